"""Stream processors built on the hold-back scanner: ``HoldbackGuard`` (text deltas in, committed
text out) and ``RedactingGuard`` (the same rules over input messages and tool results too).

What belongs here: turning ``HoldbackScanner`` commits into ``text-delta`` chunks per text id,
releasing held text before other chunks and at the end of a step, discarding what a retried
attempt held, and the message-level hooks of redacting guards. What does not: the scanning
algorithm (``_redact``) and any guard's strategies (``_pii``, ``_regex``, ``_vault``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from streamkit import Processor
from streamkit.chunks import ReasoningDelta, StepStart, TextDelta
from streamkit.errors import InvalidArgument
from streamkit.messages import TextPart, ToolInvocationPart

from ._budget import Buffering
from ._redact import Commit, Detection, Finding, HoldbackScanner, Rule, find_all, map_strings

__all__ = ["HoldbackGuard", "RedactingGuard", "notify"]

log = logging.getLogger("streamkit_operators")


class _Run:
    """One text (or reasoning) part being streamed through a guard: its id, chunk class,
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


class HoldbackGuard(Processor):
    r"""Base of streaming guards that hold back only the shortest tail that could become a match.

    Subclasses give the rules (``stream_rules``) and decide what a commit turns into
    (``on_commit``: the text to emit, or raise ``TripWire``). The base handles ``text-delta``
    (and, with ``check_reasoning``, ``reasoning-delta``) chunks per part id, emits committed
    text as new deltas (``multi_emit``), releases what it holds before any other chunk (order is
    kept) and at the end of the step (``flush_output_stream``), and discards what a retried
    attempt left held (on ``step-start``). With ``holds = False`` (report-only guards) deltas
    pass at once and the scanner only watches.

    A guard that trips on a commit raises before returning it, so the text of that commit
    before the match is not shown either; none of a blocked value ever is.

    Marble (rule: 4 digits, hold-back ``.``)::

        --"id 12"--"34 ok"--|   redact   --"id "--"[N] ok"--|

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
    _RUN = "holdback.run"

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

    def _scanner(self) -> HoldbackScanner:
        return HoldbackScanner(self.stream_rules(), max_hold=self.max_hold)

    def _stream(self, part: Any, state: dict[str, Any], request_context: Any) -> Any:
        cls = part.__class__
        if cls is TextDelta or (cls is ReasoningDelta and self.check_reasoning):
            return self._text(part, state, request_context)
        run = state.pop(self._RUN, None)
        if run is None or cls is StepStart:
            # A run still open at step-start belongs to an attempt that was retried: its text
            # was withdrawn, so it must not leak into the new attempt.
            return part
        out = self._close(run, state, request_context)
        out.append(part)
        return out

    def _flush(self, state: dict[str, Any], request_context: Any) -> Any:
        run = state.pop(self._RUN, None)
        return self._close(run, state, request_context) if run is not None else None

    def _text(self, part: Any, state: dict[str, Any], request_context: Any) -> Any:
        run = state.get(self._RUN)
        out: list[Any] | None = None
        if run is None or run.id != part.payload.id or run.cls is not part.__class__:
            if run is not None:
                out = self._close(run, state, request_context)
            run = state[self._RUN] = _Run(part, self._scanner())
        else:
            run.run_id, run.from_ = part.run_id, part.from_
        delta = part.payload.text
        commit = run.scanner.feed(delta)
        if not self.holds:
            if commit.findings:
                self.on_commit(commit, state, request_context)
            return part if out is None else [*out, part]
        text = self.on_commit(commit, state, request_context) if commit.findings \
            else commit.text
        if run.scanner.held and text.isspace():
            # Whitespace alone, while a word is held, waits for that word: no chunk of " ".
            run.pending += text
            text = ""
        elif run.pending and text:
            text, run.pending = run.pending + text, ""
        if out is None:
            if text == delta and not run.scanner.held:
                return part  # nothing held before or after, nothing found: pass it as is
            return [run.chunk(text)] if text else []
        if text:
            out.append(run.chunk(text))
        return out

    def _close(self, run: _Run, state: dict[str, Any], request_context: Any) -> list[Any]:
        commit = run.scanner.finish()
        if not self.holds:
            if commit.findings:
                self.on_commit(commit, state, request_context)
            return []
        text = run.pending + (self.on_commit(commit, state, request_context)
                              if commit.findings else commit.text)
        return [run.chunk(text)] if text else []


class RedactingGuard(HoldbackGuard):
    r"""A ``HoldbackGuard`` that also checks input messages and tool results with the same rules.

    Subclasses set ``rules`` and implement ``handle_findings(text, findings, source, state,
    request_context, offset)``: return the text to keep (redacted) or raise ``TripWire``;
    ``source`` is ``"input"``, ``"tool-result"`` or ``"stream"`` (where ``findings`` offsets are
    in the whole streamed text and ``text`` starts at ``offset``). With ``strategy == "filter"``
    an input message with a finding is dropped.

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
    rules: Sequence[Rule] = ()

    def __init__(self, id: str | None = None, *, phase: str = "all") -> None:
        super().__init__(id)
        if phase not in ("input", "output", "all"):
            raise InvalidArgument(f"phase must be 'input', 'output' or 'all', got {phase!r}")
        self.phase = phase
        if phase in ("input", "all"):
            self.process_input = self._process_input
        if phase in ("output", "all"):
            self.process_tool_result = self._process_tool_result
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
        hits: list[bool] = []

        def one(text: str) -> str:
            new, hit = self._check_text(text, "tool-result", state, request_context)
            hits.append(hit)
            return new

        redacted = map_strings(result, one)
        if any(hits) and redacted != result:
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
