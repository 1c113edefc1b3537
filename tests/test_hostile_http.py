"""Bounded time and bounded memory on the HTTP client, against a misbehaving server.

A server that drips a byte at a time never trips a read timeout: the model call's total
deadline ends it. Retries share that deadline. Error bodies are read only up to the 64 KB that
is kept, and a server-sent event (or a JSON response) larger than ``max_event_bytes`` fails the
call instead of being buffered. Every wait in these tests is bounded by ``WAIT``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from streamkit.errors import APICallError, StreamkitError
from streamkit.models import AnthropicModel, ModelRequest, OpenAIChatModel
from streamkit.models._http import DEFAULT_DEADLINE, DEFAULT_TIMEOUT

from ._hostile_server import HostileServer, Misbehaviour, sse_body

WAIT = 10.0
REQUEST = ModelRequest(prompt=[{"role": "user", "content": "hi"}])
TEXT = sse_body(json.dumps({"choices": [{"delta": {"content": "Hello"}}]}),
                json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]}), "[DONE]")


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with HostileServer() as s:
        yield s


async def call(model: Any) -> list[Any]:
    async with asyncio.timeout(WAIT):
        return [chunk async for chunk in model.stream(REQUEST)]


def test_the_defaults_are_bounded() -> None:
    assert DEFAULT_TIMEOUT.connect == 10.0 and DEFAULT_TIMEOUT.read == 120.0
    assert DEFAULT_TIMEOUT.write == 30.0 and DEFAULT_TIMEOUT.pool == 10.0
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9")
    assert model.retry_policy.deadline == DEFAULT_DEADLINE == 600.0
    assert model.max_event_bytes == 16 * 1024 * 1024


@pytest.mark.parametrize("bad", [0, -1.0, "10", True])
def test_a_deadline_must_be_positive_seconds(bad: Any) -> None:
    with pytest.raises(StreamkitError, match="deadline"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9", deadline=bad)


@pytest.mark.parametrize("make", [
    pytest.param(lambda url, **kw: OpenAIChatModel("m", base_url=url, **kw), id="openai"),
    pytest.param(lambda url, **kw: AnthropicModel("m", base_url=url, **kw), id="anthropic"),
])
async def test_a_dripping_server_trips_the_deadline(server: HostileServer, make: Any) -> None:
    # 1 byte per 20 ms: no read ever waits long, so only the total deadline can end it.
    server.enqueue(Misbehaviour.sse(TEXT, piece=1, pause=0.02))
    before = server.requests
    async with make(server.url, deadline=1.0, max_retries=3) as model:
        with pytest.raises(APICallError, match="deadline of 1 s") as info:
            await call(model)
    assert not info.value.is_retryable and info.value.status_code is None
    assert server.requests - before <= 1  # not retried: no time was left
    server.queue.clear()


async def test_retries_of_a_stalled_server_share_one_deadline(server: HostileServer) -> None:
    stalled = Misbehaviour(pieces=[b": waiting\n\n"], ending="hang")
    server.enqueue(*[stalled] * 10)
    before = server.requests
    async with OpenAIChatModel("m", base_url=server.url, timeout=httpx.Timeout(5.0, read=0.1),
                               max_retries=8, backoff=0.05, max_backoff=0.05,
                               deadline=0.6) as model:
        with pytest.raises(APICallError) as info:
            await call(model)
    server.queue.clear()
    # Each attempt waits 0.1 s for a read and 0.05 s before the next: the deadline cuts the
    # nine attempts the retry count would allow short.
    assert server.requests - before < 9
    assert "deadline" in info.value.message or "timed out" in info.value.message


async def test_a_deadline_of_none_turns_it_off(server: HostileServer) -> None:
    server.enqueue(Misbehaviour.sse(TEXT, piece=7))
    async with OpenAIChatModel("m", base_url=server.url, deadline=None) as model:
        chunks = await call(model)
    assert chunks[-1].type == "finish"


async def test_an_error_body_is_read_up_to_the_cap(server: HostileServer) -> None:
    size = 50 * 1024 * 1024

    def page() -> Iterator[bytes]:
        for _ in range(size // 65536):
            yield b"<html>" + b"x" * (65536 - 6)

    server.enqueue(Misbehaviour(status=500, headers={"content-type": "text/html"}, pieces=page))
    async with OpenAIChatModel("m", base_url=server.url, max_retries=0) as model:
        with pytest.raises(APICallError) as info:
            await call(model)
    assert info.value.status_code == 500 and info.value.body is not None
    assert len(info.value.body) <= 64_000 + len("...[truncated]")
    assert await asyncio.to_thread(server.hung_up.wait, WAIT)
    assert server.written < size // 2  # the client hung up long before the page ended


@pytest.mark.parametrize("body", [
    pytest.param(b"data: " + b"x" * 5_000 + b"\n\n", id="one-long-line"),
    pytest.param(b"data: x\n" * 2_000 + b"\n", id="many-lines-one-event"),
    pytest.param(b"data: " + b"x" * 5_000, id="a-line-that-never-ends"),
])
async def test_an_event_past_max_event_bytes(server: HostileServer, body: bytes) -> None:
    server.enqueue(Misbehaviour.sse(body, piece=1_000))
    before = server.requests
    async with OpenAIChatModel("m", base_url=server.url, max_event_bytes=4_096,
                               max_retries=2) as model:
        with pytest.raises(APICallError, match="max_event_bytes=4096") as info:
            await call(model)
    assert not info.value.is_retryable and server.requests - before == 1


async def test_a_json_response_past_max_event_bytes(server: HostileServer) -> None:
    doc = json.dumps({"choices": [{"message": {"content": "x" * 10_000}}]}).encode()
    server.enqueue(Misbehaviour(headers={"content-type": "application/json"}, pieces=[doc],
                                is_chunked=False))
    async with OpenAIChatModel("m", base_url=server.url, max_event_bytes=4_096, stream=False,
                               max_retries=0) as model:
        with pytest.raises(APICallError, match="max_event_bytes=4096"):
            await call(model)


async def test_the_default_limit_passes_a_large_event(server: HostileServer) -> None:
    text = "y" * (2 << 20)
    server.enqueue(Misbehaviour.sse(sse_body(
        json.dumps({"choices": [{"delta": {"content": text}}]}),
        json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]}), "[DONE]"),
        piece=65536))
    async with OpenAIChatModel("m", base_url=server.url, max_retries=0) as model:
        chunks = await call(model)
    assert "".join(c.payload.text for c in chunks if c.type == "text-delta") == text
