"""pytest-benchmark: the runner rows of ``python -m benchmarks`` (see ``conftest.py``)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from .conftest import cases


@pytest.mark.parametrize(("group", "case"), cases("runner"))
def test_runner(run_case: Callable[..., None], group: Any, case: Any) -> None:
    run_case(group, case)
