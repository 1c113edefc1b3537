"""Chunks as bytes: JSON, server-sent events, JSON lines and MessagePack.

What belongs here: turning chunks into bytes and back (``encode``/``decode`` and their SSE,
JSON-lines and MessagePack variants), the generic incremental ``SSEParser``, and
``to_builtins``/``from_builtins``. What does not: the chunk classes (``streamkit.chunks``),
HTTP clients and servers, and anything about agents.

Every function speaks Mastra's wire form and round-trips it: a chunk emitted by Mastra decodes,
and encodes again to equal JSON (keys it does not model included, see ``payload.extra``).

>>> from streamkit.chunks import TextDelta
>>> data = encode(TextDelta(id="t1", text="hi", run_id="r1", from_="AGENT"))
>>> data
b'{"type":"text-delta","runId":"r1","from":"AGENT","payload":{"id":"t1","text":"hi"}}'
>>> decode(data).payload.text
'hi'
>>> encode_sse(decode(data))[:26]
b'data: {"type":"text-delta"'

Speed: msgspec encoders and decoders are built once, at import. ``decode`` first runs msgspec's
typed decoder over the union of chunk classes; only ``data-*`` chunks, payloads with unknown keys
and bad input fall back to an untyped decode plus ``msgspec.convert``. ``encode`` hands the chunk
straight to msgspec unless some payload has ``extra`` keys to put back.
"""

import re
from collections.abc import AsyncIterable, AsyncIterator
from datetime import datetime
from typing import Any, NamedTuple, Union

import msgspec

from ._chunk_base import has_extra_keys, merge_extra_keys
from .chunks import CHUNK_TYPES, Chunk, ChunkBase, chunk_from_builtins
from .errors import ChunkDecodeError, InvalidType

__all__ = [
    "encode",
    "decode",
    "encode_sse",
    "iter_sse",
    "SSEParser",
    "SSEEvent",
    "encode_jsonl",
    "decode_jsonl",
    "iter_jsonl",
    "encode_msgpack",
    "decode_msgpack",
    "to_builtins",
    "from_builtins",
]

# Every chunk class but DataChunk: msgspec tells them apart by their "type" tag in one pass.
_TAGGED: Any = Union[tuple(CHUNK_TYPES.values())]

_json_encoder = msgspec.json.Encoder()
_json_decoder: msgspec.json.Decoder[Chunk] = msgspec.json.Decoder(_TAGGED)
_msgpack_encoder = msgspec.msgpack.Encoder()
_msgpack_decoder: msgspec.msgpack.Decoder[Chunk] = msgspec.msgpack.Decoder(_TAGGED)
_json_encode = _json_encoder.encode
_json_decode = _json_decoder.decode
_msgpack_encode = _msgpack_encoder.encode
_msgpack_decode = _msgpack_decoder.decode

# Kept as themselves by ``to_builtins`` for MessagePack, which encodes them natively.
_MSGPACK_NATIVE = (bytes, bytearray, memoryview, datetime)

_BYTE_POSITION = re.compile(r"\(byte (\d+)\)")


# --- JSON and MessagePack --------------------------------------------------------------------


def encode(chunk: Chunk) -> bytes:
    """Encode one chunk as JSON in Mastra's wire form.

    Args:
        chunk: any chunk.

    Returns:
        The JSON bytes, with ``payload.extra`` keys written beside the modelled ones.

    Raises:
        TypeError: ``chunk`` is not a chunk (or its payload is not a payload struct).

    Example:
        >>> from streamkit.chunks import TripwireChunk
        >>> encode(TripwireChunk(reason="no", retry=False, run_id="r", from_="AGENT"))
        b'{"type":"tripwire","runId":"r","from":"AGENT","payload":{"reason":"no","retry":false}}'
    """
    try:
        # Class flags first: most chunks need one attribute read, step ends one method call.
        # (mypy cannot see that a set flag means the chunk has a payload: union-attr below.)
        if chunk._flat_payload:
            if not chunk.payload.extra:  # type: ignore[union-attr]
                return _json_encode(chunk)
        elif not chunk._nested_payload \
                or not chunk.payload.has_extra_keys():  # type: ignore[union-attr]
            return _json_encode(chunk)
    except AttributeError:
        raise InvalidType(_not_a_chunk(chunk)) from None
    return _json_encode(merge_extra_keys(chunk, msgspec.to_builtins(chunk, builtin_types=())))


def decode(data: bytes | bytearray | memoryview | str) -> Chunk:
    """Decode one chunk from JSON.

    Args:
        data: one JSON object in Mastra's wire form.

    Returns:
        The chunk: a ``DataChunk`` for any ``data-*`` type, else the class of ``CHUNK_TYPES``.

    Raises:
        ChunkDecodeError: malformed JSON (``position`` is the byte offset), an unknown ``type``
            (``chunk_type`` names it), or a field of the wrong type (``chunk_type``, and ``path``
            such as ``"$.payload.text"``).

    Example:
        >>> decode(b'{"type":"data-progress","data":{"pct":50}}')
        DataChunk(type='data-progress', data={'pct': 50})
    """
    try:
        return _json_decode(data)
    except msgspec.DecodeError:
        pass
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise _malformed("JSON", exc, data) from exc
    return chunk_from_builtins(obj)


def encode_msgpack(chunk: Chunk) -> bytes:
    """Encode one chunk as MessagePack (same keys as the JSON form; bytes stay binary).

    Example:
        >>> from streamkit.chunks import TextDelta
        >>> decode_msgpack(encode_msgpack(TextDelta(id="t1", text="hi"))).payload.text
        'hi'
    """
    try:
        # Class flags first: most chunks need one attribute read, step ends one method call.
        # (mypy cannot see that a set flag means the chunk has a payload: union-attr below.)
        if chunk._flat_payload:
            if not chunk.payload.extra:  # type: ignore[union-attr]
                return _msgpack_encode(chunk)
        elif not chunk._nested_payload \
                or not chunk.payload.has_extra_keys():  # type: ignore[union-attr]
            return _msgpack_encode(chunk)
    except AttributeError:
        raise InvalidType(_not_a_chunk(chunk)) from None
    data = msgspec.to_builtins(chunk, builtin_types=_MSGPACK_NATIVE)
    return _msgpack_encode(merge_extra_keys(chunk, data))


def decode_msgpack(data: bytes | bytearray | memoryview) -> Chunk:
    """Decode one chunk from MessagePack.

    Raises:
        ChunkDecodeError: as :func:`decode`.
    """
    try:
        return _msgpack_decode(data)
    except msgspec.DecodeError:
        pass
    try:
        obj = msgspec.msgpack.decode(data)
    except msgspec.DecodeError as exc:
        raise _malformed("MessagePack", exc, data) from exc
    return chunk_from_builtins(obj)


def to_builtins(chunk: Chunk) -> dict[str, Any]:
    """The chunk as JSON-ready builtins (dicts, lists, strings...), in wire form.

    Example:
        >>> from streamkit.chunks import TextDelta
        >>> to_builtins(TextDelta(id="t1", text="hi", extra={"hint": 1}))
        {'type': 'text-delta', 'payload': {'id': 't1', 'text': 'hi', 'hint': 1}}
    """
    data: dict[str, Any] = msgspec.to_builtins(chunk)
    if has_extra_keys(chunk):
        merge_extra_keys(chunk, data)
    return data


def from_builtins(obj: Any) -> Chunk:
    """The inverse of :func:`to_builtins`: a chunk from its builtins (decoded JSON) form.

    Raises:
        ChunkDecodeError: as :func:`decode`.
    """
    return chunk_from_builtins(obj)


def _not_a_chunk(value: Any) -> str:
    if isinstance(value, ChunkBase):
        expected = type(value)._payload_cls
        name = expected.__name__ if expected is not None else "a payload struct"
        return (f"{type(value).__name__}.payload must be {name}, "
                f"got {type(getattr(value, 'payload', None)).__name__}")
    return f"expected a chunk, got {type(value).__name__}"


def _malformed(kind: str, exc: msgspec.DecodeError, data: Any) -> ChunkDecodeError:
    message = str(exc).removeprefix(f"{kind} is malformed: ")
    match = _BYTE_POSITION.search(message)
    if match is not None:
        position: int | None = int(match.group(1))
    elif "truncated" in message:
        position = len(data.encode() if isinstance(data, str) else data)
    else:
        position = None
    return ChunkDecodeError(f"malformed {kind}: {message}", position=position)


# --- server-sent events ----------------------------------------------------------------------


class SSEEvent(NamedTuple):
    """One dispatched server-sent event.

    Attributes:
        data: the event's data lines joined with ``"\\n"``.
        event: the event type (``"message"`` unless an ``event:`` field said otherwise).
        id: the last event ID at the time of dispatch (``""`` if none was ever sent).
    """

    data: str
    event: str = "message"
    id: str = ""


class SSEParser:
    """Incremental parser of a ``text/event-stream`` body, per the WHATWG SSE specification.

    Feed it bytes as they arrive, split anywhere (inside a line, a ``\\r\\n`` pair or a UTF-8
    character); it returns the events completed so far. It knows nothing about chunks, so any
    SSE API can use it (an OpenAI stream's ``[DONE]`` is just data here).

    * Lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a blank line dispatches the event.
    * ``data:`` lines are joined with ``\\n``; one space after the colon is dropped.
    * Lines starting with ``:`` are comments; unknown fields are ignored.
    * ``event:`` sets the type of the next event, ``id:`` the last event ID
      (:attr:`last_event_id`), ``retry:`` the reconnection time in ms (:attr:`retry`).
    * A leading byte order mark is skipped; invalid UTF-8 becomes U+FFFD.

    Example:
        >>> parser = SSEParser()
        >>> parser.feed(b"data: hel")
        []
        >>> parser.feed(b"lo\\r\\n: keep-alive\\r\\ndata: world\\r\\n\\r\\n")
        ['hello\\nworld']
        >>> parser.close()
    """

    __slots__ = ("_buffer", "_skip_lf", "_started", "_data", "_event", "last_event_id", "retry")

    def __init__(self) -> None:
        self._buffer = b""
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self.last_event_id = ""
        """The value of the last ``id:`` field (``""`` until one arrives)."""
        self.retry: int | None = None
        """The reconnection time in milliseconds from the last valid ``retry:`` field."""

    def feed(self, data: bytes | bytearray | memoryview) -> list[str]:
        """Add bytes; return the data of every event they complete, in order."""
        lines = self._lines(data)
        if not lines:
            return []
        return [event.data for event in self._process(lines)]

    def feed_events(self, data: bytes | bytearray | memoryview) -> list[SSEEvent]:
        """Like :meth:`feed`, but return whole events (data, event type and id)."""
        lines = self._lines(data)
        if not lines:
            return []
        return self._process(lines)

    def close(self) -> None:
        """Signal the end of the stream.

        Raises:
            ChunkDecodeError: the stream ended inside an event that has data (a ``data:`` line
                with no blank line after it, or a cut-off ``data:`` line). An unfinished event
                without data, or a cut-off comment, is dropped silently as the spec says.
        """
        tail = self._buffer
        pending = list(self._data)
        self._buffer, self._skip_lf, self._data, self._event = b"", False, [], ""
        if tail:
            line = tail.decode("utf-8", "replace")
            if not self._started and line.startswith("\ufeff"):
                line = line[1:]
            if line.partition(":")[0] == "data":
                pending.append(line)
        if pending:
            preview = "\n".join(pending)
            if len(preview) > 80:
                preview = preview[:77] + "..."
            raise ChunkDecodeError(
                f"SSE stream ended inside an event (no blank line after its data): {preview!r}",
                position=None)

    def _lines(self, data: bytes | bytearray | memoryview) -> list[str]:
        """Complete lines in ``data`` (plus what was buffered); keep the unfinished rest."""
        if not data:
            return []
        chunk = bytes(data)
        if self._skip_lf:  # the previous read ended with "\r"; a "\n" here belongs to it
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            if buffer[-1:] == b"\r":
                self._skip_lf = True
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buffer.rfind(b"\n")
        if end < 0:
            self._buffer = buffer
            return []
        self._buffer = buffer[end + 1:]
        # Line breaks never occur inside a UTF-8 sequence, so the complete part decodes whole.
        text = buffer[:end].decode("utf-8", "replace")
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        return text.split("\n")

    def _process(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        data = self._data
        for line in lines:
            if line.startswith("data: "):  # by far the most common line: take it first
                data.append(line[6:])
                continue
            if not line:
                if data:
                    events.append(SSEEvent("\n".join(data), self._event or "message",
                                           self.last_event_id))
                    data.clear()
                self._event = ""
                continue
            colon = line.find(":")
            if colon == 0:
                continue  # comment
            if colon < 0:
                name, value = line, ""
            else:
                name, value = line[:colon], line[colon + 1:]
                if value[:1] == " ":
                    value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\x00" not in value:
                    self.last_event_id = value
            elif name == "retry":
                if value.isascii() and value.isdigit():
                    self.retry = int(value)
        return events


def encode_sse(chunk: Chunk) -> bytes:
    """One chunk as a server-sent event: ``data: <json>\\n\\n``.

    Example:
        >>> from streamkit.chunks import AbortChunk
        >>> encode_sse(AbortChunk(run_id="r", from_="AGENT"))
        b'data: {"type":"abort","runId":"r","from":"AGENT","payload":{}}\\n\\n'
    """
    return b"data: " + encode(chunk) + b"\n\n"


async def iter_sse(source: AsyncIterable[bytes]) -> AsyncIterator[Chunk]:
    """Decode a server-sent-event byte stream into chunks.

    Each event's data is one chunk; a ``[DONE]`` event ends the stream (Mastra's server sends
    one). The source is closed (``aclose()``) when iteration ends for any reason.

    Args:
        source: the response body, in reads of any size.

    Yields:
        Chunks, in order.

    Raises:
        ChunkDecodeError: an event is not a valid chunk, or the stream ended inside an event.
    """
    parser = SSEParser()
    iterator = aiter(source)
    try:
        async for block in iterator:
            for data in parser.feed(block):
                if data == "[DONE]":
                    return
                yield decode(data)
        parser.close()
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


# --- JSON lines ------------------------------------------------------------------------------


def encode_jsonl(chunk: Chunk) -> bytes:
    """One chunk as a JSON line (``<json>\\n``); join them for a file."""
    return encode(chunk) + b"\n"


def decode_jsonl(data: bytes | str) -> list[Chunk]:
    """Decode every non-blank line of a JSON-lines document.

    Raises:
        ChunkDecodeError: as :func:`decode`, with ``line`` (1-based) set and named in the message.

    Example:
        >>> lines = b'{"type":"data-a","data":1}\\n\\n{"type":"data-b","data":2}'
        >>> [chunk.type for chunk in decode_jsonl(lines)]
        ['data-a', 'data-b']
    """
    raw = data.encode() if isinstance(data, str) else data
    chunks: list[Chunk] = []
    for number, line in enumerate(raw.split(b"\n"), 1):
        chunk = _decode_line(line, number)
        if chunk is not None:
            chunks.append(chunk)
    return chunks


async def iter_jsonl(source: AsyncIterable[bytes]) -> AsyncIterator[Chunk]:
    """Decode a JSON-lines byte stream, read in pieces of any size, into chunks.

    The last line needs no newline. The source is closed (``aclose()``) when iteration ends.

    Raises:
        ChunkDecodeError: as :func:`decode_jsonl`.
    """
    buffer = b""
    number = 0
    iterator = aiter(source)
    try:
        async for block in iterator:
            buffer += block
            if b"\n" not in block:
                continue
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                number += 1
                chunk = _decode_line(line, number)
                if chunk is not None:
                    yield chunk
        chunk = _decode_line(buffer, number + 1)
        if chunk is not None:
            yield chunk
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def _decode_line(line: bytes, number: int) -> Chunk | None:
    line = line.strip()
    if not line:
        return None
    try:
        return decode(line)
    except ChunkDecodeError as exc:
        raise ChunkDecodeError(f"line {number}: {exc.message}", chunk_type=exc.chunk_type,
                               position=exc.position, path=getattr(exc, "path", None),
                               line=number) from exc
