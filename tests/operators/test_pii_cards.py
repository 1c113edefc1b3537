"""Issue 26, point 9: the card rule is cheap per character, and finds exactly what it found.

``_cards.scan_cards`` replaces, for the card rule, the generic scan of a validated rule
(``_match._scan_validated``: a regex search per start and, for a match failing Luhn, ~36
``fullmatch`` calls for a shorter valid card). The generic scan is the reference: both are run
on the same strings, at the same start and end, streaming and final, and must return the same
findings and the same resume point. Streamed redaction (``HoldbackScanner``) must still equal
one-shot redaction. The cost per character is counted in ``test_pii_linear.py``.
"""

from __future__ import annotations

from typing import Any

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit_operators import HoldbackScanner, find_all
from streamkit_operators._cards import CARD_PATTERN, is_card_rule, luhn_valid, scan_cards
from streamkit_operators._match import _match_ending_at, _scan_validated, scan
from streamkit_operators._pii import _DETECTORS, pii_rules

CARD = regex.compile(CARD_PATTERN)

#: Digits (ASCII, full-width, Arabic-Indic), every kind of separator, the sentence end and
#: neighbours that matter to the look-arounds.
_PIECES = st.sampled_from(["0", "1", "4", "5", "9", "7", "3", " ", " ", "  ", "-", ".", "/",
                           "\n", "\t", "a", "_", ". ", "٣", "x1", ",", "4111 1111 1111 1111",
                           "4111111111111111", "0 0 0 0 0 0 0", "1 1 1 1 1 1 1",
                           "\u2028", "\x1c", "\u00a0", "²", "é", "\u0301"])
_TEXT = st.lists(_PIECES, max_size=40).map("".join)


def _old(s: str, pos: int, n: int, final: bool) -> tuple[int, list[Any]]:
    out: list[Any] = []
    at = _scan_validated(CARD, luhn_valid, s, pos, n, out, 7, final)
    return at, [(a, b, m.group()) for a, b, m in out]


def _new(s: str, pos: int, n: int, final: bool) -> tuple[int, list[Any]]:
    out: list[Any] = []
    at = scan_cards(CARD, s, pos, n, out, 7, final, _match_ending_at)
    return at, [(a, b, m.group()) for a, b, m in out]


def test_the_built_in_card_rule_takes_the_fast_path() -> None:
    pattern, validate = _DETECTORS["credit-card"]
    rule = pii_rules(["credit-card"])[0]
    assert is_card_rule(rule.pattern, rule.validate)
    assert not is_card_rule(regex.compile(pattern, regex.I), validate)
    assert not is_card_rule(rule.pattern, lambda s: True)


@settings(max_examples=4000, deadline=None)
@given(s=_TEXT, data=st.data())
def test_same_findings_and_resume_point_as_the_generic_scan(s: str, data: Any) -> None:
    n = data.draw(st.integers(0, len(s)))
    pos = data.draw(st.integers(0, n))
    for final in (True, False):
        assert _new(s, pos, n, final) == _old(s, pos, n, final), (s, pos, n, final)


@settings(max_examples=300, deadline=None)
@given(s=_TEXT, data=st.data())
def test_streamed_cards_are_the_one_shot_cards(s: str, data: Any) -> None:
    rules = pii_rules(["credit-card", "phone"])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(s)), max_size=5)))
    scanner = HoldbackScanner(rules, max_hold=data.draw(st.sampled_from([8, 40, 1024])))
    texts, found = [], []
    for a, b in zip([0, *cuts], [*cuts, len(s)], strict=True):
        commit = scanner.feed(s[a:b])
        texts.append(commit.text)
        found += [(f.rule.name, f.start, f.end, f.text) for f in commit.findings]
    commit = scanner.finish()
    texts.append(commit.text)
    found += [(f.rule.name, f.start, f.end, f.text) for f in commit.findings]
    assert "".join(texts) == s
    if scanner.max_hold >= 1024:
        assert found == [(f.rule.name, f.start, f.end, f.text) for f in find_all(rules, s)]


def test_realistic_text_and_worst_cases_agree() -> None:
    texts = [
        "pay 4111 1111 1111 1111 now, or 5500-0000-0000-0004 / 3782 822463 10005.",
        "order 1 4111 1111 1111 1111 4 and 4111111111111111 4",
        "1 " * 500, "0 " * 500, "1-" * 300, "4.1.1.1." * 50, "0  " * 200,
        "call 555 123 4567 or ４１１１ １１１１ １１１１ １１１１",
    ]
    for s in texts:
        for final in (True, False):
            assert _new(s, 0, len(s), final) == _old(s, 0, len(s), final)
    assert _new("0 " * 500, 0, 1000, True)[1], "runs of zeros are cards (Luhn sum 0)"


def test_scan_dispatches_to_the_card_finder() -> None:
    rule = pii_rules(["credit-card"])[0]
    out: list[Any] = []
    assert scan(rule.pattern, rule.validate, "x 4111 1111 1111 1111", 0, 21, out, 0, False) == 2
    assert out == []
    assert scan(rule.pattern, rule.validate, "x 4111 1111 1111 1111", 0, 21, out, 0, True) == 21
    assert [(a, b) for a, b, _ in out] == [(2, 21)]
