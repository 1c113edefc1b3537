"""The AI SDK v5 UI message stream: Mastra chunks turned into UI chunks, as ``@mastra/ai-sdk``'s
``chatRoute`` does (``docs/protocols.md``, "The AI SDK chat route"), for
``useChat``/``DefaultChatTransport`` clients.

What belongs here: ``UIMessageStream`` (one per response: it holds the run's ``start`` until the
first step opens, and appends a ``finish`` after a tripwire) and the headers the response carries.
What does not: HTTP framing (``_sse``), request bodies (``_requests``).

The field renames (``text`` → ``delta``, ``args`` → ``input``, ``result`` → ``output``,
``step-start`` → ``start-step``) are the table of ``docs/protocols.md``. Decisions where streamkit
differs from ``chatRoute``, each because a processor, not the transport, decides what a client
sees:

* reasoning and sources are sent (``chatRoute`` defaults ``sendReasoning``/``sendSources`` to
  off): an output processor that drops reasoning (the demo's ``HideReasoning``) is the way to
  keep it from clients, exactly as in-process;
* ``transient: true`` on a ``data-*`` chunk is kept (``chatRoute`` drops it): the AI SDK then
  hands the chunk to ``onData`` only instead of storing it as a message part, which is what
  transient means (``data-step-retry`` must not become part of the history a client resends);
* ``abort`` is sent as the UI ``abort`` chunk.

Dropped, as by ``chatRoute`` (the UI schema has no such part): ``tool-call-input-streaming-end``,
``raw``, ``response-metadata``, ``reasoning-signature``, ``redacted-reasoning``,
``reasoning-file``, ``tool-output``, ``object``, ``object-result``, ``tool-output-denied``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from msgspec import UNSET

from .._json import JSONDict
from ..chunks import (
    AbortChunk,
    Chunk,
    DataChunk,
    ErrorChunk,
    File,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    Source,
    Start,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallApproval,
    ToolCallDelta,
    ToolCallInputStreamingStart,
    ToolCallSuspended,
    ToolErrorChunk,
    ToolResult,
    TripwireChunk,
)
from ..wire import to_builtins

__all__ = ["UIMessageStream", "UI_MESSAGE_STREAM_HEADERS", "FINISH_REASONS", "error_text_of"]

#: The headers of a UI message stream response (``ai``'s ``UI_MESSAGE_STREAM_HEADERS``).
UI_MESSAGE_STREAM_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}

#: The finish reasons the UI schema accepts; any other becomes ``"other"``.
FINISH_REASONS = frozenset(("stop", "length", "content-filter", "tool-calls", "error", "other",
                            "unknown"))


def error_text_of(error: object) -> str:
    """A readable message from an ``error`` payload (a string, ``{"message": ...}``, anything)."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str) and message:
            name = error.get("name")
            return f"{name}: {message}" if isinstance(name, str) and name else message
    return "error" if error is UNSET or error is None else str(error)


def _set(out: JSONDict, key: str, value: Any) -> None:  # a payload's free-form value (_json.py)
    if value is not UNSET and value is not None:
        out[key] = value


def _source(chunk: Source) -> JSONDict:
    """``source-url`` or ``source-document``, by the source's ``sourceType``."""
    p = chunk.payload
    if p.source_type == "document":
        doc: JSONDict = {"type": "source-document", "sourceId": p.id,
                               "mediaType": p.mime_type if p.mime_type is not UNSET
                               else "application/octet-stream",
                               "title": p.title if p.title is not UNSET else p.id}
        _set(doc, "filename", getattr(p, "filename", UNSET))
        return doc
    url: JSONDict = {"type": "source-url", "sourceId": p.id,
                           "url": p.url if p.url is not UNSET else ""}
    _set(url, "title", p.title)
    return url


class UIMessageStream:
    """Turns one run's Mastra chunks into AI SDK v5 UI chunks (plain dicts, ready for JSON).

    ``convert(chunk)`` returns the UI chunks for one Mastra chunk (often one, sometimes none);
    ``close()`` returns what must still be sent when the run ended (a ``finish`` after a
    tripwire ended it without one).

    Marble::

        --start--step-start---------text-delta{text:"Hi"}--step-finish--finish--|
                            UIMessageStream
        -------start,start-step---text-delta{delta:"Hi"}--finish-step--finish--|

    Example:
        >>> ui = UIMessageStream()
        >>> ui.convert(TextDelta(id="t1", text="Hi", run_id="r", from_="AGENT"))
        [{'type': 'text-delta', 'id': 't1', 'delta': 'Hi'}]
    """

    __slots__ = ("_start", "_started", "_finished", "_tripped")

    def __init__(self) -> None:
        self._start: Start | None = None
        self._started = False
        self._finished = False
        self._tripped = False

    def convert(self, chunk: Chunk) -> list[JSONDict]:
        # One dict lookup by class (``_CONVERTERS``) instead of a chain of up to ten
        # ``isinstance`` tests per chunk; a subclass of a chunk class is converted as the first
        # class of its MRO that has a converter (for a class derived from one chunk class, what
        # the ``isinstance`` chain gave it; with two, the MRO's order decides, not the chain's).
        convert = _CONVERTERS.get(chunk.__class__)
        if convert is None:
            convert = _converter_of(chunk.__class__)
        return convert(self, chunk)

    def _text_delta(self, chunk: TextDelta) -> list[JSONDict]:
        return [{"type": "text-delta", "id": chunk.payload.id, "delta": chunk.payload.text}]

    def _data(self, chunk: DataChunk) -> list[JSONDict]:
        data: JSONDict = {"type": chunk.type, "data": chunk.data}
        _set(data, "id", chunk.id)
        if chunk.transient is True:
            data["transient"] = True
        return [data]

    def _run_start(self, chunk: Start) -> list[JSONDict]:
        self._start = chunk
        return []

    def _step_start(self, chunk: StepStart) -> list[JSONDict]:
        return self._opening(chunk) + [{"type": "start-step"}]

    def _step_finish(self, chunk: StepFinish) -> list[JSONDict]:
        return [{"type": "finish-step"}]

    def _part_start(self, chunk: TextStart | ReasoningStart) -> list[JSONDict]:
        opened: JSONDict = {"type": chunk.type, "id": chunk.payload.id}
        _set(opened, "providerMetadata", chunk.payload.provider_metadata)
        return [opened]

    def _part_end(self, chunk: TextEnd | ReasoningEnd) -> list[JSONDict]:
        closed: JSONDict = {"type": chunk.type, "id": chunk.payload.id}
        _set(closed, "providerMetadata", getattr(chunk.payload, "provider_metadata", UNSET))
        return [closed]

    def _reasoning_delta(self, chunk: ReasoningDelta) -> list[JSONDict]:
        return [{"type": "reasoning-delta", "id": chunk.payload.id,
                 "delta": chunk.payload.text}]

    def _tool_input_start(self, chunk: ToolCallInputStreamingStart) -> list[JSONDict]:
        start: JSONDict = {"type": "tool-input-start", "toolCallId": chunk.payload.tool_call_id,
                           "toolName": chunk.payload.tool_name, "dynamic": False}
        _set(start, "providerExecuted", getattr(chunk.payload, "provider_executed", UNSET))
        return [start]

    def _tool_input_delta(self, chunk: ToolCallDelta) -> list[JSONDict]:
        return [{"type": "tool-input-delta", "toolCallId": chunk.payload.tool_call_id,
                 "inputTextDelta": chunk.payload.args_text_delta}]

    def _tool_call(self, chunk: ToolCall) -> list[JSONDict]:
        args = chunk.payload.args
        return [{"type": "tool-input-available", "toolCallId": chunk.payload.tool_call_id,
                 "toolName": chunk.payload.tool_name,
                 "input": {} if args is UNSET or args is None else args}]

    def _tool_result(self, chunk: ToolResult) -> list[JSONDict]:
        result = chunk.payload.result
        return [{"type": "tool-output-available", "toolCallId": chunk.payload.tool_call_id,
                 "output": None if result is UNSET else result}]

    def _tool_error(self, chunk: ToolErrorChunk) -> list[JSONDict]:
        return [{"type": "tool-output-error", "toolCallId": chunk.payload.tool_call_id,
                 "errorText": error_text_of(chunk.payload.error)}]

    def _opening(self, step: StepStart) -> list[JSONDict]:
        """The held ``start``, sent with the first step so its ``messageId`` is the step's."""
        if self._started:
            return []
        self._started = True
        out: JSONDict = {"type": "start"}
        message_id = step.payload.message_id
        if message_id is UNSET and self._start is not None:
            message_id = self._start.payload.message_id
        _set(out, "messageId", message_id)
        return [out]

    def _finish(self, chunk: Finish) -> list[JSONDict]:
        self._finished = True
        step_result: Any = chunk.payload.step_result
        reason = getattr(step_result, "reason", None)
        return self._begin() + [{"type": "finish", "finishReason":
                                 reason if reason in FINISH_REASONS else "other"}]

    def _error(self, chunk: ErrorChunk) -> list[JSONDict]:
        return self._begin() + [{"type": "error",
                                 "errorText": error_text_of(chunk.payload.error)}]

    def _tripwire(self, chunk: TripwireChunk) -> list[JSONDict]:
        trip = chunk.payload
        data = {"reason": trip.reason, "retry": trip.retry is True,
                "metadata": None if trip.metadata is UNSET else trip.metadata,
                "processorId": None if trip.processor_id is UNSET else trip.processor_id}
        self._tripped = True
        return self._begin() + [{"type": "data-tripwire", "data": data}]

    def _abort(self, chunk: AbortChunk) -> list[JSONDict]:
        self._finished = True
        return self._begin() + [{"type": "abort"}]

    def _source(self, chunk: Source) -> list[JSONDict]:
        return [_source(chunk)]

    def _file(self, chunk: File) -> list[JSONDict]:
        file = chunk.payload
        content = file.data
        if isinstance(content, (bytes, bytearray, memoryview)):
            content = base64.b64encode(bytes(content)).decode("ascii")
        return [{"type": "file", "url": f"data:{file.mime_type};base64,{content}",
                 "mediaType": file.mime_type}]

    def _tool_pause(self, chunk: ToolCallApproval | ToolCallSuspended) -> list[JSONDict]:
        return [{"type": f"data-{chunk.type}", "data": to_builtins(chunk)["payload"]}]

    def _nothing(self, chunk: Chunk) -> list[JSONDict]:
        return []

    def _begin(self) -> list[JSONDict]:
        """A terminal chunk before any step (an early tripwire or error) still needs the
        message's ``start`` first, or the client has no message to put it in."""
        if self._started:
            return []
        self._started = True
        out: JSONDict = {"type": "start"}
        if self._start is not None:
            _set(out, "messageId", self._start.payload.message_id)
        return [out]

    def close(self) -> list[JSONDict]:
        """What to send after the run's last chunk: a ``finish`` (reason ``other``) when a
        tripwire ended the run (it has no ``finish``). After an ``error`` nothing is added, as
        Mastra does: the client already knows the turn failed."""
        if self._finished or not self._tripped:
            return []
        self._finished = True
        return self._begin() + [{"type": "finish", "finishReason": "other"}]


_Converter = Callable[[UIMessageStream, Any], list[JSONDict]]

#: Each chunk class's UI chunks (``UIMessageStream.convert``); a class not here sends nothing
#: (``step-output``, ``object``, ``response-metadata``, ``watch``... have no UI chunk).
_CONVERTERS: dict[type, _Converter] = {
    TextDelta: UIMessageStream._text_delta, DataChunk: UIMessageStream._data,
    Start: UIMessageStream._run_start, StepStart: UIMessageStream._step_start,
    StepFinish: UIMessageStream._step_finish, TextStart: UIMessageStream._part_start,
    ReasoningStart: UIMessageStream._part_start, TextEnd: UIMessageStream._part_end,
    ReasoningEnd: UIMessageStream._part_end, ReasoningDelta: UIMessageStream._reasoning_delta,
    ToolCallInputStreamingStart: UIMessageStream._tool_input_start,
    ToolCallDelta: UIMessageStream._tool_input_delta, ToolCall: UIMessageStream._tool_call,
    ToolResult: UIMessageStream._tool_result, ToolErrorChunk: UIMessageStream._tool_error,
    Finish: UIMessageStream._finish, ErrorChunk: UIMessageStream._error,
    TripwireChunk: UIMessageStream._tripwire, AbortChunk: UIMessageStream._abort,
    Source: UIMessageStream._source, File: UIMessageStream._file,
    ToolCallApproval: UIMessageStream._tool_pause,
    ToolCallSuspended: UIMessageStream._tool_pause,
}


def _converter_of(cls: type) -> _Converter:
    """The converter of the first class in ``cls``'s MRO that has one (``_nothing`` if none),
    remembered for ``cls`` (chunk classes are few: the table stays small)."""
    found = next((_CONVERTERS[c] for c in cls.__mro__ if c in _CONVERTERS),
                 UIMessageStream._nothing)
    _CONVERTERS[cls] = found
    return found
