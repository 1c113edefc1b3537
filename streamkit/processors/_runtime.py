"""Per-request runtime: state dicts, abort functions, the writer, and the trace.

One ``RequestRuntime`` exists per request (one ``agent.stream()``/``generate()`` call, one
``ops.apply()``); it is never shared between concurrent requests, so state can never leak.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..tripwire import TripWire, Violation, make_abort
from ._spec import ProcessorSpec
from ._writer import Writer

if TYPE_CHECKING:
    from ._probe import ChunkProbe

__all__ = ["RequestRuntime", "TraceRecord", "StreamStats", "Writer", "DEFAULT_HOOK_TIMEOUT"]

#: Seconds each call of an async processor hook may take unless ``Agent(hook_timeout=)`` says
#: otherwise (``None`` there: no limit).
DEFAULT_HOOK_TIMEOUT = 120.0

log = logging.getLogger("streamkit.processors")


@dataclass(slots=True)
class TraceRecord:
    """One hook call (or, for ``process_output_stream``, one processor's whole pass over a step).

    Attributes:
        processor_id: the processor.
        hook: the hook name.
        step: the step number (``None`` for ``process_input``/``process_output_result``).
        duration: seconds spent inside the hook. For stream hooks, summed over the step's
            chunks: measured on the first chunk and one in 64 after it, scaled to all calls.
        outcome: ``"ok"``, ``"changed"``, ``"tripwire"``, ``"retry"``, ``"error"``, or for
            stream hooks ``"ok"``/``"dropped"`` (some chunks dropped)/``"tripwire"``.
        calls: how many times the hook ran (chunks seen for stream hooks, else 1).
        dropped: chunks the stream hook dropped.
        first_call: seconds its first call took (its compute time on the first chunk).
        detail: the tripwire reason or error text, when there is one.
        first_chunk_delay: stream hooks only: seconds between the first ``text-delta`` reaching
            this processor in the step and the first ``text-delta`` it let out (passed on,
            emitted, or flushed at the end of the step) — the time it added to time-to-first-
            chunk, hold-back included. ``None`` when no text reached it, or none came out.
    """

    processor_id: str
    hook: str
    step: int | None
    duration: float
    outcome: str
    calls: int = 1
    dropped: int = 0
    first_call: float | None = None
    detail: str | None = None
    first_chunk_delay: float | None = None

    def as_row(self) -> dict[str, object]:
        return {"processor": self.processor_id, "hook": self.hook, "step": self.step,
                "calls": self.calls, "dropped": self.dropped, "ms": round(self.duration * 1e3, 3),
                "outcome": self.outcome, "detail": self.detail,
                "ttfc_ms": None if self.first_chunk_delay is None
                else round(self.first_chunk_delay * 1e3, 3)}


@dataclass(slots=True)
class StreamStats:
    """Counters one processor's slot in a fused stream chain updates in place: timed samples
    (``sampled`` calls taking ``ns`` in all, the first taking ``first_ns``), and the exact
    number of chunks it ``dropped`` and ``fanout`` extra chunks it emitted; and when the step's
    first text delta reached it (``text_in_ns``) and first left it (``text_out_ns``)."""

    sampled: int = 0
    ns: int = 0
    first_ns: int = 0
    dropped: int = 0
    fanout: int = 0
    text_in_ns: int = 0
    text_out_ns: int = 0


class RequestRuntime:
    """Everything per request that hooks share: ``state`` per processor id, ``abort`` per
    processor, ``request_context``, the trace, and violation handling."""

    def __init__(self, request_context: object = None, *, run_id: str = "",
                 timed: bool = True, hook_timeout: float | None = None) -> None:
        self.states: dict[str, dict[str, Any]] = {}
        #: Seconds each call of an async hook may take (``Agent(hook_timeout=)``), or ``None``.
        self.hook_timeout = hook_timeout
        self._aborts: dict[str, Callable[..., Any]] = {}
        self.request_context = request_context if request_context is not None else {}
        self.run_id = run_id
        self.timed = timed
        self.trace: list[TraceRecord] = []
        #: Called with every record as it is added (the run's tracer sets it; ``None`` when off).
        self.on_record: Callable[[TraceRecord], None] | None = None
        #: Reports what each stream hook did to each chunk (set by a run whose observers ask
        #: for chunk detail, before its chains are bound; ``None``: the plain fused path).
        self.probe: ChunkProbe | None = None

    def state(self, processor_id: str) -> dict[str, Any]:
        """The state dict of ``processor_id`` for this request (created on first use)."""
        st = self.states.get(processor_id)
        if st is None:
            st = self.states[processor_id] = {}
        return st

    def abort(self, processor_id: str) -> Callable[..., Any]:
        fn = self._aborts.get(processor_id)
        if fn is None:
            fn = self._aborts[processor_id] = make_abort(processor_id)
        return fn

    def record(self, processor_id: str, hook: str, step: int | None, duration: float,
               outcome: str, detail: str | None = None) -> None:
        self._add(TraceRecord(processor_id, hook, step, duration, outcome, detail=detail))

    def record_stream(self, processor_id: str, step: int | None, calls: int, dropped: int,
                      ns: float, first_ns: int, outcome: str = "ok",
                      detail: str | None = None, first_chunk_delay: float | None = None) -> None:
        if dropped and outcome == "ok":
            outcome = "dropped"
        self._add(TraceRecord(
            processor_id, "process_output_stream", step, ns / 1e9, outcome, calls=calls,
            dropped=dropped, first_call=first_ns / 1e9 if calls else None, detail=detail,
            first_chunk_delay=first_chunk_delay))

    def _add(self, record: TraceRecord) -> None:
        self.trace.append(record)
        if self.on_record is not None:
            self.on_record(record)

    async def violation(self, spec: ProcessorSpec | None, tripwire: TripWire,
                        hook: str | None = None) -> None:
        """Call ``spec.on_violation`` for ``tripwire``; its own exceptions are logged, never
        raised (a broken callback must not change the run's outcome)."""
        if getattr(tripwire, "_violation_sent", False):
            return  # each TripWire is reported once, however many layers see it
        tripwire._violation_sent = True  # type: ignore[attr-defined]
        if spec is None or spec.on_violation is None:
            return
        violation = Violation(processor_id=tripwire.processor_id or spec.id,
                              message=str(tripwire), detail=tripwire.metadata,
                              retry=tripwire.retry, hook=hook)
        try:
            out = spec.on_violation(violation)
            if inspect.isawaitable(out):
                await out
        except Exception:  # noqa: BLE001 - documented: on_violation errors are logged only
            log.exception("on_violation of processor %r raised; ignored", spec.id)


def now() -> float:
    return time.perf_counter()
