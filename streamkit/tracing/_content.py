"""Message content as the GenAI conventions want it on spans: JSON strings of
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (``[{role, parts: [...]}]``) and of tool
arguments and results. Pure functions of what they are given; the span tracer calls them only
when content capture is on, with values the processors already saw (never raw model output).

The prompt comes in streamkit's provider-shaped "core" format (``docs/DESIGN.md``); parts map
as: text → ``{"type": "text", "content"}``, reasoning → ``{"type": "reasoning", "content"}``,
tool-call → ``{"type": "tool_call", "id", "name", "arguments"}``, tool-result →
``{"type": "tool_call_response", "id", "result"}``. File and image parts keep their type and
media type but not their bytes (base64 data would make every span huge; decision).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from .._prompt import PromptMessage
from .._tool_records import StepToolCall

__all__ = ["to_json", "input_messages", "output_messages"]

_encoder = msgspec.json.Encoder(enc_hook=repr)


def to_json(value: object) -> str:
    """``value`` as JSON text; what JSON cannot hold is written as its ``repr``."""
    if isinstance(value, str):
        return value
    try:
        return _encoder.encode(value).decode()
    except (TypeError, ValueError, OverflowError):
        return repr(value)


def _part(part: object) -> dict[str, object]:
    if not isinstance(part, dict):
        return {"type": "text", "content": str(part)}
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "content": part.get("text", "")}
    if kind == "reasoning":
        return {"type": "reasoning", "content": part.get("text", "")}
    if kind == "tool-call":
        return {"type": "tool_call", "id": part.get("toolCallId"), "name": part.get("toolName"),
                "arguments": part.get("args")}
    if kind == "tool-result":
        return {"type": "tool_call_response", "id": part.get("toolCallId"),
                "result": part.get("result")}
    return {"type": str(kind), "mime_type": part.get("mimeType")}


def input_messages(prompt: Sequence[PromptMessage]) -> str:
    """The prompt as sent (core format) → ``gen_ai.input.messages``."""
    out = []
    for message in prompt:
        content = message.get("content")
        parts = [{"type": "text", "content": content}] if isinstance(content, str) \
            else [_part(p) for p in content or ()]
        out.append({"role": message.get("role"), "parts": parts})
    return to_json(out)


def output_messages(text: str, reasoning: str, tool_calls: Sequence[StepToolCall],
                    finish_reason: str) -> str:
    """What the consumer received of one step → ``gen_ai.output.messages``."""
    parts: list[dict[str, object]] = []
    if reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if text:
        parts.append({"type": "text", "content": text})
    parts.extend({"type": "tool_call", "id": c.tool_call_id, "name": c.tool_name,
                  "arguments": c.args} for c in tool_calls)
    return to_json([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])
