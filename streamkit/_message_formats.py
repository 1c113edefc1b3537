"""The provider ("core") and UI formats of messages.

Private module: import ``to_core``/``to_ui`` from ``streamkit.messages``. ``to_core`` turns
stored messages into the provider-shaped prompt of ``docs/DESIGN.md`` (an assistant message with
tool results becomes an assistant turn plus a ``tool`` turn; ``step-start`` splits turns; calls
without an outcome are dropped); ``to_ui`` into UI dicts. Pure functions; nothing else here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NotRequired, TypedDict

import msgspec
from msgspec import UNSET

from streamkit._message_model import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    ReasoningText,
    StepStartPart,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    format_timestamp,
    get_text,
)
from streamkit._prompt import (
    AssistantContent,
    ImageContent,
    PromptMessage,
    ReasoningContent,
    RedactedReasoningContent,
    ToolResultContent,
    UserContent,
)

__all__ = ["to_core", "to_ui", "core_reasoning", "core_result", "OUTCOME_STATES"]

#: The tool invocation states that have an outcome: the only calls a prompt holds.
OUTCOME_STATES = frozenset(("result", "output-error", "output-denied"))


def _core_user(message: Message) -> list[PromptMessage]:
    content: list[UserContent] = []
    texts: list[str] = []  # the text parts' texts, while every part sent is text
    for part in message.content.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
            texts.append(part.text)
        elif isinstance(part, FilePart):
            content.append({"type": "file", "data": part.data, "mimeType": part.mime_type})
        elif isinstance(part, ImagePart):
            image: ImageContent = {"type": "image", "image": part.image}
            if part.mime_type is not UNSET:
                image["mimeType"] = part.mime_type
            content.append(image)
    if len(texts) == len(content):  # text only: one string (``get_text``'s, without its walk)
        text = "".join(texts)
        if not text and isinstance(message.content.content, str):
            text = message.content.content
        return [{"role": "user", "content": text}] if text or content else []
    return [{"role": "user", "content": content}]


def core_reasoning(part: ReasoningPart) -> list[ReasoningContent | RedactedReasoningContent]:
    """A reasoning part's prompt items: one per detail (signed or redacted), else its text."""
    if part.details is UNSET or not part.details:
        return [{"type": "reasoning", "text": part.reasoning}] if part.reasoning else []
    result: list[ReasoningContent | RedactedReasoningContent] = []
    for detail in part.details:
        if isinstance(detail, ReasoningText):
            item: ReasoningContent = {"type": "reasoning", "text": detail.text}
            if detail.signature is not UNSET:
                item["signature"] = detail.signature
            result.append(item)
        else:
            result.append({"type": "redacted-reasoning", "data": detail.data})
    return result


def core_result(invocation: ToolInvocation) -> ToolResultContent:
    """A tool invocation's outcome as its prompt ``tool-result`` (a failure or denial with
    ``isError: true`` and its text)."""
    item: ToolResultContent = {"type": "tool-result", "toolCallId": invocation.tool_call_id,
                               "toolName": invocation.tool_name, "result": None}
    if invocation.state == "result":
        if invocation.result is not UNSET:
            item["result"] = invocation.result
        if invocation.is_error is True:
            item["isError"] = True
        return item
    if invocation.error_text is not UNSET:
        item["result"] = invocation.error_text
    elif invocation.result is not UNSET:
        item["result"] = invocation.result
    else:
        item["result"] = ("Tool execution was denied." if invocation.state == "output-denied"
                          else "Tool execution failed.")
    item["isError"] = True
    return item


def _core_assistant(message: Message) -> list[PromptMessage]:
    result: list[PromptMessage] = []
    content: list[AssistantContent] = []
    tool_results: list[ToolResultContent] = []

    def flush() -> None:
        if content:
            if all(c["type"] == "text" for c in content):
                result.append({"role": "assistant", "content": "".join(
                    c["text"] for c in content if c["type"] == "text")})
            else:
                result.append({"role": "assistant", "content": list(content)})
        if tool_results:
            result.append({"role": "tool", "content": list(tool_results)})
        content.clear()
        tool_results.clear()

    for part in message.content.parts:
        if isinstance(part, StepStartPart):
            flush()
        elif isinstance(part, TextPart):
            if part.text:
                content.append({"type": "text", "text": part.text})
        elif isinstance(part, ReasoningPart):
            content.extend(core_reasoning(part))
        elif isinstance(part, FilePart):
            content.append({"type": "file", "data": part.data, "mimeType": part.mime_type})
        elif isinstance(part, ToolInvocationPart):
            invocation = part.tool_invocation
            # Calls without an outcome are dropped: a provider rejects a tool call that is not
            # followed by its result (Mastra's default ``filterIncompleteToolCalls``).
            if invocation.state in OUTCOME_STATES:
                content.append({"type": "tool-call", "toolCallId": invocation.tool_call_id,
                                "toolName": invocation.tool_name, "args": invocation.args})
                tool_results.append(core_result(invocation))
    flush()
    if not result and not message.content.parts and isinstance(message.content.content, str) \
            and message.content.content:
        result.append({"role": "assistant", "content": message.content.content})
    return result


def to_core(messages: Iterable[Message]) -> list[PromptMessage]:
    """Messages in the provider ("core") format of ``docs/DESIGN.md``.

    * system → ``{"role": "system", "content": text}``; ``signal`` messages go as user turns.
    * user → ``{"role": "user", "content": text}``, or a list of ``text``/``file``/``image``
      parts when it is not text only.
    * assistant → split at every ``step-start`` part; each step becomes an assistant message
      (``text``, ``reasoning``, ``file`` and ``tool-call`` parts; a plain string when text only)
      followed by one ``tool`` message with its ``tool-result`` parts. Tool invocations without
      an outcome (``partial-call``, ``call``, ``approval-*``) are dropped; ``output-error`` and
      ``output-denied`` become results with ``isError: true``. Source, data, error and
      step-start parts are not sent.

    Example:
        >>> msg = Message.assistant([ToolInvocationPart.returned("c1", "t", 42), StepStartPart(),
        ...                          TextPart("It is 42.")])
        >>> [m["role"] for m in to_core([msg])]
        ['assistant', 'tool', 'assistant']
    """
    result: list[PromptMessage] = []
    for message in messages:
        if message.role == "system":
            result.append({"role": "system", "content": get_text(message)})
        elif message.role == "assistant":
            result.extend(_core_assistant(message))
        else:
            result.extend(_core_user(message))
    return result


class UIMessage(TypedDict):
    """A message in the UI form ``to_ui`` gives."""

    id: str
    role: str
    createdAt: str
    content: str
    #: The stored parts as camelCase JSON objects (``msgspec.to_builtins``).
    parts: list[dict[str, object]]
    metadata: NotRequired[dict[str, object]]


def to_ui(messages: Iterable[Message]) -> list[UIMessage]:
    """Messages as UI dicts (AI SDK v4 ``UIMessage``-like).

    Each is ``{"id", "role", "createdAt": ISO str, "content": text, "parts": [...]}`` plus
    ``"metadata"`` when the message has any; ``parts`` are the stored parts as camelCase dicts
    (``{"type": "tool-invocation", "toolInvocation": {...}}``, ``{"type": "data-x", "data": ...}``).

    Example:
        >>> to_ui([Message.user("hi", id="m1")])[0]["parts"]
        [{'type': 'text', 'text': 'hi'}]
    """
    result: list[UIMessage] = []
    for message in messages:
        item: UIMessage = {
            "id": message.id, "role": message.role,
            "createdAt": format_timestamp(message.created_at), "content": get_text(message),
            "parts": msgspec.to_builtins(message.content.parts),
        }
        if isinstance(message.content.metadata, dict):
            item["metadata"] = message.content.metadata
        result.append(item)
    return result


# --------------------------------------------------------------------------------------------
# MessageList
# --------------------------------------------------------------------------------------------
