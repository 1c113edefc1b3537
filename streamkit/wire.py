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
from collections.abc import AsyncIterable, AsyncIterator, Callable
from datetime import datetime
from typing import Any, NamedTuple, NoReturn, Union

import msgspec

from ._chunk_base import has_extra_keys, merge_extra_keys
from .chunks import CHUNK_TYPES, Chunk, ChunkBase, chunk_from_builtins
from .errors import ChunkDecodeError, InvalidArgument, InvalidType, StreamkitError
from .validate import optional_int_at_least

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
_TAGGED: Any = Union[tuple(CHUNK_TYPES.values())]  # noqa: UP007 - built from a tuple

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

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The default bound on one SSE line or event, and on one JSON line (``iter_sse``,
``iter_jsonl``, ``SSEParser``): far above any real chunk, far below what would pin a process."""

# msgspec recurses once per nesting level and raises RecursionError past Python's limit (about
# 1,000 levels); these are the errors of values that cannot be encoded at all.
_UNENCODABLE = (TypeError, RecursionError, UnicodeEncodeError, OverflowError)
_ENCODE_ERRORS = (AttributeError, *_UNENCODABLE)

# Every encoder inlines the same class-flag test, so that a chunk costs one Python frame (a
# helper call per chunk was a measured ~10 % of SSE encoding, see benchmarks/README.md): a flat
# payload keeps unknown keys in ``payload.extra``, a nested one (the step ends) anywhere inside,
# which ``payload.has_extra_keys()`` finds; a chunk without a payload has none. (mypy cannot see
# that a set flag means the chunk has a payload: union-attr.) A chunk with ``extra`` keys goes
# to ``_encode_with_extra_keys``; whatever the test or msgspec raises to ``_raise_encode_error``.
# The rule is written once, in ``_writes_extra_keys``; tests/test_wire.py holds the four inlined
# copies to it, text and behaviour (measured again for issue 32: a call adds 12.6 % of the
# instructions of an ``encode``, a typed alias that would drop the ``type: ignore``s 2-3 %).


def _writes_extra_keys(chunk: Any) -> bool:
    """Whether encoding ``chunk`` must write ``extra`` keys back (the slow path): the one
    definition of the test each encoder inlines."""
    return bool(chunk.payload.extra if chunk._flat_payload
                else chunk._nested_payload and chunk.payload.has_extra_keys())


# --- JSON and MessagePack --------------------------------------------------------------------


def encode(chunk: Chunk) -> bytes:
    """Encode one chunk as JSON in Mastra's wire form.

    Args:
        chunk: any chunk.

    Returns:
        The JSON bytes, with ``payload.extra`` keys written beside the modelled ones.

    Raises:
        InvalidType: ``chunk`` is not a chunk (or its payload is not a payload struct), or a
            payload value has a type JSON cannot hold (also a ``TypeError``).
        InvalidArgument: text with a lone surrogate, or values nested beyond msgspec's depth
            limit (also a ``ValueError``).

    Example:
        >>> from streamkit.chunks import TripwireChunk
        >>> encode(TripwireChunk(reason="no", retry=False, run_id="r", from_="AGENT"))
        b'{"type":"tripwire","runId":"r","from":"AGENT","payload":{"reason":"no","retry":false}}'
    """
    try:
        if not (chunk.payload.extra if chunk._flat_payload  # type: ignore[union-attr]
                else chunk._nested_payload and chunk.payload.has_extra_keys()):  # type: ignore[union-attr]
            return _json_encode(chunk)
    except _ENCODE_ERRORS as exc:
        _raise_encode_error(chunk, exc)
    return _encode_with_extra_keys(chunk, _json_encode, ())


def decode(data: bytes | bytearray | memoryview | str) -> Chunk:
    """Decode one chunk from JSON.

    Args:
        data: one JSON object in Mastra's wire form.

    Returns:
        The chunk: a ``DataChunk`` for any ``data-*`` type, else the class of ``CHUNK_TYPES``.

    Raises:
        ChunkDecodeError: malformed JSON (``position`` is the byte offset), an unknown ``type``
            (``chunk_type`` names it), a field of the wrong type (``chunk_type``, and ``path``
            such as ``"$.payload.text"``), nesting too deep to decode, or a ``str`` with a lone
            surrogate (it has no UTF-8 form).
        InvalidType: ``data`` is not bytes, bytearray, memoryview or str.

    Example:
        >>> decode(b'{"type":"data-progress","data":{"pct":50}}')
        DataChunk(type='data-progress', data={'pct': 50})
    """
    try:
        return _json_decode(data)
    except msgspec.DecodeError:
        pass
    except RecursionError as exc:
        raise _too_deep("JSON", exc) from exc
    except (TypeError, UnicodeEncodeError) as exc:
        _raise_undecodable("decode", data, exc, text=True)
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise _malformed("JSON", exc, data) from exc
    except RecursionError as exc:
        raise _too_deep("JSON", exc) from exc
    return _from_builtins(obj)


def encode_msgpack(chunk: Chunk) -> bytes:
    """Encode one chunk as MessagePack (same keys as the JSON form; bytes stay binary).

    Example:
        >>> from streamkit.chunks import TextDelta
        >>> decode_msgpack(encode_msgpack(TextDelta(id="t1", text="hi"))).payload.text
        'hi'
    """
    try:
        if not (chunk.payload.extra if chunk._flat_payload  # type: ignore[union-attr]
                else chunk._nested_payload and chunk.payload.has_extra_keys()):  # type: ignore[union-attr]
            return _msgpack_encode(chunk)
    except _ENCODE_ERRORS as exc:
        _raise_encode_error(chunk, exc)
    return _encode_with_extra_keys(chunk, _msgpack_encode, _MSGPACK_NATIVE)


def decode_msgpack(data: bytes | bytearray | memoryview) -> Chunk:
    """Decode one chunk from MessagePack.

    Raises:
        ChunkDecodeError: as :func:`decode`.
        InvalidType: ``data`` is not bytes, bytearray or memoryview.
    """
    try:
        return _msgpack_decode(data)
    except msgspec.DecodeError:
        pass
    except RecursionError as exc:
        raise _too_deep("MessagePack", exc) from exc
    except TypeError as exc:
        _raise_undecodable("decode_msgpack", data, exc, text=False)
    try:
        obj = msgspec.msgpack.decode(data)
    except msgspec.DecodeError as exc:
        raise _malformed("MessagePack", exc, data) from exc
    except RecursionError as exc:
        raise _too_deep("MessagePack", exc) from exc
    return _from_builtins(obj)


def to_builtins(chunk: Chunk) -> dict[str, Any]:
    """The chunk as JSON-ready builtins (dicts, lists, strings...), in wire form.

    Example:
        >>> from streamkit.chunks import TextDelta
        >>> to_builtins(TextDelta(id="t1", text="hi", extra={"hint": 1}))
        {'type': 'text-delta', 'payload': {'id': 't1', 'text': 'hi', 'hint': 1}}

    Raises:
        InvalidType: ``chunk`` is not a chunk, or a payload value has a type that has no
            builtins form.
        InvalidArgument: values nested beyond msgspec's depth limit.
    """
    try:
        data: dict[str, Any] = msgspec.to_builtins(chunk)
        if has_extra_keys(chunk):
            merge_extra_keys(chunk, data)
    except _UNENCODABLE as exc:
        if not isinstance(chunk, ChunkBase):
            raise InvalidType(_not_a_chunk(chunk)) from None
        raise _unencodable(chunk, exc) from exc
    return data


def from_builtins(obj: object) -> Chunk:
    """The inverse of :func:`to_builtins`: a chunk from its builtins (decoded JSON) form.

    Raises:
        ChunkDecodeError: as :func:`decode`.
    """
    return _from_builtins(obj)


def _from_builtins(obj: object) -> Chunk:
    try:
        return chunk_from_builtins(obj)
    except RecursionError as exc:
        raise _too_deep("data", exc) from exc
    except UnicodeEncodeError as exc:
        # msgspec reads a str given for a number, a bool or bytes as UTF-8 to parse it (or to
        # name it in its error); a lone surrogate has no UTF-8 form.
        raise ChunkDecodeError(f"invalid chunk: a string holds a lone surrogate "
                               f"({exc.object[exc.start:exc.end]!r} at index {exc.start}), "
                               f"which has no UTF-8 form; expected valid Unicode text",
                               position=None) from exc


def _raise_undecodable(name: str, data: object, exc: Exception, *, text: bool) -> NoReturn:
    """What a decoder's typed fast path raised that is not a decode error: a lone surrogate in
    ``str`` input (``ChunkDecodeError``), input of the wrong type (``InvalidType``); a
    ``streamkit.errors`` error (a chunk class's own check) goes on as it is."""
    if isinstance(exc, StreamkitError):
        raise exc
    if isinstance(exc, UnicodeEncodeError) and isinstance(data, str):
        raise ChunkDecodeError(f"malformed JSON: the text holds a lone surrogate "
                               f"({data[exc.start:exc.end]!r} at index {exc.start}), which has "
                               f"no UTF-8 form; expected valid Unicode text",
                               position=None) from exc
    if isinstance(data, (bytes, bytearray, memoryview, str)):
        raise ChunkDecodeError(f"invalid chunk: {type(exc).__name__}: {exc}",
                               position=None) from exc
    kinds = "bytes, bytearray, memoryview" + (" or str" if text else "")
    raise InvalidType(f"{name} takes {kinds}, got {type(data).__name__}") from None


def _too_deep(kind: str, exc: RecursionError) -> ChunkDecodeError:
    return ChunkDecodeError(f"malformed {kind}: nested too deeply to decode ({exc}); a chunk "
                            f"may nest at most a few hundred levels", position=None)


def _encode_with_extra_keys(chunk: Chunk, encode: Callable[[object], bytes],
                            native: tuple[type, ...]) -> bytes:
    """``encode`` of a chunk with ``extra`` keys: its builtins form, the keys merged back in."""
    try:
        return encode(merge_extra_keys(chunk, msgspec.to_builtins(chunk, builtin_types=native)))
    except _UNENCODABLE as exc:
        raise _unencodable(chunk, exc) from exc


def _raise_encode_error(chunk: object, exc: Exception) -> NoReturn:
    """The ``streamkit.errors`` form of what the fast path of an encoder caught."""
    if isinstance(exc, AttributeError):  # no class flags, or a payload that is not a struct
        raise InvalidType(_not_a_chunk(chunk)) from None
    raise _unencodable(chunk, exc) from exc


def _unencodable(chunk: object, exc: BaseException) -> StreamkitError:
    what = f"{type(chunk).__name__} cannot be encoded: {type(exc).__name__}: {exc}"
    if isinstance(exc, TypeError):
        return InvalidType(f"{what}; payload values must be JSON-like (dict, list, str, "
                           f"numbers, bool, None, msgspec Structs, dataclasses)")
    return InvalidArgument(f"{what}; text must be valid Unicode and values nested at most a "
                           f"few hundred levels")


def _not_a_chunk(value: object) -> str:
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

    Time is linear in the bytes fed, however they are split: each read is scanned once, and an
    unfinished line is kept as a list of pieces joined only when its end arrives.

    Args:
        max_event_bytes: the most bytes one line, or the data of one event, may hold
            (default :data:`DEFAULT_MAX_EVENT_BYTES`, 16 MiB); beyond it :meth:`feed` raises
            ``ChunkDecodeError`` instead of buffering without bound. ``None`` turns the limit
            off (for trusted input only).

    Example:
        >>> parser = SSEParser()
        >>> parser.feed(b"data: hel")
        []
        >>> parser.feed(b"lo\\r\\n: keep-alive\\r\\ndata: world\\r\\n\\r\\n")
        ['hello\\nworld']
        >>> parser.close()
    """

    __slots__ = ("_pieces", "_pending", "_skip_lf", "_started", "_data", "_size", "_event",
                 "_limit", "last_event_id", "retry")

    def __init__(self, *, max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES) -> None:
        optional_int_at_least(max_event_bytes, "max_event_bytes", 1)
        self._limit = max_event_bytes
        self._pieces: list[bytes] = []  # the unfinished line, in the pieces it arrived in
        self._pending = 0  # their total length
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._size = 0  # characters of data in the current event
        self._event = ""
        self.last_event_id = ""
        """The value of the last ``id:`` field (``""`` until one arrives)."""
        self.retry: int | None = None
        """The reconnection time in milliseconds from the last valid ``retry:`` field."""

    def feed(self, data: bytes | bytearray | memoryview) -> list[str]:
        """Add bytes; return the data of every event they complete, in order.

        Raises:
            ChunkDecodeError: a line or an event's data grew beyond ``max_event_bytes``.
            InvalidType: ``data`` is not bytes, bytearray or memoryview (a ``str`` too: the
                stream's bytes are decoded here, as UTF-8).
        """
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
        tail = b"".join(self._pieces)
        pending = list(self._data)
        self._pieces, self._pending, self._skip_lf = [], 0, False
        self._data, self._size, self._event = [], 0, ""
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

    def _too_big(self, what: str) -> ChunkDecodeError:
        return ChunkDecodeError(f"SSE {what} is longer than max_event_bytes={self._limit} "
                                f"bytes; raise the limit if such events are expected",
                                position=None)

    def _lines(self, data: bytes | bytearray | memoryview) -> list[str]:
        """Complete lines in ``data`` (plus the buffered unfinished line); keep the rest.

        Only ``data`` is scanned: what was buffered is known to hold no line break.
        """
        chunk = data if data.__class__ is bytes else _bytes_of("SSEParser.feed", data, text=False)
        if not chunk:
            return []
        if self._skip_lf:  # the previous read ended with "\r"; a "\n" here belongs to it
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if 13 in chunk:  # b"\r": an int is a memchr, a bytes needle ~6x slower per read
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = chunk.rfind(b"\n")
        limit = self._limit
        if end < 0:
            if chunk:
                self._pieces.append(chunk)
                self._pending += len(chunk)
                if limit is not None and self._pending > limit:
                    raise self._too_big("line")
            return []
        if self._pieces:
            self._pieces.append(chunk[:end])
            complete = b"".join(self._pieces)
        else:
            complete = chunk[:end]
        rest = chunk[end + 1:]
        self._pieces = [rest] if rest else []
        self._pending = len(rest)
        if limit is not None and (self._pending > limit or (
                len(complete) > limit and max(map(len, complete.split(b"\n"))) > limit)):
            raise self._too_big("line")
        # Line breaks never occur inside a UTF-8 sequence, so the complete part decodes whole.
        text = complete.decode("utf-8", "replace")
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        return text.split("\n")

    def _process(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        data = self._data
        # Counted in characters (at most the bytes they came from) of data since the last
        # dispatch, so many small data lines cannot build an event without bound either.
        size = self._size
        limit = self._limit if self._limit is not None else -1
        for line in lines:
            if line.startswith("data: "):  # by far the most common line: take it first
                data.append(line[6:])
                size += len(line)
                if size > limit >= 0:
                    raise self._too_big("event's data")
                continue
            if not line:
                if data:
                    events.append(SSEEvent("\n".join(data), self._event or "message",
                                           self.last_event_id))
                    data.clear()
                size = 0
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
                size += len(line)
                if size > limit >= 0:
                    raise self._too_big("event's data")
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\x00" not in value:
                    self.last_event_id = value
            elif name == "retry":
                # Bounded: int() refuses strings of more than 4,300 digits (ValueError).
                if value.isascii() and value.isdigit() and len(value) <= 15:
                    self.retry = int(value)
        self._size = size
        return events


def encode_sse(chunk: Chunk) -> bytes:
    """One chunk as a server-sent event: ``data: <json>\\n\\n``.

    Example:
        >>> from streamkit.chunks import AbortChunk
        >>> encode_sse(AbortChunk(run_id="r", from_="AGENT"))
        b'data: {"type":"abort","runId":"r","from":"AGENT","payload":{}}\\n\\n'
    """
    try:
        if not (chunk.payload.extra if chunk._flat_payload  # type: ignore[union-attr]
                else chunk._nested_payload and chunk.payload.has_extra_keys()):  # type: ignore[union-attr]
            # One format, not two concatenations: no intermediate bytes object.
            return b"data: %b\n\n" % _json_encode(chunk)
    except _ENCODE_ERRORS as exc:
        _raise_encode_error(chunk, exc)
    return b"data: %b\n\n" % _encode_with_extra_keys(chunk, _json_encode, ())


async def iter_sse(source: AsyncIterable[bytes], *,
                   max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES
                   ) -> AsyncIterator[Chunk]:
    """Decode a server-sent-event byte stream into chunks.

    Each event's data is one chunk; a ``[DONE]`` event ends the stream (Mastra's server sends
    one). The source is closed (``aclose()``) when iteration ends for any reason.

    Args:
        source: the response body, in reads of any size.
        max_event_bytes: the bound on one line or event (see :class:`SSEParser`).

    Yields:
        Chunks, in order.

    Raises:
        ChunkDecodeError: an event is not a valid chunk, is longer than ``max_event_bytes``,
            or the stream ended inside an event.
        InvalidType: ``source`` is not an async iterable, or it gave something not bytes-like.
    """
    parser = SSEParser(max_event_bytes=max_event_bytes)
    iterator = _aiter(source, "iter_sse")
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


def _aiter(source: Any, name: str) -> AsyncIterator[Any]:
    try:
        return aiter(source)
    except TypeError:
        raise InvalidType(f"{name} reads an async iterable of bytes (a response body), got "
                          f"{type(source).__name__}") from None


# --- JSON lines ------------------------------------------------------------------------------


def encode_jsonl(chunk: Chunk) -> bytes:
    """One chunk as a JSON line (``<json>\\n``); join them for a file."""
    try:
        if not (chunk.payload.extra if chunk._flat_payload  # type: ignore[union-attr]
                else chunk._nested_payload and chunk.payload.has_extra_keys()):  # type: ignore[union-attr]
            return _json_encode(chunk) + b"\n"
    except _ENCODE_ERRORS as exc:
        _raise_encode_error(chunk, exc)
    return _encode_with_extra_keys(chunk, _json_encode, ()) + b"\n"


def decode_jsonl(data: bytes | bytearray | memoryview | str) -> list[Chunk]:
    """Decode every non-blank line of a JSON-lines document.

    Raises:
        ChunkDecodeError: as :func:`decode`, with ``line`` (1-based) set and named in the message.
        InvalidType: ``data`` is not bytes, bytearray, memoryview or str.

    Example:
        >>> lines = b'{"type":"data-a","data":1}\\n\\n{"type":"data-b","data":2}'
        >>> [chunk.type for chunk in decode_jsonl(lines)]
        ['data-a', 'data-b']
    """
    if data.__class__ is bytes:
        raw = data
    elif isinstance(data, str):
        try:
            raw = data.encode()
        except UnicodeEncodeError as exc:
            _raise_undecodable("decode_jsonl", data, exc, text=True)
    else:
        raw = _bytes_of("decode_jsonl", data, text=True)
    chunks: list[Chunk] = []
    for number, line in enumerate(raw.split(b"\n"), 1):
        chunk = _decode_line(line, number)
        if chunk is not None:
            chunks.append(chunk)
    return chunks


async def iter_jsonl(source: AsyncIterable[bytes], *,
                     max_line_bytes: int | None = DEFAULT_MAX_EVENT_BYTES
                     ) -> AsyncIterator[Chunk]:
    """Decode a JSON-lines byte stream, read in pieces of any size, into chunks.

    The last line needs no newline. The source is closed (``aclose()``) when iteration ends.
    Time is linear in the bytes read: an unfinished line is kept in pieces, joined once.

    Args:
        source: the byte stream.
        max_line_bytes: the longest line accepted (default 16 MiB; ``None``: no limit).

    Raises:
        ChunkDecodeError: as :func:`decode_jsonl`, or a line longer than ``max_line_bytes``.
        InvalidType: ``source`` is not an async iterable, or it gave something not bytes-like.
        InvalidArgument: ``max_line_bytes`` is not an int >= 1 or None.
    """
    if max_line_bytes is not None and (type(max_line_bytes) is not int or max_line_bytes < 1):
        raise InvalidArgument(f"max_line_bytes must be an int >= 1 or None, got "
                              f"{max_line_bytes!r}")
    pieces: list[bytes] = []
    pending = 0
    number = 0
    iterator = _aiter(source, "iter_jsonl")
    try:
        async for block in iterator:
            if block.__class__ is not bytes:
                block = _bytes_of("iter_jsonl: each read", block, text=False)
            end = block.rfind(b"\n")
            if end < 0:
                pieces.append(block)
                pending += len(block)
                if max_line_bytes is not None and pending > max_line_bytes:
                    raise _line_too_long(number + 1, max_line_bytes)
                continue
            pieces.append(block[:end])
            lines = b"".join(pieces).split(b"\n")
            rest = block[end + 1:]
            pieces, pending = [rest], len(rest)
            for line in lines:
                number += 1
                if max_line_bytes is not None and len(line) > max_line_bytes:
                    raise _line_too_long(number, max_line_bytes)
                chunk = _decode_line(line, number)
                if chunk is not None:
                    yield chunk
            if max_line_bytes is not None and pending > max_line_bytes:
                raise _line_too_long(number + 1, max_line_bytes)
        chunk = _decode_line(b"".join(pieces), number + 1)
        if chunk is not None:
            yield chunk
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def _bytes_of(name: str, data: object, *, text: bool) -> bytes:
    """``data`` (not ``bytes``: the callers test that first, the common case) as bytes, or the
    ``InvalidType`` that names what was expected."""
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    kinds = "bytes, bytearray, memoryview" + (" or str" if text else "")
    raise InvalidType(f"{name} takes {kinds}, got {type(data).__name__}")


def _line_too_long(number: int, limit: int) -> ChunkDecodeError:
    return ChunkDecodeError(f"line {number}: longer than max_line_bytes={limit} bytes",
                            position=None, line=number)


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
