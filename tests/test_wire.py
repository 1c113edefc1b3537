"""Wire formats: Mastra's real streams, SSE split anywhere, JSON lines, MessagePack, errors."""

import json
import random
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamkit import wire
from streamkit.chunks import (
    DataChunk,
    File,
    Finish,
    StepFinish,
    TextDelta,
    ToolCall,
    TripwireChunk,
)
from streamkit.errors import ChunkDecodeError, InvalidType
from streamkit.wire import SSEEvent, SSEParser

# Real Mastra 1.71.0 recordings, kept in the repository (tests/fixtures/mastra).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MASTRA_FIXTURES = sorted((FIXTURES / "mastra").glob("*.jsonl"))
OWN_FIXTURES = sorted((Path(__file__).resolve().parent / "fixtures" / "chunks").glob("*.json"))


def mastra_lines() -> list[Any]:
    params = []
    for path in MASTRA_FIXTURES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            kind = json.loads(line)["type"]
            params.append(pytest.param(line, id=f"{path.stem}:{number}:{kind}"))
    return params


def test_shared_mastra_fixtures_are_present() -> None:
    names = {path.name for path in MASTRA_FIXTURES}
    assert {"text-only.jsonl", "tool-turn.jsonl"} <= names, f"looked in {FIXTURES}"


@pytest.mark.parametrize("line", mastra_lines())
def test_every_mastra_line_decodes_and_reencodes_to_equal_json(line: str) -> None:
    chunk = wire.decode(line)
    assert chunk.type == json.loads(line)["type"]
    assert json.loads(wire.encode(chunk)) == json.loads(line)
    assert json.loads(wire.encode_jsonl(chunk)) == json.loads(line)
    assert wire.decode_msgpack(wire.encode_msgpack(chunk)) == chunk
    assert wire.decode(line.encode()) == chunk  # bytes and str alike


def test_mastra_step_finish_fields_are_typed() -> None:
    lines = (FIXTURES / "mastra" / "text-only.jsonl").read_text().splitlines()
    finish = wire.decode(lines[-1])
    assert isinstance(finish, Finish)
    assert finish.payload.step_result.reason == "stop"
    assert finish.payload.step_result.is_continued is False
    assert finish.payload.output.text == "The quick brown fox jumps."
    assert finish.payload.output.usage.total_tokens == 17
    assert finish.payload.processor_retry_count == 0
    assert isinstance(wire.decode(lines[-2]), StepFinish)


# --- decode errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("data, match, attrs", [
    pytest.param(b'{"type":"text-deltaz","runId":"r","from":"AGENT","payload":{}}',
                 r"unknown chunk type 'text-deltaz'.*text-delta", {"chunk_type": "text-deltaz"},
                 id="unknown-type"),
    pytest.param(b'{"type":"text-delta","runId":"r","from":"AGENT","payload":{"id":"t","text":7}}',
                 r"invalid 'text-delta' chunk: Expected `str`, got `int` - at `\$.payload.text`",
                 {"chunk_type": "text-delta", "path": "$.payload.text"}, id="wrong-field-type"),
    pytest.param(b'{"type":"text-delta","payload":{"id":"t","text":7,"unknown":1}}',
                 r"Expected `str`, got `int` - at `\$.payload.text`",
                 {"chunk_type": "text-delta", "path": "$.payload.text"},
                 id="wrong-field-type-beside-unknown-key"),
    pytest.param(b'{"type":"finish","payload":{"stepResult":{"reason":"stop"},'
                 b'"output":{"usage":{"inputTokens":"many"}}}}',
                 r"`\$.payload.output.usage.inputTokens`",
                 {"chunk_type": "finish", "path": "$.payload.output.usage.inputTokens"},
                 id="wrong-nested-field-type"),
    pytest.param(b'{"type":"tool-call","payload":{"toolName":"t"}}',
                 r"missing required field `toolCallId`", {"chunk_type": "tool-call"},
                 id="missing-required-field"),
    pytest.param(b'{"type":"text-delta","payload":{"id":"t","text":"a"},"surprise":1}',
                 r"unknown field `surprise`", {"chunk_type": "text-delta", "path": "$"},
                 id="unknown-envelope-key"),
    pytest.param(b'{"type":"data-x","data":1,"transient":"yes"}', r"Expected `bool`",
                 {"chunk_type": "data-x", "path": "$.transient"}, id="data-chunk-wrong-type"),
    pytest.param(b'{"type":"text-delta",,}',
                 r"^malformed JSON: object keys must be strings \(byte 21\)$",
                 {"position": 21, "chunk_type": None}, id="malformed-json"),
    pytest.param(b'{"type":"text-delta","payload":{"id":"t"', r"malformed JSON.*truncated",
                 {"position": 40}, id="truncated-json"),
    pytest.param(b'{"type":"text-delta"} trailing', r"malformed JSON", {},
                 id="trailing-garbage"),
    pytest.param(b'[{"type":"text-delta"}]', r"expected a chunk object, got an array", {},
                 id="not-an-object"),
    pytest.param(b'{"payload":{}}', r"no string 'type' field", {}, id="missing-type"),
    pytest.param(b'{"type":3}', r"no string 'type' field \(got a number\)", {},
                 id="type-not-a-string"),
    pytest.param(b'{"type":"text-delta","payload":{"id":"t","text":"\xff"}}', r"UTF-8", {},
                 id="invalid-utf8"),
])
def test_bad_input_raises_chunk_decode_error(data: bytes, match: str,
                                             attrs: dict[str, Any]) -> None:
    with pytest.raises(ChunkDecodeError, match=match) as info:
        wire.decode(data)
    for name, value in attrs.items():
        assert getattr(info.value, name) == value


def test_msgpack_decode_errors_are_chunk_decode_errors() -> None:
    with pytest.raises(ChunkDecodeError, match="malformed MessagePack") as info:
        wire.decode_msgpack(b"\xc1")
    assert info.value.position == 0
    with pytest.raises(ChunkDecodeError, match="unknown chunk type 'nope'"):
        wire.decode_msgpack(msgspec.msgpack.encode({"type": "nope"}))


def with_dict_payload() -> TextDelta:
    # Chunks are frozen; ``replace`` does not check types, so this builds a malformed chunk.
    return msgspec.structs.replace(TextDelta(id="t", text="x"),
                                   payload={"id": "t", "text": "x"})


@pytest.mark.parametrize("value, match", [
    pytest.param({"type": "text-delta"}, "expected a chunk, got dict", id="dict"),
    pytest.param(with_dict_payload(), "TextDelta.payload must be TextDeltaPayload, got dict",
                 id="payload-replaced-by-a-dict"),
])
def test_encode_rejects_what_is_not_a_chunk(value: Any, match: str) -> None:
    with pytest.raises(InvalidType, match=match):
        wire.encode(value)
    with pytest.raises(InvalidType, match=match):
        wire.encode_msgpack(value)


# --- MessagePack -----------------------------------------------------------------------------


def test_msgpack_keeps_bytes_binary_even_with_extra_keys() -> None:
    chunk = File(data=b"\x00\x01binary", mime_type="application/octet-stream",
                 extra={"note": b"\x02"})
    back = wire.decode_msgpack(wire.encode_msgpack(chunk))
    assert back == chunk
    assert isinstance(back.payload.data, bytes)


# --- JSON lines ------------------------------------------------------------------------------


def test_decode_jsonl_skips_blank_lines_and_crlf() -> None:
    text = '{"type":"data-a","data":1}\r\n\r\n  \n{"type":"data-b","data":2}'
    assert wire.decode_jsonl(text) == [DataChunk("data-a", 1), DataChunk("data-b", 2)]


def test_decode_jsonl_names_the_bad_line() -> None:
    data = b'{"type":"data-a","data":1}\n\n{"type":"text-delta","payload":{"id":1,"text":"x"}}\n'
    with pytest.raises(ChunkDecodeError, match=r"^line 3: invalid 'text-delta'") as info:
        wire.decode_jsonl(data)
    assert info.value.line == 3
    assert info.value.chunk_type == "text-delta"
    assert info.value.path == "$.payload.id"


async def test_iter_jsonl_reads_a_stream_cut_anywhere() -> None:
    chunks = [wire.decode(line.values[0]) for line in mastra_lines()]
    body = b"".join(wire.encode_jsonl(c) for c in chunks)
    rng = random.Random(7)
    cuts = sorted(rng.sample(range(1, len(body)), 60))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    assert [c async for c in wire.iter_jsonl(aiter_of(pieces))] == chunks
    # the last line needs no newline
    assert [c async for c in wire.iter_jsonl(aiter_of([body.rstrip(b"\n")]))] == chunks


# --- SSE framing -----------------------------------------------------------------------------


SSE_BODY = (
    b"\xef\xbb\xbf: stream opened\r\n"
    b"retry: 2500\r\n"
    b'data: {"type":"text-delta","payload":{"id":"t","text":"w\xc3\xb6rld \xf0\x9f\x91\x8b"}}\r\n'
    b"\r\n"
    b"event: progress\r\n"
    b"id: 41\r\n"
    b"data:first line\r\n"
    b"data:  second line keeps one space\r\n"
    b"data\r\n"
    b"\r\n"
    b": keep-alive\n"
    b"unknown-field: ignored\n"
    b"id: bad\x00id\n"
    b"retry: soon\n"
    b"data: \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\r"
    b"\r"
    b"event: ignored-because-no-data\n"
    b"\n"
    b"data: [DONE]\n\n"
)
SSE_EVENTS = [
    SSEEvent('{"type":"text-delta","payload":{"id":"t","text":"w\u00f6rld \U0001F44B"}}',
             "message", ""),
    SSEEvent("first line\n second line keeps one space\n", "progress", "41"),
    SSEEvent("\u65e5\u672c\u8a9e", "message", "41"),
    SSEEvent("[DONE]", "message", "41"),
]


def feed_all(pieces: Iterable[bytes]) -> tuple[list[SSEEvent], SSEParser]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for piece in pieces:
        events += parser.feed_events(piece)
    parser.close()
    return events, parser


def test_sse_parser_follows_the_spec_in_one_read() -> None:
    events, parser = feed_all([SSE_BODY])
    assert events == SSE_EVENTS
    assert parser.retry == 2500  # "retry: soon" is not a number and is ignored
    assert parser.last_event_id == "41"  # an id containing NUL is ignored


@pytest.mark.parametrize("offset", [pytest.param(i, id=f"cut-at-{i}")
                                    for i in range(len(SSE_BODY) + 1)])
def test_sse_parser_split_at_every_byte_offset(offset: int) -> None:
    events, _ = feed_all([SSE_BODY[:offset], SSE_BODY[offset:]])
    assert events == SSE_EVENTS


def test_sse_parser_one_byte_reads() -> None:
    events, parser = feed_all(SSE_BODY[i:i + 1] for i in range(len(SSE_BODY)))
    assert events == SSE_EVENTS
    assert parser.retry == 2500


def test_sse_parser_feed_returns_data_strings() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n\ndata: b\n") == ["a"]
    assert parser.feed(bytearray(b"\n")) == ["b"]
    assert parser.feed(b"") == []


@pytest.mark.parametrize("ending", [
    pytest.param(b"\n", id="lf"), pytest.param(b"\r\n", id="crlf"), pytest.param(b"\r", id="cr"),
])
def test_sse_line_endings_are_equivalent(ending: bytes) -> None:
    body = ending.join([b"data: a", b"data: b", b"", b": c", b"data: d", b"", b""])
    events, _ = feed_all([body])
    assert [e.data for e in events] == ["a\nb", "d"]
    events, _ = feed_all(body[i:i + 1] for i in range(len(body)))
    assert [e.data for e in events] == ["a\nb", "d"]


@pytest.mark.parametrize("tail", [
    pytest.param(b"data: {\"type\":\"abort\"", id="cut-inside-data-line"),
    pytest.param(b"data: {\"type\":\"abort\",\"payload\":{}}\n", id="no-blank-line-after-data"),
    pytest.param(b"data: one\r\ndata: two\r\n", id="multi-line-data-not-finished"),
    pytest.param(b"data", id="bare-data-field-cut"),
])
def test_sse_close_raises_on_a_truncated_frame_with_data(tail: bytes) -> None:
    parser = SSEParser()
    assert parser.feed(b"data: ok\n\n" + tail) == ["ok"]
    with pytest.raises(ChunkDecodeError, match="ended inside an event"):
        parser.close()


@pytest.mark.parametrize("tail", [
    pytest.param(b"", id="clean-end"),
    pytest.param(b": a comment cut", id="cut-comment"),
    pytest.param(b"event: x\n", id="event-without-data"),
    pytest.param(b"id: 7", id="cut-id-field"),
])
def test_sse_close_accepts_an_end_without_pending_data(tail: bytes) -> None:
    parser = SSEParser()
    parser.feed(b"data: ok\n\n" + tail)
    parser.close()


def test_sse_invalid_utf8_becomes_replacement_characters() -> None:
    events, _ = feed_all([b"data: a\xffb\n\n"])
    assert events[0].data == "a\ufffdb"


def test_encode_sse_frames_one_chunk() -> None:
    chunk = TripwireChunk(reason="no", retry=False, processor_id="p", run_id="r", from_="AGENT")
    frame = wire.encode_sse(chunk)
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 2  # JSON never carries a raw newline
    assert SSEParser().feed(frame) == [wire.encode(chunk).decode()]


# --- iter_sse --------------------------------------------------------------------------------


async def aiter_of(pieces: Iterable[bytes],
                   closed: list[bool] | None = None) -> AsyncIterator[bytes]:
    try:
        for piece in pieces:
            yield piece
    finally:
        if closed is not None:
            closed.append(True)


def mastra_sse_body() -> tuple[bytes, list[Any]]:
    chunks = [wire.decode(param.values[0]) for param in mastra_lines()]
    body = b": hello\n\n" + b"".join(wire.encode_sse(c) for c in chunks)
    return body, chunks


async def test_iter_sse_decodes_mastra_streams_in_one_byte_reads() -> None:
    body, chunks = mastra_sse_body()
    got = [c async for c in wire.iter_sse(aiter_of(body[i:i + 1] for i in range(len(body))))]
    assert got == chunks


async def test_iter_sse_decodes_mastra_streams_cut_at_random_places() -> None:
    body, chunks = mastra_sse_body()
    body = body.replace(b"\n", b"\r\n")
    rng = random.Random(3)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(body)), 25))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
        assert [c async for c in wire.iter_sse(aiter_of(pieces))] == chunks


async def test_iter_sse_stops_at_done_and_closes_the_source() -> None:
    closed: list[bool] = []
    body = (wire.encode_sse(TextDelta(id="t", text="a")) + b"data: [DONE]\n\n"
            + wire.encode_sse(TextDelta(id="t", text="never read")))
    got = [c async for c in wire.iter_sse(aiter_of([body], closed))]
    assert [c.payload.text for c in got] == ["a"]
    assert closed == [True]


async def test_iter_sse_closes_the_source_when_the_consumer_stops_early() -> None:
    closed: list[bool] = []
    body = b"".join(wire.encode_sse(TextDelta(id="t", text=str(i))) for i in range(5))
    stream = wire.iter_sse(aiter_of([body[:40], body[40:]], closed))
    first = await anext(stream)
    assert first.payload.text == "0"
    await stream.aclose()
    assert closed == [True]


async def test_iter_sse_raises_on_a_truncated_final_frame() -> None:
    closed: list[bool] = []
    body = wire.encode_sse(TextDelta(id="t", text="a")) + b'data: {"type":"text-del'
    stream = wire.iter_sse(aiter_of([body], closed))
    assert (await anext(stream)).payload.text == "a"
    with pytest.raises(ChunkDecodeError, match="ended inside an event"):
        await anext(stream)
    assert closed == [True]


async def test_iter_sse_raises_on_an_invalid_chunk() -> None:
    body = b'data: {"type":"tool-call","payload":{"toolCallId":1,"toolName":"t"}}\n\n'
    with pytest.raises(ChunkDecodeError) as info:
        [c async for c in wire.iter_sse(aiter_of([body]))]
    assert info.value.chunk_type == "tool-call"
    assert info.value.path == "$.payload.toolCallId"


# --- builtins --------------------------------------------------------------------------------


def test_to_builtins_is_the_json_form() -> None:
    for path in OWN_FIXTURES:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert wire.to_builtins(wire.from_builtins(data)) == data, path.name


def test_decode_of_encode_is_identity_for_a_tool_call_with_nested_args() -> None:
    chunk = ToolCall(tool_call_id="c", tool_name="t",
                     args={"q": ["a", {"b": None, "c": 1.5, "d": True}], "extra": 1},
                     run_id="r", from_="AGENT")
    assert wire.decode(wire.encode(chunk)) == chunk


# --- the extra-keys rule: one definition, four inlined copies (issue 32) -----------------------

_ENCODERS = [wire.encode, wire.encode_sse, wire.encode_jsonl, wire.encode_msgpack]


def _rule_text(source: str, start: str) -> str:
    """The expression after ``start`` up to its closing ``):``, comments and spaces dropped."""
    lines = source[source.index(start) + len(start):].splitlines()
    text = ""
    for line in lines:
        text += line.split("#")[0].strip() + " "
        if line.split("#")[0].rstrip().endswith(":"):
            break
    return "".join(text.split()).rstrip(":")


@pytest.mark.parametrize("encoder", _ENCODERS, ids=lambda f: f.__name__)
def test_each_encoder_inlines_the_one_extra_keys_rule(encoder: Any) -> None:
    # The encoders copy the rule for speed (benchmarks/README.md, issue 32); a copy that drifts
    # from ``_writes_extra_keys`` fails here.
    import inspect

    rule = _rule_text(inspect.getsource(wire._writes_extra_keys), "return bool")
    copy = _rule_text(inspect.getsource(encoder), "if not ")
    assert copy == rule


_NESTED_EXTRA = (b'{"type":"step-finish","runId":"r","from":"AGENT","payload":{"output":'
                 b'{"usage":{"inputTokens":1},"hint":1},"stepResult":{"reason":"stop"}}}')


@pytest.mark.parametrize("encoder", _ENCODERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("chunk", [
    TextDelta(id="t", text="x"),
    TextDelta(id="t", text="x", extra={"hint": 1}),
    wire.decode(_NESTED_EXTRA),
    wire.decode(_NESTED_EXTRA.replace(b',"hint":1', b"")),
    DataChunk("data-x", {"a": 1}),
], ids=["plain", "flat-extra", "nested-extra", "nested-plain", "data"])
def test_each_encoder_keeps_extra_keys_as_the_rule_says(encoder: Any, chunk: Any) -> None:
    from streamkit._chunk_base import has_extra_keys

    assert wire._writes_extra_keys(chunk) == (not isinstance(chunk, DataChunk)
                                              and has_extra_keys(chunk))
    data = encoder(chunk)
    if encoder is wire.encode_msgpack:
        back = wire.decode_msgpack(data)
    else:
        back = wire.decode(data.removeprefix(b"data: ").strip())
    assert back == chunk
