"""Backpressure, disconnects and heartbeats, with real clients on real sockets (uvicorn on
127.0.0.1 in the test's loop, so the test shares ``asyncio.Event``s with the model and tools).

No sleeps: the tests wait (bounded) on events the model, the tool or the client sets."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamkit import Agent
from streamkit.chunks import (
    Finish,
    FinishPayload,
    StepOutputPayload,
    StepResultPayload,
    TextDelta,
    TextEnd,
    TextStart,
    UsagePayload,
)
from streamkit.memory import Memory, SQLiteStore
from streamkit.models import ModelRequest
from streamkit.serve import create_app
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.tools import tool

from ._server import running

WAIT = 20.0  # the longest any test waits for an event (a bound, not a timing)

ROUTES = [pytest.param("mastra", id="mastra-stream"), pytest.param("chat", id="ai-sdk-chat")]


class TextModel:
    """Streams ``count`` deltas of ``size`` characters; after delta ``hold_at`` it waits for
    ``release``. Counts what it produced and records how its stream ended."""

    provider = "test"
    model_id = "text-model"

    def __init__(self, count: int, *, size: int = 8, hold_at: int | None = None) -> None:
        self.count = count
        self.piece = "x" * (size - 1) + " "
        self.hold_at = hold_at
        self.release = asyncio.Event()
        self.held = asyncio.Event()  # set when the model starts waiting for ``release``
        self.produced = 0
        self.closed = asyncio.Event()
        self.finished = False

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        rid = request.run_id
        try:
            yield TextStart(id="t1", run_id=rid, from_="AGENT")
            for i in range(self.count):
                self.produced += 1
                yield TextDelta(id="t1", text=self.piece, run_id=rid, from_="AGENT")
                if i == self.hold_at:
                    self.held.set()
                    await self.release.wait()
            yield TextEnd(id="t1", run_id=rid, from_="AGENT")
            yield Finish(payload=FinishPayload(
                step_result=StepResultPayload(reason="stop"),
                output=StepOutputPayload(usage=UsagePayload(input_tokens=1, output_tokens=1,
                                                            total_tokens=2))),
                run_id=rid, from_="AGENT")
            self.finished = True
        finally:
            self.closed.set()


def request_for(route: str, text_: str = "go", thread: str = "t1") -> tuple[str, dict[str, Any]]:
    memory = {"thread": thread, "resource": "u1"}
    if route == "mastra":
        return "/api/agents/a/stream", {"messages": text_, "memory": memory}
    return "/chat/a", {"id": "c", "trigger": "submit-message", "memory": memory, "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": text_}]}]}


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Memory]:
    mem = Memory(SQLiteStore(str(tmp_path / "flow.sqlite3")))
    yield mem
    await mem.close()


@pytest.mark.parametrize("route", ROUTES)
async def test_a_client_that_disconnects_mid_stream_ends_the_run(route: str,
                                                                 memory: Memory) -> None:
    model = TextModel(10, hold_at=3)  # waits after 4 deltas, until the run is closed
    agent = Agent(id="a", model=model, memory=memory)
    path, body = request_for(route)
    async with running(create_app(agent)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
            async with client.stream("POST", path, json=body) as response:
                seen = 0
                async for line in response.aiter_lines():
                    seen += '"text-delta"' in line
                    if seen == 2:
                        break  # leave mid-stream: the response is closed on exit
        await asyncio.wait_for(model.closed.wait(), WAIT)  # the model's stream was closed
    assert not model.finished and model.produced == 4
    assert await memory.get_thread("t1") is None  # nothing of the turn was stored


async def test_a_client_that_leaves_a_generate_ends_the_run(memory: Memory) -> None:
    model = TextModel(10, hold_at=3)
    agent = Agent(id="a", model=model, memory=memory)
    body = json.dumps({"messages": "go", "memory": {"thread": "t1", "resource": "u1"}}).encode()
    async with running(create_app(agent)) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /api/agents/a/generate HTTP/1.1\r\nhost: x\r\ncontent-type: "
                     b"application/json\r\ncontent-length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        await writer.drain()
        await asyncio.wait_for(model.held.wait(), WAIT)  # the run is inside the model now
        writer.close()  # the client leaves before the answer
        await asyncio.wait_for(model.closed.wait(), WAIT)
    assert not model.finished
    assert await memory.get_thread("t1") is None


@pytest.mark.parametrize("route", ROUTES)
async def test_a_disconnect_while_a_tool_runs_cancels_the_tool(route: str,
                                                               memory: Memory) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def slow(writer: Any = None) -> str:
        """Waits until cancelled."""
        writer.custom({"type": "data-progress", "data": {"pct": 1}})
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    agent = Agent(id="a", model=ScriptedModel([tool_call("slow", {}), text("done")]),
                  tools=[slow], memory=memory)
    path, body = request_for(route)
    async with running(create_app(agent)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
            async with client.stream("POST", path, json=body) as response:
                async for line in response.aiter_lines():
                    if "data-progress" in line:
                        break
        await asyncio.wait_for(cancelled.wait(), WAIT)
    assert started.is_set()
    assert await memory.get_thread("t1") is None


@pytest.mark.parametrize("route", ROUTES)
async def test_heartbeats_while_a_tool_runs_long(route: str) -> None:
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        """Waits for the test."""
        await release.wait()
        return "finally"

    agent = Agent(id="a", model=ScriptedModel([tool_call("slow", {}), text("done")]),
                  tools=[slow])
    path, body = request_for(route)
    body.pop("memory")
    lines: list[str] = []
    async with running(create_app(agent, heartbeat=0.01)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
            async with client.stream("POST", path, json=body) as response:
                async for line in response.aiter_lines():
                    lines.append(line)
                    if line == ": heartbeat":
                        release.set()  # the tool may finish once a heartbeat was seen
    beat = lines.index(": heartbeat")
    result = next(i for i, ln in enumerate(lines) if "finally" in ln)
    assert beat < result and lines[-2:] == ["data: [DONE]", ""]
    assert lines[beat + 1] == ""  # a comment event of its own (": heartbeat\n\n")


BUFFER = 32 * 1024  # the client's receive buffer and the server's send buffer


async def _read_http_slowly(url: str, path: str, body: bytes, on_read: Any) -> bytes:
    """POST with a raw socket whose receive buffer is small, reading 16 KiB at a time and
    calling ``on_read(new_bytes)`` after each read."""
    host, port = url.removeprefix("http://").split(":")
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
    sock.setblocking(False)
    await loop.sock_connect(sock, (host, int(port)))
    head = (f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
    await loop.sock_sendall(sock, head + body)
    received = bytearray()
    try:
        while True:
            data = await asyncio.wait_for(loop.sock_recv(sock, 16 * 1024), WAIT)
            if not data:
                return bytes(received)
            received += data
            on_read(data)
    finally:
        sock.close()


class MarkerCounter:
    """Counts a marker in a byte stream read in pieces (a marker may straddle two reads)."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.count = 0
        self.tail = b""

    def feed(self, data: bytes) -> int:
        joined = self.tail + data
        self.count += joined.count(self.marker) - self.tail.count(self.marker)
        self.tail = joined[-len(self.marker) + 1:]
        return self.count


@pytest.mark.parametrize("route", ROUTES)
async def test_a_slow_client_holds_the_run_back_instead_of_the_server_buffering(
        route: str) -> None:
    size, count, queue = 16 * 1024, 400, 8
    model = TextModel(count, size=size)  # 6.4 MB of text deltas
    agent = Agent(id="a", model=model)
    path, payload = request_for(route)
    payload.pop("memory")
    # What may legitimately be in flight: the queue, the batch being written (the whole queue
    # taken at once, issue 28), asyncio's write buffer (64 KiB high-water mark) and the
    # kernel's socket buffers (the kernel doubles what is set). Without backpressure the model
    # runs ahead by the whole answer.
    in_flight = 64 * 1024 + 2 * BUFFER + 2 * BUFFER
    bound = 2 * queue + in_flight // size + 4
    assert bound < count // 4
    ahead: list[int] = []
    counter = MarkerCounter(b'"text-delta"')

    def on_read(data: bytes) -> None:
        ahead.append(model.produced - counter.feed(data))

    async with running(create_app(agent, queue_size=queue), sndbuf=BUFFER) as url:
        body = await _read_http_slowly(url, path, json.dumps(payload).encode(), on_read)
    assert body.count(b'"text-delta"') == count and body.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
    assert max(ahead) <= bound, f"the server ran {max(ahead)} deltas ahead of the client"
