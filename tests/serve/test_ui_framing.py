"""The chat route's framing (``_app.UIFraming``) writes a text delta straight as bytes, beside
``UIMessageStream.convert``'s general rule: the two must give the same frame for every text
delta, and the same typed error for text JSON cannot hold (a lone surrogate)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit.chunks import ReasoningDelta, ReasoningDeltaPayload, TextDelta
from streamkit.errors import InvalidArgument
from streamkit.serve._app import UIFraming
from streamkit.serve._ui_stream import UIMessageStream

_ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


def _general(chunk: TextDelta) -> bytes:
    (part,) = UIMessageStream().convert(chunk)
    return b"data: " + msgspec.json.encode(part) + b"\n\n"


@given(ident=_ANY_TEXT, text=_ANY_TEXT)
def test_a_text_delta_frame_is_the_general_rules_frame(ident: str, text: str) -> None:
    chunk = TextDelta(id=ident, text=text, run_id="r", from_="AGENT")
    try:
        expected = _general(chunk)
    except (UnicodeEncodeError, ValueError, TypeError):
        with pytest.raises(InvalidArgument, match="cannot be encoded"):
            UIFraming().frame(chunk)
        return
    assert UIFraming().frame(chunk) == expected


def test_a_lone_surrogate_in_a_delta_is_a_typed_error() -> None:
    chunk = TextDelta(id="t", text="a\ud800b", run_id="r", from_="AGENT")
    with pytest.raises(InvalidArgument, match="'text-delta' cannot be encoded"):
        UIFraming().frame(chunk)


def test_a_subclass_of_a_chunk_class_converts_as_its_class() -> None:
    # convert() finds a chunk's rule by its exact class; a subclass (not in the table) takes
    # the rule of the first class of its MRO that has one, as isinstance tests would give it.
    class Annotated(ReasoningDelta, kw_only=True, frozen=True):
        pass

    chunk = Annotated(payload=ReasoningDeltaPayload(id="r", text="why"), run_id="r",
                      from_="AGENT")
    plain = ReasoningDelta(id="r", text="why", run_id="r", from_="AGENT")
    assert UIMessageStream().convert(chunk) == UIMessageStream().convert(plain) == [
        {"type": "reasoning-delta", "id": "r", "delta": "why"}]
