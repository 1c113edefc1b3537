"""Request bodies: Mastra's ``generate``/``stream`` body and the AI SDK chat body, parsed into
the arguments of ``Agent.stream``.

What belongs here: reading a JSON body, checking it, and turning it into a ``Call`` (messages and
options); turning AI SDK v5 ``UIMessage``s (what ``useChat`` resends every turn) back into
streamkit messages. What does not: responses (``_mastra``, ``_app``), chunks (``_ui_stream``).

Every problem is an ``InvalidArgument`` (or ``InvalidType``) whose ``field`` attribute names the
body field, so the route answers Mastra's ``400 {"error": "Invalid request body", "issues":
[{"field", "message"}]}`` before any stream starts.

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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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

__all__ = ["Call", "read_json", "parse_agent_call", "parse_chat_call", "ui_to_messages",
           "issues_of"]

#: Mastra's camelCase body keys → ``Agent.stream`` keyword, with the JSON type each must have.
_OPTIONS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "maxSteps": ("max_steps", int),
    "toolChoice": ("tool_choice", (str, dict)),
    "activeTools": ("active_tools", list),
    "modelSettings": ("model_settings", dict),
    "providerOptions": ("provider_options", dict),
}


@dataclass(slots=True)
class Call:
    """What one request asks an agent to do: ``messages`` and ``Agent.stream`` keywords."""

    messages: list[Message]
    options: dict[str, Any] = field(default_factory=dict)
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


def read_json(body: bytes) -> dict[str, Any]:
    """The body as a JSON object.

    Raises:
        InvalidArgument: the body is not JSON, or not an object (``field`` is ``"(body)"``).
    """
    try:
        data = json.loads(body) if body.strip() else None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad("(body)", f"not valid JSON ({exc}); expected a JSON object") from None
    if not isinstance(data, dict):
        raise _bad("(body)", f"expected a JSON object, got {type(data).__name__}")
    return data


def _messages(body: Mapping[str, Any]) -> list[Message]:
    value = body.get("messages")
    if value is None or isinstance(value, bool) or not isinstance(value, (str, dict, list)):
        # Mastra's own wording for a missing or mistyped ``messages``.
        raise _bad("messages", "Invalid input")
    if isinstance(value, list) and not value:
        raise _bad("messages", "expected at least one message")
    try:
        return to_messages(value)
    except MessageError as exc:
        raise _bad("messages", exc.message) from None


def _memory(body: Mapping[str, Any]) -> dict[str, str]:
    """``thread_id``/``resource_id`` from ``memory`` (or top-level ``threadId``/``resourceId``).

    A missing resource is not an error here: the server may decide it (``_tenancy``), which
    then refuses a thread that still has none.
    """
    memory = body.get("memory")
    thread: Any = body.get("threadId")
    resource: Any = body.get("resourceId")
    if memory is not None:
        if not isinstance(memory, dict):
            raise _bad("memory", "expected an object {thread, resource}")
        thread = memory.get("thread", thread)
        resource = memory.get("resource", resource)
        if isinstance(thread, dict):
            thread = thread.get("id")
        if not isinstance(thread, str) or not thread:
            raise _bad("memory.thread", "expected a thread id (a string or {id})")
        if resource is not None and (not isinstance(resource, str) or not resource):
            raise _bad("memory.resource", "expected a resource id (a non-empty string)")
    out: dict[str, str] = {}
    if thread is not None:
        if not isinstance(thread, str) or not thread:
            raise _bad("threadId", "expected a non-empty string")
        out["thread_id"] = thread
    if resource is not None:
        if not isinstance(resource, str) or not resource:
            raise _bad("resourceId", "expected a non-empty string")
        out["resource_id"] = resource
    return out


def _resource_field(body: Mapping[str, Any]) -> str:
    return "memory.resource" if isinstance(body.get("memory"), dict) else "resourceId"


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = dict(_memory(body))
    context = body.get("requestContext")
    if context is not None:
        if not isinstance(context, dict):
            raise _bad("requestContext", "expected an object")
        options["request_context"] = context
    for key, (name, kind) in _OPTIONS.items():
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            expected = kind.__name__ if isinstance(kind, type) else \
                " or ".join(k.__name__ for k in kind)
            raise InvalidType(f"invalid request body: {key}: expected {expected}, got "
                              f"{type(value).__name__}", field=key,
                              issue=f"expected {expected}")
        options[name] = value
    structured = body.get("structuredOutput")
    if structured is not None:
        schema = structured.get("schema") if isinstance(structured, dict) else None
        if not isinstance(schema, dict):
            raise _bad("structuredOutput.schema", "expected a JSON Schema object")
        options["structured_output"] = schema
    return options


def parse_agent_call(body: Mapping[str, Any]) -> Call:
    """A Mastra ``generate``/``stream`` body as a ``Call``.

    Raises:
        InvalidArgument: a missing or malformed field (``exc.field`` names it).

    Example:
        >>> call = parse_agent_call({"messages": "Hi", "memory": {"thread": "t1",
        ...                          "resource": "u1"}, "maxSteps": 3})
        >>> call.options
        {'thread_id': 't1', 'resource_id': 'u1', 'max_steps': 3}
    """
    return Call(_messages(body), _options(body), _resource_field(body))


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
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("messages", "expected a non-empty list of UI messages")
    trigger = body.get("trigger", "submit-message")
    if trigger not in ("submit-message", "regenerate-message"):
        raise _bad("trigger", "expected submit-message or regenerate-message")
    history = list(raw)
    if trigger == "regenerate-message" and isinstance(history[-1], Mapping) \
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
