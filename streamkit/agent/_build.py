"""Building what a step leaves behind: the stored message parts (from the chunks the consumer
received), the step-end payloads, usage and finish reason read from the model's ``finish``,
and the structured-output object. Pure functions of their arguments; the nodes call them.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import UNSET

from ..chunks import (File, ReasoningDelta, ReasoningEnd, Source, TextDelta, ToolCall)
from ..errors import StreamkitError
from ..messages import (FilePart, ReasoningPart, ReasoningText, SourceInfo, SourcePart, TextPart,
                        ToolInvocationPart)
from ._result import Usage
from ._state import RunConfig, StepState

__all__ = ["usage_of", "reason_of", "build_parts", "schema_of", "step_end_payload",
           "parse_object"]


def usage_of(finish: Any) -> Usage:
    try:
        u = finish.payload.output.usage
        inp = int(u.input_tokens or 0)
        outp = int(u.output_tokens or 0)
        tot = u.total_tokens
        return Usage(inp, outp, int(tot) if isinstance(tot, int) else inp + outp)
    except AttributeError:
        return Usage()


def reason_of(finish: Any) -> str:
    try:
        reason = finish.payload.step_result.reason
        return reason if isinstance(reason, str) else "unknown"
    except AttributeError:
        return "unknown"


def build_parts(step: StepState) -> list[Any]:
    """The assistant message parts of one step, from the chunks the consumer received (so what
    is stored equals what was streamed). Data chunks are stored by ``_persist_data``."""
    parts: list[Any] = []
    texts: dict[str, list[str]] = {}
    reasons: dict[str, list[str]] = {}
    text_all: list[str] = []
    reasoning_all: list[str] = []
    signatures: dict[str, str] = {}
    for c in step.chunks:
        cls = c.__class__
        if cls is TextDelta:
            key = c.payload.id
            buf = texts.get(key)
            if buf is None:
                buf = texts[key] = []
                parts.append(("text", key))
            buf.append(c.payload.text)
            text_all.append(c.payload.text)
        elif cls is ReasoningDelta:
            key = c.payload.id
            buf = reasons.get(key)
            if buf is None:
                buf = reasons[key] = []
                parts.append(("reasoning", key))
            buf.append(c.payload.text)
            reasoning_all.append(c.payload.text)
        elif cls is ReasoningEnd:
            sig = getattr(c.payload, "signature", None)
            if isinstance(sig, str) and sig:
                signatures[c.payload.id] = sig
        elif cls is ToolCall:
            p = c.payload
            parts.append(ToolInvocationPart.call(p.tool_call_id, p.tool_name, p.args))
            step.tool_calls.append({"tool_call_id": p.tool_call_id, "tool_name": p.tool_name,
                                    "args": p.args})
        elif cls is Source:
            p = c.payload
            title = getattr(p, "title", None)
            parts.append(SourcePart(source=SourceInfo(
                source_type=getattr(p, "source_type", None) or "url", id=p.id,
                url=getattr(p, "url", None) or "",
                title=title if isinstance(title, str) else UNSET)))
        elif cls is File:
            p = c.payload
            parts.append(FilePart(mime_type=p.mime_type, data=p.data))
    step.text = "".join(text_all)
    step.reasoning = "".join(reasoning_all)
    built: list[Any] = []
    for part in parts:
        if isinstance(part, tuple):
            kind, key = part
            if kind == "text":
                built.append(TextPart(text="".join(texts[key])))
            else:
                joined = "".join(reasons[key])
                # The provider's signature must go back with the reasoning on the next step
                # (Anthropic rejects unsigned thinking blocks next to tool use).
                detail = ReasoningText(text=joined, signature=signatures[key]) \
                    if key in signatures else ReasoningText(text=joined)
                built.append(ReasoningPart(reasoning=joined, details=[detail]))
        else:
            built.append(part)
    return built


def schema_of(structured: Any) -> dict[str, Any] | None:
    from ..tools import json_schema

    return None if structured is None else json_schema(structured)


def step_end_payload(kind: str, reason: str, continued: bool, text: str,
                      tool_calls: list[dict[str, Any]], usage: Usage, message_id: str) -> Any:
    from ..chunks import FinishPayload, StepFinishPayload, StepOutputPayload, StepResult as SR
    from ..chunks import Usage as U

    cls = StepFinishPayload if kind == "step-finish" else FinishPayload
    return cls(message_id=message_id,
               step_result=SR(reason=reason, is_continued=continued),
               output=StepOutputPayload(
                   text=text,
                   tool_calls=[{"toolCallId": c["tool_call_id"], "toolName": c["tool_name"],
                                "args": c["args"]} for c in tool_calls],
                   usage=U(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                           total_tokens=usage.total_tokens)))


def parse_object(cfg: RunConfig, text: str) -> Any:
    import msgspec

    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        body = body[body.find("\n") + 1:] if "\n" in body else body
    try:
        raw = json.loads(body)
    except json.JSONDecodeError as exc:
        raise StreamkitError(f"structured output: the model's answer is not JSON ({exc}); "
                             f"got {text[:80]!r}") from exc
    if isinstance(cfg.structured_output, dict):
        return raw
    try:
        return msgspec.convert(raw, type=cfg.structured_output, strict=False)
    except msgspec.ValidationError as exc:
        raise StreamkitError(f"structured output does not match "
                             f"{getattr(cfg.structured_output, '__name__', 'the schema')}: "
                             f"{exc}") from exc
