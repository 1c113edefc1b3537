"""Server-sent events over ASGI, with backpressure, heartbeats and disconnects.

What belongs here: ``EventStream`` — one response's frames, produced by their own task into a
small bounded buffer — and ``SSEResponse``, the ASGI response that sends them. What does not:
what the frames say (``_mastra``, ``_ui_stream``), routing (``_app``).

Why a producer task and a bounded buffer:

* **Backpressure.** The producer (the agent run, framed) waits when the buffer is full, and the
  buffer empties only as fast as ``send`` returns — which uvicorn holds back while the socket's
  write buffer is full. A client that reads slowly slows the run down (the model stream is
  pulled no faster than the client reads) instead of making the server buffer the whole answer.
* **Heartbeats.** While no frame arrives for ``heartbeat`` seconds (a tool that runs long) the
  response sends an SSE comment, ``: heartbeat``, which keeps proxies from closing an idle
  connection. Both clients skip comments (``docs/protocols.md``, "Mastra's agent API": client-js
  keeps only pieces that start with ``data: ``; the AI SDK parses SSE).
* **Disconnects.** A task listens for ``http.disconnect``; when the client goes away the
  producer is cancelled, which closes the agent's stream and with it the model's request. A run
  ended that way never reaches its ``finish`` node, so nothing of the turn is stored.
* One task runs the whole agent stream, so context variables set inside the run (tracing
  spans) stay in one context from start to end.

Frames already waiting are sent together in one ``send`` (fewer writes under load); a wait
for the next frame is one future, woken by the producer, the heartbeat's timer or the
disconnect listener (no ``asyncio.wait`` per batch).

The streaming routes hand ``EventStream.of_run`` the run itself and a ``Framing`` (how the
route turns a chunk into frames): the producer frames each chunk in its own loop, so a chunk
passes one generator (the run's) on its way to the buffer, not two (the run's and a framing
generator around it). Measured per text delta on the chat route (200-delta streams, in
process): see ``benchmarks/README.md``, "Serving", third pass.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..chunks import Chunk, ErrorChunk
from ..errors import StreamkitError

if TYPE_CHECKING:
    from ..agent import AgentStream

__all__ = ["EventStream", "Framing", "SSEResponse", "HEARTBEAT", "DONE", "SSE_HEADERS",
           "CLOSE_TIMEOUT"]

#: The comment sent while nothing else is (``chatRoute``'s ``heartbeatMs`` sends the same).
HEARTBEAT = b": heartbeat\n\n"
#: The last event of both protocols.
DONE = b"data: [DONE]\n\n"
#: Mastra's stream headers (``docs/protocols.md``, "Mastra's agent API").
SSE_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-accel-buffering": "no",
}

#: Longest wait for a cancelled run to finish closing (its model stream, its tools).
CLOSE_TIMEOUT = 10.0


#: Encoded header lists by the headers they were encoded from (the routes send the same few
#: header sets again and again, so each is encoded once).
_RAW_HEADERS: dict[tuple[tuple[str, str], ...], list[tuple[bytes, bytes]]] = {}


def _raw_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """``headers`` as ASGI's raw list (lower-case latin-1 names, latin-1 values), remembered
    for up to 64 distinct header sets (past that, encoded each time)."""
    key = tuple(headers.items())
    found = _RAW_HEADERS.get(key)
    if found is not None:
        return found
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in key]
    if len(_RAW_HEADERS) < 64:
        _RAW_HEADERS[key] = raw
    return raw


def _wake(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


class Framing(Protocol):
    """How a streaming route turns one run's chunks into SSE frames (``EventStream.of_run``).

    The rules every route shares are ``EventStream``'s: a run whose first chunk is an
    ``error`` (it failed before it started) raises its error, so the route still answers JSON;
    a ``StreamkitError`` raised after a frame was sent becomes ``failed``'s in-band frame; the
    run is closed however it ends, and ``end`` follows its last chunk."""

    def frame(self, chunk: Chunk, /) -> bytes:
        """The frames of one chunk, ``b""`` when the client sees nothing of it."""
        ...

    def failed(self, error: StreamkitError, /) -> bytes:
        """The in-band error frame of a run that failed after frames were sent."""
        ...

    def end(self) -> bytes:
        """What follows the run's last chunk (``data: [DONE]`` included)."""
        ...


class EventStream:
    """The frames of one response, produced by their own task into a bounded buffer.

    Args:
        frames: an async iterator of SSE frames (bytes); closed when the stream ends or is
            cancelled.
        queue_size: frames that may wait for the client; beyond that the producer waits.

    ``await first()`` starts the producer and returns the first frame, or raises what the
    producer raised before it (so a route can still answer with a JSON error: nothing has been
    sent yet). Then ``SSEResponse`` sends the rest.

    The buffer is a list and two futures, not an ``asyncio.Queue``: the producer appends
    without awaiting until the buffer is full, the consumer takes everything waiting at once
    (one copy and one ``send`` per batch, nothing per frame); a queue's ``put``/``get`` per
    frame cost more than framing the chunk (measured under the load test). The end and a
    failure are flags beside the buffer, not items in it.
    """

    def __init__(self, frames: AsyncIterator[bytes] | None, *, queue_size: int = 64) -> None:
        self._frames = frames
        self._run: AgentStream | None = None
        self._framing: Framing | None = None
        self._size = queue_size
        self._buffer: list[bytes] = []
        self._ended = False
        self._error: Exception | None = None
        self._room: asyncio.Future[None] | None = None  # the producer waits on it when full
        self._arrived: asyncio.Future[None] | None = None  # the consumer waits on it when empty
        self._task: asyncio.Task[None] | None = None
        # Set by ``first()``: the loop is looked up once per response (on CPython 3.11 each
        # ``asyncio.get_running_loop()`` is a ``getpid()`` system call, ~0.1 µs here; py-spy
        # --native put 3-5 % of the server's samples on it, which an A/B run without any
        # lookup did not confirm: py-spy's samples pile up at system calls).
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def of_run(cls, run: AgentStream, framing: Framing, *, queue_size: int = 64) -> EventStream:
        """The frames of one run: each chunk framed by ``framing`` inside the producer's loop
        (see ``Framing`` for what happens when the run fails)."""
        events = cls(None, queue_size=queue_size)
        events._run, events._framing = run, framing
        return events

    async def _produce(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            if self._run is not None and self._framing is not None:
                await self._produce_run(self._run, self._framing, loop)
            elif self._frames is not None:
                await self._produce_frames(self._frames, loop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, raised there
            self._error = exc
        finally:
            self._ended = True
            _wake(self._arrived)

    async def _produce_frames(self, frames: AsyncIterator[bytes],
                              loop: asyncio.AbstractEventLoop) -> None:
        buffer, size = self._buffer, self._size
        try:
            async for frame in frames:
                buffer.append(frame)
                arrived = self._arrived
                if arrived is not None:  # the consumer waits: woken once, then forgotten
                    self._arrived = None
                    _wake(arrived)
                if len(buffer) >= size:
                    self._room = loop.create_future()
                    await self._room
        finally:
            closer = getattr(frames, "aclose", None)
            if closer is not None:
                await closer()

    async def _produce_run(self, run: AgentStream, framing: Framing,
                           loop: asyncio.AbstractEventLoop) -> None:
        # The same buffer steps as ``_produce_frames`` (kept inline in both: this loop runs
        # once per chunk of every stream).
        buffer, size = self._buffer, self._size
        frame = framing.frame
        sent = False
        try:
            async for chunk in run:
                if not sent and isinstance(chunk, ErrorChunk):
                    await run.result()  # a run that failed before it started: raises why
                data = frame(chunk)
                if not data:
                    continue
                sent = True
                buffer.append(data)
                arrived = self._arrived
                if arrived is not None:  # the consumer waits: woken once, then forgotten
                    self._arrived = None
                    _wake(arrived)
                if len(buffer) >= size:
                    self._room = loop.create_future()
                    await self._room
        except StreamkitError as exc:
            if not sent:
                raise
            buffer.append(framing.failed(exc))
        finally:
            await run.aclose()
        buffer.append(framing.end())

    async def first(self) -> bytes:
        """Start producing; the first frame.

        Raises:
            Exception: what the frames raised before the first frame (the producer is done).
        """
        loop = self._loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._produce(loop))
        try:
            if not self._buffer and not self._ended:
                self._arrived = loop.create_future()
                await self._arrived
                self._arrived = None
        except BaseException:
            await self.cancel()
            raise
        if self._buffer:
            frame = self._buffer.pop(0)
            _wake(self._room)
            return frame
        if self._error is not None:
            error, self._error = self._error, None
            await self.cancel()
            raise error
        return b""

    def ready(self) -> list[bytes] | None:
        """Every frame waiting now, ``[]`` when none, ``None`` at the end.

        Raises:
            Exception: what the frames raised after the first frame (the frame iterators turn
                run errors into an in-band error event first, so this is a bug: it is raised
                for the server to log, and the response is cut short).
        """
        buffer = self._buffer
        if buffer:
            out = buffer[:]
            buffer.clear()
            _wake(self._room)
            return out
        if not self._ended:
            return []
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return None

    async def wait(self, timeout: float) -> bool:
        """Wait until a frame or the end is ready (``True``), ``timeout`` passes or ``wake()``
        is called (``False`` for both, unless a frame arrived meanwhile)."""
        if self._buffer or self._ended:
            return True
        loop = self._loop or asyncio.get_running_loop()
        arrived = self._arrived = loop.create_future()
        timer = loop.call_later(timeout, _wake, arrived)
        try:
            await arrived
        finally:
            timer.cancel()
            self._arrived = None
        return bool(self._buffer) or self._ended

    @property
    def produced(self) -> bool:
        """The producer has ended without an error: what ``ready()`` returns now is the rest
        of the stream."""
        return self._ended and self._error is None

    @property
    def finished(self) -> bool:
        """Ended, nothing left to take and nothing to raise: the next ``ready()`` is
        ``None``."""
        return self._ended and not self._buffer and self._error is None

    def wake(self) -> None:
        """End a ``wait()`` now (the client has gone)."""
        _wake(self._arrived)

    async def cancel(self) -> None:
        """Stop the producer (and with it the run); waits, bounded, until it has closed."""
        task = self._task
        if task is None or task.done():
            if task is not None and not task.cancelled():
                task.exception()  # retrieved: nothing is left for the loop to warn about
            return
        task.cancel()
        await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)


class SSEResponse(Response):
    """An ASGI response sending an ``EventStream`` (see the module docstring).

    Args:
        events: the stream (``first()`` already awaited).
        first: its first frame.
        headers: the response headers.
        heartbeat: seconds of silence before a ``: heartbeat`` comment is sent.
    """

    def __init__(self, events: EventStream, first: bytes, *, headers: Mapping[str, str],
                 heartbeat: float) -> None:
        # Not ``super().__init__``: with no body it would declare ``content-length: 0``.
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_raw_headers(headers))  # a copy: middleware may add to it
        self._events = events
        self._first = first
        self._heartbeat = heartbeat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        events = self._events
        if events.produced:
            # The whole stream was produced while the route waited for its first frame (a
            # short answer, no real waits in the run): head and body, no listener task.
            try:
                await send({"type": "http.response.start", "status": self.status_code,
                            "headers": self.raw_headers})
                rest = events.ready()
                await send({"type": "http.response.body",
                            "body": b"".join([self._first, *rest]) if rest else self._first,
                            "more_body": False})
            except OSError:
                pass  # the client went away while we were writing
            finally:
                await events.cancel()
            return
        disconnected = False

        async def listen() -> None:
            nonlocal disconnected
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected = True
                    events.wake()
                    return

        listener = (events._loop or asyncio.get_running_loop()).create_task(listen())
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            # The first frame goes out with whatever followed it by now, and the last batch
            # with the end of the body: a short stream is one write after the headers.
            pending = self._first
            while not disconnected:
                batch = events.ready()
                if batch is None:
                    await send({"type": "http.response.body", "body": pending,
                                "more_body": False})
                    return
                if batch:
                    if pending:
                        batch.insert(0, pending)
                        pending = b""
                    end = events.finished
                    await send({"type": "http.response.body",
                                "body": batch[0] if len(batch) == 1 else b"".join(batch),
                                "more_body": not end})
                    if end:
                        return
                    continue
                if pending:
                    await send({"type": "http.response.body", "body": pending,
                                "more_body": True})
                    pending = b""
                    continue
                if not await events.wait(self._heartbeat) and not disconnected:
                    await send({"type": "http.response.body", "body": HEARTBEAT,
                                "more_body": True})
        except OSError:
            pass  # the client went away while we were writing: same as a disconnect
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            await events.cancel()
