"""Request bodies: Mastra's ``generate``/``stream`` body and the AI SDK chat body, parsed into
the arguments of ``Agent.stream``.

What belongs here: reading a JSON body, checking it, and turning it into a ``Call`` (messages and
options); turning AI SDK v5 ``UIMessage``s (what ``useChat`` resends every turn) back into
streamkit messages. What does not: responses (``_mastra``, ``_app``), chunks (``_ui_stream``).

Every problem is an ``InvalidArgument`` (or ``InvalidType``) whose ``field`` attribute names the
body field, so the route answers Mastra's ``400 {"error": "Invalid request body", "issues":
[{"field", "message"}]}`` before any stream starts.

A body is decoded in one pass into a msgspec struct (``_AgentBody``, ``_ChatBody``: the fields
and their JSON types written once); msgspec's error names the path, which ``_ISSUES`` maps to the
body field and the issue the client reads (Mastra's ``"Invalid input"`` for ``messages``). What
the types cannot say (``memory`` without a thread, an empty ``messages`` list, a message of an
unknown shape) is checked after. Decision: ``NaN``/``Infinity`` literals, which are not JSON
(``json.loads`` took them), are a ``(body)`` error now, as msgspec refuses them.

Mastra body → ``Agent.stream`` options (``docs/protocols.md``, "Mastra's agent API"): ``messages``
(a string, a message or a
list; required), ``memory: {thread, resource}`` (``thread`` may be ``{id}``; a thread needs a
resource, which the server may decide instead — checked in ``_tenancy``; top-level
``threadId``/``resourceId`` are read too), ``requestContext`` (an
object), ``maxSteps``, ``toolChoice``, ``activeTools``, ``modelSettings``, ``providerOptions``,
``structuredOutput.schema``. Decision: the other keys Mastra documents (``runId``,
``instructions``, ``system``, ``context``, ``clientTools``, ``savePerStep``, ``tracingOptions``,
``stopWhen``, ``requireToolApproval``, ``output``...) and unknown keys are accepted and not used,
as Mastra tolerates unknown keys; streamkit has no per-call equivalent for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec

from ..agent import CallOptions
from ..errors import InvalidArgument, InvalidType, MessageError
from ..messages import (
    DataPart,
    FilePart,
    Message,
    MessageContent,
    Part,
    ReasoningPart,
    StepStartPart,
    TextPart,
    ToolInvocationPart,
    to_messages,
)

__all__ = ["Call", "ThreadBody", "read_json", "decode_agent_call", "decode_chat_call",
           "decode_thread_body", "parse_agent_call", "parse_chat_call", "ui_to_messages",
           "issues_of"]

_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _ThreadRef(msgspec.Struct):
    """``memory.thread`` given as ``{id}``."""

    id: _NonEmpty


class _MemoryBody(msgspec.Struct):
    """``memory: {thread, resource}``; ``thread`` falls back to the top-level ``threadId``."""

    thread: _NonEmpty | _ThreadRef | None = None
    resource: _NonEmpty | None = None


class _StructuredOutput(msgspec.Struct):
    schema: dict[str, object] | None = None


class _OptionsBody(msgspec.Struct, rename="camel"):
    """The body keys both routes read, by their wire (camelCase) names. Unknown keys are
    accepted and not used (as Mastra tolerates them)."""

    memory: _MemoryBody | None = None
    thread_id: _NonEmpty | None = None
    resource_id: _NonEmpty | None = None
    request_context: dict[str, object] | None = None
    max_steps: int | None = None
    tool_choice: str | dict[str, object] | None = None
    active_tools: list[str] | None = None
    model_settings: dict[str, object] | None = None
    provider_options: dict[str, object] | None = None
    structured_output: _StructuredOutput | None = None


class _AgentBody(_OptionsBody, rename="camel"):
    """Mastra's ``generate``/``stream`` body: ``messages`` is a string, a message or a list."""

    messages: str | dict[str, object] | list[Any] | None = None


class _ChatBody(_OptionsBody, rename="camel"):
    """The AI SDK chat body: ``messages`` is a list of ``UIMessage``s."""

    messages: list[Any] | None = None
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"


class ThreadBody(msgspec.Struct, rename="camel"):
    """``POST /api/memory/threads``: ``{resourceId, threadId?, title?, metadata?}``. An empty
    ``resourceId``/``threadId`` counts as not given (the server may decide the resource; a thread
    id is generated); Mastra's client also spells ``resourceid``. Decision: a ``title`` that is
    not a string or ``metadata`` that is not an object is a ``400`` (it was silently dropped;
    Mastra's own route refuses them too)."""

    resource_id: str | None = None
    resourceid: str | None = None
    thread_id: str | None = None
    title: str | None = None
    metadata: dict[str, object] | None = None


_THREAD_ISSUES: dict[str, tuple[str, str, type[InvalidArgument] | type[InvalidType]]] = {
    "resourceId": ("resourceId", "Invalid input", InvalidType),
    "resourceid": ("resourceId", "Invalid input", InvalidType),
    "threadId": ("threadId", "expected a string", InvalidType),
    "title": ("title", "expected a string", InvalidType),
    "metadata": ("metadata", "expected an object", InvalidType),
}


#: A decode error at a body path → (the field reported, its issue, the error class). The
#: longest matching prefix wins; anything else is reported at its own path.
_ISSUES: dict[str, tuple[str, str, type[InvalidArgument] | type[InvalidType]]] = {
    "messages": ("messages", "Invalid input", InvalidArgument),  # Mastra's own wording
    "memory": ("memory", "expected an object {thread, resource}", InvalidType),
    "memory.thread": ("memory.thread", "expected a thread id (a string or {id})",
                      InvalidArgument),
    "memory.resource": ("memory.resource", "expected a resource id (a non-empty string)",
                        InvalidArgument),
    "threadId": ("threadId", "expected a non-empty string", InvalidArgument),
    "resourceId": ("resourceId", "expected a non-empty string", InvalidArgument),
    "requestContext": ("requestContext", "expected an object", InvalidType),
    "maxSteps": ("maxSteps", "expected int", InvalidType),
    "toolChoice": ("toolChoice", "expected str or dict", InvalidType),
    "activeTools": ("activeTools", "expected a list of tool names (strings)", InvalidType),
    "modelSettings": ("modelSettings", "expected dict", InvalidType),
    "providerOptions": ("providerOptions", "expected dict", InvalidType),
    "structuredOutput": ("structuredOutput.schema", "expected a JSON Schema object",
                         InvalidType),
    "trigger": ("trigger", "expected submit-message or regenerate-message", InvalidArgument),
}
_CHAT_ISSUES = {**_ISSUES, "messages": ("messages", "expected a non-empty list of UI messages",
                                        InvalidArgument)}

_AT = re.compile(r" - at `\$(.*)`$")
_GOT = re.compile(r"got `(\w+)`")


@dataclass(slots=True)
class Call:
    """What one request asks an agent to do: ``messages`` and ``Agent.stream`` keywords."""

    messages: list[Message]
    options: CallOptions = field(default_factory=lambda: CallOptions())
    #: The body field a missing resource is reported under (``memory.resource`` when the body
    #: used ``memory: {thread, resource}``).
    resource_field: str = "resourceId"

    @property
    def thread_id(self) -> str | None:
        value = self.options.get("thread_id")
        return value if isinstance(value, str) else None

    @property
    def resource_id(self) -> str | None:
        value = self.options.get("resource_id")
        return value if isinstance(value, str) else None


def _bad(field_name: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"invalid request body: {field_name}: {message}", field=field_name,
                           issue=message)


def issues_of(exc: Exception) -> list[dict[str, str]]:
    """Mastra's ``issues`` list for a body error."""
    name = getattr(exc, "field", None)
    issue = getattr(exc, "issue", None)
    return [{"field": name if isinstance(name, str) else "(body)",
             "message": issue if isinstance(issue, str) else str(exc)}]


def _body_error(exc: msgspec.MsgspecError,
                issues: Mapping[str, tuple[str, str, type[InvalidArgument] | type[InvalidType]]]
                ) -> InvalidArgument | InvalidType:
    """A msgspec decode/validation error as the body error the routes answer ``400`` with:
    ``field`` is the body field (``(body)`` for the body as a whole), ``issue`` what was
    expected, and the message adds what msgspec found."""
    text = str(exc)
    if not isinstance(exc, msgspec.ValidationError):  # (a ValidationError is a DecodeError)
        issue = f"not valid JSON ({text}); expected a JSON object"
        return InvalidArgument(f"invalid request body: (body): {issue}", field="(body)",
                               issue=issue)
    at = _AT.search(text)
    detail = text[:at.start()] if at else text
    got = _GOT.search(detail)
    path = re.sub(r"\[\d+\]", "", at.group(1)).lstrip(".") if at else ""
    if not path:
        issue = f"expected a JSON object, got {got.group(1)}" if got else \
            f"expected a JSON object with string keys ({text})"
        return InvalidArgument(f"invalid request body: (body): {issue}", field="(body)",
                               issue=issue)
    key = path
    while key and key not in issues:
        key = key.rpartition(".")[0]
    name, issue, error = issues[key] if key else (path, detail, InvalidArgument)
    if error is InvalidType and got and got.group(1) == "null":
        error = InvalidArgument
    return error(f"invalid request body: {name}: {issue} ({detail})", field=name, issue=issue)


def read_json(body: bytes) -> dict[str, object]:
    """The body as a JSON object.

    Raises:
        InvalidArgument: the body is not JSON, or not an object (``field`` is ``"(body)"``).
    """
    try:
        return _OBJECT.decode(body) if body.strip() else _OBJECT.decode(b"null")
    except msgspec.MsgspecError as exc:
        raise _body_error(exc, {}) from None


def _messages(value: str | dict[str, object] | list[Any] | None) -> list[Message]:
    if value is None:
        # Mastra's own wording for a missing or mistyped ``messages``.
        raise _bad("messages", "Invalid input")
    if isinstance(value, list) and not value:
        raise _bad("messages", "expected at least one message")
    try:
        return to_messages(value)
    except MessageError as exc:
        raise _bad("messages", exc.message) from None


def _memory(body: _OptionsBody, options: CallOptions) -> None:
    """``thread_id``/``resource_id`` from ``memory`` (or top-level ``threadId``/``resourceId``),
    into ``options``.

    A missing resource is not an error here: the server may decide it (``_tenancy``), which
    then refuses a thread that still has none.
    """
    memory = body.memory
    thread: str | _ThreadRef | None = body.thread_id
    resource = body.resource_id
    if memory is not None:
        thread = memory.thread if memory.thread is not None else thread
        resource = memory.resource if memory.resource is not None else resource
        if thread is None:
            raise _bad("memory.thread", "expected a thread id (a string or {id})")
    if thread is not None:
        options["thread_id"] = thread.id if isinstance(thread, _ThreadRef) else thread
    if resource is not None:
        options["resource_id"] = resource


def _options(body: _OptionsBody) -> CallOptions:
    """The body's ``Agent.stream`` keywords: each one the body gave, by its ``CallOptions``
    name (mypy checks each value against the option's type)."""
    options = CallOptions()
    _memory(body, options)
    if body.request_context is not None:
        options["request_context"] = body.request_context
    if body.max_steps is not None:
        options["max_steps"] = body.max_steps
    if body.tool_choice is not None:
        options["tool_choice"] = body.tool_choice
    if body.active_tools is not None:
        options["active_tools"] = body.active_tools
    if body.model_settings is not None:
        options["model_settings"] = body.model_settings
    if body.provider_options is not None:
        options["provider_options"] = body.provider_options
    if body.structured_output is not None:
        if body.structured_output.schema is None:
            raise _bad("structuredOutput.schema", "expected a JSON Schema object")
        options["structured_output"] = body.structured_output.schema
    return options


def _resource_field(body: _OptionsBody) -> str:
    return "memory.resource" if body.memory is not None else "resourceId"


_OBJECT = msgspec.json.Decoder(dict[str, object])
_THREAD_BODY = msgspec.json.Decoder(ThreadBody)


def decode_thread_body(body: bytes) -> ThreadBody:
    """A thread-creation body (JSON bytes) as a ``ThreadBody``.

    Raises:
        InvalidArgument: not JSON or not an object (``field`` is ``"(body)"``).
        InvalidType: a field of the wrong JSON type (``exc.field`` names it).

    Example:
        >>> decode_thread_body(b'{"resourceId": "u1", "title": "Returns"}').title
        'Returns'
    """
    try:
        return _THREAD_BODY.decode(body) if body.strip() else _THREAD_BODY.decode(b"null")
    except msgspec.MsgspecError as exc:
        raise _body_error(exc, _THREAD_ISSUES) from None
_AGENT_BODY = msgspec.json.Decoder(_AgentBody)
_CHAT_BODY = msgspec.json.Decoder(_ChatBody)


def decode_agent_call(body: bytes) -> Call:
    """A Mastra ``generate``/``stream`` request body (JSON bytes) as a ``Call``: decoded and
    checked in one pass into a msgspec struct; a decode error becomes the body error.

    Raises:
        InvalidArgument: not JSON, not an object, or a missing or malformed field
            (``exc.field`` names it).
        InvalidType: a field of the wrong JSON type (``exc.field`` names it).

    Example:
        >>> decode_agent_call(b'{"messages": "Hi", "maxSteps": 2}').options
        {'max_steps': 2}
        >>> decode_agent_call(b'{"messages": "Hi", "maxSteps": "2"}')
        Traceback (most recent call last):
        ...
        streamkit.errors.InvalidType: invalid request body: maxSteps: expected int (Expected \
`int | null`, got `str`)
    """
    try:
        parsed = _AGENT_BODY.decode(body) if body.strip() else _AGENT_BODY.decode(b"null")
    except msgspec.MsgspecError as exc:
        raise _body_error(exc, _ISSUES) from None
    return _agent_call(parsed)


def _agent_call(body: _AgentBody) -> Call:
    return Call(_messages(body.messages), _options(body), _resource_field(body))


def parse_agent_call(body: Mapping[str, Any]) -> Call:
    """A Mastra ``generate``/``stream`` body, already parsed, as a ``Call`` (the checks of
    ``decode_agent_call``).

    Raises:
        InvalidArgument: a missing or malformed field (``exc.field`` names it).

    Example:
        >>> call = parse_agent_call({"messages": "Hi", "memory": {"thread": "t1",
        ...                          "resource": "u1"}, "maxSteps": 3})
        >>> call.options
        {'thread_id': 't1', 'resource_id': 'u1', 'max_steps': 3}
    """
    try:
        parsed = msgspec.convert(body, _AgentBody, strict=True)
    except msgspec.MsgspecError as exc:
        raise _body_error(exc, _ISSUES) from None
    return _agent_call(parsed)


# --------------------------------------------------------------------------------------------
# AI SDK v5 UIMessages → messages
# --------------------------------------------------------------------------------------------


def _tool_part(part: Mapping[str, Any], name: str) -> Part | None:
    """A ``tool-<name>``/``dynamic-tool`` UI part as a tool invocation, or ``None`` when it has
    no outcome yet (``input-streaming``/``input-available``: a call nobody can answer now —
    the AI SDK's own ``convertToModelMessages`` leaves unanswered calls out too)."""
    state = part.get("state")
    call_id = part.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        raise MessageError(f"a {part.get('type')!r} part needs a toolCallId")
    args = part.get("input")
    if state == "output-available":
        return ToolInvocationPart.returned(call_id, name, part.get("output"),
                                           {} if args is None else args)
    if state == "output-error":
        text = part.get("errorText")
        return ToolInvocationPart.failed(call_id, name, text if isinstance(text, str)
                                         else "tool failed", {} if args is None else args)
    if state in ("input-streaming", "input-available", "approval-requested",
                 "approval-responded", "output-denied"):
        return None
    raise MessageError(f"tool part {call_id!r} has unknown state {state!r}; expected "
                       f"output-available, output-error, input-available or input-streaming")


def _ui_part(part: Any) -> Part | None:
    if not isinstance(part, Mapping):
        raise MessageError(f"a UI message part must be an object, got {type(part).__name__}")
    kind = part.get("type")
    if not isinstance(kind, str):
        raise MessageError("a UI message part needs a string 'type'")
    if kind == "text":
        return TextPart(str(part.get("text", "")))
    if kind == "reasoning":
        return ReasoningPart(str(part.get("text", "")))
    if kind == "step-start":
        return StepStartPart()
    if kind == "file":
        url, media = part.get("url"), part.get("mediaType")
        if not isinstance(url, str) or not isinstance(media, str):
            raise MessageError("a 'file' part needs 'url' and 'mediaType' strings")
        return FilePart(media, url)
    if kind.startswith("tool-"):
        return _tool_part(part, kind[len("tool-"):])
    if kind == "dynamic-tool":
        name = part.get("toolName")
        if not isinstance(name, str) or not name:
            raise MessageError("a 'dynamic-tool' part needs a toolName")
        return _tool_part(part, name)
    if kind.startswith("data-"):
        data = DataPart(type=kind, data=part.get("data"))
        if isinstance(part.get("id"), str):
            data.id = part["id"]
        return data
    if kind in ("source-url", "source-document"):
        return None  # citations the model already gave; not model input (as convertToModelMessages)
    raise MessageError(f"unknown UI message part type {kind!r}")


def ui_to_messages(messages: Sequence[Any]) -> list[Message]:
    """AI SDK v5 ``UIMessage``s (``{id, role, parts}``) as streamkit messages.

    Assistant ``tool-<name>`` parts with an outcome become tool invocations (so the model sees
    the call and its result again); parts without an outcome, and ``source-*`` parts, are left
    out; ``data-*`` parts are kept as data parts (stored, never sent to a model).

    Raises:
        MessageError: a message or part of an unknown shape (the message names it).

    Example:
        >>> [m.role for m in ui_to_messages([{"id": "u1", "role": "user",
        ...                                   "parts": [{"type": "text", "text": "Hi"}]}])]
        ['user']
    """
    out: list[Message] = []
    for index, item in enumerate(messages):
        if not isinstance(item, Mapping):
            raise MessageError(f"message #{index}: expected an object, got "
                               f"{type(item).__name__}")
        role = item.get("role")
        if role not in ("user", "assistant", "system"):
            raise MessageError(f"message #{index}: role must be user, assistant or system, got "
                               f"{role!r}")
        raw_parts = item.get("parts")
        if not isinstance(raw_parts, list):
            raise MessageError(f"message #{index}: 'parts' must be a list")
        try:
            parts = [p for p in (_ui_part(part) for part in raw_parts) if p is not None]
        except MessageError as exc:
            raise MessageError(f"message #{index}: {exc.message}") from None
        if role == "system":
            text = "".join(p.text for p in parts if isinstance(p, TextPart))
            out.append(Message.system(text))
            continue
        if not parts:
            continue
        content = MessageContent(parts=parts)
        if isinstance(item.get("metadata"), dict):
            content.metadata = item["metadata"]
        message = Message(role=role, content=content)
        if isinstance(item.get("id"), str) and item["id"]:
            message.id = item["id"]
        out.append(message)
    return out


def _chat_call(body: _ChatBody) -> Call:
    raw = body.messages
    if not raw:
        raise _bad("messages", "expected a non-empty list of UI messages")
    history = list(raw)
    if body.trigger == "regenerate-message" and isinstance(history[-1], Mapping) \
            and history[-1].get("role") == "assistant":
        history.pop()
    options = _options(body)
    if "thread_id" in options:
        last = max((i for i, m in enumerate(history)
                    if isinstance(m, Mapping) and m.get("role") == "assistant"), default=-1)
        history = history[last + 1:]
    try:
        messages = ui_to_messages(history)
    except MessageError as exc:
        raise _bad("messages", exc.message) from None
    if not messages:
        raise _bad("messages", "nothing to answer: no user message after the last answer")
    return Call(messages, options, _resource_field(body))


def decode_chat_call(body: bytes) -> Call:
    """An AI SDK chat request body (JSON bytes) as a ``Call``, decoded into a msgspec struct
    (see ``parse_chat_call`` for what it means).

    Raises:
        InvalidArgument: not JSON, not an object, no ``messages`` list, a malformed message
            (``exc.field`` names it).
    """
    try:
        parsed = _CHAT_BODY.decode(body) if body.strip() else _CHAT_BODY.decode(b"null")
    except msgspec.MsgspecError as exc:
        raise _body_error(exc, _CHAT_ISSUES) from None
    return _chat_call(parsed)


def parse_chat_call(body: Mapping[str, Any]) -> Call:
    """An AI SDK chat body (``{id, messages: UIMessage[], trigger, messageId?, ...}``) as a
    ``Call``.

    ``trigger: "regenerate-message"`` drops the last assistant message (it is being answered
    again). Decision: with memory (``memory: {thread, resource}`` or ``threadId``/``resourceId``
    in the body) the stored thread already holds the history, so only the messages after the
    last assistant message are sent as input — the full history the client resends would
    otherwise be stored twice. Options are read as in ``parse_agent_call``.

    Raises:
        InvalidArgument: no ``messages`` list, a malformed message (``exc.field`` names it).
    """
    try:
        parsed = msgspec.convert(body, _ChatBody, strict=True)
    except msgspec.MsgspecError as exc:
        raise _body_error(exc, _CHAT_ISSUES) from None
    return _chat_call(parsed)
