r"""``RegexFilter``: block, redact or report text matching your patterns — in the input, in tool
results, and in the stream without letting a split match through.

Mastra's ``RegexFilterProcessor`` (id ``regex-filter``), with its rules, presets, strategies and
phases. Streaming differs on purpose: Mastra keeps a fixed carry-over tail
(``streamCarryoverSize``, 128 characters); here the hold-back is the shortest tail that could
still become a match (``_redact``), bounded by ``max_hold``, so a match is never emitted in two
halves and ordinary text is not delayed by a fixed window.

What belongs here: the rule presets and the processor. What does not: the hold-back algorithm.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from streamkit import TripWire
from streamkit.errors import InvalidArgument, InvalidType

from ._holdback import RedactingGuard, notify
from ._pii import pii_rules
from ._redact import Detection, Finding, Rule, merge_regions, replace_regions

__all__ = ["RegexFilter", "PRESETS", "preset_rules"]

log = logging.getLogger("streamkit_operators")

_SECRETS = (  # name, pattern, replacement, the characters a match starts with
    ("api-key", r"\b(?:(?:sk|pk|rk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{16,}"
                r"|gh[pousr]_[A-Za-z0-9]{36,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})",
     "[API_KEY]", r"[sprgxA]"),
    ("bearer-token", r"\bBearer\s+[A-Za-z0-9\-._~+/]{8,}=*", "[BEARER_TOKEN]", r"[B]"),
    ("aws-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "[AWS_KEY]", r"[A]"),
)

#: How a block message names each ``source`` of a match.
_WHAT = {"stream": "streaming content", "tool-call": "tool-call arguments",
         "tool-result": "tool result", "tool-error": "tool error", "data": "data chunk"}

#: Preset names → the rule names they add.
PRESETS: dict[str, tuple[str, ...]] = {
    "pii": ("email", "phone", "ssn", "credit-card"),
    "secrets": tuple(name for name, _, _, _ in _SECRETS),
    "urls": ("url",),
}


def preset_rules(name: str) -> list[Rule]:
    """The rules of preset ``name`` (``"pii"``, ``"secrets"``, ``"urls"``), each replaced by
    ``[TYPE]`` when redacting. The ``pii`` rules are ``PIIDetector``'s (card numbers must pass
    the Luhn check).

    Raises:
        ValueError: an unknown preset.
    """
    if name == "secrets":
        return [Rule(n, p, replacement=r, starts=c) for n, p, r, c in _SECRETS]
    if name in PRESETS:
        return [Rule(r.name, r.pattern, replacement=f"[{r.name.upper().replace('-', '_')}]",
                     validate=r.validate, starts=r.starts) for r in pii_rules(PRESETS[name])]
    raise InvalidArgument(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")


def _rule(spec: Any) -> Rule:
    if isinstance(spec, Rule):
        return spec
    if isinstance(spec, Mapping):
        try:
            return Rule(spec["name"], spec["pattern"], replacement=spec.get("replacement"),
                        validate=spec.get("validate"), starts=spec.get("starts"))
        except KeyError as exc:
            raise InvalidArgument(f"a rule dict needs 'name' and 'pattern', got {dict(spec)}"
                                  ) from exc
    raise InvalidType(f"rules takes Rule objects or {{'name', 'pattern', 'replacement'?}} "
                      f"dicts, got {type(spec).__name__}")


class RegexFilter(RedactingGuard):
    """Filter text against regex rules on input, tool results and the output stream.

    Args:
        rules: ``Rule`` objects or dicts ``{"name", "pattern", "replacement"?}``; a replacement
            may use groups (``\\1``, ``\\g<name>``, or Mastra's ``$1``) or be a function of the
            match; default ``"[REDACTED]"``.
        presets: ``"pii"``, ``"secrets"``, ``"urls"`` (or several).
        strategy: ``"block"`` (default: trip), ``"redact"``, or ``"warn"`` (log, change nothing,
            hold nothing back).
        phase: ``"input"`` (``process_input``), ``"output"`` (the stream and tool results), or
            ``"all"`` (default).
        include_redacted_values: give ``on_detection`` the matched text (default: it gets
            ``"[REDACTED_MATCH]"``, as Mastra's violation reports do).
        on_detection: ``callback(Detection)`` per match; exceptions are logged and ignored.
        retry: with ``"block"``, trip with ``retry=True`` from the stream and tool results, so
            the agent re-runs the step with the reason as feedback (``max_processor_retries``).
        max_hold: longest stretch of streamed text held while it could still become a match.
        include_reasoning: scan streamed reasoning deltas as well (default ``True``: they reach
            clients and the store like text).
        include_tool_args: scan tool-call arguments, streamed and final (default ``True``: they
            reach clients and the store; the tool then runs with the redacted arguments —
            turn it off only for a tool that must receive the raw value, knowing the client
            and the store then see it too).
        id: processor id (default ``"regex-filter"``).

    Raises:
        ValueError: no rule at all, an invalid pattern, or an unknown option value.

    Marble (block)::

        --"key: sk-"--"live_0123456789abcdef"--|   RegexFilter(presets="secrets")   --"key: "X|

    Example:
        >>> guard = RegexFilter(rules=[{"name": "ticket", "pattern": r"TCK-\\d{6}",
        ...                             "replacement": "[TICKET]"}], strategy="redact")
    """

    def __init__(self, rules: Iterable[Any] = (), *, presets: str | Sequence[str] = (),
                 strategy: str = "block", phase: str = "all",
                 include_redacted_values: bool = False,
                 on_detection: Callable[[Detection], Any] | None = None, retry: bool = False,
                 max_hold: int = 1024, include_reasoning: bool = True,
                 include_tool_args: bool = True, id: str = "regex-filter") -> None:
        super().__init__(id, phase=phase)
        if strategy not in ("block", "redact", "warn"):
            raise InvalidArgument(f"strategy must be 'block', 'redact' or 'warn', got "
                                  f"{strategy!r}")
        collected = [_rule(r) for r in rules]
        for preset in [presets] if isinstance(presets, str) else list(presets):
            collected.extend(preset_rules(preset))
        if not collected:
            raise InvalidArgument(f"RegexFilter needs at least one rule (rules=... or "
                                  f"presets=...); got rules={rules!r}, presets={presets!r}")
        self.rules = collected
        self.strategy = strategy
        self.include_redacted_values = include_redacted_values
        self.on_detection = on_detection
        self.retry = retry
        self.max_hold = max_hold
        self.holds = strategy != "warn"
        self.check_reasoning = include_reasoning
        self.check_tool_args = include_tool_args

    def __repr__(self) -> str:
        return (f"RegexFilter(id={self.id!r}, strategy={self.strategy!r}, phase={self.phase!r}, "
                f"rules={[r.name for r in self.rules]})")

    def handle_findings(self, text: str, findings: list[Finding], source: str,
                        state: dict[str, Any], request_context: Any, offset: int = 0) -> str:
        names = list(dict.fromkeys(f.rule.name for f in findings))
        shown = self.include_redacted_values
        notify(self.on_detection, [
            Detection(self.id, f.rule.name, f.text if shown else "[REDACTED_MATCH]", f.start,
                      f.end, source, self.strategy) for f in findings])
        state.setdefault("matches", []).extend(
            {"rule": f.rule.name, "index": f.start, "source": source} for f in findings)
        if self.strategy == "block":
            what = _WHAT.get(source, "content")
            raise TripWire(
                f"Regex filter: blocked {what} matching patterns: {', '.join(names)}",
                retry=self.retry and source != "input",
                metadata={"processorId": self.id, "strategy": "block",
                          "matches": [{"rule": f.rule.name, "match": "[REDACTED_MATCH]",
                                       "index": f.start} for f in findings]})
        if self.strategy == "warn":
            log.warning("%s: %s matched rules %s (strategy='warn', left in place)", self.id,
                        source, ", ".join(names))
            return text

        def replace(region: Any, matched: str) -> str:
            owner = region.owner
            expanded = owner.rule.expand(owner.match)
            return "[REDACTED]" if expanded is None else expanded

        return replace_regions(text, merge_regions(findings), replace, offset)
