"""What one request may take: ``Limits`` (every bound, with its default) and ``RequestLimits``,
the ASGI middleware that holds each request to the request-level ones.

What belongs here: the limits themselves and what the *app* enforces under any ASGI server —
the header count and size (431), the body size (413), the time to receive the body (408), the
JSON shape of a body (nesting depth, lone surrogates: 400). What does not: the limits only the
*connection* can enforce (the time to receive the headers, keep-alive idle time, the
connection count, the send deadline for a client that stops reading): ``_connections`` puts
those on uvicorn's protocol.

How a body is read: ``Content-Length`` is checked before a byte is read; then the body is read
into memory, counting, and buffering stops at the first chunk that crosses ``max_body_bytes``
(a chunked body has no length to check up front), so one request holds at most the limit plus
one chunk. Errors carry ``connection: close``: the rest of the body is never read, so the
connection cannot be reused. The body then goes to the route as it came (one
``http.request`` message); later ``receive()`` calls reach the server (disconnects).

Decisions:
    * After a chunked body crosses the limit, up to ``_DISCARD_BYTES`` (256 KiB) more are read
      and thrown away before the 413 is sent (Go's ``net/http`` does the same): closing a
      socket with unread data makes the kernel reset the connection and drop the answer, so a
      client whose body was only a little too large would see a reset instead of the 413. A
      body larger still is cut off: its client may see a reset, but the server reads no more.
    * ``max_body_bytes`` defaults to 4 MiB, the default Mastra's MCP server answers 413 above:
      a chat body resends the whole history, and files travel in it as data URLs, so 1 MiB
      (a common web default) would refuse ordinary conversations with one photo.
    * ``max_json_depth`` defaults to 100 nested arrays/objects (Ruby's ``JSON.parse``
      ``max_nesting``; .NET's 64 would refuse deep tool inputs that clients legitimately
      resend). It is also far enough below Python's recursion limit that a value at the limit
      goes through the run, memory and the encoders (tested at the limit).
    * A lone surrogate (``"\\ud800"``) is refused in the body: it cannot be encoded as UTF-8,
      so it would fail later, mid-stream or in a store. Only bodies that contain a ``\\uD8``…
      ``\\uDF`` escape are searched, so ordinary bodies pay one ``bytes`` search.
    * The depth is read off the text, not from a parsed value (``_depth_exceeds``): it costs
      what one ``json.loads`` costs on an ordinary body, a 4 MiB body built to be slow costs
      ~0.2 s (a walk over the parsed value took 0.4 s for 2.5 MB), and the route parses the
      body once, as before. Only a body with a surrogate escape is parsed here.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, fields
from itertools import accumulate

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import InvalidArgument
from ..validate import int_at_least, seconds
from ._requests import issues_of

__all__ = ["Limits", "RequestLimits", "check_json", "DEFAULT_LIMITS", "request_body"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Every bound the server puts on a request or a connection, with its default.

    Request-level (enforced by the app, under any ASGI server): ``max_body_bytes`` (413),
    ``body_timeout`` (408), ``max_headers`` and ``max_header_bytes`` (431), ``max_json_depth``
    (400). Connection-level (enforced by ``python -m streamkit serve`` and ``uvicorn_config``):
    ``max_header_bytes`` for a head still arriving, ``header_timeout``, ``keep_alive_timeout``,
    ``send_timeout``, ``max_connections``.

    Args:
        max_body_bytes: largest request body, in bytes.
        max_json_depth: deepest nesting of arrays/objects in a JSON body.
        max_headers: most request headers.
        max_header_bytes: largest request headers, in bytes (above: 431; a head still
            incomplete at this size: uvicorn's 400, closed).
        header_timeout: seconds from a connection's first byte of a request (or its opening)
            to the end of the headers; a client that trickles headers is closed after it.
        body_timeout: seconds to receive the whole body once the headers are in.
        keep_alive_timeout: seconds an idle keep-alive connection is kept between requests.
        send_timeout: seconds a response may wait for a client that stopped reading (its
            socket buffers full); then the connection is dropped and its run cancelled, as on a
            disconnect.
        max_connections: most open connections; above it the oldest connection that is not
            in a request is closed to make room. ``None`` (default): derived from the
            process's open-file limit (a quarter kept for the files, database and model
            connections runs open, an eighth for one accept batch: 640 under 1,024 files).

    Raises:
        InvalidArgument: a limit that is not a positive number.

    Example:
        >>> app = create_app([agent], limits=Limits(max_body_bytes=16 * 1024 * 1024))
    """

    max_body_bytes: int = 4 * 1024 * 1024
    max_json_depth: int = 100
    max_headers: int = 100
    max_header_bytes: int = 16 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    send_timeout: float = 30.0
    max_connections: int | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None and item.name == "max_connections":
                continue
            if item.type in ("int", "int | None"):
                int_at_least(value, f"Limits.{item.name}", 1, field=item.name)
            else:
                seconds(value, f"Limits.{item.name}", field=item.name)


DEFAULT_LIMITS = Limits()

#: A ``\\uD800``-``\\uDFFF`` escape: the only way a JSON text can spell a surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


#: Bytes that are not brackets (deleted), and ``{}`` mapped to ``[]``: the nesting skeleton.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SQUARE = bytes.maketrans(b"{}", b"[]")
_STEP = [0] * 256
_STEP[ord("[")], _STEP[ord("]")] = 1, -1


def _depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether the JSON text ``body`` nests arrays/objects deeper than ``limit``, read off the
    text without parsing it (parsing is what recurses).

    Strings are cut out first (escaped backslashes and quotes removed, then every other piece
    between quotes dropped), then only brackets are kept, and the running depth is
    accumulated — all C-level passes over bytes (measured on a loaded 2-CPU machine: 0.1 ms
    for a 15 KB chat body, as much as ``json.loads`` of it; 180 ms for the worst 4 MB body).
    A body with no more opening brackets than ``limit`` (in strings or not) cannot nest deeper
    than that: two byte counts answer for nearly every body (~0.2 µs for a short one, against
    ~2 µs for the passes).
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = b"".join(unescaped.split(b'"')[0::2]).translate(_SQUARE, _NOT_BRACKETS)
    if len(skeleton) <= 2 * limit:
        return False
    return max(accumulate(map(_STEP.__getitem__, skeleton))) > limit


def _lone_surrogate(value: object) -> str | None:
    """The first string (key or value) in ``value`` that holds a lone surrogate, or ``None``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def check_json(body: bytes, *, max_depth: int = DEFAULT_LIMITS.max_json_depth) -> None:
    """Refuse a JSON body nested deeper than ``max_depth`` or holding a lone surrogate.

    A body that is not JSON passes unless its brackets alone nest too deep: the route says
    what it expected.

    Raises:
        InvalidArgument: ``field="(body)"``, ``issue`` saying what was wrong and what is
            expected (the route answers Mastra's ``400 {"error": "Invalid request body",
            "issues": [...]}``).

    Example:
        >>> check_json(b"[" * 101 + b"]" * 101)
        Traceback (most recent call last):
        ...
        streamkit.errors.InvalidArgument: invalid request body: (body): JSON nested deeper...
    """
    if _depth_exceeds(body, max_depth):
        too_deep = f"JSON nested deeper than {max_depth} levels; expected at most " \
                   f"{max_depth} nested arrays/objects"
        raise InvalidArgument(f"invalid request body: (body): {too_deep}", field="(body)",
                              issue=too_deep)
    if _SURROGATE_ESCAPE.search(body) is None:
        return
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # not JSON: the route's own 400 says so
        return
    bad = _lone_surrogate(data)
    if bad is not None:
        issue = (f"a string holds a lone surrogate ({bad!r:.60}); expected valid Unicode "
                 f"(a \\ud800-\\udfff escape only as half of a pair)")
        raise InvalidArgument(f"invalid request body: (body): {issue}", field="(body)",
                              issue=issue)


#: The scope key under which ``RequestLimits`` leaves the whole body it read and checked.
BODY = "streamkit.body"


async def request_body(request: Request) -> bytes:
    """The request's whole body: what ``RequestLimits`` read (within its limits) when the app
    runs inside it, else ``request.body()``. Starlette's ``body()`` would read the same bytes
    again through an async generator over the replayed message (~1.9 µs a request)."""
    body = request.scope.get(BODY)
    return body if body.__class__ is bytes else await request.body()


class _TooLarge(Exception):
    pass


#: Bytes read and thrown away after a chunked body crosses the limit (module docstring).
_DISCARD_BYTES = 256 * 1024


class RequestLimits:
    """ASGI middleware holding every HTTP request to the request-level ``Limits`` (see the
    module docstring).

    Args:
        app: the app it wraps.
        limits: the bounds.
    """

    def __init__(self, app: ASGIApp, limits: Limits = DEFAULT_LIMITS) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        headers = scope["headers"]
        if len(headers) > limits.max_headers:
            await _refuse(send, 431, f"Request has too many headers: {len(headers)}; the "
                                     f"limit is {limits.max_headers}")
            return
        size = 0
        declared = b""
        for name, value in headers:
            size += len(name) + len(value) + 4  # as sent: "name: value\r\n"
            if name == b"content-length":
                declared = value
        if size > limits.max_header_bytes:
            await _refuse(send, 431, f"Request headers too large: {size} bytes; the limit is "
                                     f"{limits.max_header_bytes}")
            return
        if declared.isdigit() and int(declared) > limits.max_body_bytes:
            await _refuse(send, 413, _too_large(limits))
            return
        try:
            first = await _read_body_within(receive, limits.max_body_bytes,
                                            limits.body_timeout)
        except _TooLarge:
            await _refuse(send, 413, _too_large(limits))
            return
        except TimeoutError:
            await _refuse(send, 408, f"Request body not received in time: the limit is "
                                     f"{limits.body_timeout:g} seconds")
            return
        if first["type"] != "http.request":
            return  # the client left before its body was in: nobody to answer
        body = scope[BODY] = first["body"]
        if body:
            try:
                check_json(body, max_depth=limits.max_json_depth)
            except InvalidArgument as exc:
                await _refuse(send, 400, "Invalid request body", issues=issues_of(exc))
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return first

        await self.app(scope, replay, send)


def _too_large(limits: Limits) -> str:
    return f"Request body too large: the limit is {limits.max_body_bytes} bytes"


async def _read_body_within(receive: Receive, limit: int, seconds: float) -> Message:
    """``_read_body`` with a deadline: ``TimeoutError`` when the body is not in after
    ``seconds``.

    What ``asyncio.timeout`` does, minus what a request cannot need (rescheduling, nesting):
    one timer that cancels this task, and the cancellation turned into ``TimeoutError`` only
    when the timer caused it (``uncancel`` back to the count it found, as ``asyncio.timeout``
    does, so a cancellation from outside still cancels). ``asyncio.timeout`` makes three
    running-loop lookups (each a ``getpid()`` on CPython 3.11) and a context manager; this
    makes one lookup and one timer.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task(loop)
    if task is None:  # not inside a task (no ASGI server calls an app so): no deadline to set
        return await _read_body(receive, limit)
    cancelling = task.cancelling()
    fired = False

    def expire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    timer = loop.call_at(loop.time() + seconds, expire)
    try:
        return await _read_body(receive, limit)
    except asyncio.CancelledError:
        if fired and task.uncancel() <= cancelling:
            raise TimeoutError from None
        raise
    finally:
        timer.cancel()


async def _read_body(receive: Receive, limit: int) -> Message:
    """The whole body as one ``http.request`` message (or the ``http.disconnect`` that came
    first); stops reading as soon as it is over ``limit``."""
    message = await receive()
    if message["type"] != "http.request":
        return message
    body: bytes = message.get("body", b"")
    if len(body) > limit:
        raise _TooLarge
    if not message.get("more_body", False):
        return message
    parts = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return message
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            await _discard(receive, message, _DISCARD_BYTES)
            raise _TooLarge
        parts.append(chunk)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(parts), "more_body": False}


async def _discard(receive: Receive, message: Message, budget: int) -> None:
    """Read and drop the rest of a body, up to ``budget`` bytes (module docstring)."""
    while message["type"] == "http.request" and message.get("more_body", False) and budget > 0:
        message = await receive()
        budget -= len(message.get("body", b""))


async def _refuse(send: Send, status: int, error: str, **extra: object) -> None:
    """A Mastra-style JSON error; the connection is closed after it (the body, or the rest of
    it, is never read)."""
    body = json.dumps({"error": error, **extra}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
