"""PII rows: the time ``PIIDetector`` takes over one streamed delta, per KB, as the delta grows,
beside the code before issue 26 (point 9) measured in the same run.

What belongs here: the text, the old scanner (the e-mail rule before the fix and a ``feed`` that
scans a whole delta at once, as ``HoldbackScanner.feed`` did) and the group. The µs/chunk
column of these rows is **µs per KB** of the delta (``chunks`` = KB), so a linear scanner shows
the same figure at every size.

* **old · N KB** (baseline): the scanner before the fix, all built-in types. Quadratic: a
  continuable (``partial``) regex scan costs the ``regex`` engine the rest of the string at
  every position it tries, and the e-mail rule tried almost every position. Not run at 1 MB
  (~270 s, issue 26).
* **new · N KB**: ``HoldbackScanner`` with ``PIIDetector().rules`` today; its ratio to the old
  row of the same size is the speed-up.
* **new · 1 MB**: against **new** at the smallest size, so its ratio *is* the growth of the cost
  per KB (1.0× = linear).

The text is ordinary words, an e-mail address at the start, a card or a phone number about
every 1,000 characters; every row must return the number of findings ``find_all`` gives, so a row
that skipped work fails.

A second group is the costliest text per character for the card rule, ``"1 1 1 …"`` (every
digit starts a candidate), one delta through ``HoldbackScanner`` with the card rule alone:

* **generic · N KB** (baseline): the card rule through the generic scan of a validated rule
  (``_match._scan_validated``), what it used before ``_cards.scan_cards``: a regex search per
  start and ~36 ``fullmatch`` calls for a shorter valid card in each failed one. Run at the
  smallest old size only (~45 µs per character).
* **card · N KB**: the card rule today (``_cards.scan_cards``, one pass per run of digits).
"""

from __future__ import annotations

import random
from typing import Any

from streamkit_operators import HoldbackScanner, PIIDetector, Rule, find_all
from streamkit_operators._cards import luhn_valid
from streamkit_operators._pii import pii_rules
from streamkit_operators._redact import Commit

from .harness import Case, Group

__all__ = ["pii_groups", "words", "OLD_EMAIL", "single_digits"]

#: The e-mail pattern before issue 26 (quadratic in a run of local-part characters).
OLD_EMAIL = r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![A-Za-z0-9-])"

_WORDS = ("the order ships today and the invoice follows by mail please keep this number for "
          "your records thanks again for choosing us").split()


def words(n: int) -> str:
    """``n`` characters of words: an e-mail address first, then a card or a phone number about
    every 1,000 characters (no more addresses: the old scanner was quadratic in the text after
    the last one)."""
    rng = random.Random(26)
    out = ["mail ada.lovelace@example.com"]
    size = len(out[0])
    while size < n:
        word = rng.choice(_WORDS)
        if rng.random() < 0.02:
            word = rng.choice(["4111 1111 1111 1111", "(555) 123-4567"])
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n]


def single_digits(n: int) -> str:
    """``n`` characters of ``"1 1 1 …"``: the card rule's costliest text per character."""
    return ("1 " * (n // 2 + 1))[:n]


class _OldScanner(HoldbackScanner):
    """``HoldbackScanner`` as it was: one delta scanned at once, however long."""

    __slots__ = ()

    def feed(self, text: str) -> Commit:
        before = self._offset + len(self._buf)
        view = self._add(text)
        return self._commit(view, before, final=False)


def _old_rules(rules: list[Rule]) -> list[Rule]:
    return [Rule(r.name, OLD_EMAIL, starts=r.starts) if r.name == "email" else r
            for r in rules]


def _run(cls: type[HoldbackScanner], rules: list[Rule], text: str, max_hold: int) -> int:
    scanner = cls(rules, max_hold=max_hold)
    return len(scanner.feed(text).findings) + len(scanner.finish().findings)


def pii_groups(sizes_kb: tuple[int, ...], old_sizes_kb: tuple[int, ...], repeat: int
               ) -> list[Group]:
    """One group: old and new at ``old_sizes_kb``, new alone at the other sizes."""
    pii = PIIDetector()
    new_rules, old_rules = list(pii.rules), _old_rules(list(pii.rules))
    smallest = min(sizes_kb)
    cases: list[Case] = []
    for kb in sizes_kb:
        text = words(kb * 1024)
        found = len(find_all(new_rules, text))
        label = f"{kb // 1024} MB" if kb >= 1024 and kb % 1024 == 0 else f"{kb} KB"

        def new(text: str = text) -> Any:
            return _run(HoldbackScanner, new_rules, text, pii.max_hold)

        if kb in old_sizes_kb:
            def old(text: str = text) -> Any:
                return _run(_OldScanner, old_rules, text, pii.max_hold)

            cases.append(Case(f"old · {label}", old, chunks=kb, expect=found,
                              note="scanner and e-mail rule before issue 26, µs per KB"))
            baseline = f"old · {label}"
        else:
            baseline = f"new · {smallest} KB"
        cases.append(Case(f"new · {label}", new, chunks=kb, expect=found,
                          baseline=None if baseline == f"new · {label}" else baseline,
                          note="HoldbackScanner with PIIDetector().rules, µs per KB"))
    groups = [Group("pii · PIIDetector over one delta (µs per KB)", cases, repeat=repeat)]
    return groups + [_card_group(sizes_kb, min(old_sizes_kb, default=min(sizes_kb)), repeat)]


def _card_group(sizes_kb: tuple[int, ...], old_kb: int, repeat: int) -> Group:
    card = pii_rules(["credit-card"])[0]
    # The same rule, but not recognised as the card rule: it takes the generic validated scan.
    generic = [Rule(card.name, card.pattern, validate=lambda s: luhn_valid(s))]
    cases: list[Case] = []
    for kb in sorted({*sizes_kb, old_kb}):
        text = single_digits(kb * 1024)
        found = len(find_all([card], text))
        label = f"{kb // 1024} MB" if kb >= 1024 and kb % 1024 == 0 else f"{kb} KB"
        if kb == old_kb:
            def old(text: str = text) -> Any:
                return _run(HoldbackScanner, generic, text, 1024)

            cases.append(Case(f"generic · {label}", old, chunks=kb, expect=found,
                              note="card rule through the generic validated scan, µs per KB"))

        def new(text: str = text) -> Any:
            return _run(HoldbackScanner, [card], text, 1024)

        cases.append(Case(f"card · {label}", new, chunks=kb, expect=found,
                          baseline=f"generic · {old_kb} KB",
                          note='card rule over "1 1 1 …" (_cards.scan_cards), µs per KB'))
    return Group('pii · card rule over "1 1 1 …" (µs per KB)', cases, repeat=repeat)
