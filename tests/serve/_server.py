"""Run a streamkit app under real uvicorn on 127.0.0.1 (a free port) for the serving tests.

``running(app)`` serves inside the test's own event loop (async tests: the test can share
``asyncio.Event``s with tools and models); ``ServerThread(app)`` serves from a thread with its own
loop (sync tests that drive a subprocess or a browser). Both bind the socket here, so the port is
known before the first request, and both stop uvicorn and wait for it, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

STOP_TIMEOUT = 10.0


def _socket(sndbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if sndbuf is not None:  # accepted connections inherit it (Linux)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.bind(("127.0.0.1", 0))
    return sock


def _config(app: Any) -> uvicorn.Config:
    return uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)


@contextlib.asynccontextmanager
async def serving(config: uvicorn.Config, sock: socket.socket) -> AsyncIterator[uvicorn.Server]:
    """Serve ``config`` on the bound ``sock`` in this loop; yields the server once it accepts,
    and stops it (waited for, bounded) and closes ``sock`` when the block ends."""
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.005)  # polling uvicorn's startup flag; no timing asserted
        yield server
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, STOP_TIMEOUT)
        sock.close()


@contextlib.asynccontextmanager
async def running(app: Any, *, sndbuf: int | None = None) -> AsyncIterator[str]:
    """Serve ``app`` in this loop; yields its base URL (``http://127.0.0.1:PORT``).
    ``sndbuf`` caps the kernel send buffer of its connections."""
    sock = _socket(sndbuf)
    async with serving(_config(app), sock):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


class ServerThread:
    """Serve ``app`` from a thread (``with ServerThread(app) as url: ...``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sock = _socket()
        self.server = uvicorn.Server(_config(app))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
            self.ready.set()
        finally:
            self.loop.close()

    async def _serve(self) -> None:
        task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started and not task.done():
            await asyncio.sleep(0.005)
        self.ready.set()
        await task

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __enter__(self) -> str:
        self.thread.start()
        if not self.ready.wait(STOP_TIMEOUT) or self.error is not None:
            raise RuntimeError(f"uvicorn did not start: {self.error!r}")
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(STOP_TIMEOUT)
        self.sock.close()
