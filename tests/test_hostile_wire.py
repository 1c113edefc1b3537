"""Hostile input to the wire decoders and the SSE parser: a typed error or a correct result.

Every decoder (``decode``, ``decode_jsonl``, ``decode_msgpack``, ``from_builtins``, ``iter_sse``,
``iter_jsonl``) and ``SSEParser`` is fuzzed with hypothesis: random bytes, random JSON (nested
past msgspec's recursion limit too) and random splits. The only exception allowed out is
``ChunkDecodeError``; what decodes must encode back. The parser's output must not depend on how
its input is split, and its size limit must fail with ``ChunkDecodeError`` rather than buffer.
Speed (linear time in line length) is measured in ``python -m benchmarks``, not here.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import wire
from streamkit.chunks import DataChunk, TextDelta
from streamkit.errors import ChunkDecodeError, InvalidArgument, InvalidType

FUZZ = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=12) \
    | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                           max_leaves=12)
types = st.sampled_from(["text-delta", "data-x", "finish", "tool-call", "error", "nope", "",
                         "data-", "tripwire", "step-finish", "reasoning-delta"])


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


@st.composite
def chunk_like(draw: st.DrawFn) -> Any:
    """A dict shaped roughly like a chunk: a known or unknown type, random fields."""
    obj: dict[str, Any] = {"type": draw(types)}
    for key in draw(st.lists(st.sampled_from(["payload", "data", "runId", "from", "id",
                                              "transient"]), max_size=4, unique=True)):
        obj[key] = draw(json_values)
    return obj


def decodes_or_is_typed(fn: Any, data: Any) -> Any:
    """``fn(data)``; a ``ChunkDecodeError`` is a fine outcome (``None``), anything else fails."""
    try:
        return fn(data)
    except ChunkDecodeError as exc:
        assert exc.message
        return None


def assert_round_trips(chunk: Any) -> None:
    assert wire.decode(wire.encode(chunk)) == chunk


# --------------------------------------------------------------------------- deep nesting


@pytest.mark.parametrize("depth", [pytest.param(1_000, id="depth-1000"),
                                   pytest.param(5_000, id="depth-5000"),
                                   pytest.param(100_000, id="depth-100000")])
class TestDeepNesting:
    def test_decode_raises_chunk_decode_error(self, depth: int) -> None:
        for data in (nested(depth), f'{{"type":"data-x","data":{nested(depth)}}}',
                     f'{{"type":"text-delta","payload":{{"id":"t","text":"x",'
                     f'"extra":{nested(depth)}}}}}'):
            with pytest.raises(ChunkDecodeError, match="nested too deeply"):
                wire.decode(data)

    def test_decode_jsonl_names_the_line(self, depth: int) -> None:
        doc = '{"type":"data-a","data":1}\n' + f'{{"type":"data-x","data":{nested(depth)}}}'
        with pytest.raises(ChunkDecodeError, match="line 2") as info:
            wire.decode_jsonl(doc)
        assert info.value.line == 2

    def test_decode_msgpack(self, depth: int) -> None:
        data = b"\x91" * depth + b"\x01"  # fixarray of one element, nested
        with pytest.raises(ChunkDecodeError, match="nested too deeply"):
            wire.decode_msgpack(data)
        chunk = b"\x82\xa4type\xa6data-x\xa4data" + data
        with pytest.raises(ChunkDecodeError, match="nested too deeply"):
            wire.decode_msgpack(chunk)

    async def test_iter_sse_and_iter_jsonl(self, depth: int) -> None:
        frame = f'{{"type":"data-x","data":{nested(depth)}}}'.encode()
        with pytest.raises(ChunkDecodeError, match="nested too deeply"):
            await asyncio.wait_for(_drain(wire.iter_sse(_reads(b"data: " + frame + b"\n\n"))), 10)
        with pytest.raises(ChunkDecodeError, match="nested too deeply"):
            await asyncio.wait_for(_drain(wire.iter_jsonl(_reads(frame + b"\n"))), 10)


def test_a_deep_but_legal_value_still_decodes() -> None:
    chunk = wire.decode(f'{{"type":"data-x","data":{nested(200)}}}')
    assert isinstance(chunk, DataChunk)
    assert_round_trips(chunk)


def test_from_builtins_of_a_value_nested_too_deeply() -> None:
    value: Any = 1
    for _ in range(5_000):
        value = [value]
    result = decodes_or_is_typed(wire.from_builtins, {"type": "data-x", "data": value})
    assert result is None or isinstance(result, DataChunk)


@pytest.mark.parametrize("encode", [pytest.param(wire.encode, id="json"),
                                    pytest.param(wire.encode_msgpack, id="msgpack")])
class TestUnencodable:
    def test_nesting_past_the_limit(self, encode: Any) -> None:
        value: Any = 1
        for _ in range(5_000):
            value = [value]
        with pytest.raises(InvalidArgument, match="cannot be encoded"):
            encode(DataChunk(type="data-x", data=value))

    def test_an_arbitrary_object(self, encode: Any) -> None:
        with pytest.raises(InvalidType, match="JSON-like"):
            encode(DataChunk(type="data-x", data={"at": object()}))


def test_encoding_a_lone_surrogate() -> None:
    with pytest.raises(InvalidArgument, match="cannot be encoded"):
        wire.encode(TextDelta(id="t", text="\ud800"))


# --------------------------------------------------------------------------- framed encoders

# One chunk of every type (our own fixtures) and Mastra's recorded runs: flat and nested payloads
# (the step ends), and a chunk without one (``data-*``).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = [json.loads(path.read_text()) for path in sorted((FIXTURES / "chunks").glob("*.json"))]
SAMPLES += [json.loads(line) for path in sorted((FIXTURES / "mastra").glob("*.jsonl"))
            for line in path.read_text().splitlines()]


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


#: Values no encoder can write: an object, a lone surrogate, nesting past the limit, a huge int.
unencodable = st.sampled_from([object(), "\ud800", _deep(5_000), 2**70])


def _add_keys(draw: st.DrawFn, obj: Any, depth: int = 0) -> None:
    """Unknown keys in ``obj`` and the dicts inside it: on a payload struct they land in
    ``extra`` (of the payload, or of a struct nested in it), elsewhere they are just data."""
    if not isinstance(obj, dict) or depth > 2:
        return
    for value in list(obj.values()):
        _add_keys(draw, value, depth + 1)
    for key in draw(st.lists(st.text(max_size=5).map("x-".__add__), max_size=2)):
        obj[key] = draw(json_values)


def _add_a_key_everywhere(obj: Any, depth: int = 0) -> None:
    """``"x-k": 1`` in ``obj`` and in every dict inside it, two levels down."""
    if isinstance(obj, dict) and depth <= 2:
        for value in list(obj.values()):
            _add_a_key_everywhere(value, depth + 1)
        obj["x-k"] = 1


@st.composite
def encodable_chunks(draw: st.DrawFn) -> Any:
    """A real chunk of any type, often with unknown payload keys (``payload.extra``)."""
    obj = json.loads(json.dumps(draw(st.sampled_from(SAMPLES))))
    if "payload" in obj and draw(st.booleans()):
        _add_keys(draw, obj["payload"])
    return wire.from_builtins(obj)


@st.composite
def unencodable_chunks(draw: st.DrawFn) -> Any:
    """What every encoder must refuse: not a chunk at all, or a chunk holding a bad value in
    the fast path's reach (``text``, ``data``) or only in ``extra`` (the slow path)."""
    bad = draw(unencodable)
    kind = draw(st.sampled_from(["not-a-chunk", "text", "data", "extra", "nested-extra"]))
    if kind == "not-a-chunk":
        return draw(st.sampled_from([None, "text", 3, {"type": "text-delta"}, object(),
                                     msgspec.structs.replace(TextDelta(id="t", text="x"),
                                                             payload={"id": "t"})]))
    if kind == "text":
        return TextDelta(id="t", text="\ud800")
    if kind == "data":
        return DataChunk(type="data-x", data={"at": bad})
    chunk = draw(encodable_chunks())
    payload = getattr(chunk, "payload", None)
    if not isinstance(payload, msgspec.Struct) or not hasattr(payload, "extra"):
        payload = None  # no payload, or a chunk type whose payload is plain data (a dict)
    if kind == "nested-extra" and payload is not None:
        # A payload struct inside the payload (a step end's stepResult, output...), if any.
        inner = [v for v in msgspec.structs.astuple(payload) if isinstance(v, msgspec.Struct)
                 and hasattr(v, "extra")]
        payload = draw(st.sampled_from(inner)) if inner else payload
    if payload is None:
        return DataChunk(type="data-x", data=bad)
    payload.extra["x-bad"] = bad  # payloads are frozen, their extra dict is not
    return chunk


def _outcome(encode: Any, chunk: Any) -> Any:
    """The bytes, or the error as plain data: its type, message and what it was raised from."""
    try:
        return encode(chunk)
    except (InvalidType, InvalidArgument) as exc:
        cause = exc.__cause__
        return type(exc), str(exc), type(cause) if cause is not None else None, \
            exc.__suppress_context__


class TestFramedEncoders:
    """``encode_sse`` and ``encode_jsonl`` are ``encode`` plus their frame, errors included:
    each inlines ``encode``'s fast path rather than calling it, so this keeps them one."""

    @FUZZ
    @given(st.one_of(encodable_chunks(), unencodable_chunks()))
    def test_sse_and_jsonl_frame_exactly_what_encode_gives(self, chunk: Any) -> None:
        plain = _outcome(wire.encode, chunk)
        if isinstance(plain, bytes):
            assert wire.encode_sse(chunk) == b"data: " + plain + b"\n\n"
            assert wire.encode_jsonl(chunk) == plain + b"\n"
            assert type(wire.encode_sse(chunk)) is bytes
            assert wire.decode(plain) == chunk
        else:
            assert _outcome(wire.encode_sse, chunk) == plain
            assert _outcome(wire.encode_jsonl, chunk) == plain

    @pytest.mark.parametrize("obj", [pytest.param(obj, id=f"{number}-{obj['type']}")
                                     for number, obj in enumerate(SAMPLES)])
    def test_every_sample_with_an_unknown_key_in_every_payload_dict(self, obj: Any) -> None:
        # Not left to chance: step ends with nested extra keys are rare among the draws above, and
        # an encode_sse that skipped has_extra_keys() passed 80 random examples.
        obj = json.loads(json.dumps(obj))
        _add_a_key_everywhere(obj.get("payload"))
        chunk = wire.from_builtins(obj)
        plain = wire.encode(chunk)
        assert json.loads(plain) == obj
        assert wire.encode_sse(chunk) == b"data: " + plain + b"\n\n"
        assert wire.encode_jsonl(chunk) == plain + b"\n"
        assert wire.decode_msgpack(wire.encode_msgpack(chunk)) == chunk

    @FUZZ
    @given(st.one_of(encodable_chunks(), unencodable_chunks()))
    def test_msgpack_round_trips_or_fails_typed(self, chunk: Any) -> None:
        packed = _outcome(wire.encode_msgpack, chunk)
        if isinstance(packed, bytes):
            assert wire.decode_msgpack(packed) == chunk

    @pytest.mark.parametrize("encode", [wire.encode, wire.encode_sse, wire.encode_jsonl,
                                        wire.encode_msgpack])
    def test_the_errors_say_what_is_wrong(self, encode: Any) -> None:
        with pytest.raises(InvalidType, match="expected a chunk, got dict") as info:
            encode({"type": "text-delta"})
        assert info.value.__cause__ is None and info.value.__suppress_context__
        with pytest.raises(InvalidType, match="JSON-like") as info:
            encode(TextDelta(id="t", text="x", extra={"at": object()}))
        assert isinstance(info.value.__cause__, TypeError)
        with pytest.raises(InvalidArgument, match="cannot be encoded"):
            encode(DataChunk(type="data-x", data=_deep(5_000)))


# --------------------------------------------------------------------------- fuzzing decoders


class TestFuzzedDecoders:
    @FUZZ
    @given(st.binary(max_size=300))
    def test_random_bytes(self, data: bytes) -> None:
        for fn in (wire.decode, wire.decode_msgpack, wire.decode_jsonl):
            out = decodes_or_is_typed(fn, data)
            if out is not None and fn is wire.decode:
                assert_round_trips(out)

    @FUZZ
    @given(chunk_like())
    def test_chunk_shaped_json(self, obj: Any) -> None:
        data = json.dumps(obj)
        out = decodes_or_is_typed(wire.decode, data)
        if out is not None:
            assert_round_trips(out)
        try:
            packed = msgspec.msgpack.encode(obj)
        except OverflowError:  # an int MessagePack cannot hold: nothing to decode
            packed = b"\xc1"  # never used in MessagePack: malformed
        out = decodes_or_is_typed(wire.decode_msgpack, packed)
        if out is not None:
            assert wire.decode_msgpack(wire.encode_msgpack(out)) == out
        decodes_or_is_typed(wire.from_builtins, obj)

    @FUZZ
    @given(chunk_like(), st.integers(1, 4_000))
    def test_chunk_shaped_json_with_deep_data(self, obj: Any, depth: int) -> None:
        obj["data"] = "@"
        data = json.dumps(obj).replace('"@"', nested(depth))
        out = decodes_or_is_typed(wire.decode, data)
        if out is not None:
            assert_round_trips(out)
        decodes_or_is_typed(wire.decode_jsonl, data + "\n" + data)

    @FUZZ
    @given(st.lists(chunk_like(), max_size=5), st.data())
    async def test_iter_jsonl_of_random_splits(self, objs: list[Any], data: st.DataObject
                                               ) -> None:
        doc = "\n".join(json.dumps(o) for o in objs).encode()
        cuts = sorted(data.draw(st.lists(st.integers(0, len(doc)), max_size=6)))
        try:
            whole: list[Any] | None = wire.decode_jsonl(doc)
        except ChunkDecodeError:
            whole = None
        try:
            got: list[Any] | None = await asyncio.wait_for(
                _drain(wire.iter_jsonl(_reads(*_split(doc, cuts)))), 10)
        except ChunkDecodeError:
            got = None
        assert got == whole


async def test_iter_jsonl_bounds_a_line() -> None:
    with pytest.raises(ChunkDecodeError, match="max_line_bytes=100"):
        await asyncio.wait_for(_drain(wire.iter_jsonl(_reads(*[b"x" * 60] * 3),
                                                      max_line_bytes=100)), 10)
    with pytest.raises(ChunkDecodeError, match="line 2: longer than max_line_bytes"):
        await asyncio.wait_for(_drain(wire.iter_jsonl(
            _reads(b'{"type":"data-a","data":1}\n' + b"y" * 200 + b"\n"), max_line_bytes=100)), 10)


# --------------------------------------------------------------------------- the SSE parser


def _parse(pieces: list[bytes], limit: int | None = None) -> list[wire.SSEEvent]:
    parser = wire.SSEParser(max_event_bytes=limit)
    events: list[wire.SSEEvent] = []
    for piece in pieces:
        events += parser.feed_events(piece)
    try:
        parser.close()
    except ChunkDecodeError:
        events.append(wire.SSEEvent("<cut>"))
    return events


sse_lines = st.lists(st.one_of(
    st.sampled_from([b"data: x", b"data:y", b"data", b":comment", b"event: e", b"id: 1",
                     b"id: a\x00b", b"retry: 100", b"retry: x", b"retry: " + b"9" * 5000,
                     b"", b"", b"\xef\xbb\xbfdata: bom", b"data: \xff\xfe", b"field: v"]),
    st.binary(max_size=20).map(lambda b: b"data: " + b.replace(b"\n", b"").replace(b"\r", b""))),
    max_size=20)
newlines = st.sampled_from([b"\n", b"\r\n", b"\r"])


class TestFuzzedSSEParser:
    @FUZZ
    @given(sse_lines, newlines, st.data())
    def test_any_split_gives_the_same_events(self, lines: list[bytes], nl: bytes,
                                             data: st.DataObject) -> None:
        body = nl.join(lines) + data.draw(st.sampled_from([b"", nl, nl + nl]))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
        assert _parse(_split(body, cuts)) == _parse([body])

    @FUZZ
    @given(st.binary(max_size=400), st.data())
    def test_random_bytes_are_events_or_a_typed_error(self, body: bytes,
                                                      data: st.DataObject) -> None:
        cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
        assert _parse(_split(body, cuts)) == _parse([body])

    @FUZZ
    @given(sse_lines, st.integers(1, 40), st.data())
    def test_a_limit_fails_typed_or_changes_nothing(self, lines: list[bytes], limit: int,
                                                    data: st.DataObject) -> None:
        body = b"\n".join(lines) + b"\n\n"
        cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
        try:
            limited = _parse(_split(body, cuts), limit)
        except ChunkDecodeError as exc:
            assert "max_event_bytes" in exc.message
            assert max(map(len, body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                           .split(b"\n"))) > limit or _data_size(body) > limit
            return
        assert limited == _parse([body])

    @pytest.mark.parametrize("pieces", [
        pytest.param([b"data: " + b"x" * 2_000], id="one-read"),
        pytest.param([b"data: " + b"x" * 100] * 20, id="many-reads-no-newline"),
        pytest.param([b"data: " + b"x" * 2_000 + b"\n\n"], id="complete-line"),
        pytest.param([b"data: x\n" * 400], id="many-lines-one-event"),
    ])
    def test_a_line_or_event_past_the_limit(self, pieces: list[bytes]) -> None:
        parser = wire.SSEParser(max_event_bytes=1_000)
        with pytest.raises(ChunkDecodeError, match="max_event_bytes=1000"):
            for piece in pieces:
                parser.feed(piece)

    def test_the_limit_is_checked(self) -> None:
        for bad, error in ((0, InvalidArgument), (-1, InvalidArgument), (1.5, InvalidType),
                           (True, InvalidType), ("1", InvalidType)):
            with pytest.raises(error, match="max_event_bytes"):
                wire.SSEParser(max_event_bytes=bad)  # type: ignore[arg-type]

    def test_the_default_limit_holds_a_big_event(self) -> None:
        big = b"data: " + b"x" * (4 << 20) + b"\n\n"
        assert [len(d) for d in wire.SSEParser().feed(big)] == [4 << 20]

    def test_a_retry_of_thousands_of_digits_is_ignored(self) -> None:
        parser = wire.SSEParser()
        parser.feed(b"retry: " + b"9" * 10_000 + b"\nretry: 250\n\n")
        assert parser.retry == 250

    @FUZZ
    @given(st.lists(chunk_like(), max_size=4), st.data())
    async def test_iter_sse_decodes_or_fails_typed(self, objs: list[Any],
                                                   data: st.DataObject) -> None:
        body = b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs)
        body += data.draw(st.sampled_from([b"", b"data: [DONE]\n\n", b"data: cut", b"\r\n"]))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
        try:
            chunks = await asyncio.wait_for(_drain(wire.iter_sse(_reads(*_split(body, cuts)))),
                                            10)
        except ChunkDecodeError:
            return
        for chunk in chunks:
            assert_round_trips(chunk)


def _data_size(body: bytes) -> int:
    """The largest data size of one event, as the parser counts it (whole data lines)."""
    best = size = 0
    # The parser drops one byte order mark at the very start of the stream, as the SSE spec says.
    body = body.removeprefix(b"\xef\xbb\xbf")
    for line in body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        text = line.decode("utf-8", "replace")
        if not text:
            size = 0
        elif text.partition(":")[0] == "data":
            size += len(text)
            best = max(best, size)
    return best


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    return [body[a:b] for a, b in itertools.pairwise([0, *cuts, len(body)])]


async def _reads(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def _drain(source: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in source]


def test_a_message_nested_too_deeply_is_a_message_error() -> None:
    from streamkit.errors import MessageError
    from streamkit.messages import decode_message, decode_messages

    deep = '{"id":"m","role":"user","content":{"format":2,"parts":[{"type":"data-x","data":' \
        + nested(3_000) + "}]}}"
    with pytest.raises(MessageError, match="invalid message JSON"):
        decode_message(deep)
    with pytest.raises(MessageError, match="invalid message JSON"):
        decode_messages("[" + deep + "]")
