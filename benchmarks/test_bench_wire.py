"""pytest-benchmark: the wire rows of ``python -m benchmarks`` (see ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .conftest import cases


@pytest.mark.parametrize(("group", "case"), cases("wire"))
def test_wire(run_case: Callable[..., None], group: Any, case: Any) -> None:
    run_case(group, case)
