"""The prompt a model gets: provider-shaped ("core") messages, typed.

``ModelRequest.prompt``, ``MessageList.prompt()``/``.get.all.core()`` and the ``prompt`` a
``process_llm_request`` hook receives (and may return) are lists of ``PromptMessage``: one of
``SystemPromptMessage``, ``UserPromptMessage``, ``AssistantPromptMessage``,
``ToolPromptMessage`` (the format of ``docs/DESIGN.md``), their parts typed the same way.

Decided here (issue 32 point 1, "prompts are typed messages"): the messages are ``TypedDict``s,
not msgspec structs. A prompt is built once per model call and then read by the provider adapter,
by token counters, by the response cache's key and by users' ``process_llm_request`` hooks, which
build and edit it as plain dicts (``prompt + [{"role": "system", "content": "..."}]``, a filtered
copy, ``prompt[0]["content"]``). With ``TypedDict`` every one of those keeps working unchanged and
costs nothing at run time (no conversion at the adapters, a cache key is the same JSON as before,
``request.prompt == [{"role": "user", "content": "hi"}]`` still holds), while a type checker knows
each message's keys and values: ``m["rol"]`` or ``{"role": "user", "content": 3}`` is a mypy
error, and ``m["role"] == "tool"`` narrows ``m`` to ``ToolPromptMessage``. How to build or edit one:
write the dict (a type checker checks it against these types), or start from
``message_list.prompt()``. The provider adapters still validate every message at run time, as a
hook's prompt is untrusted.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "PromptMessage", "SystemPromptMessage", "UserPromptMessage", "AssistantPromptMessage",
    "ToolPromptMessage",
    "TextContent", "FileContent", "ImageContent", "ReasoningContent", "RedactedReasoningContent",
    "ToolCallContent", "ToolResultContent", "UserContent", "AssistantContent", "prompt_text",
]


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


class FileContent(TypedDict):
    type: Literal["file"]
    data: str
    mimeType: str


class ImageContent(TypedDict):
    type: Literal["image"]
    image: str
    mimeType: NotRequired[str]


class ReasoningContent(TypedDict):
    type: Literal["reasoning"]
    text: str
    signature: NotRequired[str]


class RedactedReasoningContent(TypedDict):
    type: Literal["redacted-reasoning"]
    data: str


class ToolCallContent(TypedDict):
    type: Literal["tool-call"]
    toolCallId: str
    toolName: str
    #: The call's arguments as the model sent them (a JSON value, usually an object).
    args: Any


class ToolResultContent(TypedDict):
    type: Literal["tool-result"]
    toolCallId: str
    toolName: str
    #: The tool's value (a JSON value) or, with ``isError``, the error text.
    result: Any
    isError: NotRequired[bool]


UserContent: TypeAlias = TextContent | FileContent | ImageContent
AssistantContent: TypeAlias = (TextContent | FileContent | ReasoningContent
                               | RedactedReasoningContent | ToolCallContent)


class SystemPromptMessage(TypedDict):
    role: Literal["system"]
    content: str


class UserPromptMessage(TypedDict):
    role: Literal["user"]
    content: str | list[UserContent]


class AssistantPromptMessage(TypedDict):
    role: Literal["assistant"]
    content: str | list[AssistantContent]


class ToolPromptMessage(TypedDict):
    role: Literal["tool"]
    content: list[ToolResultContent]


PromptMessage: TypeAlias = (SystemPromptMessage | UserPromptMessage | AssistantPromptMessage
                            | ToolPromptMessage)
"""One provider-shaped message (see the module docstring)."""


def prompt_text(content: object) -> str:
    """The text of a prompt message's ``content``: the string itself, or its ``text`` parts
    joined (other parts, and anything that is neither, give ``""``). What a ``FunctionModel``
    reads of the message it answers.

    Example:
        >>> prompt_text([{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}])
        'Hi there'
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content
                       if isinstance(p, dict) and p.get("type") == "text")
    return ""
