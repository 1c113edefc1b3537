r"""The detection view of a text: what guards match their rules against.

A secret written with look-alike characters is still the secret to the person reading it:
``４１１１ １１１１ …`` (full-width digits), ``4111\u200b1111…`` (a zero-width space inside),
``ada＠example.com`` (a full-width at sign), ``ѕk-live_…`` (a Cyrillic ``ѕ``). Guards therefore
match their rules against a *folded* view of the text and map what they find back to the
original characters, so a redaction replaces exactly the characters the reader would see.

The view is built one character at a time — so folding a text in pieces gives the same view as
folding it whole, which is what lets a streamed guard agree with one-shot detection on every
input. Each character becomes:

* nothing, when it is invisible: format characters (category ``Cf``: zero-width space, joiner
  and non-joiner, soft hyphen, bidi controls, tag characters), the combining grapheme joiner,
  variation selectors and the Hangul fillers;
* otherwise its compatibility normalization (NFKC of the character alone: full-width forms,
  ligatures, no-break and other typographic spaces), and then, per resulting character:
  any decimal digit → its ASCII digit (Arabic-Indic ``٤`` → ``4``), any space separator → `` ``,
  any dash → ``-``, the ideographic full stop, middle dots and bullets → ``.``, and the Cyrillic
  and Greek letters that look like Latin ones → those Latin letters (``ѕ`` → ``s``, ``о`` →
  ``o``, ``Α`` → ``A``).

What belongs here: the view and its offset map. What does not: matching (``_redact``) and what
guards do with what they find.

Text that needs no folding (all ASCII, or NFKC-stable with none of the characters above) is its
own view: ``fold`` returns it with ``offsets=None`` after one C-level check, so ordinary text pays
almost nothing.
"""

from __future__ import annotations

import unicodedata
from typing import NamedTuple

import regex

__all__ = ["Folded", "fold", "fold_char"]

#: Latin look-alikes (Cyrillic and Greek letters, dotless i/j) → the Latin letter a reader sees.
_HOMOGLYPHS: dict[str, str] = dict(zip(
    "аеорсухѕіјԁԛԝһӏкАВЕКМНОРСТХЅІЈҮԚԜҺӀ"
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοναρικυıȷ",
    "aeopcyxsijdqwhlkABEKMHOPCTXSIJYQWHl"
    "ABEZHIKMNOPTYXovapikuij", strict=True))

#: Characters folded besides NFKC's own changes (the fast path looks for these).
_OTHER = {"\u3002": ".", "\u2212": "-", "\u2043": "-", "\ufe63": "-",
          # Middle dots and bullets read as dots between digit groups (4111·1111·…).
          "\u00b7": ".", "\u2022": ".", "\u2027": ".", "\u2219": ".", "\u22c5": ".",
          "\u30fb": ".", "\uff65": "."}

#: Invisible characters, removed from the view.
_INVISIBLE = regex.compile(
    r"[\p{Cf}\u034f\u115f\u1160\u3164\uffa0\u180b-\u180d\ufe00-\ufe0f\U000e0100-\U000e01ef]")

#: A text with none of these (and NFKC-stable) is its own view.
_SPECIAL = regex.compile(
    r"(?V1)[\p{Cf}\u034f\u115f\u1160\u3164\uffa0\u180b-\u180d\ufe00-\ufe0f"
    r"\U000e0100-\U000e01ef" + "".join(_HOMOGLYPHS) + "".join(_OTHER)
    + r"[[\p{Nd}\p{Zs}\p{Pd}]--[\x00-\x7f]]]")


class Folded(NamedTuple):
    """A text's detection view: ``text``, and ``offsets[i]`` = the offset in the original text
    of the character ``text[i]`` came from (``None`` when the view *is* the original)."""

    text: str
    offsets: list[int] | None


def _fold_one(c: str) -> str:
    if _INVISIBLE.match(c):
        return ""
    out = []
    for r in unicodedata.normalize("NFKC", c):
        if r in _HOMOGLYPHS:
            r = _HOMOGLYPHS[r]
        elif r in _OTHER:
            r = _OTHER[r]
        elif not r.isascii():
            category = unicodedata.category(r)
            if category == "Nd":
                r = str(unicodedata.decimal(r))
            elif category == "Zs":
                r = " "
            elif category == "Pd":
                r = "-"
            elif category == "Cf":  # NFKC can yield one (rare): invisible all the same
                r = ""
        out.append(r)
    return "".join(out)


#: Folded characters seen so far (bounded: a hostile text cannot grow it without limit).
_CACHE: dict[str, str] = {}
_CACHE_MAX = 65_536


def fold_char(c: str) -> str:
    """The view of one character (``""`` for an invisible one).

    Example:
        >>> fold_char("４"), fold_char("\u200b"), fold_char("ѕ"), fold_char("a")
        ('4', '', 's', 'a')
    """
    folded = _CACHE.get(c)
    if folded is None:
        folded = _fold_one(c)
        if len(_CACHE) < _CACHE_MAX:
            _CACHE[c] = folded
    return folded


def fold(text: str) -> Folded:
    """The detection view of ``text`` with its offset map.

    Example:
        >>> fold("4111\u200b１１１")
        Folded(text='4111111', offsets=[0, 1, 2, 3, 5, 6, 7])
        >>> fold("plain text")
        Folded(text='plain text', offsets=None)
    """
    if text.isascii() or (_SPECIAL.search(text) is None
                          and unicodedata.is_normalized("NFKC", text)):
        return Folded(text, None)
    out: list[str] = []
    index: list[int] = []
    changed = False
    for i, c in enumerate(text):
        f = _CACHE.get(c)
        if f is None:
            f = fold_char(c)
        if f == c:
            out.append(c)
            index.append(i)
            continue
        changed = True
        out.append(f)
        index.extend([i] * len(f))
    if not changed:
        return Folded(text, None)
    return Folded("".join(out), index)
