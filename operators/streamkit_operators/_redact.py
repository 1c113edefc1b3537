r"""Boundary-safe redaction: rules, findings, and the hold-back scanner.

What belongs here: finding rule matches in text (at once, or incrementally as a stream grows),
merging overlapping findings, replacing them. What does not: the stream processors built on the
scanner (``_holdback``), which patterns detect PII (``_pii``), what a regex rule set does with
its findings (``_regex``), placeholder vaults (``_vault``).

How the hold-back works
-----------------------
Streamed text arrives in deltas. After each delta the scanner finds the longest prefix of the
text it holds that is *final* — no continuation of the stream can change which matches lie in
it — commits that prefix (the guard redacts and emits it) and keeps the rest. For every rule it
scans the held text with the ``regex`` module's partial matching (with up to ``lookbehind``
already-emitted characters before it as context, so ``\b`` and look-behinds see the real left
neighbour) and holds from the earliest position where

1. a **partial match** starts: the text from there to the end is a prefix of some match;
2. a complete match **ends at the end** of the text: more text could extend it (``\d+``) or undo
   it (a trailing ``\b`` or ``(?!\d)``);
3. a complete match starts where a **longer match** could also start: the text from there to the
   end is a prefix of a full match of the rule (``abc|a`` on ``"x ab"``: ``"a"`` matches, but
   ``"abc"`` may follow), tested with ``fullmatch(partial=True)`` (this test also covers case 2;
   case 2 is checked first because it is cheaper);

then lowers the hold point to the start of any match that would straddle it, so no match is
ever cut. Everything before the hold point is final, because a regex attempt that never read up
to the end of the text gives the same answer whatever follows. So the streamed result equals the
result of scanning the whole text at once, which the tests check at every split point.

What is held is therefore the shortest tail that could still become a match: for an email rule
the trailing word (``"ada"`` may yet become ``"ada@example.com"``), for a card number the
trailing run of digits and separators, for text ending in a space nothing at all.

Validated rules
---------------
A rule with a validator (Luhn for cards) takes the longest *validated* match: a match that fails
its check is searched for a valid one inside it (``4111 1111 1111 1111 4`` holds a card; see
``_match``), so padding a secret with one more digit does not hide it. Streamed and one-shot
detection share this search, so they still agree.
The card rule itself takes a one-pass finder with exactly this search's results (``_cards``).

The detection view
------------------
Rules never see the raw text: they run on its folded view (``_fold``: look-alike characters
folded, invisible ones removed), and every finding is mapped back to the original characters it
came from — so ``４１１１ １１１１ …`` or a card with a zero-width space inside is found, and its
redaction replaces exactly the original characters. A finding's ``text`` is the folded (canonical)
value; its ``start``/``end`` are offsets in the original text. Folding is per character, so the
streamed view is the one-shot view and streamed detection still equals one-shot detection. The
hold point never falls inside one original character's expansion (``ﬁ`` → ``fi``).

Context: a scanner may start with ``context``, text already released (the end of the previous
part of the same kind, which a client joins to this one). Matches may start in it; commits never
repeat it; a finding that starts in it has a negative ``start`` (the guard replaces only the part
after the boundary).

Bounds: a held stretch longer than ``max_hold`` characters is committed anyway (latency and
memory stay bounded; a single match longer than ``max_hold`` may then be cut); look-behinds see
at most ``lookbehind`` characters of already emitted text; and a *negative* look-ahead that
reads past the end of its own match (``a(?!.*z)``) can be undone by text that arrives later —
keep look-aheads to the characters right after a match (``(?!\d)``, ``\b``), as the built-in
rules do.

Time: linear in the streamed text. Decision (issue 26): a delta longer than ``_PIECE``
characters is scanned a piece at a time, because a continuable (partial) ``regex`` scan costs
the rest of the string at every position it tries; the findings are the same (they never
depend on where the stream is split), and each partial scan reads at most the held text plus
one piece.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
import regex

from streamkit.errors import InvalidArgument, InvalidType

from ._fold import fold
from ._match import scan

__all__ = ["Rule", "Finding", "Region", "Detection", "Commit", "HoldbackScanner",
           "compile_pattern", "find_all", "merge_regions", "replace_regions",
           "map_strings"]

_RE_FLAGS = ((re.IGNORECASE, regex.IGNORECASE), (re.MULTILINE, regex.MULTILINE),
             (re.DOTALL, regex.DOTALL), (re.VERBOSE, regex.VERBOSE), (re.ASCII, regex.ASCII))


def compile_pattern(pattern: Any, flags: int = 0) -> regex.Pattern[str]:
    r"""A ``regex`` pattern from a string, an ``re.Pattern`` or a ``regex`` pattern.

    Raises:
        ValueError: the pattern does not compile, or it matches the empty string (a rule that
            matches nothing would "match" everywhere).

    Example:
        >>> compile_pattern(re.compile(r"ticket-\d+", re.I)).match("TICKET-7").group()
        'TICKET-7'
    """
    if isinstance(pattern, re.Pattern):
        flags |= sum(rx for py, rx in _RE_FLAGS if pattern.flags & py)
        pattern = pattern.pattern
    if isinstance(pattern, regex.Pattern):
        compiled = pattern if not flags else regex.compile(pattern.pattern, pattern.flags | flags)
    elif isinstance(pattern, str):
        try:
            compiled = regex.compile(pattern, flags)
        except regex.error as exc:
            raise InvalidArgument(f"invalid pattern {pattern!r}: {exc}") from exc
    else:
        raise InvalidType(f"a pattern must be a str or a compiled regex, got "
                          f"{type(pattern).__name__}")
    if compiled.fullmatch("") is not None:
        raise InvalidArgument(f"pattern {compiled.pattern!r} matches the empty string; a rule "
                              f"must match at least one character")
    return compiled


@dataclass(frozen=True, slots=True)
class Rule:
    r"""One thing to find: a name, a pattern, an optional validator and replacement.

    Attributes:
        name: the rule's name (a PII type such as ``"email"``, or a RegexFilter rule name).
        pattern: a string, ``re`` or ``regex`` pattern; stored compiled with ``regex``.
        replacement: what a redacting guard writes instead of a match: a template (``\1``,
            ``\g<name>``; JavaScript's ``$1``/``$<name>`` are accepted too) or a function of the
            match. ``None`` leaves the choice to the guard.
        validate: a check on the matched text (a Luhn checksum); a match failing it is not a
            finding.
        starts: a regex character class of every character a match can start with
            (``"[0-9]"`` for a card number). A streaming scanner with nothing pending for the
            rule skips it for a delta holding none of them (a speed-up only; a class that
            misses a real first character makes the rule miss matches, so leave it ``None``
            when unsure).

    Example:
        >>> Rule("ticket", r"TCK-\d{6}", replacement="[TICKET]", starts="[T]").name
        'ticket'
    """

    name: str
    pattern: Any
    replacement: str | Callable[[Any], str] | None = None
    validate: Callable[[str], bool] | None = None
    starts: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InvalidType(f"a rule needs a non-empty str name, got "
                              f"{type(self.name).__name__} {self.name!r}")
        if not self.name:
            raise InvalidArgument("a rule needs a non-empty name, got ''")
        object.__setattr__(self, "pattern", compile_pattern(self.pattern))
        if isinstance(self.replacement, str):
            object.__setattr__(self, "replacement", _js_template(self.replacement))
        if isinstance(self.starts, str):
            try:
                object.__setattr__(self, "starts", regex.compile(self.starts))
            except regex.error as exc:
                raise InvalidArgument(f"invalid starts class {self.starts!r} (expected a "
                                      f"character class such as '[0-9]'): {exc}") from exc

    def expand(self, match: Any) -> str | None:
        """The replacement for ``match``, or ``None`` when the rule has none."""
        rep = self.replacement
        if rep is None:
            return None
        if callable(rep):
            return str(rep(match))
        return str(match.expand(rep))


def _js_template(template: str) -> str:
    # Mastra rules use JavaScript's ``$1``/``$<name>``; Python's expand wants ``\g<1>``.
    return re.sub(r"\$(\d+|<\w+>)", lambda m: "\\g" + (m.group(1) if m.group(1)[0] == "<"
                                                      else f"<{m.group(1)}>"), template)


@dataclass(frozen=True, slots=True)
class Finding:
    """One validated match: ``rule``, ``start``/``end`` offsets in the original text it was
    found in (for a stream: in the whole streamed text; negative when it starts in the scanner's
    ``context``), the matched ``text`` as the detection view reads it (the canonical value:
    ``"4111 1111 1111 1111"`` for ``"４１１１ １１１１ １１１１ １１１１"``), and the regex
    ``match`` (on the view)."""

    rule: Rule
    start: int
    end: int
    text: str
    match: Any = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Region:
    """Overlapping findings unioned into one span; ``owner`` (the longest finding, the first on
    a tie) decides how the span is replaced."""

    start: int
    end: int
    owner: Finding
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class Detection:
    """What ``on_detection`` callbacks receive, one per finding.

    Attributes:
        processor_id: the guard.
        type: the rule name / PII type.
        value: the detected text (present only where the guard is configured to expose it).
        start: offset in the original text (for ``source="stream"``: in the part's streamed
            text, negative when the value began in the previous part, already released).
        end: end offset.
        source: where it was: ``"input"``, ``"stream"`` (text or reasoning deltas), ``"tool-call"``
            (arguments), ``"tool-result"``, ``"tool-error"`` or ``"data"`` (a ``data-*`` chunk).
        strategy: the strategy applied.
    """

    processor_id: str
    type: str
    value: str | None
    start: int
    end: int
    source: str
    strategy: str


class Commit(NamedTuple):
    """What a scanner released: the original ``text``, where it starts in the whole streamed
    text (``start``), and the findings that lie in it (offsets in the whole text)."""

    text: str
    start: int
    findings: list[Finding]


def find_all(rules: Sequence[Rule], text: str) -> list[Finding]:
    r"""Every validated match of every rule in ``text``'s detection view (each rule scanned on
    its own, leftmost first and non-overlapping as ``finditer`` does), sorted by start, with
    offsets in ``text``.

    Example:
        >>> [f.text for f in find_all([Rule("n", r"\d+")], "a 12 b 345")]
        ['12', '345']
        >>> [(f.start, f.end, f.text) for f in find_all([Rule("n", r"\d+")], "a １\u200b２")]
        [(2, 5, '12')]
    """
    view, index = fold(text)
    out: list[Finding] = []
    found: list[tuple[int, int, regex.Match[str]]] = []
    for rule in rules:
        scan(rule.pattern, rule.validate, view, 0, len(view), found, 0, True)
        for s, e, m in found:
            if index is not None:
                s, e = index[s], index[e - 1] + 1
            out.append(Finding(rule, s, e, m.group(), m))
        found.clear()
    out.sort(key=lambda f: (f.start, -f.end))
    return out


def merge_regions(findings: Iterable[Finding]) -> list[Region]:
    """Union overlapping findings; the longest finding of a group owns it.

    Example:
        >>> a, b = find_all([Rule("x", r"abc"), Rule("y", r"bcde")], "abcde")
        >>> [(r.start, r.end, r.owner.rule.name) for r in merge_regions([a, b])]
        [(0, 5, 'y')]
    """
    regions: list[Region] = []
    group: list[Finding] = []
    end = -1
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        if group and f.start < end:
            group.append(f)
            end = max(end, f.end)
            continue
        if group:
            regions.append(_region(group, end))
        group, end = [f], f.end
    if group:
        regions.append(_region(group, end))
    return regions


def _region(group: list[Finding], end: int) -> Region:
    owner = max(group, key=lambda f: f.end - f.start)  # max keeps the first on a tie
    return Region(group[0].start, end, owner, tuple(group))


def replace_regions(text: str, regions: Sequence[Region], replace: Callable[[Region, str], str],
                    offset: int = 0) -> str:
    """``text`` with each region replaced by ``replace(region, original_span_text)``; region
    offsets are shifted by ``-offset`` (a stream commit starts at ``offset``). A region that
    starts before ``text`` (in a scanner's already released context) is replaced from the start
    of ``text`` only."""
    if not regions:
        return text
    out: list[str] = []
    pos = 0
    for r in regions:
        s, e = max(r.start - offset, 0), r.end - offset
        out.append(text[pos:s])
        out.append(replace(r, text[s:e]))
        pos = e
    out.append(text[pos:])
    return "".join(out)


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` with ``fn`` applied to every string inside it — dict keys and values, list and
    tuple items, nested; other values are kept. Used to redact (and restore) tool arguments,
    tool results, tool errors and ``data-*`` payloads.

    Keys are mapped too: a tool may return ``{"ada@example.com": ...}``. When two keys become
    the same key (both redacted to ``[EMAIL]``), the later ones get ``#2``, ``#3``… so no value
    is lost.

    Any other value that reaches a client as JSON is seen as it will be sent: a dataclass, a
    ``msgspec.Struct``, a set, a datetime… is mapped as its ``msgspec.to_builtins`` form, and
    that form is returned when ``fn`` changed a string in it (else the value itself). Bytes are
    read as UTF-8 text: when ``fn`` changes that text, the text is returned (a client would have
    decoded the base64 of the bytes). Values ``msgspec`` cannot encode are kept (they cannot
    reach the wire either).

    Example:
        >>> map_strings({"a1": ["b2", 3], "c3": "a1"}, str.upper)
        {'A1': ['B2', 3], 'C3': 'A1'}
        >>> map_strings({"x1": 1, "x2": 2}, lambda s: s[0])
        {'x': 1, 'x#2': 2}
    """
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if isinstance(k, str):
                k = fn(k)
                if k in out:
                    n = 2
                    while f"{k}#{n}" in out:
                        n += 1
                    k = f"{k}#{n}"
            out[k] = map_strings(v, fn)
        return out
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_strings(v, fn) for v in value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return value
        mapped = fn(text)
        return value if mapped == text else mapped
    try:
        plain = msgspec.to_builtins(value)
    except (TypeError, msgspec.EncodeError):
        return value
    if plain is value:
        return value
    mapped = map_strings(plain, fn)
    return value if mapped == plain else mapped


#: The longest stretch of one ``feed`` scanned at once (see ``HoldbackScanner.feed``).
_PIECE = 2048


class HoldbackScanner:
    r"""Incremental, boundary-safe scanning of a growing text (see the module docstring).

    ``feed(delta)`` returns the ``Commit`` that became final; ``finish()`` commits the rest.
    Concatenating the committed texts gives back the fed text exactly, and the findings are
    exactly ``find_all(rules, whole_text)`` (for matches up to ``max_hold`` characters).

    Rules run on the detection view (``_fold``); the scanner keeps the view of what it holds
    next to the original, with the offset map between them only while the two differ.

    Each rule keeps its own resume point: the first position it could still match from (where
    its partial match starts, or the end of the text when nothing is pending for it) and the
    final matches it found but the scanner has not committed yet (another rule holds earlier
    text). A later delta is scanned by each rule from its own resume point only; a rule with
    nothing pending and a ``starts`` class that no character of the delta belongs to is not
    run at all. This is what keeps a dozen rules cheap per delta.

    Args:
        rules: what to find.
        max_hold: the longest stretch (in view characters) held while it could become a match.
        lookbehind: how many committed view characters look-behinds and ``\b`` still see.
        context: text already released before this one (see the module docstring).

    Example:
        >>> s = HoldbackScanner([Rule("card", r"\d{4} \d{4}")])
        >>> s.feed("pay 1234"), s.held
        (Commit(text='pay ', start=0, findings=[]), '1234')
        >>> [f.text for f in s.feed(" 5678 now").findings]
        ['1234 5678']
        >>> s = HoldbackScanner([Rule("card", r"\d{4} \d{4}")], context="pay 1234")
        >>> c = s.feed(" 5678 now")
        >>> c.text, [(f.start, f.end) for f in c.findings]
        (' 5678 now', [(-4, 5)])
    """

    __slots__ = ("rules", "max_hold", "lookbehind", "_ctx", "_buf", "_offset", "_raw",
                 "_raw_offset", "_index", "_resume", "_pending")

    def __init__(self, rules: Sequence[Rule], *, max_hold: int = 1024, lookbehind: int = 64,
                 context: str = "") -> None:
        if max_hold < 1:
            raise InvalidArgument(f"max_hold must be >= 1 character, got {max_hold}")
        self.rules = tuple(rules)
        self.max_hold = max_hold
        self.lookbehind = lookbehind
        self._ctx = ""  # committed view text that look-behinds still see
        self._buf = ""  # the held text's view
        self._raw = ""  # the held text itself
        # _buf[i] came from _raw[_index[i]]; None while _buf is _raw (nothing folded).
        self._index: list[int] | None = None
        self._offset = 0  # where _buf starts in the whole view
        self._raw_offset = 0  # where _raw starts in the whole original text
        self._resume = [0] * len(self.rules)
        self._pending: list[list[tuple[int, int, regex.Match[str]]]] = [[] for _ in self.rules]
        if context:
            self._add(context)
            self._offset = -len(self._buf)
            self._raw_offset = -len(context)
            self._resume = [self._offset] * len(self.rules)

    @property
    def held(self) -> str:
        """The text not yet committed."""
        return self._raw if self._raw_offset >= 0 else self._raw[-self._raw_offset:]

    def _add(self, text: str) -> str:
        view, index = fold(text)
        if index is None and self._index is None:
            self._buf += text
        else:
            base = len(self._raw)
            own = self._index if self._index is not None else list(range(len(self._buf)))
            if index is None:
                own.extend(range(base, base + len(view)))
            else:
                own.extend([base + i for i in index])
            self._index = own
            self._buf += view
        self._raw += text
        return view

    def feed(self, text: str) -> Commit:
        """Add ``text``; commit what can no longer change.

        A ``text`` longer than ``_PIECE`` characters is scanned ``_PIECE`` characters at a
        time (one ``Commit`` is returned for all of it): a scan that may still be continued
        (partial matching) costs the ``regex`` engine time in proportion to the rest of the
        string at *every* position it tries, so one scan over a 1 MB delta was quadratic in
        the delta (~270 s); over pieces, each scan reads at most the held text plus one
        piece, and the time is linear in the delta. Pieces change nothing else: the scanner's
        result does not depend on where the stream is split (the module docstring)."""
        if len(text) <= _PIECE:
            before = self._offset + len(self._buf)
            view = self._add(text)
            return self._commit(view, before, final=False)
        texts: list[str] = []
        findings: list[Finding] = []
        start: int | None = None
        for at in range(0, len(text), _PIECE):
            before = self._offset + len(self._buf)
            view = self._add(text[at:at + _PIECE])
            commit = self._commit(view, before, final=False)
            if commit.text and start is None:
                start = commit.start
            texts.append(commit.text)
            findings.extend(commit.findings)
        return Commit("".join(texts), commit.start if start is None else start, findings)

    def finish(self) -> Commit:
        """The text ended: commit everything held."""
        return self._commit("", self._offset + len(self._buf), final=True)

    def _commit(self, view: str, before: int, *, final: bool) -> Commit:
        buf, start, ctx, index = self._buf, self._offset, self._ctx, self._index
        s = ctx + buf
        n = len(s)
        origin = start - len(ctx)  # absolute offset of s[0]
        end = origin + n
        rules, resume, pending = self.rules, self._resume, self._pending
        for i, rule in enumerate(rules):
            at = resume[i]
            if at == end:
                continue
            if not final and at == before and rule.starts is not None \
                    and rule.starts.search(view) is None:
                resume[i] = end  # nothing pending, and nothing in the delta can start a match
                continue
            resume[i] = origin + scan(rule.pattern, rule.validate, s, at - origin, n,
                                      pending[i], origin, final)
        hold = min(resume, default=end)
        if end - hold > self.max_hold:
            # Bounded latency: commit all but the last max_hold characters, scanning what is
            # pending there as if the text ended at that point.
            hold = end - self.max_hold
            for i, rule in enumerate(rules):
                if resume[i] < hold:
                    scan(rule.pattern, rule.validate, s, resume[i] - origin, hold - origin,
                         pending[i], origin, True)
                    resume[i] = hold
        moved = True
        while moved:  # never cut a match in two, nor one original character's expansion
            moved = False
            for found in pending:
                for ms, me, _ in found:
                    if ms < hold < me:
                        hold, moved = ms, True
            if index is not None:
                c = hold - start
                while 0 < c < len(buf) and index[c - 1] == index[c]:
                    c -= 1
                    moved = True
                hold = start + c
        raw_start = self._raw_offset
        findings: list[Finding] = []
        for i, rule in enumerate(rules):
            found = pending[i]
            if not found or found[0][0] >= hold:
                continue
            keep = []
            for ms, me, m in found:
                if me > hold:
                    keep.append((ms, me, m))
                elif me <= 0:
                    continue  # wholly inside the released context: handled when it was released
                else:
                    if index is None:
                        os, oe = raw_start + ms - start, raw_start + me - start
                    else:
                        os = raw_start + index[ms - start]
                        oe = raw_start + index[me - 1 - start] + 1
                    findings.append(Finding(rule, os, oe, m.group(), m))
            pending[i] = keep
        findings.sort(key=lambda f: (f.start, -f.end))
        cut = hold - start  # in the view
        raw_cut = cut if index is None else (index[cut] if cut < len(buf) else len(self._raw))
        raw = self._raw
        released = max(0, -raw_start)  # the context is never committed again
        committed = raw[min(released, raw_cut):raw_cut]
        commit_start = raw_start + min(released, raw_cut)
        self._buf = buf[cut:]
        self._raw = raw[raw_cut:]
        if index is not None:
            rest = [i - raw_cut for i in index[cut:]]
            self._index = None if self._buf == self._raw else rest
        lb = self.lookbehind
        self._ctx = (ctx + buf[:cut])[-lb:] if lb else ""
        self._offset = hold
        self._raw_offset = raw_start + raw_cut
        return Commit(committed, commit_start, findings)
