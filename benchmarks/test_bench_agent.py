"""pytest-benchmark: the agent.stream, request and memory rows of ``python -m benchmarks``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .conftest import cases


@pytest.mark.parametrize(("group", "case"), cases("agent"))
def test_agent_stream(run_case: Callable[..., None], group: Any, case: Any) -> None:
    run_case(group, case)


@pytest.mark.parametrize(("group", "case"), cases("requests"))
def test_requests(run_case: Callable[..., None], group: Any, case: Any) -> None:
    run_case(group, case)


@pytest.mark.parametrize(("group", "case"), cases("memory"))
def test_memory_rows(run_case: Callable[..., None], group: Any, case: Any) -> None:
    run_case(group, case)
