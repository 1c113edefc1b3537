"""``PartialJSON`` (issue 27, point 6): over random JSON documents split at random places, the
values it shows are a monotone sequence (each extends the one before) ending in the document's
value. (Its speed against re-parsing the text per delta: ``benchmarks/bench_partial_json.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit._partial_json import PartialJSON

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20)
_documents = st.one_of(st.dictionaries(st.text(max_size=6), _values, max_size=5),
                       st.lists(_values, max_size=5))


def extends(before: Any, after: Any) -> bool:
    """``after`` shows everything ``before`` showed, and maybe more: objects gain keys, arrays
    gain elements, strings grow at their end; each shown part extends the one it was."""
    if isinstance(before, dict):
        return isinstance(after, dict) and all(
            k in after and extends(v, after[k]) for k, v in before.items())
    if isinstance(before, list):
        return isinstance(after, list) and len(before) <= len(after) and all(
            extends(b, a) for b, a in zip(before, after))
    if isinstance(before, str):
        return isinstance(after, str) and after.startswith(before)
    return type(before) is type(after) and before == after


def shown(pieces: list[str]) -> list[Any]:
    parser = PartialJSON()
    out = [parser.snapshot() for piece in pieces if parser.feed(piece)]
    assert parser.is_complete and not parser.is_failed
    return out


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


@settings(max_examples=300, deadline=None)
@given(doc=_documents, cuts=st.lists(st.integers(0, 10**6), max_size=40),
       indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_partials_are_monotone_and_end_in_the_document(doc: Any, cuts: list[int],
                                                       indent: int | None,
                                                       ascii_only: bool) -> None:
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
    values = shown(split(text, cuts))
    assert values, "a document always shows something"
    for before, after in zip(values, values[1:]):
        assert extends(before, after), (before, after)
        assert before != after  # a change is reported only when there is one
    assert values[-1] == json.loads(text)


@given(doc=_documents)
def test_one_character_at_a_time_matches_one_piece(doc: Any) -> None:
    text = json.dumps(doc, ensure_ascii=True)  # escapes everywhere, \\u pairs split too
    assert shown(list(text))[-1] == shown([text])[-1] == doc


@pytest.mark.parametrize("pieces,expected", [
    pytest.param(['{"age": 4', '2}'], [{}, {"age": 42}], id="a-number-shows-once-complete"),
    pytest.param(['{"ok": tr', 'ue}'], [{}, {"ok": True}], id="a-literal-shows-once-complete"),
    pytest.param(['{"na', 'me": "A', 'da"}'], [{}, {"name": "A"}, {"name": "Ada"}],
                 id="a-key-shows-with-its-value"),
    pytest.param(['{"a": [', '1, {"b": "x', '"}]}'],
                 [{"a": []}, {"a": [1, {"b": "x"}]}], id="containers-show-when-opened"),
    pytest.param(['{"e": "\\ud83d', '\\ude00"}'], [{"e": ""}, {"e": "\U0001F600"}],
                 id="a-surrogate-pair-split-across-pieces"),
    pytest.param(['{"t": "a\\', 'nb"}'], [{"t": "a"}, {"t": "a\nb"}],
                 id="an-escape-split-across-pieces"),
    pytest.param(['```json\n{"a": 1', '}\n```'], [{}, {"a": 1}], id="inside-a-markdown-fence"),
    pytest.param(['Sure! [', ']', ' done'], [[]], id="text-around-the-document-is-skipped"),
])
def test_what_is_shown_when(pieces: list[str], expected: list[Any]) -> None:
    parser = PartialJSON()
    got = [parser.snapshot() for piece in pieces if parser.feed(piece)]
    assert got == expected


@pytest.mark.parametrize("text", ['{"a": 01}', '{"a" 1}', '[1,]', '{"a": tru}', '[1}',
                                  '{"a": "\\x"}', '{"a": "\\u12g4"}'])
def test_text_that_is_not_json_stops_it(text: str) -> None:
    parser = PartialJSON()
    parser.feed(text)
    assert parser.is_failed and not parser.is_complete
    assert parser.feed('"more"') is False  # it reads no more


def test_snapshots_do_not_change_when_parsing_goes_on() -> None:
    parser = PartialJSON()
    parser.feed('{"a": [1, {"b": "x')
    first = parser.snapshot()
    parser.feed('yz"}, 2], "c": "d"}')
    assert first == {"a": [1, {"b": "x"}]}
    assert parser.snapshot() == {"a": [1, {"b": "xyz"}, 2], "c": "d"}
