"""Issue 26, point 9: PII detection is linear in the size of one chunk, and detects exactly what
it did before.

Two things made it quadratic: the e-mail rule read a run of local-part characters once per
start position in it (``"x" * n + "@"``), and a scan that may still be continued (``regex``
partial matching, the streaming path) costs time in proportion to the rest of the string at
every position it tries, so one 160 KB delta of ordinary words took seconds.

No timing here (the numbers are in ``benchmarks/rows_pii.py``). Linearity is checked by what
can be counted exactly:

* the instructions the ``regex`` engine executes for every built-in pattern over adversarial
  texts of n and 4n characters (valgrind's callgrind, repeatable to a few instructions): linear
  work grows 4×, quadratic 16× (skipped, with the reason, where valgrind is not installed);
* the stretch of text each continuable scan reads when a 1 MB delta is fed: at most the held
  text plus one piece, whatever the delta's size.

The card rule's costliest text (``"1 1 1 …"``) is counted the same way, end to end through
``find_all`` and ``HoldbackScanner``; its equivalence with the generic scan is in
``test_pii_cards.py``.

Equivalence: the new e-mail pattern against the old one on every match, partial match and full
match (hypothesis, an alphabet of the characters that matter), and streamed == one-shot over
deltas longer than a piece.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit_operators import HoldbackScanner, PIIDetector, _match, _redact, find_all
from streamkit_operators._model_check import _FENCE
from streamkit_operators._pii import _DETECTORS, pii_rules
from streamkit_operators._system_prompt_scrubber import _ends_sentence

#: The e-mail rule before the fix: the reference for what must be detected.
OLD_EMAIL = regex.compile(
    r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![A-Za-z0-9-])")
NEW_EMAIL = regex.compile(_DETECTORS["email"][0])

#: Adversarial texts: the unit repeated to n characters, optionally with a prefix/suffix.
ADVERSARIAL = [
    ("", "a", ""), ("", "x", "@"), ("", "a.", "@"), ("a@", "a.", ""), ("", "@", ""),
    ("", "1", ""), ("", "1 ", ""), ("", " ", ""), ("", ".", ""), ("", "\n", ""),
    ("", "a.b-c_d%e+f@", ""), ("", "ab ", ""), ("", "1.", ""), ("", "a:", ""), ("", "GB12", ""),
    ("http://", ".", ""), ("dob: ", "1", ""), ("", "f:", ""), ("", "sk-", ""),
]


def _adversarial(prefix: str, unit: str, suffix: str, n: int) -> str:
    return prefix + (unit * (n // len(unit) + 1))[:n] + suffix


# -- equivalence -----------------------------------------------------------------------------

_EMAIL_TEXT = st.text(alphabet="ab1.-_%+@ X\n:", max_size=24)


def _spans(pattern: regex.Pattern[str], s: str, pos: int, partial: bool) -> list[Any]:
    return [(m.span(), m.partial) for m in pattern.finditer(s, pos, partial=partial)]


@settings(max_examples=3000, deadline=None)
@given(s=_EMAIL_TEXT, data=st.data())
def test_email_pattern_matches_exactly_what_the_old_one_did(s: str, data: Any) -> None:
    pos = data.draw(st.integers(0, len(s)))
    for partial in (False, True):
        assert _spans(NEW_EMAIL, s, pos, partial) == _spans(OLD_EMAIL, s, pos, partial)
    for at in range(pos, len(s) + 1):
        for how in ("match", "fullmatch"):
            old = getattr(OLD_EMAIL, how)(s, at, partial=True)
            new = getattr(NEW_EMAIL, how)(s, at, partial=True)
            assert (new and (new.span(), new.partial)) == (old and (old.span(), old.partial))


@pytest.mark.parametrize("text", [
    pytest.param("a@b.com.x@y.org", id="a-match-right-after-a-match"),
    pytest.param("mail ada@mail.example.co.uk. or x.y+z@a-b.io!", id="sentence"),
    pytest.param("a@b.c.d1.com.x1", id="last-top-level-label-wins"),
    pytest.param("a@b..com a@b.c a@b.com-x", id="no-domain"),
])
def test_email_examples_agree(text: str) -> None:
    assert _spans(NEW_EMAIL, text, 0, False) == _spans(OLD_EMAIL, text, 0, False)


_STREAM_TEXT = st.lists(st.sampled_from(
    ["ada@example.com", "4111 1111 1111 1111", "123-45-6789", " ", "word", "x" * 300, "@", ".",
     "10.0.0.1", "(555) 123-4567", "\n", "sk-proj-abcdefghijklmnopqrstuv", "a.b."]),
    max_size=40).map("".join)


@settings(max_examples=60, deadline=None)
@given(text=_STREAM_TEXT, data=st.data())
def test_deltas_longer_than_a_piece_find_what_one_shot_finds(text: str, data: Any) -> None:
    rules = pii_rules()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=3)))
    scanner = HoldbackScanner(rules, max_hold=4096)
    out, found = [], []
    for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
        commit = scanner.feed(text[a:b])
        out.append(commit.text)
        found += [(f.rule.name, f.start, f.end) for f in commit.findings]
    commit = scanner.finish()
    out.append(commit.text)
    found += [(f.rule.name, f.start, f.end) for f in commit.findings]
    assert "".join(out) == text
    assert found == [(f.rule.name, f.start, f.end) for f in find_all(rules, text)]


def test_a_long_delta_is_redacted_as_a_whole_text_is() -> None:
    body = ("lorem ipsum ada@example.com dolor 4111 1111 1111 1111 sit " * 2000)
    pii = PIIDetector()
    scanner = HoldbackScanner(pii.rules)
    commit = scanner.feed(body)
    rest = scanner.finish()
    assert commit.text + rest.text == body
    streamed = [(f.start, f.end) for f in commit.findings + rest.findings]
    assert streamed == [(f.start, f.end) for f in find_all(pii.rules, body)]
    assert len(streamed) == 4000


@settings(max_examples=2000, deadline=None)
@given(s=st.text(alphabet=".!?。 \n\"')]a\u3000\t", max_size=10))
def test_sentence_end_is_the_old_regex(s: str) -> None:
    assert _ends_sentence(s) == bool(re.search(r"[.!?。！？\n][\"')\]]*\s*$", s))


@settings(max_examples=2000, deadline=None)
@given(s=st.text(alphabet="`a \n{}-", max_size=16))
def test_fence_is_the_old_regex(s: str) -> None:
    old = re.search(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```", s, re.S)
    new = _FENCE.search(s)
    assert (new and (new.span(), new.group(1))) == (old and (old.span(), old.group(1)))


# -- linearity -------------------------------------------------------------------------------


def test_continuable_scans_of_a_1mb_delta_read_a_bounded_stretch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scan that partial-matches (``final=False``) reads at most the held text plus one
    piece: the quadratic cost of a partial scan is then bounded per piece. Before the fix one
    scan read the whole megabyte."""
    reads: list[int] = []
    real = _match.scan

    def counting(pattern: Any, validate: Any, s: str, pos: int, n: int, out: Any,
                 origin: int, final: bool) -> int:
        if not final:
            reads.append(n - pos)
        return real(pattern, validate, s, pos, n, out, origin, final)

    monkeypatch.setattr(_redact, "scan", counting)
    text = _adversarial("", "ab ", "", 1_000_000)
    scanner = HoldbackScanner(pii_rules(), max_hold=1024, lookbehind=64)
    commit = scanner.feed(text)
    assert commit.text + scanner.finish().text == text
    bound = 1024 + 64 + _redact._PIECE
    assert reads and max(reads) <= bound, f"a scan read {max(reads)} characters (bound {bound})"


_CHILD = textwrap.dedent("""
    import json, sys, regex
    patterns, cases, n = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
    compiled = [regex.compile(p) for p in patterns]
    texts = [p + (u * (n // len(u) + 1))[:n] + s for p, u, s in cases]
    for pattern in compiled:
        for text in texts:
            for _ in pattern.finditer(text):
                pass
""")


def _instructions(patterns: list[str], n: int, tmp: Path) -> int:
    script = tmp / "child.py"
    script.write_text(_CHILD)
    out = subprocess.run(
        [shutil.which("valgrind") or "valgrind", "--tool=callgrind",
         "--callgrind-out-file=/dev/null", sys.executable, str(script),
         json.dumps(patterns), json.dumps(ADVERSARIAL), str(n)],
        capture_output=True, text=True, timeout=900, env={"PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", out.stderr)
    assert out.returncode == 0 and found, out.stderr[-2000:]
    return int(found.group(1))


@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed: the instruction counts need callgrind")
def test_regex_engine_work_grows_linearly(tmp_path: Path) -> None:
    """Instructions of every built-in pattern over every adversarial text, at 0, n and 4n
    characters: linear work grows 4× from n to 4n, quadratic 16×. The old e-mail pattern
    alone grew ~16× here."""
    patterns = [p for p, _ in _DETECTORS.values()]
    base, small, large = (_instructions(patterns, n, tmp_path) for n in (0, 2000, 8000))
    growth = (large - base) / (small - base)
    assert growth < 6, f"engine work grew {growth:.1f}x from 2,000 to 8,000 characters"


_CARD_CHILD = textwrap.dedent("""
    import sys
    from streamkit_operators import HoldbackScanner, find_all
    from streamkit_operators._cards import luhn_valid
    from streamkit_operators._pii import pii_rules
    from streamkit_operators._redact import Rule
    which, n = sys.argv[1], int(sys.argv[2])
    if which == "card":
        rules = pii_rules(["credit-card"])
    elif which == "generic-card":  # the same rule through the generic validated scan
        card = pii_rules(["credit-card"])[0]
        rules = [Rule(card.name, card.pattern, validate=lambda s: luhn_valid(s))]
    else:
        rules = [r for r in pii_rules() if r.name != "credit-card"]
    text = (sys.argv[3] * (n // len(sys.argv[3]) + 1))[:n]
    find_all(rules, text)
    scanner = HoldbackScanner(rules)
    scanner.feed(text)
    scanner.finish()
""")


def _card_instructions(which: str, unit: str, n: int, tmp: Path) -> int:
    script = tmp / "card_child.py"
    script.write_text(_CARD_CHILD)
    out = subprocess.run(
        [shutil.which("valgrind") or "valgrind", "--tool=callgrind",
         "--callgrind-out-file=/dev/null", sys.executable, str(script), which, str(n), unit],
        capture_output=True, text=True, timeout=900, env={"PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", out.stderr)
    assert out.returncode == 0 and found, out.stderr[-2000:]
    return int(found.group(1))


@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed: the instruction counts need callgrind")
def test_card_rule_is_linear_and_cheap_on_runs_of_single_digits(tmp_path: Path) -> None:
    """``"1 1 1 …"``: every digit starts a card candidate. The card rule's work (one-shot and
    streamed) per character is the same from n to 4n characters (linear), and at most 10× (2-4×
    measured) what the ten other built-in rules cost together on ordinary words. The generic
    validated scan (what the card rule used before) costs far more per character here."""
    _card_instructions("card", "1 ", 10, tmp_path)  # writes the byte code caches first

    def per_char(which: str, unit: str, n: int) -> float:
        """Instructions per character from n to 4n characters (imports cancel out)."""
        small = _card_instructions(which, unit, n, tmp_path)
        return (_card_instructions(which, unit, 4 * n, tmp_path) - small) / (3 * n)

    small, large = per_char("card", "1 ", 2000), per_char("card", "1 ", 8000)
    assert large < 1.5 * small, f"card work per character grew {large / small:.1f}x"
    others = per_char("others", "the order ships today ", 2000)
    assert large < 10 * others, f"card: {large:.0f} instructions/char, others {others:.0f}"
    generic = per_char("generic-card", "1 ", 500)
    assert generic > 10 * large, f"generic scan {generic:.0f}/char, card finder {large:.0f}"
