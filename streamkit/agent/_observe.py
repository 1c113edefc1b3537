"""A run's observers (``observers=``): the run's events (``streamkit.events``), made where the
run calls its tracer.

What belongs here: ``Observed``, the tracer of a run that has observers. It wraps the run's own
tracer (``NOOP`` or the span tracer) and is called at exactly its points — ``begin``,
``transition`` after every node, ``end``, and ``RequestRuntime.on_record`` per trace record —
so the loop has no second set of call sites, and a run without observers has no cost at all.
Per-chunk events come from ``ChunkProbe`` (``processors._probe``), set up here when an observer
asks for chunk detail.

Decided here: an exception raised by an observer is logged (logger ``streamkit.events``) and
ignored, as ``on_violation`` errors are — watching a run must not change it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..errors import InvalidType
from ..events import (
    HookCalled,
    RunEvent,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
    Transition,
    TripwireDetail,
)
from ..processors._probe import ChunkProbe, now_ms
from ..processors._runtime import TraceRecord
from ..tracing._tracer import RunTracer

if TYPE_CHECKING:
    from ._run import Run

__all__ = ["Observed", "check_observers"]

log = logging.getLogger("streamkit.events")

#: The nodes a step attempt ends at, and its outcome there.
_STEP_EXITS = {"retry": "retried", "tripwire": "tripwire", "fail": "error"}


def check_observers(observers: Any) -> tuple[Any, ...]:
    """``observers=`` as a tuple, checked: each must have a callable ``on_event``.

    Raises:
        InvalidType: not a sequence of observers (the message names what was wrong).
    """
    if observers is None:
        return ()
    if isinstance(observers, (str, bytes)) or not isinstance(observers, Sequence):
        if callable(getattr(observers, "on_event", None)):
            raise InvalidType("observers= takes a list of observers, got one observer; pass "
                              "observers=[obs]")
        raise InvalidType(f"observers= takes a list of objects with on_event(event), got "
                          f"{type(observers).__name__}")
    for i, obs in enumerate(observers):
        if not callable(getattr(obs, "on_event", None)):
            raise InvalidType(f"observers[{i}] ({type(obs).__name__}) has no on_event(event) "
                              f"method; an observer is an object with on_event(event) and "
                              f"optionally chunk_detail = True")
    return tuple(observers)


def _usage(usage: Any) -> dict[str, int]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens}


def _model_id(model: Any) -> str | None:
    value = getattr(model, "model_id", None)
    return value if isinstance(value, str) else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 3)


class Observed(RunTracer):
    """The tracer of a run with observers: calls ``inner`` (the run's own tracer), then hands
    the run's events to every observer, in order.

    Args:
        run: the run (its runtime gets the ``ChunkProbe`` when an observer wants chunk detail).
        inner: the run's tracer.
        observers: the checked ``observers=``.
    """

    __slots__ = ("_inner", "_observers", "_detailed", "_run_id", "_step", "_retry",
                 "_inner_record", "probe", "_calls")

    def __init__(self, run: Run, inner: RunTracer, observers: tuple[Any, ...]) -> None:
        self._inner = inner
        self._observers = observers
        self._run_id = run.run_id
        self._step: int | None = None  # the step attempt open, if one is
        self._retry = 0
        self._inner_record: Any = None
        self._calls: dict[str, dict[str, Any]] = {}
        self.probe: ChunkProbe | None = None
        self._detailed = tuple(o for o in observers if getattr(o, "chunk_detail", False) is True)
        if self._detailed:
            self.probe = run.runtime.probe = ChunkProbe(run.run_id, self._emit_detail,
                                                        self._step_now)

    def _step_now(self) -> int | None:
        return self._step

    def emit(self, event: RunEvent) -> None:
        """Hand ``event`` to every observer (an observer's exception is logged, not raised)."""
        self._hand(event, self._observers)

    def _emit_detail(self, event: RunEvent) -> None:
        """A per-chunk event: only to the observers that asked for chunk detail."""
        self._hand(event, self._detailed)

    def _hand(self, event: RunEvent, observers: tuple[Any, ...]) -> None:
        for obs in observers:
            try:
                obs.on_event(event)
            except Exception:  # noqa: BLE001 - documented: watching must not change the run
                log.exception("observer %r raised on a %s event; ignored", obs,
                              type(event).__name__)

    # ------------------------------------------------------------------ the tracer's calls

    def begin(self, run: Run) -> None:
        self._inner.begin(run)
        self._inner_record = run.runtime.on_record
        run.runtime.on_record = self._record
        cfg = run.config
        self.emit(RunStarted(run_id=run.run_id, agent_id=cfg.agent_id,
                             model_id=_model_id(cfg.model), thread_id=cfg.thread_id,
                             resource_id=cfg.resource_id, at=now_ms()))

    def _record(self, rec: TraceRecord) -> None:
        inner = self._inner_record
        if inner is not None:
            inner(rec)
        self.emit(HookCalled(
            run_id=self._run_id, processor_id=rec.processor_id, hook=rec.hook, step=rec.step,
            duration_ms=round(rec.duration * 1e3, 3), outcome=rec.outcome, detail=rec.detail,
            calls=rec.calls, dropped=rec.dropped, ttfc_ms=_ms(rec.first_chunk_delay)))

    def transition(self, run: Run, node: str, nxt: str) -> None:
        self._inner.transition(run, node, nxt)
        if self.probe is not None:
            self.probe.seq = None  # a node's model chunks are behind it
        st = run.state
        step = st.step
        # What ends first: a step attempt, the tool calls of a step.
        if node in ("tools", "process_tool_result") and nxt != "process_tool_result" \
                and step is not None:
            self._tools_done(run)
        if self._step is not None:
            exit_ = _STEP_EXITS.get(nxt)
            if node == "step_finish":
                # step_finish has moved the state on to the next step: report the one it ended.
                done = st.steps[-1] if st.steps else None
                self._step_end(run, "accepted", done.finish_reason if done else None,
                               done.usage if done else None, None, None)
            elif exit_ is not None:
                tw = st.pending_tripwire
                reason = tw.reason if tw is not None else run.shown_text(st.error) \
                    if st.error is not None else None
                self._step_end(run, exit_, step.finish_reason if step else None,
                               step.usage if step else None, reason,
                               tw.processor_id if tw is not None else None)
        self.emit(Transition(run_id=run.run_id, node=node, next=nxt,
                             step_number=self._step, at=now_ms()))
        # What starts.
        if nxt == "process_input_step":
            self._step, self._retry = st.step_number, st.retry_count
            self.emit(StepStarted(run_id=run.run_id, step_number=st.step_number,
                                  retry_count=st.retry_count, at=now_ms()))
        elif nxt == "tools" and step is not None:
            for call in step.tool_calls:
                cid = str(call["tool_call_id"])
                self._calls[cid] = call
                self.emit(ToolCalled(run_id=run.run_id, step_number=st.step_number,
                                     tool_call_id=cid, tool_name=str(call["tool_name"]),
                                     args=call.get("args")))

    def _step_end(self, run: Run, outcome: Any, finish_reason: str | None, usage: Any,
                  reason: str | None, processor_id: str | None) -> None:
        step = self._step
        if step is None:
            return
        self._step = None
        self.emit(StepFinished(
            run_id=run.run_id, step_number=step, retry_count=self._retry, outcome=outcome,
            finish_reason=finish_reason or None,
            usage=_usage(usage) if usage is not None else {}, reason=reason,
            processor_id=processor_id, at=now_ms()))

    def _tools_done(self, run: Run) -> None:
        if not self._calls:
            return
        step = run.state.step
        delivered = {r["tool_call_id"]: r for r in step.tool_results} if step is not None else {}
        for cid, call in self._calls.items():
            got = delivered.get(cid)
            self.emit(ToolReturned(
                run_id=run.run_id, step_number=step.number if step is not None else 0,
                tool_call_id=cid, tool_name=str(call["tool_name"]),
                is_error=bool(got["is_error"]) if got is not None else False,
                result=got["result"] if got is not None else None))
        self._calls.clear()

    def end(self, run: Run, exc: BaseException | None) -> None:
        self._inner.end(run, exc)
        run.runtime.on_record = None
        st = run.state
        error = st.error if st.error is not None else exc
        outcome: Any
        if st.tripwire is not None:
            outcome = "tripwire"
        elif st.error is not None:
            outcome = "error"
        elif exc is not None:
            outcome = "error" if isinstance(exc, Exception) else "closed"
        else:
            outcome = "ok"
        if self._step is not None:
            self._step_end(run, "error" if outcome in ("error", "closed") else "tripwire",
                           None, None, None, None)
        tw = st.tripwire
        shown = None
        if outcome == "error" and error is not None:
            shown = run.shown_text(error) or str(error)
        self.emit(RunFinished(
            run_id=run.run_id, outcome=outcome, text=st.text, error=shown,
            tripwire=None if tw is None else TripwireDetail(
                reason=tw.reason, processor_id=tw.processor_id, retry=tw.retry, hook=tw.hook),
            finish_reason=st.finish_reason or None, usage=_usage(st.usage), at=now_ms()))

    def tool_hooks(self, tool_call_id: str) -> None:
        self._inner.tool_hooks(tool_call_id)

    def tool_context(self, tool_call_id: str) -> AbstractContextManager[None]:
        return self._inner.tool_context(tool_call_id)
