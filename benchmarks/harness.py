"""The measuring engine: cases grouped with their baselines, interleaved repetitions, medians.

What belongs here: ``Case`` (one row: a workload run once per call), ``Group`` (rows measured
together), ``measure`` (warm-up, interleaved timed repetitions, one extra run under
``tracemalloc``), ``Result`` and the stderr progress bar. What does not: the workloads
(``benchmarks.rows_*``), the fixed set (``benchmarks.suite``) and printing (``benchmarks.report``).

How a group is measured:

1. **Warm-up**: every case runs once (or runs its cheaper ``warmup``), so caches, compiled chains
   and lazy imports are in place before any clock starts.
2. **Timed repetitions, interleaved**: repetition *r* runs every case once, starting at case
   ``r % len(cases)``; a noisy neighbour then slows all contenders alike instead of whichever
   one happened to run at that moment. ``gc.collect()`` runs before each timed run; the GC stays
   *enabled* during it, because users pay for it too (a run that keeps a million chunks alive pays
   for the collections that walk them).
3. **Median** of the repetitions per case; a row's ratio to its baseline is the median of the
   *paired* per-repetition ratios of time per chunk (run *r* of the row over run *r* of the
   baseline), which cancels slow drifts of the machine.
4. **Memory**: one more run of each case under ``tracemalloc``; the row reports the peak of
   traced memory above what was allocated before the run started (inputs built ahead are not
   counted). Never timed: ``tracemalloc`` slows allocation-heavy code several times.

Every run returns a check value (or an ``Outcome`` holding one); all runs of a case must return
the same value, and a case with ``expect`` must return exactly that, so contenders that silently
stopped doing the work would fail loudly instead of looking fast.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

__all__ = ["Case", "Group", "Outcome", "Result", "Progress", "BenchmarkError", "measure",
           "run_groups", "planned_steps"]


class BenchmarkError(RuntimeError):
    """A contender returned a different result than expected: the comparison would be a lie."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a run may return instead of a bare check value: the ``check`` value plus ``metrics``
    (numbers such as per-window µs/chunk); each metric is reported as its median over the timed
    runs."""

    check: Any
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class Case:
    """One row of the table: a workload that processes ``chunks`` chunks per call of ``fn``.

    Attributes:
        name: the row label, unique within its group.
        fn: runs the whole workload once and returns its check value (or an ``Outcome``); a
            coroutine function when ``is_async``.
        chunks: chunks one call processes (the denominator of µs/chunk).
        is_async: ``fn`` must be awaited; it runs on the group's event loop.
        baseline: name of the case in the same group this row's ratio is taken against; ``None``
            for a baseline row.
        expect: the check value every run must return (``None``: only consistency is checked).
        requests: requests one call serves (the numerator of req/s; 0 when not a request row).
        memory: run once more under ``tracemalloc`` to report the peak.
        concurrent: all ``requests`` of a call are in flight together, so the peak divided by
            ``requests`` is the memory of one in-flight request (reported as such).
        warmup: a cheaper call on the same code paths, used instead of ``fn`` to warm up.
        note: one line for the README/JSON (what exactly is measured).
    """

    name: str
    fn: Callable[[], Any]
    chunks: int
    is_async: bool = False
    baseline: str | None = None
    expect: Any = None
    requests: int = 0
    memory: bool = True
    concurrent: bool = False
    warmup: Callable[[], Any] | None = None
    note: str = ""


@dataclass(slots=True)
class Group:
    """Rows measured together, interleaved, in one run (so each ratio compares like with like)."""

    title: str
    cases: list[Case]
    repeat: int = 5

    def __post_init__(self) -> None:
        names = [c.name for c in self.cases]
        if len(set(names)) != len(names):
            raise ValueError(f"group {self.title!r}: duplicate case names {names}")
        for case in self.cases:
            if case.baseline is not None and case.baseline not in names:
                raise ValueError(f"group {self.title!r}: case {case.name!r} compares to unknown "
                                 f"baseline {case.baseline!r}")
        if self.repeat < 1:
            raise ValueError(f"group {self.title!r}: repeat must be >= 1")


@dataclass(slots=True)
class Result:
    """The measurement of one case (one row of the table)."""

    group: str
    name: str
    baseline: str | None
    chunks: int
    requests: int
    times: list[float]
    ratio: float | None = None
    peak_bytes: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    note: str = ""
    concurrent: bool = False

    @property
    def seconds(self) -> float:
        """Median wall time of one call, in seconds."""
        return statistics.median(self.times)

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else float("inf")

    @property
    def us_per_chunk(self) -> float:
        return self.seconds * 1e6 / self.chunks if self.chunks else 0.0

    @property
    def requests_per_s(self) -> float | None:
        if not self.requests:
            return None
        return self.requests / self.seconds if self.seconds > 0 else float("inf")

    @property
    def bytes_per_request(self) -> float | None:
        """Peak memory per in-flight request (rows whose requests all run together only)."""
        if self.peak_bytes is None or not self.requests or not self.concurrent:
            return None
        return self.peak_bytes / self.requests

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group, "name": self.name, "baseline": self.baseline,
            "chunks": self.chunks, "requests": self.requests, "median_s": self.seconds,
            "times_s": self.times, "ratio": self.ratio, "chunks_per_s": self.chunks_per_s,
            "us_per_chunk": self.us_per_chunk, "requests_per_s": self.requests_per_s,
            "peak_bytes": self.peak_bytes, "bytes_per_request": self.bytes_per_request,
            "metrics": self.metrics, "note": self.note, "concurrent": self.concurrent,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        return cls(group=data["group"], name=data["name"], baseline=data.get("baseline"),
                   chunks=data["chunks"], requests=data.get("requests", 0),
                   times=list(data["times_s"]), ratio=data.get("ratio"),
                   peak_bytes=data.get("peak_bytes"), metrics=dict(data.get("metrics") or {}),
                   note=data.get("note", ""), concurrent=bool(data.get("concurrent")))


class Progress:
    """A plain progress bar on stderr: ``[#####-----]  45%  12/27  group · row  0:42``.

    On a terminal it redraws one line; otherwise (CI logs) it prints one line per group so the
    log stays readable. ``enabled=False`` silences it.
    """

    def __init__(self, total: int, *, stream: IO[str] | None = None, enabled: bool = True,
                 width: int = 28) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.width = width
        self.started = time.monotonic()
        self.is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._group = ""

    def step(self, label: str, group: str) -> None:
        """One unit of work finished (``label`` is what runs next or just ran)."""
        self.done = min(self.done + 1, self.total)
        if not self.enabled:
            return
        if self.is_tty:
            self._draw(f"{group} · {label}")
        elif group != self._group:
            self._group = group
            self.stream.write(f"[{self.done * 100 // self.total:3d}%] {group}\n")
            self.stream.flush()

    def _draw(self, label: str) -> None:
        filled = self.done * self.width // self.total
        elapsed = int(time.monotonic() - self.started)
        bar = "#" * filled + "-" * (self.width - filled)
        text = (f"\r[{bar}] {self.done * 100 // self.total:3d}%  {self.done}/{self.total}  "
                f"{elapsed // 60}:{elapsed % 60:02d}  {label}")
        self.stream.write(text[:118].ljust(118))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.is_tty:
            self.stream.write("\r" + " " * 118 + "\r")
            self.stream.flush()


def _split(value: Any) -> tuple[Any, dict[str, float]]:
    if isinstance(value, Outcome):
        return value.check, value.metrics
    return value, {}


class _Runner:
    """Calls cases, sync or async, on one event loop per group."""

    def __init__(self) -> None:
        self.loop = asyncio.Runner()

    def close(self) -> None:
        self.loop.close()

    def call(self, fn: Callable[[], Any], is_async: bool) -> Any:
        if not is_async:
            return fn()
        return self.loop.run(_awaited(fn))

    def timed(self, case: Case) -> tuple[float, Any]:
        gc.collect()
        if not case.is_async:
            start = time.perf_counter()
            value = case.fn()
            return time.perf_counter() - start, value
        return self.loop.run(_timed_async(case.fn))  # type: ignore[no-any-return]


async def _awaited(fn: Callable[[], Awaitable[Any]]) -> Any:
    return await fn()


async def _timed_async(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    # Timed inside the loop: creating and scheduling the coroutine is not the workload's cost.
    start = time.perf_counter()
    value = await fn()
    return time.perf_counter() - start, value


def _peak(runner: _Runner, case: Case) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        runner.call(case.fn, case.is_async)
        return max(tracemalloc.get_traced_memory()[1] - before, 0)
    finally:
        tracemalloc.stop()


def planned_steps(groups: Sequence[Group]) -> int:
    """Progress units ``run_groups`` will report: warm-ups, timed runs and memory runs."""
    return sum(len(g.cases) * (1 + g.repeat) + sum(c.memory for c in g.cases) for g in groups)


def measure(group: Group, progress: Progress | None = None) -> list[Result]:
    """Measure every case of ``group`` (see the module docstring); one ``Result`` per case,
    in the group's order.

    Raises:
        BenchmarkError: a case returned a value other than its ``expect``, or runs of one case
            disagreed.
    """
    runner = _Runner()
    checks: dict[str, Any] = {}

    def verify(case: Case, value: Any, *, warm: bool) -> dict[str, float]:
        check, metrics = _split(value)
        if warm and case.warmup is not None:
            return metrics  # a warm-up on another size returns another value
        if case.expect is not None and check != case.expect:
            raise BenchmarkError(f"{group.title} / {case.name}: returned {check!r}, expected "
                                 f"{case.expect!r}")
        if case.name in checks and checks[case.name] != check:
            raise BenchmarkError(f"{group.title} / {case.name}: runs disagree "
                                 f"({checks[case.name]!r} then {check!r})")
        checks[case.name] = check
        return metrics

    def tick(case: Case) -> None:
        if progress is not None:
            progress.step(case.name, group.title)

    try:
        for case in group.cases:
            warm = case.warmup or case.fn
            verify(case, runner.call(warm, case.is_async), warm=True)
            tick(case)
        times: dict[str, list[float]] = {c.name: [] for c in group.cases}
        metrics: dict[str, list[dict[str, float]]] = {c.name: [] for c in group.cases}
        n = len(group.cases)
        for rep in range(group.repeat):
            for k in range(n):
                case = group.cases[(rep + k) % n]
                seconds, value = runner.timed(case)
                metrics[case.name].append(verify(case, value, warm=False))
                times[case.name].append(seconds)
                tick(case)
        peaks: dict[str, int | None] = {}
        for case in group.cases:
            peaks[case.name] = None
            if case.memory:
                peaks[case.name] = _peak(runner, case)
                tick(case)
    finally:
        runner.close()

    by_name = {c.name: c for c in group.cases}
    results = []
    for case in group.cases:
        ratio = None
        if case.baseline is not None:
            # Per chunk, so a long row compares to its short twin; pairs share a repetition.
            base = by_name[case.baseline]
            scale = base.chunks / case.chunks if case.chunks else 1.0
            pairs = zip(times[case.name], times[case.baseline])
            ratio = statistics.median(a / b * scale for a, b in pairs if b > 0)
        keys = {k for m in metrics[case.name] for k in m}
        merged = {k: statistics.median(m[k] for m in metrics[case.name] if k in m)
                  for k in sorted(keys)}
        results.append(Result(group=group.title, name=case.name, baseline=case.baseline,
                              chunks=case.chunks, requests=case.requests,
                              times=times[case.name], ratio=ratio, peak_bytes=peaks[case.name],
                              metrics=merged, note=case.note, concurrent=case.concurrent))
    return results


def run_groups(groups: Sequence[Group], *, progress: bool = True,
               stream: IO[str] | None = None) -> list[Result]:
    """Measure ``groups`` in order with one progress bar over all of them."""
    bar = Progress(planned_steps(groups), stream=stream, enabled=progress)
    results: list[Result] = []
    try:
        for group in groups:
            results.extend(measure(group, bar))
    finally:
        bar.close()
    return results
