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
  ``hook``, ``tool-call``, ``tool-result``, ``run-finish``): made only when the run has an
  observer, at the points where the run already calls its tracer; never per chunk.
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
  mask the old did not (``[LABEL]`` in brackets, ``***``, ``█``).
* ``emitted``: a chunk it added — an extra item of the list it returned next to the chunk it
  was given, or a chunk it wrote with its ``writer``.
* ``aborted``: it raised ``TripWire`` (``reason`` is the tripwire's) or failed
  (``reason`` is the error text).

``seq`` of ``model-chunk``/``action`` numbers the model's chunks of the run (from 0); an action
on a chunk that did not come from the model (``step-start``, a tool result, what was written or
flushed) has ``seq`` ``None``. ``chunk`` events number what the consumer received, from 0.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from .errors import InvalidArgument

__all__ = [
    "RunEvent", "RunObserver", "RunStarted", "Transition", "StepStarted", "StepFinished",
    "HookCalled", "ToolCalled", "ToolReturned", "ModelChunk", "ProcessorAction", "ChunkOut",
    "RunFinished", "TripwireDetail", "Action", "EVENT_TYPES", "decode_event", "EventLog",
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


class RunStarted(_Event, frozen=True, kw_only=True, tag="run-start"):
    """The run starts (its first chunk is being asked for). ``at``: epoch milliseconds."""

    agent_id: str
    model_id: str | None
    thread_id: str | None
    resource_id: str | None
    at: float


class Transition(_Event, frozen=True, kw_only=True, tag="transition"):
    """Node ``node`` finished (its chunks were delivered); ``next`` runs next.
    ``step_number``: the step the run is in (``None`` before the first)."""

    node: str
    next: str
    step_number: int | None
    at: float


class StepStarted(_Event, frozen=True, kw_only=True, tag="step-start"):
    """An attempt at step ``step_number`` starts; ``retry_count`` attempts of it were retried."""

    step_number: int
    retry_count: int
    at: float


class StepFinished(_Event, frozen=True, kw_only=True, tag="step-finish"):
    """An attempt at a step ended: ``accepted`` (its chunks stand), ``retried`` (withdrawn by a
    processor's ``abort(retry=True)``; the step runs again), ``tripwire`` or ``error``.
    ``reason``: the tripwire's reason or the error as shown, for the last three."""

    step_number: int
    retry_count: int
    outcome: Literal["accepted", "retried", "tripwire", "error"]
    finish_reason: str | None
    usage: dict[str, int]
    at: float
    reason: str | None = None
    processor_id: str | None = None


class HookCalled(_Event, frozen=True, kw_only=True, tag="hook"):
    """One processor hook call — one ``result.trace`` record (``TraceRecord``); for
    ``process_output_stream``, one processor's whole pass over a step. ``ttfc_ms``: the time
    the processor added to the step's first text chunk."""

    processor_id: str
    hook: str
    step: int | None
    duration_ms: float
    outcome: str
    detail: str | None
    calls: int
    dropped: int
    ttfc_ms: float | None


class ToolCalled(_Event, frozen=True, kw_only=True, tag="tool-call"):
    """The loop is about to run the tool call ``tool_call_id`` of step ``step_number``."""

    step_number: int
    tool_call_id: str
    tool_name: str
    args: Any


class ToolReturned(_Event, frozen=True, kw_only=True, tag="tool-result"):
    """The tool call returned (``is_error`` false) or failed; ``result`` as the consumer
    received it (after the processors; ``None`` when a processor dropped it)."""

    step_number: int
    tool_call_id: str
    tool_name: str
    is_error: bool
    result: Any


class ModelChunk(_Event, frozen=True, kw_only=True, tag="model-chunk"):
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
    (``error``: the text a client was shown) or ``closed`` (its consumer stopped early or it
    was cancelled). ``text``: ``result.text``."""

    outcome: Literal["ok", "tripwire", "error", "closed"]
    text: str
    error: str | None
    tripwire: TripwireDetail | None
    finish_reason: str | None
    usage: dict[str, int]
    at: float


#: Any event of a run.
RunEvent = (RunStarted | Transition | StepStarted | StepFinished | HookCalled | ToolCalled
            | ToolReturned | ModelChunk | ProcessorAction | ChunkOut | RunFinished)

#: Each event's ``type`` tag → its class.
EVENT_TYPES: dict[str, type[Any]] = {
    str(cls.__struct_config__.tag): cls
    for cls in (RunStarted, Transition, StepStarted, StepFinished, HookCalled, ToolCalled,
                ToolReturned, ModelChunk, ProcessorAction, ChunkOut, RunFinished)}

_DECODER: msgspec.json.Decoder[RunEvent] = msgspec.json.Decoder(RunEvent)


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

    def of(self, cls: type[Any]) -> list[Any]:
        """The events of class ``cls``, in order."""
        return [e for e in self.events if isinstance(e, cls)]
