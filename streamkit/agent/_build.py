"""Building what a step leaves behind: the stored message parts (from the chunks the consumer
received), the step-end payloads, usage and finish reason read from the model's ``finish``,
and the structured-output object. Pure functions of their arguments; the nodes call them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET

from .._partial_json import PartialJSON
from .._tool_records import StepToolCall
from ..chunks import (
    File,
    Finish,
    ObjectResult,
    ReasoningDelta,
    ReasoningEnd,
    Source,
    TextDelta,
    ToolCall,
)
from ..errors import StreamkitError
from ..messages import (
    FilePart,
    Part,
    ReasoningPart,
    ReasoningText,
    SourceInfo,
    SourcePart,
    TextPart,
    ToolInvocationPart,
)
from ..tools import json_schema
from ._result import Usage

__all__ = ["usage_of", "reason_of", "error_text", "StepRecorder", "schema_of",
           "parse_object"]


def usage_of(finish: Finish | None) -> Usage:
    if finish is None:
        return Usage()
    try:
        u = finish.payload.output.usage
        inp = int(u.input_tokens or 0)
        outp = int(u.output_tokens or 0)
        tot = u.total_tokens
        return Usage(inp, outp, int(tot) if isinstance(tot, int) else inp + outp)
    except AttributeError:
        return Usage()


def reason_of(finish: Finish | None) -> str:
    if finish is None:
        return "unknown"
    try:
        reason = finish.payload.step_result.reason
        return reason if isinstance(reason, str) else "unknown"
    except AttributeError:
        return "unknown"


def error_text(name: str, message: str) -> str:
    """What the model (and the store) reads of a failed tool: the exception's message alone
    (``"service unavailable"``, not ``"RuntimeError: service unavailable"``), as Mastra gives
    its model ``error.message``. The developer gets the type and the traceback elsewhere (the
    ``streamkit.tools`` log, ``result.trace``, the ``execute_tool`` span). Decision: an
    exception with an empty message gives its type name, so the model is told *something*."""
    return message if message else name


class StepRecorder:
    """What one attempt of a step delivered to the consumer, recorded as it streams.

    It keeps what the stored message and the result need — text by text id, reasoning, tool
    calls, sources, files, objects — not the chunks themselves, so a long stream costs a string
    reference per delta instead of a chunk. The full chunk list is kept only when ``keep_chunks``
    (some processor has ``process_llm_response``, which receives it). What is stored is built
    from what the consumer received, so stored equals streamed.

    The stream node appends text deltas to ``open_text(id)``'s buffer itself (its hot path);
    every other chunk goes through ``add``.
    """

    __slots__ = ("entries", "texts", "chunks", "tool_calls", "objects", "_reasons",
                 "_signatures", "first_text_ns", "partial")

    def __init__(self, keep_chunks: bool, partial: PartialJSON | None = None) -> None:
        # entries, in order of first appearance: a text buffer (list[str]), a reasoning
        # buffer (tuple ("reasoning", id, list[str])), or a finished message part.
        self.entries: list[Any] = []
        self.texts: dict[str, list[str]] = {}
        self.chunks: list[Any] | None = [] if keep_chunks else None
        self.tool_calls: list[StepToolCall] = []
        self.objects: list[Any] = []
        self._reasons: dict[str, list[str]] = {}
        self._signatures: dict[str, str] = {}
        #: ``perf_counter_ns()`` when the first text part opened (its first delta was
        #: delivered): the step's time to first chunk. Read once per part, never per chunk.
        self.first_text_ns = 0
        #: With structured output: the step's text read as JSON as it is delivered, for the
        #: partial ``object`` chunks (``Run.events`` feeds it each text delta).
        self.partial = partial

    def open_text(self, text_id: str) -> list[str]:
        """The buffer of text part ``text_id`` (created, in order, on first use)."""
        buf = self.texts.get(text_id)
        if buf is None:
            buf = self.texts[text_id] = []
            self.entries.append(buf)
            if not self.first_text_ns:
                self.first_text_ns = time.perf_counter_ns()
        return buf

    def add(self, c: Any) -> None:
        """Record one delivered chunk (any type): kept when ``keep_chunks``, and what it adds
        to the step (``_RECORDERS``: most chunks add nothing, and are told apart by one dict
        lookup instead of a chain of class tests)."""
        if self.chunks is not None:
            self.chunks.append(c)
        cls = c.__class__
        if cls is TextDelta:  # the most frequent chunk, recorded inline (no second call)
            self.open_text(c.payload.id).append(c.payload.text)
            return
        record = _RECORDERS.get(cls)
        if record is not None:
            record(self, c)

    def _reasoning_delta(self, c: ReasoningDelta) -> None:
        key = c.payload.id
        buf = self._reasons.get(key)
        if buf is None:
            buf = self._reasons[key] = []
            self.entries.append(("reasoning", key, buf))
        buf.append(c.payload.text)

    def _reasoning_end(self, c: ReasoningEnd) -> None:
        sig = getattr(c.payload, "signature", None)
        if isinstance(sig, str) and sig:
            self._signatures[c.payload.id] = sig

    def _tool_call(self, c: ToolCall) -> None:
        p = c.payload
        self.entries.append(ToolInvocationPart.call(p.tool_call_id, p.tool_name, p.args))
        self.tool_calls.append(StepToolCall(p.tool_call_id, p.tool_name, p.args))

    def _source(self, c: Source) -> None:
        p = c.payload
        title = getattr(p, "title", None)
        self.entries.append(SourcePart(source=SourceInfo(
            source_type=getattr(p, "source_type", None) or "url", id=p.id,
            url=getattr(p, "url", None) or "",
            title=title if isinstance(title, str) else UNSET)))

    def _file(self, c: File) -> None:
        p = c.payload
        self.entries.append(FilePart(mime_type=p.mime_type, data=p.data))

    def _object_result(self, c: ObjectResult) -> None:
        self.objects.append(c.object)

    def text(self) -> str:
        """The step's text (its text parts, joined)."""
        return "".join("".join(e) for e in self.entries if e.__class__ is list)

    def reasoning(self) -> str:
        return "".join("".join(e[2]) for e in self.entries if e.__class__ is tuple)

    def parts(self) -> list[Part]:
        """The assistant message parts of this attempt (data parts are stored on their own)."""
        built: list[Part] = []
        for e in self.entries:
            if e.__class__ is list:
                built.append(TextPart(text="".join(e)))
            elif e.__class__ is tuple:
                key, joined = e[1], "".join(e[2])
                # The provider's signature must go back with the reasoning on the next step
                # (Anthropic rejects unsigned thinking blocks next to tool use).
                sig = self._signatures.get(key)
                detail = ReasoningText(text=joined, signature=sig) if sig \
                    else ReasoningText(text=joined)
                built.append(ReasoningPart(reasoning=joined, details=[detail]))
            else:
                built.append(e)
        return built


#: What each recorded chunk class adds to its step (``StepRecorder.add``); by exact class, as
#: the chain of ``is`` tests it replaces did.
_RECORDERS: dict[type, Callable[[StepRecorder, Any], None]] = {
    ReasoningDelta: StepRecorder._reasoning_delta,
    ReasoningEnd: StepRecorder._reasoning_end, ToolCall: StepRecorder._tool_call,
    Source: StepRecorder._source, File: StepRecorder._file,
    ObjectResult: StepRecorder._object_result,
}


def schema_of(structured: object) -> dict[str, object] | None:
    return None if structured is None else json_schema(structured)


def parse_object(structured_output: object, text: str) -> Any:
    """The structured-output object in the model's answer ``text`` (a JSON document, possibly
    in a Markdown fence), converted to ``structured_output`` when that is a type."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        body = body[body.find("\n") + 1:] if "\n" in body else body
    try:
        raw = json.loads(body)
    except json.JSONDecodeError as exc:
        raise StreamkitError(f"structured output: the model's answer is not JSON ({exc}); "
                             f"got {text[:80]!r}") from exc
    if isinstance(structured_output, dict):
        return raw
    try:
        return msgspec.convert(raw, type=structured_output, strict=False)
    except msgspec.ValidationError as exc:
        raise StreamkitError(f"structured output does not match "
                             f"{getattr(structured_output, '__name__', 'the schema')}: "
                             f"{exc}") from exc
