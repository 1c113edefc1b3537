"""What a run did, as typed events: the loop's path, each step, each processor hook, and (on
request) what every processor did to every chunk.

Pass observers to a call — ``agent.stream(..., observers=[obs])`` or ``agent.generate(...)`` —
and each gets ``obs.on_event(event)`` for every event of the run, synchronously and in order,
from inside the run (so an observer sees a processor's action before the consumer gets the
chunk it produced). The events are frozen ``msgspec`` structs tagged by their ``type`` field;
``msgspec.json.encode(event)`` gives their JSON (snake_case keys, ``"type"`` first), and
``decode_event`` reads it back. The studio's SSE route (``docs/studio.md``) sends exactly this.

Two kinds of cost, decided here:

* **per node / hook / step** (``run-start``, ``transition``, ``step-start``, ``step-finish``,
  ``model-start``, ``model-finish``, ``hook``, ``tool-call``, ``tool-result``, ``run-finish``):
  made only when the run has an observer (the OpenTelemetry tracing is one, when it is on), at
  the run's transitions and hook records; never per chunk.
* **per chunk** (``model-chunk``, ``action``, ``chunk``): made only when some observer has
  ``chunk_detail = True``. Such a run drives its output processors through an instrumented
  copy of the stream chain (each stream hook wrapped); a run without one pays nothing per chunk.

How a stream hook's result is reported (``ProcessorAction.action``), per call:

* ``passed``: it returned the chunk it was given (the same object).
* ``dropped``: it returned nothing (``None`` or ``[]``) and does not hold back; ``held``: it
  returned nothing and holds back (its ``buffering`` is not pass-through, as the operators'
  ``HoldbackGuard``): its text waits in the processor.
* ``released``: it let out text it held, unchanged (``before`` is the held text plus the
  chunk's, ``after`` what came out); also what ``flush_output_stream`` lets out at a step's end.
* ``changed``: it returned other chunk(s): ``before``/``after`` are the text going in (with any
  held text in front) and coming out (for chunks without text: their JSON).
* ``redacted``: a change that masks what was there: the processor says it redacts (a true
  ``redacts`` attribute; the operators' ``RedactingGuard`` sets it), or the new text holds a
  mask the old did not, compared without case (``[LABEL]`` in brackets, ``***``, ``█``; so
  upper-casing ``[a]`` is a change, not a redaction).
* ``emitted``: a chunk it added — an extra item of the list it returned next to the chunk it
  was given, or a chunk it wrote with its ``writer``.
* ``aborted``: it raised ``TripWire`` (``reason`` is the tripwire's) or failed
  (``reason`` is the error text).

Message hooks (``process_input``, ``process_output_step``, ``process_tool_result``,
``process_output_result``) are reported at the hook, for observers with chunk detail: an
``action`` whose ``chunk_type`` is the hook's name, ``changed`` or ``redacted``, with the text
of each message it changed before and after (a tool result as ``name: <JSON>``); nothing when it
changed no text.

``seq`` of ``model-chunk``/``action`` numbers the model's chunks of the run (from 0); an action
on a chunk that did not come from the model (``step-start``, a tool result, what was written or
flushed) has ``seq`` ``None``. ``chunk`` events number what the consumer received, from 0.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import msgspec

from ._loop_nodes import LoopNode
from ._tool_records import StepToolCall
from .errors import InvalidArgument

__all__ = [
    "RunEvent", "RunObserver", "RunStarted", "Transition", "StepStarted", "StepFinished",
    "HookCalled", "ToolCalled", "ToolReturned", "ModelStarted", "ModelFinished", "ModelProduced",
    "ProcessorAction", "ChunkOut", "RunFinished", "TripwireDetail", "ErrorDetail", "Action",
    "EVENT_TYPES", "decode_event", "EventLog", "LoopNode",
]

#: What a stream processor did to one chunk (see the module docstring).
Action = Literal["passed", "changed", "dropped", "held", "released", "redacted", "aborted",
                 "emitted"]


class _Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    run_id: str

    @property
    def type(self) -> str:
        """The event's tag (``"run-start"``, ``"action"``...), as in its JSON."""
        return str(self.__struct_config__.tag)


class ErrorDetail(msgspec.Struct, frozen=True, kw_only=True):
    """An error as the events report it: ``type`` (the exception's class name),
    ``status_code`` (an ``APICallError``'s HTTP status, if it has one), ``api_error`` (it is an
    ``APICallError``: a model call failed) and ``shown`` (the text a client was shown of it,
    after the output processors; ``None`` when none was made). Never the raw exception text:
    it can quote what the model or a tool was given."""

    type: str
    status_code: int | None = None
    api_error: bool = False
    shown: str | None = None


class RunStarted(_Event, frozen=True, kw_only=True, tag="run-start"):
    """The run starts (its first chunk is being asked for). ``at``: epoch milliseconds;
    ``agent_name``: ``Agent(name=)`` (else its id); ``provider``: the model's, if it says."""

    agent_id: str
    model_id: str | None
    thread_id: str | None
    resource_id: str | None
    at: float
    agent_name: str = ""
    provider: str | None = None


class Transition(_Event, frozen=True, kw_only=True, tag="transition"):
    """Node ``node`` finished (its chunks were delivered); ``next`` runs next.
    ``step_number``: the step the run is in (``None`` before the first). ``error``: the error
    the run routes by this transition (into ``process_api_error`` or ``fail``).

    The events a transition causes come right after it: first what ends (``model-finish``,
    ``tool-result``, ``step-finish``), then what starts (``step-start``, ``model-start``,
    ``tool-call``)."""

    node: LoopNode
    next: LoopNode
    step_number: int | None
    at: float
    error: ErrorDetail | None = None


class StepStarted(_Event, frozen=True, kw_only=True, tag="step-start"):
    """An attempt at step ``step_number`` starts; ``retry_count`` attempts of it were retried."""

    step_number: int
    retry_count: int
    at: float


class StepFinished(_Event, frozen=True, kw_only=True, tag="step-finish"):
    """An attempt at a step ended: ``accepted`` (its chunks stand), ``retried`` (withdrawn by a
    processor's ``abort(retry=True)``; the step runs again), ``tripwire``, ``error`` or
    ``closed`` (the consumer stopped reading, or the run was cancelled, mid-step).
    ``reason``: the tripwire's reason or the error as shown, for ``retried``/``tripwire``/
    ``error``."""

    step_number: int
    retry_count: int
    outcome: Literal["accepted", "retried", "tripwire", "error", "closed"]
    finish_reason: str | None
    usage: dict[str, int]
    at: float
    reason: str | None = None
    processor_id: str | None = None


class HookCalled(_Event, frozen=True, kw_only=True, tag="hook"):
    """One processor hook call — one ``result.trace`` record (``TraceRecord``); for
    ``process_output_stream``, one processor's whole pass over a step. ``ttfc_ms``: the time
    the processor added to the step's first text chunk (``duration_s``/``ttfc_s``: the same
    two, unrounded, in seconds, as ``result.trace`` has them). ``retry``: the hook's tripwire
    asked for a retry (outcome ``retry``, or a stream hook's ``tripwire`` with ``retry=True``).
    ``tool_call_id``: for ``process_tool_result``, the tool call whose result it saw."""

    processor_id: str
    hook: str
    step: int | None
    duration_ms: float
    outcome: str
    detail: str | None
    calls: int
    dropped: int
    ttfc_ms: float | None
    duration_s: float = 0.0
    ttfc_s: float | None = None
    retry: bool = False
    tool_call_id: str | None = None


class ToolCalled(_Event, frozen=True, kw_only=True, tag="tool-call"):
    """The loop is about to run the tool call ``tool_call_id`` of step ``step_number``.
    ``description``: the tool's, when it has one."""

    step_number: int
    tool_call_id: str
    tool_name: str
    args: Any
    description: str | None = None


class ToolReturned(_Event, frozen=True, kw_only=True, tag="tool-result"):
    """The tool call returned (``is_error`` false) or failed; ``result`` as the consumer
    received it (after ``process_tool_result`` and the stream processors; ``None`` and
    ``delivered`` false when a processor dropped it, or the call never finished), ``raw`` as the
    tool returned it (a failure: its error text) — the two differ where a processor changed it.
    ``error``: the tool raised (its class; the text is in ``raw``, and in ``result`` as the
    consumer got it)."""

    step_number: int
    tool_call_id: str
    tool_name: str
    is_error: bool
    result: Any
    raw: Any = None
    delivered: bool = True
    error: ErrorDetail | None = None


class ModelStarted(_Event, frozen=True, kw_only=True, tag="model-start"):
    """A model call of step ``step_number`` starts (not for a step a ``process_llm_request``
    replay answered): the model's ``provider``/``model_id``, the request's ``model_settings``,
    whether it asks for ``structured`` output, and its ``prompt`` (the provider-shaped messages
    sent, after the processors)."""

    step_number: int
    provider: str | None
    model_id: str | None
    structured: bool
    model_settings: dict[str, object]
    prompt: list[Any]


class ModelFinished(_Event, frozen=True, kw_only=True, tag="model-finish"):
    """The model call ended: it returned (``error`` ``None``: its ``usage``, ``finish_reason``,
    and what the consumer received of it — ``text``, ``reasoning``, ``tool_calls``; the seconds
    from the call to the first text delta the consumer received, ``time_to_first_text``) or
    failed (``error``)."""

    step_number: int
    error: ErrorDetail | None = None
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    text: str = ""
    reasoning: str = ""
    tool_calls: list[StepToolCall] = msgspec.field(default_factory=list)
    time_to_first_text: float | None = None


class ModelProduced(_Event, frozen=True, kw_only=True, tag="model-chunk"):
    """What the model produced, before any processor (``chunk``: the Mastra wire dict)."""

    step_number: int
    seq: int
    chunk: dict[str, Any]


class ProcessorAction(_Event, frozen=True, kw_only=True, tag="action"):
    """What stream processor ``processor_id`` did to one chunk (see the module docstring).
    ``chunk_type``: the type of the chunk it was given (or of what it released/emitted)."""

    step_number: int | None
    seq: int | None
    processor_id: str
    action: Action
    chunk_type: str
    before: str | None = None
    after: str | None = None
    reason: str | None = None


class ChunkOut(_Event, frozen=True, kw_only=True, tag="chunk"):
    """A chunk the consumer received (``chunk``: the Mastra wire dict), numbered by ``seq``."""

    seq: int
    chunk: dict[str, Any]


class TripwireDetail(msgspec.Struct, frozen=True, kw_only=True):
    """Why a run was blocked: the processor, its reason, and whether it asked for a retry."""

    reason: str
    processor_id: str | None
    retry: bool
    hook: str | None = None


class RunFinished(_Event, frozen=True, kw_only=True, tag="run-finish"):
    """The run ended: ``ok``, ``tripwire`` (blocked: ``tripwire`` says by whom), ``error``
    (``error``: the text a client was shown; ``failure``: the error's detail) or ``closed``
    (its consumer stopped early or it was cancelled). ``text``: ``result.text``.
    ``closed_early``: the consumer stopped or the run was cancelled, whatever the outcome (a
    consumer may stop at the ``error`` chunk)."""

    outcome: Literal["ok", "tripwire", "error", "closed"]
    text: str
    error: str | None
    tripwire: TripwireDetail | None
    finish_reason: str | None
    usage: dict[str, int]
    at: float
    failure: ErrorDetail | None = None
    closed_early: bool = False


#: Any event of a run.
RunEvent = (RunStarted | Transition | StepStarted | StepFinished | HookCalled | ToolCalled
            | ToolReturned | ModelStarted | ModelFinished | ModelProduced | ProcessorAction
            | ChunkOut | RunFinished)

#: Each event's ``type`` tag → its class.
EVENT_TYPES: dict[str, type[RunEvent]] = {
    str(cls.__struct_config__.tag): cls
    for cls in (RunStarted, Transition, StepStarted, StepFinished, HookCalled, ToolCalled,
                ToolReturned, ModelStarted, ModelFinished, ModelProduced, ProcessorAction,
                ChunkOut, RunFinished)}

_DECODER: msgspec.json.Decoder[RunEvent] = msgspec.json.Decoder(RunEvent)

#: An event class, for ``EventRecorder.of``.
E = TypeVar("E")


def decode_event(data: bytes | str) -> RunEvent:
    """An event back from its JSON (what the studio's SSE route sends after ``data: ``).

    Raises:
        streamkit.errors.InvalidArgument: ``data`` is not the JSON of a run event (the message
            says what was wrong).
    """
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise InvalidArgument(f"not a run event: {exc}; expected the JSON of one of "
                              f"{sorted(EVENT_TYPES)}") from None


@runtime_checkable
class RunObserver(Protocol):
    """What ``observers=`` takes: an object with ``on_event(event)``.

    ``chunk_detail``: ``True`` asks for the per-chunk events (``model-chunk``, ``action``,
    ``chunk``); read once when the run is created. An object without the attribute gets the
    per-node events only. ``on_event`` is called synchronously inside the run: keep it short
    (append to a list, put on a queue). An exception it raises is logged (logger
    ``streamkit.events``) and does not change the run.

    An observer may also have ``tool_context(tool_call_id)`` returning a context manager: the
    run enters it inside each tool call's own task, around the tool's work (the tracing uses it
    so that spans a tool makes nest under its ``execute_tool`` span). Read once, when the run is
    created.
    """

    def on_event(self, event: RunEvent) -> None: ...


class EventLog:
    """A ``RunObserver`` that keeps every event in ``events`` (``chunk_detail`` as given).

    >>> log = EventLog(chunk_detail=True)
    >>> # agent.stream("hi", observers=[log]) ... then: [e.type for e in log.events]
    """

    def __init__(self, *, chunk_detail: bool = False) -> None:
        self.chunk_detail = chunk_detail
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent) -> None:
        self.events.append(event)

    def of(self, cls: type[E]) -> list[E]:
        """The events of class ``cls``, in order (typed as ``cls``: ``of(ToolCalled)`` is a
        ``list[ToolCalled]``)."""
        return [e for e in self.events if isinstance(e, cls)]
