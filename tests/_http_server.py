"""A real HTTP/1.1 server on 127.0.0.1 for the provider tests, replaying scripted replies.

It runs an asyncio server in its own thread (so a test may block, or run a subprocess, while the
server answers). Tests queue :class:`Reply` objects; each request takes the next one, in order.
Every request is recorded (:class:`Received`: method, path, headers, JSON body) with a
``disconnected`` event the server sets when it sees the client hang up during a held reply —
which is how tests assert that cancelling a stream closed the connection.

Replies can: stream SSE frames (chunked), cut the body at any byte (mid-frame), hold the
connection open after some frames (a stalled or slow server), answer any status with JSON and
headers (``Retry-After``), or drop the connection without answering.
"""

from __future__ import annotations

import abc
import asyncio
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_bytes(name: str) -> bytes:
    """The bytes of ``tests/fixtures/<name>``."""
    return (FIXTURES / name).read_bytes()


def frames_of(body: bytes) -> list[bytes]:
    """Split an SSE body into its events, each keeping its blank-line terminator."""
    parts = body.split(b"\n\n")
    out = [p + b"\n\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


@dataclass
class Reply:
    """What the server answers to one request.

    Attributes:
        status: the HTTP status.
        headers: extra response headers.
        pieces: body pieces, each sent (and flushed) as one write.
        is_chunked: ``Transfer-Encoding: chunked`` (else the body ends when the server closes).
        cut_at: send only this many body bytes, then close the connection.
        hold_after: after this many pieces, send nothing more and wait for the client to hang up.
        is_dropped: close the connection without any response.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[bytes] = field(default_factory=list)
    is_chunked: bool = True
    cut_at: int | None = None
    hold_after: int | None = None
    is_dropped: bool = False

    @classmethod
    def sse(cls, body: bytes | str, **kw: Any) -> Reply:
        """Stream ``body`` (an SSE document, or a fixture name ending in ``.sse``)."""
        if isinstance(body, str):
            body = fixture_bytes(body)
        headers = {"content-type": "text/event-stream", **kw.pop("headers", {})}
        return cls(pieces=frames_of(body), headers=headers, **kw)

    @classmethod
    def json(cls, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        """Answer ``obj`` (a JSON-able value, or a fixture name ending in ``.json``)."""
        data = fixture_bytes(obj) if isinstance(obj, str) and obj.endswith(".json") else \
            json.dumps(obj).encode()
        return cls(status=status, pieces=[data], is_chunked=False,
                   headers={"content-type": "application/json", **(headers or {})})

    @classmethod
    def drop(cls) -> Reply:
        """Close the connection as soon as the request is read."""
        return cls(is_dropped=True)


@dataclass
class Received:
    """One request as the server read it."""

    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    disconnected: threading.Event = field(default_factory=threading.Event)

    @property
    def body(self) -> Any:
        return json.loads(self.raw_body) if self.raw_body else None


class LoopbackServer(abc.ABC):
    """An asyncio HTTP server on 127.0.0.1 in its own thread; use as a context manager.

    The lifecycle both test servers share (this one and ``tests/_hostile_server.py``): start on a
    free port, track each connection's task, cancel them all on exit. ``connections`` counts
    the connections accepted; ``hung_up`` is set when a client goes away mid-request. A
    subclass answers one request in ``_one``.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0
        self.connections = 0
        self.hung_up = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(5)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc_info: Any) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # start_server runs each connection in a task
        self._tasks.add(task)
        self.connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            self.hung_up.set()
        finally:
            self._tasks.discard(task)
            writer.close()

    @abc.abstractmethod
    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection stays open for another."""


class ReplayServer(LoopbackServer):
    """The server; use as a context manager (``with ReplayServer() as server``)."""

    def __init__(self) -> None:
        super().__init__()
        self.replies: list[Reply] = []
        self.requests: list[Received] = []

    @property
    def base_url(self) -> str:
        """The OpenAI-style API root (``/v1``)."""
        return f"{self.url}/v1"

    def enqueue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def _one(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> bool:
        """Serve one request; return whether the connection stays open for another."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        received = Received(method, path, headers, body)
        self.requests.append(received)
        reply = self.replies.pop(0) if self.replies else Reply.json(
            {"error": {"message": "the test server has no reply queued"}}, status=599)
        if reply.is_dropped:
            return False
        try:
            await self._respond(reply, reader, writer, received)
        except ConnectionError:  # the client hung up while the reply was being written
            received.disconnected.set()
            return False
        return reply.is_chunked and reply.cut_at is None and reply.hold_after is None

    async def _respond(self, reply: Reply, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, received: Received) -> None:
        head = [f"HTTP/1.1 {reply.status} Scripted"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        if reply.is_chunked:
            head.append("transfer-encoding: chunked")
        elif reply.cut_at is None and reply.hold_after is None:
            head.append(f"content-length: {sum(len(p) for p in reply.pieces)}")
            head.append("connection: close")
        else:
            head.append("connection: close")  # the body ends when the connection does
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        sent = 0
        for i, piece in enumerate(reply.pieces):
            if reply.hold_after is not None and i >= reply.hold_after:
                break
            if reply.cut_at is not None:
                piece = piece[:max(0, reply.cut_at - sent)]
                if not piece:
                    break
            sent += len(piece)
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if reply.is_chunked else piece)
            await writer.drain()
        if reply.hold_after is not None:
            await reader.read()  # returns b"" when the client hangs up
            received.disconnected.set()
            return
        if reply.cut_at is not None:
            return
        if reply.is_chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
