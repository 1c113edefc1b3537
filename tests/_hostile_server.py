"""A misbehaving HTTP/1.1 server on 127.0.0.1 (stdlib asyncio, its own thread) for hostile tests.

Each request takes the next queued :class:`Misbehaviour`: a status and headers, then body pieces
that may be produced lazily (a 50 MB error page is never held in memory), sent with a pause
between pieces (a server that drips), and an ending: finish the body, close the connection
mid-body, or hang until the client goes away. The server counts the body bytes it managed to
write and notes when the client hung up, so a test can tell how much a client read.

Unlike ``tests/_http_server.py`` (replays of recorded, well-behaved streams), everything here is
about what a hostile or broken server does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._http_server import LoopbackServer

__all__ = ["Misbehaviour", "HostileServer", "sse_body"]


def sse_body(*frames: bytes | str) -> bytes:
    """``data: <frame>\\n\\n`` for each frame."""
    out = b""
    for frame in frames:
        data = frame.encode() if isinstance(frame, str) else frame
        out += b"data: " + data + b"\n\n"
    return out


@dataclass
class Misbehaviour:
    """What the server does with one request.

    Attributes:
        status: the HTTP status.
        headers: response headers.
        pieces: the body, as pieces written one at a time (a callable is called per request,
            so a huge body can be a generator).
        is_chunked: ``Transfer-Encoding: chunked`` (else the body ends when the connection does).
        pause: seconds to wait before each piece (a dripping server).
        ending: ``"finish"`` the body, ``"close"`` the connection where the pieces end, or
            ``"hang"`` (send nothing more until the client hangs up).
    """

    status: int = 200
    headers: dict[str, str] = field(
        default_factory=lambda: {"content-type": "text/event-stream"})
    pieces: Iterable[bytes] | Callable[[], Iterable[bytes]] = ()
    is_chunked: bool = True
    pause: float = 0.0
    ending: Literal["finish", "close", "hang"] = "finish"

    @classmethod
    def sse(cls, body: bytes, *, piece: int | None = None, **kw: Any) -> Misbehaviour:
        """An SSE body sent whole, or in pieces of ``piece`` bytes."""
        step = piece or max(1, len(body))
        return cls(pieces=[body[i:i + step] for i in range(0, len(body), step)], **kw)


class HostileServer(LoopbackServer):
    """The server; use as a context manager. ``written`` and ``hung_up`` describe the last
    request served."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[Misbehaviour] = []
        self.requests = 0
        self.written = 0

    def enqueue(self, *behaviours: Misbehaviour) -> None:
        self.queue.extend(behaviours)

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        await reader.readexactly(length)
        self.requests += 1
        self.written = 0
        self.hung_up.clear()
        how = self.queue.pop(0) if self.queue else Misbehaviour(
            status=599, headers={}, pieces=[b"no misbehaviour queued"], is_chunked=False,
            ending="close")
        lines = [f"HTTP/1.1 {how.status} Hostile", *(f"{k}: {v}" for k, v in how.headers.items())]
        lines.append("transfer-encoding: chunked" if how.is_chunked else "connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        pieces = how.pieces() if callable(how.pieces) else how.pieces
        for piece in pieces:
            if not piece:
                continue  # an empty chunk would end a chunked body
            if how.pause:
                await asyncio.sleep(how.pause)  # the misbehaviour itself, not a test's timing
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if how.is_chunked else piece)
            await writer.drain()
            self.written += len(piece)
        if how.ending == "hang":
            await reader.read()  # b"" once the client hangs up
            self.hung_up.set()
            return False
        if how.ending == "close" or not how.is_chunked:
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True
