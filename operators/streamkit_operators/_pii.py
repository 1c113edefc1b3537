r"""``PIIDetector``: find personal data in the input, in tool results and in the streamed answer,
and block, report, drop or redact it — in the stream without ever letting a split value through.

Mastra's ``PIIDetector`` (id ``pii-detector``) asks a model for detections and uses regexes only
in streaming; this one is local and deterministic everywhere: regex detectors with validators
(Luhn for card numbers, ISO 7064 mod 97 for IBANs), so what is streamed, what is stored and what
the model sees agree exactly. The types Mastra can find only with a model (``name``,
``address``) are not offered; add ``custom_patterns`` for your own identifiers.

What belongs here: the PII detectors, the masking rules, and the processor. What does not: the
hold-back algorithm (``_redact``) and reversible placeholders (``_vault``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from streamkit import TripWire
from streamkit.errors import InvalidArgument, InvalidType

from ._cards import CARD_PATTERN, luhn_valid
from ._holdback import RedactingGuard, notify
from ._redact import Detection, Finding, Region, Rule, merge_regions, replace_regions
from ._vault import PlaceholderVault

__all__ = ["PIIDetector", "PII_TYPES", "pii_rules", "luhn_valid", "iban_valid", "mask_value"]

log = logging.getLogger("streamkit_operators")


def iban_valid(text: str) -> bool:
    """Whether ``text`` (spaces allowed) is an IBAN with a valid ISO 7064 mod-97 check.

    Example:
        >>> iban_valid("GB82 WEST 1234 5698 7654 32")
        True
    """
    s = text.replace(" ", "")
    if not 15 <= len(s) <= 34:
        return False
    moved = s[4:] + s[:4]
    try:
        return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
    except ValueError:
        return False


_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_HEX4 = r"[0-9A-Fa-f]{1,4}"
_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"

_LOCAL = r"[A-Za-z0-9._%+-]"
_LABEL = r"[A-Za-z0-9-]"
#: The e-mail rule, written so that no character is read more than a few times whatever the
#: text (``[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![A-Za-z0-9-])`` read a run of
#: local-part characters once per start position in it: quadratic in a long run).
#:
#: * A match starts only where the search starts (``\G``) or after a character that cannot be
#:   in a local part. Inside a run, every start reaches the same ``@`` with the same domain
#:   after it, so the leftmost start that can succeed is the run's first character or the
#:   search position; the others are rejected by one look-behind.
#: * The local part and each domain label are possessive: ``@`` and ``.`` are not in their
#:   classes, so giving characters back could never help.
#: * The domain is the greedy ``(label.)+tld`` as hops from one top-level-domain-like label
#:   (two letters or more, a whole label) to the next: each hop is atomic and reads the labels
#:   up to the next such label once; the last hop that finds none fails once, at the end of
#:   the chain. The match ends at the last such label, as the greedy form's does.
#:
#: ``tests/operators/test_pii_linear.py`` holds it to the old form (every match, partial
#: match and full match) and counts its work.
_EMAIL = (rf"(?:\G|(?<!{_LOCAL})){_LOCAL}++@{_LABEL}++"
          rf"(?>\.(?:{_LABEL}++\.)*?[A-Za-z]{{2,}}+(?!{_LABEL}))++")

#: The built-in detectors: type → (pattern, validator).
_DETECTORS: dict[str, tuple[str, Callable[[str], bool] | None]] = {
    # Linear in the text (see ``_EMAIL``): the same matches as
    # ``[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![A-Za-z0-9-])``.
    "email": (_EMAIL, None),
    "phone": (r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]?\d{1,4}){2,5}"
              r"|(?:\(\d{3}\)[ ]?|\d{3}[ .-]?)\d{3}[ .-]?\d{4})(?!\d)", None),
    # See ``_cards``: found in one pass over each run of digits, not by this regex per start.
    "credit-card": (CARD_PATTERN, luhn_valid),
    # 123-45-6789, also with spaces or dots between the groups.
    "ssn": (r"(?<![\d.-])(?!000|666|9\d\d)\d{3}[- .](?!00)\d{2}[- .](?!0000)\d{4}(?![\d-])",
            None),
    "api-key": (r"\b(?:(?:sk|pk|rk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{16,}"
                r"|AKIA[0-9A-Z]{16}\b|gh[pousr]_[A-Za-z0-9]{36,}|xox[abprs]-[A-Za-z0-9-]{10,}"
                r"|AIza[0-9A-Za-z_-]{35})", None),
    # The look-aheads up front reject most positions before the costlier look-behinds run.
    "ip-address": (rf"(?=\d)(?<![\d.])(?:{_OCTET}\.){{3}}{_OCTET}(?!\.?\d)"
                   rf"|(?<![:\w])(?=[0-9A-Fa-f]{{0,4}}:)(?:(?:{_HEX4}:){{7}}{_HEX4}"
                   rf"|(?:{_HEX4}:){{1,6}}:(?:{_HEX4}(?::{_HEX4}){{0,5}})?)(?![:\w])", None),
    "url": (r"\bhttps?://[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]]", None),
    "uuid": (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
             None),
    "crypto-wallet": (r"\b(?:0x[a-fA-F0-9]{40}|bc1[a-z0-9]{25,59}"
                      r"|[13][a-km-zA-HJ-NP-Z1-9]{25,34})\b", None),
    "iban": (r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b", iban_valid),
    "date-of-birth": (rf"(?=\d|(?i:{_MONTHS}))(?i:(?<=\b(?:dob|d\.o\.b\.|date of birth"
                      r"|birth ?date|born(?: on)?)\s*[:\-]?\s*))(?:\d{1,2}[/.-]\d{1,2}[/.-]"
                      rf"(?:\d{{4}}|\d{{2}})|\d{{4}}-\d{{2}}-\d{{2}}"
                      rf"|(?i:\d{{1,2}} (?:{_MONTHS})[a-z]*,? \d{{4}})"
                      rf"|(?i:(?:{_MONTHS})[a-z]*\ \d{{1,2}},? \d{{4}}))(?!\d)", None),
}

#: The characters each detector's matches can start with (lets the scanner skip it for a delta
#: without any); ``email`` starts with nearly anything, so it has none.
_STARTS: dict[str, str] = {
    "phone": r"[+(0-9]", "credit-card": r"[0-9]", "ssn": r"[0-9]", "api-key": r"[sprAgx]",
    "ip-address": r"[0-9A-Fa-f]", "url": r"[h]", "uuid": r"[0-9A-Fa-f]",
    "crypto-wallet": r"[013b]", "iban": r"[A-Z]", "date-of-birth": r"[0-9JFMASONDjfmasond]",
}

#: How a block message names each ``source`` of a finding.
_WHERE = {"input": "input", "stream": "streamed output", "tool-call": "tool-call arguments",
          "tool-result": "tool result", "tool-error": "tool error", "data": "data chunk"}

#: Every built-in detection type (the default ``detection_types``).
PII_TYPES: tuple[str, ...] = tuple(_DETECTORS)
_MODEL_ONLY = ("name", "address")
STRATEGIES = ("redact", "block", "warn", "filter")
METHODS = ("mask", "hash", "remove", "placeholder", "reversible")


def pii_rules(types: Sequence[str] = PII_TYPES,
              custom: Mapping[str, Any] | Sequence[Rule] | None = None) -> list[Rule]:
    """The rules for ``types`` plus ``custom`` ones (``{"name": pattern}`` or ``Rule`` objects).

    Raises:
        InvalidArgument: an unknown type, or a model-only type (``name``, ``address``).
        InvalidType: a ``custom`` entry that is not a ``Rule``.
    """
    rules = []
    for kind in types:
        if kind in _MODEL_ONLY:
            raise InvalidArgument(f"PII type {kind!r} needs a model to detect; this "
                                  f"PIIDetector is local — use {', '.join(PII_TYPES)} or "
                                  f"custom_patterns")
        if kind not in _DETECTORS:
            raise InvalidArgument(f"unknown PII type {kind!r}; known: {', '.join(PII_TYPES)}")
        pattern, validate = _DETECTORS[kind]
        rules.append(Rule(kind, pattern, validate=validate, starts=_STARTS.get(kind)))
    if isinstance(custom, Mapping):
        rules.extend(Rule(name, pattern) for name, pattern in custom.items())
    elif custom:
        for rule in custom:
            if not isinstance(rule, Rule):
                raise InvalidType(f"custom_patterns takes a {{name: pattern}} dict or Rule "
                                  f"objects, got {type(rule).__name__}")
            rules.append(rule)
    return rules


def _keep_last_digits(value: str, keep: int = 4) -> str:
    total = sum(c.isdigit() for c in value)
    out, seen = [], 0
    for c in value:
        if c.isdigit():
            seen += 1
            out.append(c if seen > total - keep else "*")
        else:
            out.append(c)
    return "".join(out)


def _keep_ends(value: str, head: int = 1, tail: int = 1) -> str:
    if len(value) <= head + tail:
        return "*" * len(value)
    return value[:head] + "*" * (len(value) - head - tail) + value[len(value) - tail:]


def mask_value(kind: str, value: str, *, preserve_format: bool = True) -> str:
    """Mastra's masking: emails keep the first/last character of the local part and the TLD;
    phone, card and SSN numbers their last 4 digits; UUIDs their dashes; wallets their first and
    last 4 characters; IBANs their country code and last 4; anything else its first and last
    character. Without ``preserve_format``: up to 8 ``*``.

    Example:
        >>> mask_value("email", "john@example.com")
        'j**n@*******.com'
        >>> mask_value("credit-card", "4111 1111 1111 1111")
        '**** **** **** 1111'
    """
    if not preserve_format:
        return "*" * min(len(value), 8)
    if kind == "email" and "@" in value:
        local, _, domain = value.partition("@")
        host, dot, tld = domain.rpartition(".")
        return f"{_keep_ends(local)}@{'*' * len(host)}{dot}{tld}"
    if kind in ("phone", "credit-card", "ssn"):
        return _keep_last_digits(value)
    if kind == "uuid":
        return "".join("*" if c != "-" else c for c in value)
    if kind == "crypto-wallet":
        return _keep_ends(value, 4, 4)
    if kind == "iban":
        compact = value.replace(" ", "")
        kept = compact[:2] + "*" * (len(compact) - 6) + compact[-4:]
        it = iter(kept)
        return "".join(c if c == " " else next(it) for c in value)
    return _keep_ends(value)


class PIIDetector(RedactingGuard):
    """Detect PII in input messages and in everything a run sends out: the streamed answer and
    reasoning, tool-call arguments, tool results and errors, ``data-*`` chunks (see
    ``RedactingGuard``). Detection sees through look-alike characters (``_fold``): a card in
    full-width digits or with a zero-width space inside is still a card.

    Put it in ``input_processors`` for the user's messages (``process_input``) and in
    ``output_processors`` for tool results (``process_tool_result``, through
    ``message_list.update_tool_invocation``, so the model, the stored message and the
    ``tool-result`` chunk all see the redacted result) and the streamed text
    (``process_output_stream``: boundary-safe hold-back, see ``_redact``). The same object may sit
    in both lists; it keeps one ``state`` per request.

    Stored equals streamed: the agent stores the text the client received, which is the redacted
    text, and redacting a whole text at once gives the same result as the stream at any chunk
    split. There is no ``process_output_result`` hook: it could only make the stored answer
    differ from the streamed one.

    Args:
        detection_types: which built-in types to find (default: all of ``PII_TYPES``).
        strategy: ``"redact"`` (default), ``"block"`` (trip; ``retry=True`` lets the agent
            re-run the step), ``"warn"`` (log the types, change nothing, hold nothing back), or
            ``"filter"`` (drop an input message containing PII; in streamed text and tool
            results, where there is no message to drop, remove the values).
        redaction_method: ``"mask"`` (default, see ``mask_value``), ``"hash"``
            (``[HASH:<8 hex of sha256>]``), ``"remove"``, ``"placeholder"`` (``[EMAIL]``), or
            ``"reversible"`` (``<EMAIL_1>``, recorded in a ``PlaceholderVault`` so the client
            can get its own values back at the edge — see ``RestorePlaceholders``).
        preserve_format: for ``mask``: keep the shape (last 4 digits, TLD...); else up to 8 ``*``.
        custom_patterns: extra detectors: ``{"employee-id": r"EMP-\\d{6}"}`` or ``Rule``s.
        include_detections: add the (masked) detections to the tripwire metadata on block.
        on_detection: ``callback(Detection)`` for every finding, raw value included (it runs
            in your process); its exceptions are logged and ignored.
        retry: with ``strategy="block"``, trip with ``retry=True`` from the stream and tool
            results (the input has no step to retry).
        max_hold: longest stretch of text held back while it could still become a match.
        vault: the ``PlaceholderVault`` for ``reversible``; default ``request_context[vault_key]``
            (created there when missing).
        phase: ``"input"`` (only ``process_input``), ``"output"`` (tool results and the
            stream) or ``"all"`` (default).
        include_reasoning: scan streamed reasoning deltas as well (default ``True``: they reach
            clients and the store like text).
        include_tool_args: scan tool-call arguments, streamed and final (default ``True``: they
            reach clients and the store; the tool then runs with the redacted arguments —
            turn it off only for a tool that must receive the raw value, knowing the client
            and the store then see it too).
        id: processor id (default ``"pii-detector"``).

    Marble (redact, mask)::

        --"card 4111 1111"--" 1111 1111."--|   PIIDetector()   --"card "--"**** **** **** 1111."--|

    Example:
        >>> pii = PIIDetector(detection_types=["email", "credit-card"])
        >>> agent = Agent(id="support", model=model, input_processors=[pii],
        ...               output_processors=[pii])
        >>> answers_only = PIIDetector(phase="output")  # for output_processors alone

    Cost: each detector is a regex run over the held tail and each new delta; all eleven
    built-in types cost ~20 µs per delta, two of them ~8 µs (``python -m
    benchmarks.bench_guards``). Pick the types you need. Time is linear in the text, however
    it arrives (a 1 MB delta of words: ~1 s here, ``benchmarks/rows_pii.py``). The costliest
    text per character for the card rule, a long run of digits each followed by one space
    (``"1 1 1 …"``, every digit starts a candidate), costs it ~1.3 µs per character: card
    numbers are found in one pass over each run of digits with Luhn from prefix sums
    (``_cards``), not by a regex search per start (~45 µs per character there).
    """

    def __init__(self, *, detection_types: Sequence[str] | None = None,
                 strategy: str = "redact", redaction_method: str = "mask",
                 preserve_format: bool = True,
                 custom_patterns: Mapping[str, Any] | Sequence[Rule] | None = None,
                 include_detections: bool = False,
                 on_detection: Callable[[Detection], Any] | None = None, retry: bool = False,
                 max_hold: int = 1024, vault: PlaceholderVault | None = None,
                 vault_key: str = "pii_vault", phase: str = "all",
                 include_reasoning: bool = True, include_tool_args: bool = True,
                 id: str = "pii-detector") -> None:
        super().__init__(id, phase=phase)
        if strategy not in STRATEGIES:
            raise InvalidArgument(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if redaction_method not in METHODS:
            raise InvalidArgument(f"redaction_method must be one of {METHODS}, got "
                                  f"{redaction_method!r}")
        if on_detection is not None and not callable(on_detection):
            raise InvalidType(f"on_detection must be callable (a function of a Detection), "
                              f"got {type(on_detection).__name__}")
        self.rules = pii_rules(PII_TYPES if detection_types is None else detection_types,
                               custom_patterns)
        if not self.rules:
            raise InvalidArgument(f"PIIDetector needs at least one detection type or custom "
                                  f"pattern; got detection_types={detection_types!r} and "
                                  f"custom_patterns={custom_patterns!r}")
        self.strategy = strategy
        self.redaction_method = redaction_method
        self.preserve_format = preserve_format
        self.include_detections = include_detections
        self.on_detection = on_detection
        self.retry = retry
        self.max_hold = max_hold
        self.vault = vault
        self.vault_key = vault_key
        self.holds = strategy != "warn"
        self.check_reasoning = include_reasoning
        self.check_tool_args = include_tool_args

    def __repr__(self) -> str:
        return (f"PIIDetector(id={self.id!r}, strategy={self.strategy!r}, "
                f"method={self.redaction_method!r}, types={[r.name for r in self.rules]})")

    # -- findings --------------------------------------------------------------------------

    def handle_findings(self, text: str, findings: list[Finding], source: str,
                        state: dict[str, Any], request_context: Any, offset: int = 0) -> str:
        regions = merge_regions(findings)
        strategy = self.strategy
        state.setdefault("detections", []).extend(
            {"type": r.owner.rule.name, "source": source, "start": r.start, "end": r.end}
            for r in regions)
        notify(self.on_detection, [Detection(self.id, f.rule.name, f.text, f.start, f.end,
                                             source, strategy) for f in findings])
        types = sorted({r.owner.rule.name for r in regions})
        if strategy == "block":
            where = _WHERE.get(source, source)
            metadata: dict[str, Any] = {"processorId": self.id, "types": types,
                                        "count": len(regions), "source": source}
            if self.include_detections:
                metadata["detections"] = [
                    {"type": r.owner.rule.name, "start": r.start, "end": r.end,
                     "masked": mask_value(r.owner.rule.name, r.owner.text)} for r in regions]
            raise TripWire(f"PII detected in {where}. Types: {', '.join(types)}",
                           retry=self.retry and source != "input", metadata=metadata)
        if strategy == "warn":
            log.warning("%s: PII in %s (types: %s); strategy='warn' leaves it in place",
                        self.id, source, ", ".join(types))
            return text
        method = "remove" if strategy == "filter" else self.redaction_method
        return replace_regions(text, regions, self._replacer(method, source, state,
                                                             request_context), offset)

    def _replacer(self, method: str, source: str, state: dict[str, Any], request_context: Any
                  ) -> Callable[[Region, str], str]:
        # A region of one finding is replaced from its canonical value (``Finding.text``, the
        # detection view: "4111 1111 1111 1111" for full-width digits with a zero-width space
        # inside), so look-alike spellings mask and hash alike. A region that starts before
        # the text (the value began in text already released, before a part boundary) shows
        # nothing of itself.
        def value(region: Region, text: str) -> str:
            return region.owner.text if len(region.findings) == 1 else text

        if method == "remove":
            return lambda region, text: ""
        if method == "hash":
            return lambda region, text: \
                f"[HASH:{hashlib.sha256(value(region, text).encode()).hexdigest()[:8]}]"
        if method == "placeholder":
            return lambda region, text: \
                f"[{region.owner.rule.name.upper().replace('-', '_')}]"
        if method == "reversible":
            vault = self._vault(state, request_context)
            return lambda region, text: vault.placeholder(text, region.owner.rule.name,
                                                          origin=source)
        preserve = self.preserve_format

        def mask(region: Region, text: str) -> str:
            if region.start < 0:
                return "*" * min(len(text), 8)
            if len(region.findings) == 1:
                return mask_value(region.owner.rule.name, region.owner.text,
                                  preserve_format=preserve)
            return _keep_ends(text) if preserve else "*" * min(len(text), 8)
        return mask

    def _vault(self, state: dict[str, Any], request_context: Any) -> PlaceholderVault:
        if self.vault is not None:
            return self.vault
        vault: PlaceholderVault | None = state.get("vault")
        if vault is None:
            vault = state["vault"] = PlaceholderVault.for_request(request_context,
                                                                  self.vault_key)
        return vault
