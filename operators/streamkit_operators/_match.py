r"""Matching one rule against a text: its final matches and where it must resume.

What belongs here: running one compiled pattern (and its validator) over a stretch of text, at
once or as a stream grows — the partial-match tests that say which matches are final, and the
search for a validated match inside a match that failed its check. What does not: folding the
text (``_fold``), holding back and committing (``_redact``), what guards do with findings.
The card rule is dispatched to ``_cards.scan_cards`` (same results, one pass per digit run).
"""

from __future__ import annotations

from collections.abc import Callable

import regex

from ._cards import is_card_rule, scan_cards

__all__ = ["scan"]


def scan(pattern: regex.Pattern[str], validate: Callable[[str], bool] | None, s: str, pos: int,
         n: int, out: list[tuple[int, int, regex.Match[str]]], origin: int, final: bool) -> int:
    """Scan ``s[pos:n]`` with one rule; append its final, validated matches (offsets plus
    ``origin``) to ``out``; return where the rule must resume (``n`` when nothing is pending).

    ``final``: the text ends at ``n``. Otherwise the rule resumes at the start of a match that
    more text could still change (a partial match, a match touching ``n``, or one a longer match
    could replace); what lies before is final (see ``_redact``)."""
    if validate is not None:
        if is_card_rule(pattern, validate):
            return scan_cards(pattern, s, pos, n, out, origin, final, _match_ending_at)
        return _scan_validated(pattern, validate, s, pos, n, out, origin, final)
    if final:
        for m in pattern.finditer(s, pos, n):
            if m.end() > m.start():
                out.append((origin + m.start(), origin + m.end(), m))
        return n
    for m in pattern.finditer(s, pos, n, partial=True):
        st, en = m.span()
        if m.partial or en == n:
            return st  # a zero-width partial at the very end holds nothing: st == n
        if en == st:
            continue
        if pattern.fullmatch(s, st, n, partial=True) is not None:
            return st
        out.append((origin + st, origin + en, m))
    return n


def _scan_validated(pattern: regex.Pattern[str], validate: Callable[[str], bool], s: str,
                    pos: int, n: int, out: list[tuple[int, int, regex.Match[str]]], origin: int,
                    final: bool) -> int:
    """``_scan`` for a rule with a validator. A match that fails the check does not hide a
    valid one inside it: ``4111 1111 1111 1111 4`` (17 digits, no Luhn) holds a card, and so
    does ``1 4111 1111 1111 1111``. So the longest *validated* match is taken: from the failed
    match's start, shorter ends are tried (longest first), then the search goes on from the
    next character (not from the failed match's end)."""
    i = pos
    while i < n:
        m = pattern.search(s, i, n, partial=not final)
        if m is None:
            return n
        st, en = m.span()
        if not final:
            if m.partial or en == n:
                return st
            if en > st and pattern.fullmatch(s, st, n, partial=True) is not None:
                return st
        if en == st:
            i = st + 1
            continue
        if validate(m.group()):
            out.append((origin + st, origin + en, m))
            i = en
            continue
        inner = _validated_prefix(pattern, validate, s, st, en)
        if inner is not None:
            e, m = inner
            out.append((origin + st, origin + e, m))
            i = e
            continue
        i = st + 1
    return n


#: Per pattern: the pattern followed by a check that its match ends where the caller says
#: (see ``_match_ending_at``).
_ENDING: dict[regex.Pattern[str], regex.Pattern[str]] = {}


def _validated_prefix(pattern: regex.Pattern[str], validate: Callable[[str], bool], s: str,
                      st: int, en: int) -> tuple[int, regex.Match[str]] | None:
    """The longest validated match of ``pattern`` that starts at ``st`` and ends before
    ``en``: its end and the match (whose offsets are in a window of ``s``, not in ``s``)."""
    for e in range(en - 1, st, -1):
        # Cheap tests first: the span alone matches (it is the text up to ``e``), it validates;
        # then whether it is a match in its real surroundings (look-arounds see the text).
        if pattern.fullmatch(s, st, e) is not None and validate(s[st:e]):
            m = _match_ending_at(pattern, s, st, e)
            if m is not None:
                return e, m
    return None


def _match_ending_at(pattern: regex.Pattern[str], s: str, st: int, e: int
                     ) -> regex.Match[str] | None:
    """A match of ``pattern`` at ``st`` that ends exactly at ``e``, its look-arounds seeing the
    text around it (up to 64 characters before, 16 after).

    The regex engine cannot be told where a match must end, but it can be made to check it:
    the text after the window is a sentinel character (one the window does not contain) and a
    copy of the window's text from ``e`` on; the pattern is followed by a look-ahead that the
    rest of the string is ``X``, one character, ``X`` again — which, the sentinel occurring once,
    holds only when the match ends at ``e`` (the copy is compared case-sensitively whatever the
    rule's flags). The match's groups are the rule's own."""
    ending = _ENDING.get(pattern)
    if ending is None:
        if len(_ENDING) >= 256:  # bounded: rules built per request cannot grow it forever
            _ENDING.clear()
        nl = "\n" if pattern.flags & regex.VERBOSE else ""
        ending = _ENDING[pattern] = regex.compile(
            # A newline ends a verbose pattern's trailing comment before the group closes.
            rf"(?:{pattern.pattern}{nl})(?=(?P<_sk_rest>(?s:.*))(?s:.)(?-i:(?P=_sk_rest))\Z)",
            pattern.flags)
    lo = max(0, st - 64)
    window = s[lo:min(len(s), e + 16)]
    top = ord(max(window))
    if top < 0x10FFFF:
        sentinel = chr(top + 1)
    else:
        used = set(window)
        sentinel = next(chr(c) for c in range(0x110000) if chr(c) not in used)
    return ending.match(window + sentinel + window[e - lo:], st - lo)
