"""Issue 26, point 12 (wire): every public function of ``streamkit.wire`` raises only
``streamkit.errors`` errors, whatever it is given.

Hypothesis draws arbitrary builtins (text with lone surrogates, bytes, sets, objects, numbers
of any size), values of the wrong type for each argument, our fixture chunks with one field
replaced by such a value, and values nested 100,000 deep (as JSON, as MessagePack and as Python
containers). Each function either returns or raises a ``StreamkitError`` whose message is not
empty; a builtin exception (``UnicodeEncodeError`` from ``from_builtins`` of a lone surrogate,
``AttributeError`` from ``decode_jsonl`` of a non-bytes value, ``TypeError`` from a decoder
given an int, ``RecursionError``) fails the test.

``tests/test_hostile_wire.py`` covers malformed bytes and splits; this file covers the types
and values a caller can pass.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import wire
from streamkit.chunks import DataChunk, TextDelta
from streamkit.errors import ChunkDecodeError, InvalidType, StreamkitError

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "chunks").glob("*.json"))
SURROGATES = ["\ud800", "a\udfffb", "\udbff", "x\ud83d"]

surrogate_text = st.builds(lambda a, s, b: a + s + b, st.text(max_size=4),
                           st.sampled_from(SURROGATES), st.text(max_size=4))
texts = st.text(max_size=8) | surrogate_text
scalars = (st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.floats() | texts
           | st.binary(max_size=8) | st.builds(bytearray, st.binary(max_size=4))
           | st.builds(object) | st.just(Ellipsis) | st.complex_numbers(max_magnitude=1e6))
builtins = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=3) | st.tuples(inner, inner)
                   | st.dictionaries(texts, inner, max_size=3)
                   | st.frozensets(st.integers(0, 3), max_size=3)),
    max_leaves=10)
#: Anything a caller might pass where bytes are expected.
not_bytes = (st.none() | st.integers() | st.floats() | st.lists(st.integers(0, 255), max_size=3)
             | st.builds(object) | st.dictionaries(st.text(max_size=3), st.integers(),
                                                    max_size=2))


def _deep_list(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


DEEP_JSON = "[" * 100_000 + "1" + "]" * 100_000
DEEP_CHUNK_JSON = '{"type":"data-x","data":' + DEEP_JSON + "}"
DEEP_MSGPACK = b"\x82\xa4type\xa6data-x\xa4data" + b"\x91" * 100_000 + b"\x01"
DEEP_VALUE = _deep_list(100_000)


def only_typed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args)``; a ``StreamkitError`` with a message is a fine outcome (``None``)."""
    try:
        return fn(*args, **kwargs)
    except StreamkitError as exc:
        assert exc.message, f"{type(exc).__name__} without a message"
        return None


def _fixture_builtins() -> list[dict[str, Any]]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in FIXTURES]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


@st.composite
def mutated_chunks(draw: st.DrawFn) -> Any:
    """A fixture chunk's builtins with one value (at any depth, the root included) replaced by
    an arbitrary one."""
    obj = draw(st.sampled_from(_fixture_builtins()))
    path = draw(st.sampled_from([p for p in _paths(obj) if p]))
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = draw(builtins)
    return obj


# -- decoders of values -------------------------------------------------------------------------


@FUZZ
@given(value=builtins | mutated_chunks())
def test_from_builtins_raises_only_typed_errors(value: Any) -> None:
    chunk = only_typed(wire.from_builtins, value)
    if chunk is not None:
        only_typed(wire.encode, chunk)


@pytest.mark.parametrize("value", [
    pytest.param({"type": "data-progress", "data": 1, "transient": "\ud800"}, id="bool-field"),
    pytest.param({"type": "finish", "payload": {"processorRetryCount": "x\udfff"}},
                 id="number-field"),
])
def test_from_builtins_of_a_lone_surrogate_says_so(value: Any) -> None:
    with pytest.raises(ChunkDecodeError, match="lone surrogate"):
        wire.from_builtins(value)


def test_from_builtins_of_a_value_100000_deep() -> None:
    for value in ({"type": "data-x", "data": DEEP_VALUE}, DEEP_VALUE,
                  {"type": "text-delta", "payload": {"id": "t", "text": "x", "m": DEEP_VALUE}},
                  {"type": "tool-call", "payload": {"toolCallId": "c", "toolName": "t",
                                                    "args": {"a": DEEP_VALUE}}}):
        chunk = only_typed(wire.from_builtins, value)
        if chunk is not None:  # a Python value may be that deep; its encoding may not
            only_typed(wire.encode, chunk)


# -- decoders of bytes --------------------------------------------------------------------------


DECODERS = [pytest.param(wire.decode, id="decode"),
            pytest.param(wire.decode_jsonl, id="decode_jsonl"),
            pytest.param(wire.decode_msgpack, id="decode_msgpack")]


@pytest.mark.parametrize("decode", DECODERS)
@FUZZ
@given(value=not_bytes | builtins)
def test_decoders_of_what_is_not_bytes_raise_invalid_type(decode: Any, value: Any) -> None:
    if isinstance(value, (bytes, bytearray, str)):
        only_typed(decode, value)
        return
    with pytest.raises(InvalidType, match="takes bytes"):
        decode(value)


@pytest.mark.parametrize("decode", [pytest.param(wire.decode, id="decode"),
                                    pytest.param(wire.decode_jsonl, id="decode_jsonl")])
@FUZZ
@given(value=mutated_chunks())
def test_json_text_with_a_lone_surrogate(decode: Any, value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    only_typed(decode, text)
    only_typed(decode, text + "\n" + '{"type":"text-delta","payload":{"id":"t","text":"\ud800"}}')


@pytest.mark.parametrize("decode", [pytest.param(wire.decode, id="decode"),
                                    pytest.param(wire.decode_jsonl, id="decode_jsonl")])
def test_json_text_with_a_lone_surrogate_says_so(decode: Any) -> None:
    with pytest.raises(ChunkDecodeError, match="lone surrogate"):
        decode('{"type":"text-delta","payload":{"id":"t","text":"\ud800"}}')


@FUZZ
@given(data=st.binary(max_size=64) | st.builds(lambda v: json.dumps(v, default=repr).encode(),
                                               mutated_chunks()))
def test_decoders_of_any_bytes(data: bytes) -> None:
    for decode in (wire.decode, wire.decode_jsonl, wire.decode_msgpack):
        for form in (data, bytearray(data), memoryview(data)):
            only_typed(decode, form)


def test_100000_deep_input_is_a_typed_error() -> None:
    cases: list[tuple[Callable[[Any], Any], Any]] = [
        (wire.decode, DEEP_JSON), (wire.decode, DEEP_CHUNK_JSON),
        (wire.decode_jsonl, DEEP_CHUNK_JSON), (wire.decode_jsonl, DEEP_CHUNK_JSON.encode()),
        (wire.decode_msgpack, DEEP_MSGPACK)]
    for decode, data in cases:
        with pytest.raises(ChunkDecodeError, match="nested too deeply"):
            decode(data)


# -- encoders -----------------------------------------------------------------------------------


ENCODERS = [wire.encode, wire.encode_sse, wire.encode_jsonl, wire.encode_msgpack,
            wire.to_builtins]


@FUZZ
@given(value=builtins, text=texts)
def test_encoders_raise_only_typed_errors(value: Any, text: str) -> None:
    for encode in ENCODERS:
        with pytest.raises(InvalidType, match="expected a chunk"):
            encode(value)
        only_typed(encode, DataChunk(type="data-x", data=value))
        only_typed(encode, TextDelta(id="t", text=text, extra={"k": value}))


def test_encoders_of_a_value_100000_deep() -> None:
    for encode in ENCODERS:
        only_typed(encode, DataChunk(type="data-x", data=DEEP_VALUE))
        only_typed(encode, TextDelta(id="t", text="x", extra={"k": DEEP_VALUE}))


# -- streams ------------------------------------------------------------------------------------


async def _reads(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def _drain(iterator: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in iterator]


def _run_stream(make: Callable[[], AsyncIterator[Any]]) -> Any:
    async def main() -> Any:
        return await asyncio.wait_for(_drain(make()), 30)
    return only_typed(asyncio.run, main())


@FUZZ
@given(items=st.lists(not_bytes | st.binary(max_size=16) | texts, max_size=3),
       limit=st.none() | st.integers(-2, 64) | st.just("x") | st.floats(0, 9))
def test_stream_readers_raise_only_typed_errors(items: list[Any], limit: Any) -> None:
    _run_stream(lambda: wire.iter_sse(_reads(items), max_event_bytes=limit))
    _run_stream(lambda: wire.iter_jsonl(_reads(items), max_line_bytes=limit))
    parser = only_typed(wire.SSEParser, max_event_bytes=limit)
    if parser is not None:
        for item in items:
            only_typed(parser.feed, item)
            only_typed(parser.feed_events, item)
        only_typed(parser.close)


@pytest.mark.parametrize("source", [5, None, [b"data: x\n\n"], b"bytes"])
def test_stream_readers_of_what_is_not_an_async_iterable(source: Any) -> None:
    for read in (wire.iter_sse, wire.iter_jsonl):
        with pytest.raises(InvalidType, match="async iterable"):
            asyncio.run(_drain(read(source)))


@pytest.mark.parametrize("read", [pytest.param(b"data: x\n\n".decode(), id="str"),
                                  pytest.param(5, id="int"), pytest.param(None, id="none")])
def test_sse_parser_of_what_is_not_bytes(read: Any) -> None:
    with pytest.raises(InvalidType, match="takes bytes"):
        wire.SSEParser().feed(read)


def test_stream_readers_of_100000_deep_frames() -> None:
    frame = DEEP_CHUNK_JSON.encode()
    for reader in (wire.iter_sse(_reads([b"data: " + frame + b"\n\n"])),
                   wire.iter_jsonl(_reads([frame + b"\n"]))):
        with pytest.raises(ChunkDecodeError, match="nested too deeply"):
            asyncio.run(_drain(reader))
