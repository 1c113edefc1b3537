"""pytest-benchmark glue: every row of ``python -m benchmarks`` as a ``benchmark`` test.

Run with ``pytest benchmarks/`` (the default test run never collects this folder: ``testpaths``
is ``tests``). ``STREAMKIT_BENCH=quick`` picks the quick sizes. pytest-benchmark then gives its
own statistics, ``--benchmark-autosave`` and ``--benchmark-compare``; the interleaved, same-run
ratios stay the job of ``python -m benchmarks``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from .harness import Case, Group, Outcome
from .suite import Sizes, build_suite


def sizes() -> Sizes:
    """The sizes ``STREAMKIT_BENCH`` (``full`` by default, ``quick`` or ``tiny``) asks for."""
    mode = os.environ.get("STREAMKIT_BENCH", "full")
    if mode not in ("full", "quick", "tiny"):
        raise ValueError(f"STREAMKIT_BENCH must be full, quick or tiny; got {mode!r}")
    return getattr(Sizes, mode)()  # type: ignore[no-any-return]


def cases(section: str) -> list[Any]:
    """``pytest.param(group, case, id=...)`` for every row of ``section``."""
    return [pytest.param(g, c, id=f"{g.title} / {c.name}")
            for g in build_suite(sizes(), [section]) for c in g.cases]


async def _awaited(fn: Callable[[], Awaitable[Any]]) -> Any:
    return await fn()


@pytest.fixture
def run_case(benchmark: Any) -> Callable[[Group, Case], None]:
    """Benchmark one case the way its group is configured (rounds = the group's repeat)."""

    def run(group: Group, case: Case) -> None:
        benchmark.group = group.title
        benchmark.extra_info.update(chunks=case.chunks, requests=case.requests,
                                    baseline=case.baseline)
        with asyncio.Runner() as loop:
            fn: Callable[[], Any] = case.fn
            if case.is_async:
                def fn() -> Any:
                    return loop.run(_awaited(case.fn))
            value = benchmark.pedantic(fn, rounds=group.repeat, warmup_rounds=1, iterations=1)
        check = value.check if isinstance(value, Outcome) else value
        if case.expect is not None:
            assert check == case.expect, f"{case.name} returned {check!r}"

    return run
