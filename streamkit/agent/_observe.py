"""A run's observers (``observers=``, and the OpenTelemetry tracing when it is on): the run's
events (``streamkit.events``), made where the run reports its progress.

What belongs here: ``Observed``, what a run with observers reports through, and ``NOOP``, what a
run without any reports through (nothing). The run calls either at exactly three kinds of
points — ``begin``, ``transition`` after every node, ``end`` — plus ``RequestRuntime.on_record``
per trace record and, for tools, ``tool_hooks``/``tool_context``; the events are made here from
the run's state, so an observer (the tracing included) reads only events, never the run.
Per-chunk events come from ``ChunkProbe`` (``processors._probe``), set up here when an observer
asks for chunk detail.

Decided here: an exception raised by an observer is logged (logger ``streamkit.events``) and
ignored, as ``on_violation`` errors are — watching a run must not change it. An observer's
optional ``tool_context(tool_call_id)`` is entered around each tool's work (observers in order).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Literal, Protocol, TypeAlias

from .._loop_nodes import (
    COLLECT,
    FAIL,
    MODEL,
    PROCESS_API_ERROR,
    PROCESS_INPUT_STEP,
    PROCESS_TOOL_RESULT,
    RETRY,
    STEP_FINISH,
    TOOLS,
    TRIPWIRE,
    LoopNode,
)
from .._tool_records import StepToolCall
from ..errors import APICallError, InvalidType
from ..events import (
    ErrorDetail,
    HookCalled,
    ModelFinished,
    ModelStarted,
    RunEvent,
    RunFinished,
    RunObserver,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
    Transition,
    TripwireDetail,
)
from ..processors._probe import ChunkProbe, now_ms
from ..processors._runtime import RequestRuntime, TraceRecord
from ._result import Usage
from ._state import RunConfig, RunState

__all__ = ["Observed", "RunReporter", "NOOP", "check_observers"]

log = logging.getLogger("streamkit.events")

#: The nodes a step attempt ends at, other than by ``step_finish``, and its outcome there.
StepOutcome: TypeAlias = Literal["accepted", "retried", "tripwire", "error", "closed"]
_STEP_EXITS: dict[str, StepOutcome] = {RETRY: "retried", TRIPWIRE: "tripwire", FAIL: "error"}

_NO_CONTEXT: AbstractContextManager[None] = nullcontext()


def check_observers(observers: object) -> tuple[RunObserver, ...]:
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


class Run(Protocol):
    """What the events are made from (``_run.Run``): named here so that this module, which the
    run reports through, does not import the run."""

    run_id: str
    config: RunConfig
    runtime: RequestRuntime
    state: RunState

    def shown_text(self, error: BaseException) -> str | None: ...


def _usage(usage: Usage) -> dict[str, int]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens}


def _model_id(model: object) -> str | None:
    value = getattr(model, "model_id", None)
    return value if isinstance(value, str) else None


def _provider(model: object) -> str | None:
    value = getattr(model, "provider", None)
    return value if isinstance(value, str) else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 3)


def _detail(run: Run, exc: BaseException) -> ErrorDetail:
    api = isinstance(exc, APICallError)
    return ErrorDetail(type=type(exc).__name__,
                       status_code=exc.status_code if isinstance(exc, APICallError) else None,
                       api_error=api, shown=run.shown_text(exc))


class RunReporter:
    """What a run reports through; this base class reports nothing (``NOOP``: a run without
    observers, tracing off)."""

    __slots__ = ()

    def begin(self, run: Run) -> None:
        """The run starts (its first chunk is being asked for)."""

    def transition(self, run: Run, node: LoopNode, nxt: LoopNode) -> None:
        """Node ``node`` finished (its chunks were delivered); ``nxt`` runs next."""

    def end(self, run: Run, exc: BaseException | None) -> None:
        """The run ended: normally (``exc`` is ``None``; ``run.state.error`` says whether it
        failed), or with ``exc`` escaping its generator (closed early, cancelled, a bug)."""

    def tool_hooks(self, tool_call_id: str) -> None:
        """The ``process_tool_result`` hooks of call ``tool_call_id`` run next."""

    def tool_context(self, tool_call_id: str) -> AbstractContextManager[None]:
        """Entered around the tool's own work, inside the tool's task."""
        return _NO_CONTEXT


#: What a run without observers reports through.
NOOP = RunReporter()


@contextlib.contextmanager
def _each(contexts: Sequence[Callable[[str], AbstractContextManager[None]]],
          tool_call_id: str) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for make in contexts:
            stack.enter_context(make(tool_call_id))
        yield


class Observed(RunReporter):
    """The reporter of a run with observers: makes the run's events and hands each to every
    observer, in order.

    Args:
        run: the run (its runtime gets the ``ChunkProbe`` when an observer wants chunk detail).
        observers: the checked ``observers=``, and the run's span tracer when tracing is on.
    """

    __slots__ = ("_observers", "_detailed", "_run", "_run_id", "_step", "_retry", "probe",
                 "_calls", "_contexts", "_tool_now", "_model_perf", "_model_open")

    def __init__(self, run: Run, observers: tuple[RunObserver, ...]) -> None:
        self._observers = observers
        self._run = run
        self._run_id = run.run_id
        self._step: int | None = None  # the step attempt open, if one is
        self._retry = 0
        self._calls: dict[str, StepToolCall] = {}
        self._tool_now: str | None = None
        self._model_perf = 0  # perf_counter_ns() when the open model call started
        self._model_open = False
        self._contexts: tuple[Callable[[str], AbstractContextManager[None]], ...] = tuple(
            make for make in (getattr(o, "tool_context", None) for o in observers)
            if callable(make))
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

    def _hand(self, event: RunEvent, observers: tuple[RunObserver, ...]) -> None:
        for obs in observers:
            try:
                obs.on_event(event)
            except Exception:  # noqa: BLE001 - documented: watching must not change the run
                log.exception("observer %r raised on a %s event; ignored", obs,
                              type(event).__name__)

    # ------------------------------------------------------------------ the run's calls

    def begin(self, run: Run) -> None:
        run.runtime.on_record = self._record
        cfg = run.config
        self.emit(RunStarted(run_id=run.run_id, agent_id=cfg.agent_id,
                             model_id=_model_id(cfg.model), thread_id=cfg.thread_id,
                             resource_id=cfg.resource_id, at=now_ms(),
                             agent_name=cfg.agent_name or cfg.agent_id,
                             provider=_provider(cfg.model)))

    def _record(self, rec: TraceRecord) -> None:
        retry = rec.outcome == "retry"
        if rec.hook == "process_output_stream" and rec.outcome == "tripwire":
            info = self._run.state.pending_tripwire
            retry = info is not None and info.retry and info.processor_id == rec.processor_id
        self.emit(HookCalled(
            run_id=self._run_id, processor_id=rec.processor_id, hook=rec.hook, step=rec.step,
            duration_ms=round(rec.duration * 1e3, 3), outcome=rec.outcome, detail=rec.detail,
            calls=rec.calls, dropped=rec.dropped, ttfc_ms=_ms(rec.first_chunk_delay),
            duration_s=rec.duration, ttfc_s=rec.first_chunk_delay, retry=retry,
            tool_call_id=self._tool_now if rec.hook == "process_tool_result" else None))

    def transition(self, run: Run, node: LoopNode, nxt: LoopNode) -> None:
        if self.probe is not None:
            self.probe.seq = None  # a node's model chunks are behind it
        st = run.state
        step = st.step
        error = None
        if nxt is PROCESS_API_ERROR and step is not None and step.api_error is not None:
            error = _detail(run, step.api_error)
        elif nxt is FAIL and st.error is not None:
            error = _detail(run, st.error)
        self.emit(Transition(run_id=run.run_id, node=node, next=nxt, step_number=self._step,
                             at=now_ms(), error=error))
        # What ends: a model call, the tool calls of a step, a step attempt.
        if self._model_open:
            if nxt is PROCESS_API_ERROR or (node is MODEL and
                                                     nxt is FAIL):
                if error is not None:
                    self._model_end(run, error)
            elif node is COLLECT:
                self._model_end(run, None)
        if node is PROCESS_TOOL_RESULT:
            self._tools_done(run)
        if self._step is not None:
            exit_ = _STEP_EXITS.get(nxt)
            if exit_ is not None:
                tw = st.pending_tripwire
                reason = tw.reason if tw is not None else run.shown_text(st.error) \
                    if st.error is not None else None
                self._step_end(run, exit_, step.finish_reason if step else None,
                               step.usage if step else None, reason,
                               tw.processor_id if tw is not None else None)
            elif node is STEP_FINISH:
                # step_finish has moved the state on to the next step: report the one it ended.
                done = st.steps[-1] if st.steps else None
                self._step_end(run, "accepted", done.finish_reason if done else None,
                               done.usage if done else None, None, None)
        # What starts.
        if nxt is PROCESS_INPUT_STEP:
            self._step_end(run, "accepted", None, None, None, None)  # never two open steps
            self._step, self._retry = st.step_number, st.retry_count
            self.emit(StepStarted(run_id=run.run_id, step_number=st.step_number,
                                  retry_count=st.retry_count, at=now_ms()))
        elif nxt is MODEL and step is not None:
            self._model_open = True
            self.emit(ModelStarted(
                run_id=run.run_id, step_number=st.step_number, provider=_provider(step.model),
                model_id=_model_id(step.model), structured=step.structured_output is not None,
                model_settings=step.model_settings, prompt=step.prompt))
            self._model_perf = time.perf_counter_ns()
        elif nxt is TOOLS and step is not None:
            for call in step.tool_calls:
                cid = call.tool_call_id
                self._calls[cid] = call
                description = getattr(step.tools.get(call.tool_name), "description", None)
                self.emit(ToolCalled(run_id=run.run_id, step_number=st.step_number,
                                     tool_call_id=cid, tool_name=call.tool_name,
                                     args=call.args,
                                     description=description if isinstance(description, str)
                                     and description else None))

    def _model_end(self, run: Run, error: ErrorDetail | None) -> None:
        self._model_open = False
        step = run.state.step
        if error is not None or step is None:
            self.emit(ModelFinished(run_id=run.run_id, step_number=run.state.step_number,
                                    error=error))
            return
        rec = step.recorder
        first = rec.first_text_ns if rec is not None else 0
        self.emit(ModelFinished(
            run_id=run.run_id, step_number=step.number, usage=_usage(step.usage),
            finish_reason=step.finish_reason, text=step.text, reasoning=step.reasoning,
            tool_calls=step.tool_calls,
            time_to_first_text=(first - self._model_perf) / 1e9 if first > self._model_perf
            else None))

    def _step_end(self, run: Run, outcome: StepOutcome, finish_reason: str | None,
                  usage: Usage | None,
                  reason: str | None, processor_id: str | None) -> None:
        step = self._step
        if step is None:
            return
        self._tools_done(run)
        self._model_open = False
        self._step = None
        self.emit(StepFinished(
            run_id=run.run_id, step_number=step, retry_count=self._retry, outcome=outcome,
            finish_reason=finish_reason or None,
            usage=_usage(usage) if usage is not None else {}, reason=reason,
            processor_id=processor_id, at=now_ms()))

    def _tools_done(self, run: Run) -> None:
        self._tool_now = None
        if not self._calls:
            return
        step = run.state.step
        delivered = {r.tool_call_id: r for r in step.tool_results} if step is not None else {}
        outcomes = {o.call.tool_call_id: (o.ok, o.value) for o in step.tool_outcomes} \
            if step is not None else {}
        raw = {cid: v if ok else f"{type(v).__name__}: {v}" for cid, (ok, v) in outcomes.items()}
        for cid, call in self._calls.items():
            got = delivered.get(cid)
            outcome = outcomes.get(cid)
            failed = outcome[1] if outcome is not None and not outcome[0] else None
            error = _detail(run, failed) if isinstance(failed, BaseException) else None
            self.emit(ToolReturned(
                run_id=run.run_id, step_number=step.number if step is not None else 0,
                tool_call_id=cid, tool_name=call.tool_name,
                is_error=got.is_error if got is not None else error is not None,
                result=got.result if got is not None else None, raw=raw.get(cid),
                delivered=got is not None, error=error))
        self._calls.clear()

    def end(self, run: Run, exc: BaseException | None) -> None:
        run.runtime.on_record = None
        st = run.state
        closed = isinstance(exc, (GeneratorExit, asyncio.CancelledError))
        failed = st.error if st.error is not None else None if closed else exc
        outcome: Literal["ok", "tripwire", "error", "closed"]
        if st.tripwire is not None:
            outcome = "tripwire"
        elif failed is not None:
            outcome = "error"
        elif closed:
            outcome = "closed"
        else:
            outcome = "ok"
        failure = _detail(run, failed) if failed is not None else None
        if self._model_open and failure is not None and failure.api_error:
            self._model_end(run, failure)
        self._step_end(run, "error" if failed is not None else "closed" if closed
                       else "accepted", None, None, None, None)
        tw = st.tripwire
        shown = None
        if failed is not None:
            shown = run.shown_text(failed) or str(failed)
        self.emit(RunFinished(
            run_id=run.run_id, outcome=outcome, text=st.text, error=shown,
            tripwire=None if tw is None else TripwireDetail(
                reason=tw.reason, processor_id=tw.processor_id, retry=tw.retry, hook=tw.hook),
            finish_reason=st.finish_reason or None, usage=_usage(st.usage), at=now_ms(),
            failure=failure, closed_early=closed))

    def tool_hooks(self, tool_call_id: str) -> None:
        self._tool_now = tool_call_id

    def tool_context(self, tool_call_id: str) -> AbstractContextManager[None]:
        contexts = self._contexts
        if not contexts:
            return _NO_CONTEXT
        if len(contexts) == 1:
            return contexts[0](tool_call_id)
        return _each(contexts, tool_call_id)
