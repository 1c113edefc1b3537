"""Replaying one recorded stream through a pipeline and measuring each processor.

What belongs here: loading a pipeline (``module:attribute``), ``replay_stream`` (one stream,
through ``streamkit.ops.apply`` — the same fused chain a run uses), and ``replay_batch`` (the
unit of work a worker process or a Ray task runs). What does not: reading sources (``_sources``),
scheduling (``_execute``), adding results up (``_report``).

How a processor's effect is measured: a probe (a pass-through stream processor) follows every
processor in the chain and keeps what left it. For processor *i*, ``in`` is what left the
processor before it (or the recording), ``out`` what left *i*; a chunk that comes out as the
very object that went in (or as an equal one: a map that changed nothing) ``passed``; of
the rest, as many as were replaced 1:1 are
``rewritten``, the surplus of inputs is ``dropped``, the surplus of outputs ``added``
(``in = passed + rewritten + dropped``, ``out = passed + rewritten + added``). A redactor that
holds three deltas and releases one masked delta: 1 rewritten, 2 dropped. ``redactions`` is the
length of the processor's ``state["detections"]`` (or ``state["redactions"]``) — what
``PIIDetector`` and the holdback guards record; ``tripwire`` is whether it ended the stream.
Time is ``apply(..., timed=True)``'s per-processor time (sampled, see ``TraceRecord``); it is the
only figure that differs between two replays of the same data.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pickle
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from streamkit.chunks import Chunk
from streamkit.errors import ChunkDecodeError, InvalidArgument, InvalidType, StreamkitError
from streamkit.ops import apply
from streamkit.processors._base import flatten_processors
from streamkit.wire import decode, encode

from ._deadline import DeadlineExceeded, StreamClock, message
from ._sources import RecordedStream

__all__ = ["load_pipeline", "replay_stream", "replay_all", "replay_rows", "replay_batch",
           "pipeline_payload", "pipeline_of", "processor_ids", "error_row", "COUNTS"]

#: The per-processor counts of a stream result, identical between any two replays.
COUNTS = ("in", "out", "dropped", "rewritten", "added", "redactions", "tripwires")

_PROBE = "streamkit-replay-probe-"


class TripwireCell(TypedDict):
    """``tripwire`` of a row: which processor tripped, and why."""

    processor: str | None
    reason: str | None


class ReplayRow(TypedDict):
    """One stream's result (``replay_stream``): what ``replay(on_stream=...)`` receives, what
    ``--json`` writes and what the Ray job stores (``_ray.row_schema``).

    ``processors`` maps each processor id to its counts (``COUNTS`` and ``ns``, all ints).
    """

    stream: str
    chunks: int
    delivered: int
    tripwire: TripwireCell | None
    error: str | None
    processors: dict[str, dict[str, int]]


class _Probe:
    """Pass-through stream processor that keeps every chunk leaving the processor before it."""

    __slots__ = ("id", "seen", "process_output_stream")

    def __init__(self, n: int) -> None:
        self.id = f"{_PROBE}{n}"
        self.seen: list[Chunk] = []
        seen = self.seen

        def hook(part: Chunk) -> Chunk:
            seen.append(part)
            return part

        self.process_output_stream = hook


def load_pipeline(spec: str) -> object:
    """The pipeline named by ``spec`` = ``"module:attribute"`` (dotted attributes allowed). A
    function or class found there is called with no arguments (a factory); anything else — a
    processor, a ``Pipeline``, a list — is the pipeline.

    Raises:
        InvalidArgument: the spec is malformed, or the module or attribute does not exist.

    Example:
        >>> load_pipeline("myguards:PIPELINE")
    """
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise InvalidArgument(f"a pipeline is named 'module:attribute' (e.g. "
                              f"'myapp.guards:PIPELINE'), got {spec!r}")
    module_name, attr = spec.split(":")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(f"pipeline {spec!r}: module {module_name!r} cannot be imported "
                              f"({exc}); is it on PYTHONPATH?") from exc
    for name in attr.split("."):
        if not hasattr(target, name):
            raise InvalidArgument(f"pipeline {spec!r}: {module_name} has no attribute {attr!r}")
        target = getattr(target, name)
    if inspect.isfunction(target) or inspect.isclass(target):
        target = target()
    return target


def processor_ids(pipeline: object) -> list[str]:
    """The ids of the pipeline's processors, in order."""
    return [str(getattr(p, "id", "?")) for p in flatten_processors(pipeline)]


def _counts(seen_in: list[Chunk], seen_out: list[Chunk]) -> dict[str, int]:
    # Match outputs to inputs one to one: first the very objects, then equal new objects (a
    # map whose function changed nothing); an object emitted twice matches once.
    available = Counter(id(c) for c in seen_in)
    unmatched: list[Chunk] = []
    for c in seen_out:
        if available[id(c)] > 0:
            available[id(c)] -= 1
        else:
            unmatched.append(c)
    passed = len(seen_out) - len(unmatched)
    if unmatched:
        left: Counter[bytes] = Counter()
        for c in seen_in:
            if available[id(c)] > 0:
                available[id(c)] -= 1
                left[encode(c)] += 1
        for c in unmatched:
            key = encode(c)
            if left[key] > 0:
                left[key] -= 1
                passed += 1
    gone, new = len(seen_in) - passed, len(seen_out) - passed
    rewritten = min(gone, new)
    return {"in": len(seen_in), "out": len(seen_out), "dropped": gone - rewritten,
            "rewritten": rewritten, "added": new - rewritten}


def _redactions(state: Mapping[str, object]) -> int:
    found = 0
    for key in ("detections", "redactions"):
        value = state.get(key)
        if isinstance(value, (list, tuple)):
            found += len(value)
    return found


def error_row(stream: RecordedStream, error: str | None = None) -> ReplayRow:
    """The row of ``stream`` before (or instead of) its replay: nothing delivered, ``error``
    (or the stream's own read error)."""
    return {"stream": stream.id, "chunks": len(stream.chunks), "delivered": 0,
            "tripwire": None, "error": error or stream.error, "processors": {}}


async def replay_stream(pipeline: object, stream: RecordedStream, *,
                        deadline: float | None = None) -> ReplayRow:
    """Replay one recorded stream; its result row (see the module docstring).

    Args:
        deadline: seconds the stream may take (``None``: no limit); see ``_deadline``.

    Returns:
        ``{"stream": id, "chunks": n, "delivered": n_out, "tripwire": {"processor",
        "reason"} | None, "error": str | None, "processors": {id: {"in", "out", "dropped",
        "rewritten", "added", "redactions", "tripwires", "ns"}}}``. A stream that could not be
        read whole, a chunk that does not decode, a processor that raises, a stream past its
        deadline: each is that stream's ``error``, ``"<ErrorClass>: <what happened>"`` (the
        other streams go on).
    """
    processors = flatten_processors(pipeline)
    ids = [str(getattr(p, "id", "?")) for p in processors]
    row = error_row(stream)
    if stream.error is not None:
        return row
    try:
        chunks = [decode(c) for c in stream.chunks]
    except ChunkDecodeError as exc:
        row["error"] = f"ChunkDecodeError: {exc}"
        return row
    probes = [_Probe(n) for n in range(len(processors) + 1)]
    chain: list[object] = [probes[0]]
    for processor, probe in zip(processors, probes[1:], strict=True):
        chain += [processor, probe]
    applied = apply(chunks, chain, run_id=stream.id, timed=True)
    delivered = 0
    try:
        async with asyncio.timeout(deadline):
            async for _ in applied:
                delivered += 1
    except StreamkitError as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    except TimeoutError:
        row["error"] = message(deadline or 0.0)
    except RecursionError as exc:  # the pipeline's own code recursed too deep on this stream
        row["error"] = f"RecursionError: {exc}"
    row["delivered"] = delivered
    tripwire = applied.tripwire
    if tripwire is not None:
        row["tripwire"] = {"processor": tripwire.processor_id, "reason": tripwire.reason}
    ns: dict[str, int] = {}
    for rec in applied.trace:
        if rec.hook == "process_output_stream" and not rec.processor_id.startswith(_PROBE):
            ns[rec.processor_id] = ns.get(rec.processor_id, 0) + round(rec.duration * 1e9)
    for n, pid in enumerate(ids):
        counts = _counts(probes[n].seen, probes[n + 1].seen)
        counts["redactions"] = _redactions(applied.state(pid))
        counts["tripwires"] = int(tripwire is not None and tripwire.processor_id == pid)
        counts["ns"] = ns.get(pid, 0)
        row["processors"][pid] = counts
    return row


def pipeline_payload(pipeline: object) -> tuple[str, str | bytes]:
    """What a worker needs to rebuild ``pipeline``: its ``module:attribute`` (imported there),
    or the pickled object.

    Raises:
        InvalidArgument: an object that cannot be pickled (a lambda, a local class...).
    """
    if isinstance(pipeline, str):
        load_pipeline(pipeline)  # fail here, once, rather than in every worker
        return ("spec", pipeline)
    try:
        return ("pickle", pickle.dumps(pipeline))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise InvalidArgument(
            f"the pipeline cannot be sent to worker processes ({exc}); name it as "
            f"'module:attribute' instead, or replay in this process with processes=1") from exc


_LOADED: dict[tuple[str, object], object] = {}


def pipeline_of(payload: tuple[str, object]) -> object:
    """The worker's pipeline for ``payload``, built once per process."""
    kind, value = payload
    key = (kind, value)
    if key not in _LOADED:
        if kind == "spec" and isinstance(value, str):
            _LOADED[key] = load_pipeline(value)
        elif kind == "pickle" and isinstance(value, bytes):
            _LOADED[key] = pickle.loads(value)
        else:
            raise InvalidType(f"unknown pipeline payload kind {kind!r}" if kind not in
                              ("spec", "pickle") else f"a {kind!r} pipeline payload holds a "
                              f"{type(value).__name__}")
    return _LOADED[key]


async def replay_all(pipeline: object, streams: list[RecordedStream], *,
                     deadline: float | None = None,
                     rows: list[ReplayRow] | None = None,
                     on_row: Callable[[ReplayRow], object] | None = None
                     ) -> list[ReplayRow]:
    """Replay ``streams`` one after the other, each within ``deadline``; their result rows
    (appended to ``rows`` as each ends, when given, and passed to ``on_row``)."""
    rows = [] if rows is None else rows
    clock = StreamClock(deadline) if deadline is not None else None
    try:
        for n, stream in enumerate(streams):
            if clock is not None:
                clock.start(n)
            try:
                row = await replay_stream(pipeline, stream, deadline=deadline)
            except DeadlineExceeded:  # raised by the watchdog outside any processor
                row = error_row(stream)
            finally:
                if clock is not None:
                    clock.stop()
            if clock is not None and clock.expired(n):
                row["error"] = message(clock.deadline)
            rows.append(row)
            if on_row is not None:
                on_row(row)
    finally:
        if clock is not None:
            clock.close()
    return rows


def replay_rows(pipeline: object, streams: list[RecordedStream], deadline: float | None,
                run: Callable[[Any], object] = asyncio.run,
                on_row: Callable[[ReplayRow], object] | None = None) -> list[ReplayRow]:
    """``replay_all`` from sync code, with ``run`` (``asyncio.run``, or one that also works
    under a running loop). A ``DeadlineExceeded`` that the watchdog raised while the event loop
    ran its own code (between two steps of the stream) ends that loop: the stream is reported
    as past its deadline and the rest are replayed on a new loop."""
    rows: list[ReplayRow] = []
    while len(rows) < len(streams):
        try:
            run(replay_all(pipeline, streams[len(rows):], deadline=deadline, rows=rows,
                           on_row=on_row))
        except DeadlineExceeded:
            row = error_row(streams[len(rows)])
            row["error"] = message(deadline or 0.0)
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows


def replay_batch(payload: tuple[str, object], streams: list[RecordedStream],
                 deadline: float | None = None) -> list[ReplayRow]:
    """Replay ``streams`` with one event loop: what a worker process or a Ray task runs.

    Args:
        payload: ``pipeline_payload(pipeline)``.
        streams: the batch.
        deadline: seconds each stream may take (``None``: no limit).
    """
    return replay_rows(pipeline_of(payload), streams, deadline)
