"""The detection view (``_fold``) and scanning on it: look-alike characters fold, invisible ones
go, offsets map back to the original; streamed detection equals one-shot detection at every
split, and a scanner with released context never repeats it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit_operators import HoldbackScanner, Rule, find_all
from streamkit_operators._fold import fold, fold_char
from streamkit_operators._pii import pii_rules

RULES = pii_rules()

#: Characters that read as others (or as nothing): what an attacker rewrites a secret with.
LOOKALIKES = {
    "0": "０٠۰०", "1": "１١۱१", "4": "４٤۴४", "@": "＠", "s": "ѕ", "a": "а", "e": "е",
    "o": "о", " ": "\u00a0\u202f\u2007\u3000", "-": "\u2010\u2011\u2013\u2212\uff0d",
    ".": "\uff0e\u3002",
}
INVISIBLE = "\u200b\u200c\u200d\u00ad\u2060\ufeff"


def test_view_of_lookalikes() -> None:
    assert fold("４１１１\u00a0١١١١").text == "4111 1111"
    assert fold("ada＠example.com").text == "ada@example.com"
    assert fold("ѕk-live").text == "sk-live"
    assert fold("41\u200b11\u00ad").text == "4111"
    assert fold("ﬁ").text == "fi"
    assert fold("naïve 日本").offsets is None  # NFKC-stable, nothing to fold: its own view


@given(st.text(max_size=40))
def test_view_is_per_character(text: str) -> None:
    """Folding a text whole equals folding each character: the streamed view is the one-shot
    view, and every view character maps to the original character it came from."""
    view, index = fold(text)
    assert view == "".join(fold_char(c) for c in text)
    if index is not None:
        assert len(index) == len(view)
        assert index == sorted(index)
        for i, o in enumerate(index):
            assert view[i] in fold_char(text[o])


SECRETS = ["4111 1111 1111 1111", "ada.lovelace@example.com", "sk-proj-abcdefghijklmnopqrstuv",
           "123-45-6789", "(555) 123-4567", "GB82 WEST 1234 5698 7654 32"]


@st.composite
def disguised(draw: st.DrawFn) -> str:
    secret = draw(st.sampled_from(SECRETS))
    out = []
    for c in secret:
        if c in LOOKALIKES and draw(st.booleans()):
            c = draw(st.sampled_from(LOOKALIKES[c]))
        out.append(c)
        if draw(st.integers(0, 5)) == 0:
            out.append(draw(st.sampled_from(INVISIBLE)))
    return "".join(out)


def _stream(rules: list[Rule], pieces: list[str], context: str = ""
            ) -> tuple[str, list[tuple[str, int, int]]]:
    scanner = HoldbackScanner(rules, context=context)
    text, found = "", []
    for piece in pieces:
        c = scanner.feed(piece)
        text += c.text
        found += [(f.rule.name, f.start, f.end) for f in c.findings]
    c = scanner.finish()
    text += c.text
    found += [(f.rule.name, f.start, f.end) for f in c.findings]
    return text, sorted(found)


@settings(max_examples=150, deadline=None)
@given(disguised(), st.text(alphabet="ab .\n", max_size=6), st.data())
def test_disguised_secret_found_streamed_and_at_once(secret: str, filler: str,
                                                      data: st.DataObject) -> None:
    whole = f"x {filler} {secret} {filler}y"
    once = sorted((f.rule.name, f.start, f.end) for f in find_all(RULES, whole))
    assert once, f"nothing found in {whole!r}"
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(whole) - 1)), max_size=6)))
    pieces = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)])]
    text, streamed = _stream(RULES, pieces)
    assert text == whole
    assert streamed == once


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SECRETS), st.data())
def test_context_is_never_repeated(secret: str, data: st.DataObject) -> None:
    """A secret split between released context and new text is found, starting in the context
    (negative offset); the commits give back exactly the new text."""
    cut = data.draw(st.integers(1, len(secret) - 1))
    context, rest = "card " + secret[:cut], secret[cut:] + " done"
    text2, found2 = _stream(RULES, [rest], context=context)
    assert text2 == rest
    assert any(s < 0 < e for _, s, e in found2), (context, rest, found2)
