"""Stream processors built on the hold-back scanner: ``HoldbackGuard`` (text deltas in, committed
text out) and ``RedactingGuard`` (the same rules over every other way text leaves a run: input
messages, tool-call arguments, tool results and errors, ``data-*`` chunks).

What belongs here: turning ``HoldbackScanner`` commits into deltas per text part (each part its
own scanner; a part's end and the end of a step release what it holds; the released end of a
part is the next part's context), discarding what a retried attempt held, holding streamed
tool-call arguments until they are complete, and the structured and message-level checks of
redacting guards. What does not: the scanning algorithm and the detection view (``_redact``,
``_fold``) and any guard's strategies (``_pii``, ``_regex``, ``_vault``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from msgspec import UNSET, structs

from streamkit import Processor
from streamkit.chunks import (
    DataChunk,
    ErrorChunk,
    ReasoningDelta,
    ReasoningEnd,
    StepStart,
    TextDelta,
    TextEnd,
    ToolCall,
    ToolCallApproval,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
    ToolCallSuspended,
    ToolErrorChunk,
    ToolOutput,
    ToolOutputDenied,
    ToolResult,
)
from streamkit.errors import InvalidArgument
from streamkit.messages import TextPart, ToolInvocationPart

from ._budget import Buffering
from ._redact import Commit, Detection, Finding, HoldbackScanner, Rule, find_all, map_strings

__all__ = ["HoldbackGuard", "RedactingGuard", "notify"]

log = logging.getLogger("streamkit_operators")


class _Part:
    """One text (or reasoning) part being streamed through a guard: its id, delta class,
    envelope and scanner."""

    __slots__ = ("id", "cls", "run_id", "from_", "payload_cls", "scanner", "pending")

    def __init__(self, part: Any, scanner: HoldbackScanner) -> None:
        self.pending = ""
        self.cls = part.__class__
        self.id = part.payload.id
        self.run_id = part.run_id
        self.from_ = part.from_
        self.payload_cls = type(part.payload)
        self.scanner = scanner

    def chunk(self, text: str) -> Any:
        return self.cls(payload=self.payload_cls(id=self.id, text=text), run_id=self.run_id,
                        from_=self.from_)


class _Held:
    """What one guard holds of one request's stream.

    ``parts``: the open text and reasoning parts, by (delta class, part id) — each has its own
    scanner, so a chunk of another part or kind between two deltas releases nothing.
    ``tails``: per delta class, the text released when the last part of that kind closed, while
    it could still have become a match: the next part of that kind starts its scanner with it
    as context (a client joins the parts' texts, across steps too). ``tails_at_step``: the same
    when the current step began, restored when the step is retried. ``args``: streamed
    tool-call argument deltas, held per tool call until its arguments are complete.
    """

    __slots__ = ("parts", "last", "tails", "tails_at_step", "args")

    def __init__(self) -> None:
        self.parts: dict[tuple[type, str], _Part] = {}
        self.last: _Part | None = None
        self.tails: dict[type, str] = {}
        self.tails_at_step: dict[type, str] = {}
        self.args: dict[str, list[ToolCallDelta]] = {}


#: The chunk that ends a part, by the class of the part's deltas.
_ENDS: dict[type, type] = {TextEnd: TextDelta, ReasoningEnd: ReasoningDelta}

#: Tool chunks whose ``tool_name`` comes from the model (a name can carry what a guard looks
#: for as well as any other text; the tool result and error chunks are checked with theirs).
_NAMED = frozenset((ToolCall, ToolCallDelta, ToolCallInputStreamingStart, ToolCallApproval,
                    ToolCallSuspended, ToolOutput, ToolOutputDenied))


class HoldbackGuard(Processor):
    r"""Base of streaming guards that hold back only the shortest tail that could become a match.

    Subclasses give the rules (``stream_rules``) and decide what a commit turns into
    (``on_commit``: the text to emit, or raise ``TripWire``). The base handles ``text-delta``
    (and, with ``check_reasoning``, ``reasoning-delta``) chunks, with a scanner per part (by
    part id and kind): chunks of other parts or kinds pass through without releasing what a
    part holds. Committed text goes out as new deltas of its part (``multi_emit``); a part
    releases the rest at its ``text-end``/``reasoning-end`` and at the end of the step
    (``flush_output_stream``); a retried attempt's held text is discarded (on its
    ``step-start``). With ``holds = False`` (report-only guards) deltas pass at once and the
    scanners only watch.

    A client joins the texts of consecutive parts (and ``result.text`` joins the steps'), so a
    value split across two parts — before and after a tool call — is still one value: a part
    that closes while the end of its text could still become a match leaves that end as the
    context of the next part of its kind. What was released is not taken back, but the rest of
    the value is found and replaced, so the whole value never appears.

    A guard that trips on a commit raises before returning it, so the text of that commit
    before the match is not shown either; none of a blocked value ever is.

    Marble (rule: 4 digits, hold-back ``.``; ``r`` a reasoning delta)::

        --"id 12"--r--"34 ok"--|   redact   --"id "--r--"[N] ok"--|

    Example:
        >>> class Digits(HoldbackGuard):
        ...     id = "digits"
        ...     def stream_rules(self):
        ...         return [Rule("n", r"\d+")]
        ...     def on_commit(self, commit, state, request_context):
        ...         regions = merge_regions(commit.findings)
        ...         return replace_regions(commit.text, regions, lambda r, t: "#", commit.start)
    """

    multi_emit = True
    holds: bool = True
    max_hold: int = 1024
    #: Reasoning deltas reach clients too (and are stored): they are scanned the same way.
    check_reasoning: bool = True
    _HELD = "holdback"

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id)
        # Hooks are attached per instance so that a guard configured without an output phase
        # has no stream hook at all (registration then sees exactly what will run).
        self.process_output_stream = self._stream
        self.flush_output_stream = self._flush

    @property
    def buffering(self) -> Buffering:
        """The latency this guard adds: the hold-back of a possible match (or none)."""
        return Buffering.holdback(max_chars=self.max_hold) if self.holds \
            else Buffering.passthrough()

    def stream_rules(self) -> Sequence[Rule]:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_commit(self, commit: Commit, state: dict[str, Any], request_context: Any) -> str:
        """The text to emit for ``commit`` (called only when it has findings)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def on_chunk(self, part: Any, held: _Held, state: dict[str, Any], request_context: Any
                 ) -> Any:
        """A chunk that is neither a delta nor the end of a part nor a ``step-start``: passed
        as it is here; ``RedactingGuard`` scans the tool and data chunks."""
        return part

    def _held(self, state: dict[str, Any]) -> _Held:
        held: _Held | None = state.get(self._HELD)
        if held is None:
            held = state[self._HELD] = _Held()
        return held

    def _stream(self, part: Any, state: dict[str, Any], request_context: Any,
                retry_count: int) -> Any:
        cls = part.__class__
        if cls is TextDelta or (cls is ReasoningDelta and self.check_reasoning):
            return self._text(part, self._held(state), state, request_context)
        held = self._held(state)
        if cls is StepStart:
            if retry_count:
                # A new attempt at the same step: what the withdrawn attempt held must not
                # leak into it, and its parts' context is the one the step began with.
                held.parts.clear()
                held.last = None
                held.args.clear()
                held.tails = dict(held.tails_at_step)
            else:
                held.tails_at_step = dict(held.tails)
            return part
        delta_cls = _ENDS.get(cls)
        if delta_cls is not None:
            p = held.parts.get((delta_cls, part.payload.id))
            if p is None:
                return part
            out = self._close(p, held, state, request_context)
            out.append(part)
            return out
        return self.on_chunk(part, held, state, request_context)

    def _flush(self, state: dict[str, Any], request_context: Any) -> Any:
        held: _Held | None = state.get(self._HELD)
        if held is None:
            return None
        out: list[Any] = []
        for p in list(held.parts.values()):
            out += self._close(p, held, state, request_context)
        out += self.on_flush(held, state, request_context)
        return out or None

    def on_flush(self, held: _Held, state: dict[str, Any], request_context: Any) -> list[Any]:
        """What else the guard still holds at the end of the step (``RedactingGuard``: tool
        call arguments whose call never completed)."""
        return []

    def _text(self, part: Any, held: _Held, state: dict[str, Any], request_context: Any) -> Any:
        p = held.last
        if p is None or p.id != part.payload.id or p.cls is not part.__class__:
            key = (part.__class__, part.payload.id)
            p = held.parts.get(key)
            if p is None:
                p = held.parts[key] = _Part(part, HoldbackScanner(
                    self.stream_rules(), max_hold=self.max_hold,
                    context=held.tails.get(part.__class__, "")))
            held.last = p
        p.run_id, p.from_ = part.run_id, part.from_
        delta = part.payload.text
        commit = p.scanner.feed(delta)
        if not self.holds:
            if commit.findings:
                self.on_commit(commit, state, request_context)
            return part
        text = self.on_commit(commit, state, request_context) if commit.findings \
            else commit.text
        if p.scanner.held and text.isspace():
            # Whitespace alone, while a word is held, waits for that word: no chunk of " ".
            p.pending += text
            text = ""
        elif p.pending and text:
            text, p.pending = p.pending + text, ""
        if text == delta and not p.scanner.held:
            return part  # nothing held before or after, nothing found: pass it as is
        return [p.chunk(text)] if text else []

    def _close(self, p: _Part, held: _Held, state: dict[str, Any], request_context: Any
               ) -> list[Any]:
        del held.parts[(p.cls, p.id)]
        if held.last is p:
            held.last = None
        was_held = p.scanner.held
        commit = p.scanner.finish()
        if not self.holds:
            if commit.findings:
                self.on_commit(commit, state, request_context)
            held.tails[p.cls] = was_held
            return []
        text = p.pending + (self.on_commit(commit, state, request_context)
                            if commit.findings else commit.text)
        # What is released now could still have become a match: the next part of this kind
        # is scanned with it in front.
        held.tails[p.cls] = text if was_held else ""
        return [p.chunk(text)] if text else []


class RedactingGuard(HoldbackGuard):
    r"""A ``HoldbackGuard`` that checks, with the same rules, everything else that carries text
    out of a run: input messages, tool-call arguments, tool results and errors, ``data-*``
    chunks.

    Subclasses set ``rules`` and implement ``handle_findings(text, findings, source, state,
    request_context, offset)``: return the text to keep (redacted) or raise ``TripWire``.
    ``source`` says where the text was: ``"input"``, ``"stream"`` (text and reasoning deltas;
    ``findings`` offsets are in the part's streamed text and ``text`` starts at ``offset``),
    ``"tool-call"`` (arguments, tool names), ``"tool-result"``, ``"tool-error"``, ``"error"`` (the
    run's error) or ``"data"``. With
    ``strategy == "filter"`` an input message with a finding is dropped.

    What the stream hook covers, besides the deltas:

    * **tool-call arguments** (``check_tool_args``): the ``tool-call`` chunk's ``args`` (keys
      and values, nested), and its streamed ``tool-call-delta`` chunks, which are held per call
      until the arguments are complete (``tool-call-input-streaming-end``, the ``tool-call``,
      or the end of the step), then released as they came when nothing was found, or as one
      delta with the JSON of the redacted arguments. The tool runs with the arguments the guard
      let through — what the client saw and the store keeps, and no secret is handed to a tool
      that could send it elsewhere;
    * **tool results** (``result`` and ``args``) and **tool errors** (``error``, ``args``) —
      keys and values;
    * **tool names** of every tool chunk (source ``"tool-call"``, or that of the result/error);
    * **the run's error** (source ``"error"``): the ``error`` chunk's ``error`` — the text every
      way the error leaves the run uses (message, data-step-retry reason, ``result.error``);
    * **data-* chunks** (``process_data_parts = True``): their ``data``, keys and values.

    ``process_tool_result`` also redacts the result in the message list, so the model reads
    the redacted result too. Redaction of structured values is idempotent (a redacted value
    holds nothing to find), so a chunk checked twice comes out the same.

    ``phase`` decides which hooks the guard has: ``"input"`` (``process_input``), ``"output"``
    (``process_tool_result`` and the stream) or ``"all"``. A hook the phase leaves out does not
    exist, so the agent can tell (and warns) when the guard sits in a list where nothing of it
    would run.

    Example:
        >>> class Tickets(RedactingGuard):
        ...     rules = [Rule("ticket", r"TCK-\d{6}")]
        ...     def handle_findings(self, text, findings, source, state, request_context,
        ...                         offset=0):
        ...         regions = merge_regions(findings)
        ...         return replace_regions(text, regions, lambda r, t: "[TICKET]", offset)
        >>> agent = Agent(id="a", model=model, input_processors=[Tickets("tickets")],
        ...               output_processors=[Tickets("tickets")])
    """

    strategy: str = "redact"
    #: The studio reports this guard's changes to a chunk as ``redacted`` (``streamkit.events``).
    redacts: bool = True
    rules: Sequence[Rule] = ()
    #: Tool-call arguments (streamed and final) are checked too.
    check_tool_args: bool = True

    def __init__(self, id: str | None = None, *, phase: str = "all") -> None:
        super().__init__(id)
        if phase not in ("input", "output", "all"):
            raise InvalidArgument(f"phase must be 'input', 'output' or 'all', got {phase!r}")
        self.phase = phase
        if phase in ("input", "all"):
            self.process_input = self._process_input
        if phase in ("output", "all"):
            self.process_tool_result = self._process_tool_result
            self.process_data_parts = True
        else:
            del self.process_output_stream, self.flush_output_stream

    def stream_rules(self) -> Sequence[Rule]:
        return self.rules

    def on_commit(self, commit: Commit, state: dict[str, Any], request_context: Any) -> str:
        return self.handle_findings(commit.text, commit.findings, "stream", state,
                                    request_context, commit.start)

    def handle_findings(self, text: str, findings: list[Finding], source: str,
                        state: dict[str, Any], request_context: Any, offset: int = 0
                        ) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_text(self, text: str, source: str, state: dict[str, Any], request_context: Any
                    ) -> tuple[str, bool]:
        findings = find_all(self.rules, text)
        if not findings:
            return text, False
        return self.handle_findings(text, findings, source, state, request_context), True

    def _check_value(self, value: Any, source: str, state: dict[str, Any],
                     request_context: Any) -> Any:
        """``value`` with every string in it (keys too) checked; the same object when nothing
        was found."""
        hits: list[bool] = []

        def one(text: str) -> str:
            new, hit = self._check_text(text, source, state, request_context)
            hits.append(hit)
            return new

        checked = map_strings(value, one)
        return checked if any(hits) else value

    def on_chunk(self, part: Any, held: _Held, state: dict[str, Any], request_context: Any
                 ) -> Any:
        cls = part.__class__
        if cls is DataChunk:
            data = self._check_value(part.data, "data", state, request_context)
            return part if data is part.data else structs.replace(part, data=data)
        if cls is ToolResult:
            return self._check_fields(part, ("tool_name", "result", "args"), "tool-result",
                                      state, request_context)
        if cls is ToolErrorChunk:
            return self._check_fields(part, ("tool_name", "error", "args"), "tool-error", state,
                                      request_context)
        if cls is ErrorChunk:
            return self._check_fields(part, ("error",), "error", state, request_context)
        if cls in _NAMED:
            part = self._check_fields(part, ("tool_name",), "tool-call", state, request_context)
        if not self.check_tool_args:
            return part
        if cls is ToolCallDelta:
            if not self.holds:
                return part
            held.args.setdefault(part.payload.tool_call_id, []).append(part)
            return []
        if cls is ToolCallInputStreamingEnd:
            out = self._release_args(held, part.payload.tool_call_id, state, request_context)
            out.append(part)
            return out
        if cls is ToolCall:
            out = self._release_args(held, part.payload.tool_call_id, state, request_context)
            out.append(self._check_fields(part, ("args",), "tool-call", state,
                                          request_context))
            return out
        return part

    def on_flush(self, held: _Held, state: dict[str, Any], request_context: Any) -> list[Any]:
        out: list[Any] = []
        for call_id in list(held.args):
            out += self._release_args(held, call_id, state, request_context)
        return out

    def _check_fields(self, part: Any, fields: tuple[str, ...], source: str,
                      state: dict[str, Any], request_context: Any) -> Any:
        payload = part.payload
        changed: dict[str, Any] = {}
        for name in fields:
            value = getattr(payload, name)
            if value is UNSET:
                continue
            checked = self._check_value(value, source, state, request_context)
            if checked is not value:
                changed[name] = checked
        if not changed:
            return part
        return structs.replace(part, payload=structs.replace(payload, **changed))

    def _release_args(self, held: _Held, call_id: str, state: dict[str, Any],
                      request_context: Any) -> list[Any]:
        """The held argument deltas of one call: as they came when nothing is found in them,
        else one delta with the redacted arguments (as JSON when they parse, else as text)."""
        deltas = held.args.pop(call_id, None)
        if not deltas:
            return []
        raw = "".join(d.payload.args_text_delta for d in deltas)
        try:
            parsed = json.loads(raw)
        except ValueError:
            text, hit = self._check_text(raw, "tool-call", state, request_context)
        else:
            checked = self._check_value(parsed, "tool-call", state, request_context)
            hit = checked is not parsed
            text = json.dumps(checked, ensure_ascii=False) if hit else raw
        if not hit:
            return list(deltas)
        first = deltas[0]
        return [structs.replace(first, payload=structs.replace(first.payload,
                                                               args_text_delta=text))]

    def _process_input(self, messages: list[Any], state: dict[str, Any],
                       request_context: Any) -> Any:
        dropping = self.strategy == "filter"
        kept, dropped = [], False
        for message in messages:
            found = False
            for part in message.content.parts:
                if isinstance(part, TextPart):
                    new, hit = self._check_text(part.text, "input", state, request_context)
                    if hit:
                        found = True
                        if not dropping:
                            part.text = new
            mirror = message.content.content
            if isinstance(mirror, str):
                new, hit = self._check_text(mirror, "input", state, request_context)
                if hit:
                    found = True
                    if not dropping:
                        message.content.content = new
            if found and dropping:
                dropped = True
                continue
            kept.append(message)
        return kept if dropped else None

    def _process_tool_result(self, tool_call_id: str, tool_name: str, args: Any, result: Any,
                             message_list: Any, state: dict[str, Any],
                             request_context: Any) -> None:
        redacted = self._check_value(result, "tool-result", state, request_context)
        if redacted is not result and redacted != result:
            message_list.update_tool_invocation(
                ToolInvocationPart.returned(tool_call_id, tool_name, redacted, args))


def notify(callback: Callable[[Detection], Any] | None, events: Sequence[Detection]) -> None:
    """Call ``callback`` for each event; its exceptions are logged, never raised (a broken
    callback must not change what the guard does)."""
    if callback is None:
        return
    for event in events:
        try:
            callback(event)
        except Exception:  # noqa: BLE001 - documented: callback errors are logged only
            log.exception("on_detection callback of %r raised; ignored", event.processor_id)
