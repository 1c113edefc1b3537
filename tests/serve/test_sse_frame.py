"""``_mastra.sse_frame``: Mastra's frame of a chunk, with U+2028/U+2029 escaped as its server
writes them (a JavaScript client splitting on them would otherwise cut an event)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from streamkit.chunks import TextDelta
from streamkit.serve._mastra import sse_frame

_SPECIAL = "\u2028\u2029\u2027\u202a\u2000\u20ac\u2600\n\"\\"
# Text around a character whose UTF-8 starts E2 80 (U+2000..U+203F, the line separators among
# them) or E2 (U+2xxx), or another that JSON escapes.
_TEXT = st.tuples(st.text(max_size=10), st.sampled_from(_SPECIAL), st.text(max_size=10)).map(
    "".join)


@given(_TEXT)
def test_a_frame_holds_the_text_and_no_raw_line_separator(text: str) -> None:
    frame = sse_frame(TextDelta(id="t", text=text, run_id="r", from_="AGENT"))
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    body = frame[len(b"data: "):-2]
    assert "\u2028".encode() not in body and "\u2029".encode() not in body
    assert b"\n" not in body
    assert json.loads(body)["payload"]["text"] == text
