r"""Card numbers: the card rule's pattern, the Luhn check, and a one-pass finder for the rule.

What belongs here: what a card number looks like and how its matches are found fast. What does
not: the generic scan of a validated rule (``_match``), the other PII detectors (``_pii``).

Why a finder of its own (issue 26, point 9): the generic scan of a validated rule runs a regex
search per start and, when the match fails Luhn, ~36 ``fullmatch`` calls and 7 Luhn checks for a
shorter valid card inside it. In ``"1 1 1 1 …"`` every digit starts a candidate: ~80 µs per
character, linear but a megabyte blocked the event loop for over a minute. ``scan_cards`` reads
each maximal run of digits and separators once, with one regex call per run and Luhn sums from
prefix sums: a few µs per character.

Decision: it gives *exactly* what the generic scan gives for the card pattern with
``luhn_valid`` (every finding, and in streaming the same resume point), so nothing a user sees
changes but the time; ``tests/operators/test_pii_cards.py`` holds the two to each other over
random digit/separator strings. A rule with the same pattern and validator (a user's copy of
it) takes the same path.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

import regex

from streamkit.errors import StreamkitError

__all__ = ["CARD_PATTERN", "luhn_valid", "is_card_rule", "scan_cards"]

#: 13 to 19 digits, grouped by a space (two spaces, a line break or a tab too), a dash, a dot
#: or a slash (the view has folded no-break spaces, typographic dashes, middle dots and bullets
#: into these). ". " between digits ends a sentence: no card across it.
CARD_PATTERN = r"(?<![\w-])(?:\d(?:[\s./-]|  )?){12,18}\d(?!\w)"


def luhn_valid(text: str) -> bool:
    """Whether the digits of ``text`` (13 to 19 of them) pass the Luhn checksum.

    Example:
        >>> luhn_valid("4111 1111 1111 1111"), luhn_valid("4111 1111 1111 1112")
        (True, False)
    """
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


_CARD = regex.compile(CARD_PATTERN)
#: A maximal chain of digits, each joined to the next as the card pattern joins them (the gap
#: after a digit is decided by the text alone: a digit, one separator then a digit, or two
#: spaces then a digit).
_RUN = regex.compile(r"\d(?:(?:[\s./-]|  )?\d)*+")
#: What may follow a run's last digit while more text can still join it to a next digit.
_TAIL = regex.compile(r"[\s./-]|  ")
_WORD = regex.compile(r"\w")
_WORD_OR_DASH = regex.compile(r"[\w-]")
_DOUBLE = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def is_card_rule(pattern: regex.Pattern[str], validate: object) -> bool:
    """Whether a rule is the card rule (so ``scan_cards`` gives exactly its matches)."""
    return validate is luhn_valid and pattern.pattern == CARD_PATTERN \
        and pattern.flags == _CARD.flags


def scan_cards(pattern: regex.Pattern[str], s: str, pos: int, n: int,
               out: list[tuple[int, int, regex.Match[str]]], origin: int, final: bool,
               ending_at: Callable[[regex.Pattern[str], str, int, int],
                                   regex.Match[str] | None]) -> int:
    """``_match.scan`` for the card rule (``is_card_rule``): the same findings and the same
    resume point, in one pass.

    In a run of digits ``D0 … Dlast``, the digit ``Da`` starts a candidate when the character
    before it is neither a word character nor ``-`` (the pattern's look-behind); the match from
    ``Da`` may end at ``Dj`` for ``a+12 <= j <= a+18`` when no word character follows ``Dj``
    (within ``n``: the text ends there). The generic scan takes the longest such match and, when
    it fails Luhn, the longest shorter one that passes: together, the longest ending that passes
    Luhn; after a finding the search goes on at its end, else at the next candidate. Streaming
    (not ``final``): the first candidate whose text up to ``n`` could still grow into a match or
    change (a run reaching ``n`` with at most 19 digits from it) is where the rule resumes.

    ``ending_at(pattern, s, start, end)`` gives the match object of a shorter match, as the
    generic scan makes it (``_match._match_ending_at``). Memory: 10 bytes per digit of a run."""
    word = _WORD.match
    i = pos
    for run in _RUN.finditer(s, pos, n):
        a0, b = run.span()
        open_end = not final and (b == n or _TAIL.fullmatch(s, b, n) is not None)
        digits = array("q", [k for k in range(a0, b) if s[k].isdigit()])
        last = len(digits) - 1
        if last < 12 and not open_end:
            continue  # too short for a card, and no more text can lengthen it
        # Luhn sums (mod 10) of any window of digits: even[t] sums digits 0..t-1 with the
        # even-indexed ones kept and the odd-indexed ones doubled; odd[t] the other way round.
        even = bytearray(last + 2)
        odd = bytearray(last + 2)
        ends = bytearray(last + 1)  # 1 where a match may end at this digit
        se = so = 0
        for t, k in enumerate(digits):
            c = s[k]
            d = ord(c) - 48 if c < ":" else int(c)
            if t & 1:
                se = (se + _DOUBLE[d]) % 10
                so = (so + d) % 10
            else:
                se = (se + d) % 10
                so = (so + _DOUBLE[d]) % 10
            even[t + 1] = se
            odd[t + 1] = so
            if t < last:
                ends[t] = digits[t + 1] > k + 1
            else:
                ends[t] = b == n or word(s, b, n) is None
        for a, k in enumerate(digits):
            if k < i:
                continue
            if a == 0:
                if k > 0 and _WORD_OR_DASH.match(s, k - 1) is not None:
                    continue
            elif digits[a - 1] == k - 1 or s[k - 1] == "-":
                continue
            if open_end and (last - a < 18 or (last - a == 18 and b == n)):
                return k
            top = min(last, a + 18)
            longest = -1
            for j in range(top, a + 11, -1):
                if not ends[j]:
                    continue
                if longest < 0:
                    longest = j
                if (even[j + 1] == even[a]) if not j & 1 else (odd[j + 1] == odd[a]):
                    e = digits[j] + 1
                    m = pattern.match(s, k, n) if j == longest else ending_at(pattern, s, k, e)
                    if m is None:  # pragma: no cover - the pattern agrees with the run
                        raise StreamkitError(f"streamkit bug: the card finder disagrees with "
                                             f"{CARD_PATTERN!r}")
                    out.append((origin + k, origin + e, m))
                    i = e
                    break
    return n

