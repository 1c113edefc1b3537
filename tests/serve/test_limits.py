"""Limits and deadlines on the served app (issue 26, points 5 and 6), over real HTTP.

Request-level limits (body size, JSON shape, header count, body deadline) hold under any
server: they are tested under uvicorn as ``_server.running`` starts it. Connection-level ones
(header and send deadlines, header bytes, the connection bound) are tested under
``uvicorn_config`` in the test's loop, and the flood in a real ``python -m streamkit serve``
subprocess with a lowered open-file limit.

No sleeps for timing, no timed asserts: every wait is bounded by ``WAIT`` and waits for what the
server does (an answer, a closed socket, a closed model stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit import Agent
from streamkit.errors import APICallError, InvalidArgument, MemoryStoreError
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import prompt_text
from streamkit.models import ModelRequest
from streamkit.serve import Limits, create_app, uvicorn_config
from streamkit.serve._connections import SERVER_PROTOCOLS
from streamkit.serve._limits import check_json
from streamkit.serve._mastra import error_response
from streamkit.testing import FunctionModel, text

from ._server import running
from ._spawn import file_limit, serving
from .test_flow import ROUTES, TextModel, request_for

#: Both guarded HTTP/1.1 protocols (h11 and httptools) are held to the connection limits.
PROTOCOLS = pytest.mark.parametrize("http", sorted(SERVER_PROTOCOLS))
WAIT = 20.0  # the longest any wait in these tests may take (a bound, not a timing)


def _said(request: ModelRequest) -> str:
    return prompt_text(request.prompt[-1]["content"])


def echo_agent(memory: Memory | None = None) -> Agent:
    return Agent(id="a", model=FunctionModel(lambda r: text(f"Echo: {_said(r)}", chunk_size=4),
                                             model_id="echo"), memory=memory)


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Memory]:
    mem = Memory(SQLiteStore(str(tmp_path / "limits.sqlite3")))
    yield mem
    await mem.close()


@contextlib.asynccontextmanager
async def guarded(app: Any, *, sndbuf: int | None = None, http: str = "httptools"
                  ) -> AsyncIterator[str]:
    """Serve ``app`` in this loop as ``python -m streamkit serve`` does (``uvicorn_config``:
    the connection-level limits of ``app``'s ``Limits``) on the guarded protocol ``http``
    (``SERVER_PROTOCOLS``); yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if sndbuf is not None:  # accepted connections inherit it (Linux)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn_config(app, log_level="warning", lifespan="off",
                                           timeout_graceful_shutdown=2,
                                           http=SERVER_PROTOCOLS[http]))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.005)  # polling uvicorn's startup flag; no timing asserted
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, WAIT)
        sock.close()


async def raw_exchange(url: str, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection; everything the server sends until it closes."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), WAIT)
    finally:
        writer.close()


def json_of(reply: bytes) -> tuple[int, dict[str, Any], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body), head.lower()


BODY_ROUTES = [
    pytest.param("/api/agents/a/stream", id="mastra-stream"),
    pytest.param("/api/agents/a/generate", id="mastra-generate"),
    pytest.param("/chat/a", id="ai-sdk-chat"),
    pytest.param("/api/memory/threads", id="create-thread"),
]


# ------------------------------------------------------------------------------ body size


@pytest.mark.parametrize("path", BODY_ROUTES)
async def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(
        path: str, memory: Memory) -> None:
    app = create_app(echo_agent(memory), limits=Limits(max_body_bytes=1000))
    async with running(app) as url:
        # The head announces 200 MB and not one byte of it follows: the answer can only come
        # from the Content-Length.
        reply = await raw_exchange(url, f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: "
                                        f"application/json\r\ncontent-length: 200000000\r\n"
                                        f"\r\n".encode())
    status, error, head = json_of(reply)
    assert status == 413 and b"connection: close" in head
    assert error == {"error": "Request body too large: the limit is 1000 bytes"}


def _chunks(total: int, piece: int, counter: list[int]) -> AsyncIterator[bytes]:
    """``total`` bytes of body in ``piece``-sized chunks (no Content-Length: chunked); counts
    in ``counter[0]`` what the client got rid of."""
    async def chunks() -> AsyncIterator[bytes]:
        while counter[0] < total:
            counter[0] += piece
            yield b" " * piece
    return chunks()


@pytest.mark.parametrize("path", BODY_ROUTES)
async def test_a_chunked_body_a_little_over_the_limit_gets_the_413(path: str,
                                                                   memory: Memory) -> None:
    limit = 64 * 1024
    app = create_app(echo_agent(memory), limits=Limits(max_body_bytes=limit))
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.post(path, content=_chunks(limit + 128 * 1024, 8192, [0]))
        assert response.status_code == 413
        assert response.json() == {"error": f"Request body too large: the limit is {limit} "
                                            f"bytes"}
        assert response.headers["connection"] == "close"


@pytest.mark.parametrize("path", BODY_ROUTES)
async def test_a_huge_chunked_body_is_read_no_further_than_the_limit(path: str,
                                                                     memory: Memory) -> None:
    limit, offered = 64 * 1024, 64 * 1024 * 1024
    sent = [0]
    app = create_app(echo_agent(memory), limits=Limits(max_body_bytes=limit))
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        try:
            response = await client.post(path, content=_chunks(offered, 64 * 1024, sent))
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
            pass  # cut off while still sending: the kernel's reset may beat the 413 (docstring)
        else:
            assert response.status_code == 413
        # What the client got rid of: the limit plus what socket buffers hold, not the body.
        assert sent[0] < 16 * 1024 * 1024, f"the server read {sent[0]} bytes"
        assert (await client.get("/api/agents")).status_code == 200  # the server is fine


# ------------------------------------------------------------------------------ JSON shape


def _nested(depth: int, leaf: str = "1") -> str:
    """``depth`` nested objects as JSON text (built as text: too deep for ``json.dumps``)."""
    return '{"a":' * depth + leaf + "}" * depth


def _chat_body(metadata_json: str, text_: str = "hi") -> bytes:
    return (f'{{"id":"c","trigger":"submit-message","memory":{{"thread":"t1","resource":"u1"}},'
            f'"messages":[{{"id":"u","role":"user","parts":[{{"type":"text","text":'
            f'{json.dumps(text_)}}}],"metadata":{metadata_json}}}]}}').encode()


DEEP = [
    pytest.param("/api/agents/a/stream", b"[" * 100_000 + b"]" * 100_000, id="100k-deep-body"),
    pytest.param("/chat/a", _chat_body(_nested(3000)), id="3000-deep-metadata"),
    pytest.param("/api/agents/a/generate",
                 f'{{"messages":"hi","requestContext":{_nested(100)}}}'.encode(),
                 id="one-over-the-limit"),
    pytest.param("/api/memory/threads",
                 f'{{"resourceId":"u1","metadata":{_nested(3000)}}}'.encode(),
                 id="3000-deep-thread-metadata"),
]


@pytest.mark.parametrize(("path", "body"), DEEP)
async def test_json_nested_too_deep_is_a_typed_400(path: str, body: bytes,
                                                   memory: Memory) -> None:
    async with running(create_app(echo_agent(memory))) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.post(path, content=body,
                                     headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text[:300]
        assert response.json() == {"error": "Invalid request body", "issues": [
            {"field": "(body)", "message": "JSON nested deeper than 100 levels; expected at "
                                           "most 100 nested arrays/objects"}]}
        assert (await client.get("/api/agents")).status_code == 200


async def test_json_at_the_depth_limit_goes_through_the_run_and_memory(memory: Memory) -> None:
    # body {1} > messages [2] > message {3} > metadata {4} ... : 96 more objects make 100.
    body = _chat_body(_nested(97, '"deepest"'))
    assert _depth(json.loads(body)) == 100
    async with running(create_app(echo_agent(memory))) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.post("/chat/a", content=body,
                                     headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text[:300]
        assert response.text.endswith("data: [DONE]\n\n")
        generate = await client.post("/api/agents/a/generate", content=(
            f'{{"messages":"hi","requestContext":{_nested(99)}}}').encode())
        assert generate.status_code == 200, generate.text[:300]
    stored = await memory.get_messages("t1")
    assert [m.role for m in stored] == ["user", "assistant"]
    metadata = stored[0].content.metadata
    for _ in range(97):
        metadata = metadata["a"]
    assert metadata == "deepest"


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


# Strings full of what the depth check must see through: brackets, quotes, backslashes.
tricky = st.text(alphabet='[]{}"\\/ax\u00e9\U0001F600', max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        tricky, children, max_size=3),
    max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(value=json_values, limit=st.integers(1, 12), ascii=st.booleans())
def test_check_json_refuses_exactly_the_values_deeper_than_the_limit(value: Any, limit: int,
                                                                    ascii: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii).encode()
    if _depth(value) > limit:
        with pytest.raises(InvalidArgument) as caught:
            check_json(body, max_depth=limit)
        assert caught.value.field == "(body)"
    else:
        check_json(body, max_depth=limit)


# ------------------------------------------------------------------------------ surrogates


LONE = [
    pytest.param('"\\ud800"', id="high-alone"),
    pytest.param('"x\\udfff"', id="low-alone"),
    pytest.param('"\\ude00\\ud83d"', id="pair-reversed"),
]


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize("string", LONE)
async def test_a_lone_surrogate_in_the_body_is_a_typed_400(path: str, string: str,
                                                           memory: Memory) -> None:
    bodies = {"/chat/a": _chat_body("{}").replace(b'"text":"hi"', f'"text":{string}'.encode()),
              "/api/memory/threads": f'{{"resourceId":"u1","title":{string}}}'.encode()}
    body = bodies.get(path, f'{{"messages":{string}}}'.encode())
    async with running(create_app(echo_agent(memory))) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.post(path, content=body,
                                     headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text[:300]
        assert response.headers["content-type"] == "application/json"
        [issue] = response.json()["issues"]
        assert issue["field"] == "(body)" and "lone surrogate" in issue["message"]


async def test_an_escaped_surrogate_pair_is_a_character_and_goes_through(
        memory: Memory) -> None:
    body = _chat_body("{}").replace(b'"text":"hi"', b'"text":"smile \\ud83d\\ude00"')
    async with running(create_app(echo_agent(memory))) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.post("/chat/a", content=body)
    assert response.status_code == 200
    deltas = [json.loads(line[6:]) for line in response.text.split("\n\n")
              if line.startswith("data: {")]
    said = "".join(d.get("delta", "") for d in deltas if d["type"] == "text-delta")
    assert said == "Echo: smile \U0001F600"


@pytest.mark.parametrize("route", ROUTES)
async def test_a_stream_that_fails_mid_way_reports_it_and_still_ends_with_done(
        route: str) -> None:
    # The model's own text holds a lone surrogate (nothing the client sent): the chunk cannot
    # be encoded half-way through the answer.
    agent = Agent(id="a", model=FunctionModel(lambda r: text("fine so far \ud800 then",
                                                             chunk_size=4), model_id="m"))
    path, body = request_for(route)
    body.pop("memory")
    async with running(create_app(agent)) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.post(path, json=body)
    assert response.status_code == 200
    events = [json.loads(line[6:]) for line in response.text.split("\n\n")
              if line.startswith("data: {")]
    assert any(e["type"] == "text-delta" for e in events)  # it failed mid-way
    assert any(e["type"] == "error" for e in events)
    assert response.text.endswith("data: [DONE]\n\n")


async def test_generate_of_an_answer_that_is_not_unicode_is_a_json_500() -> None:
    # The same model text on /generate: no stream to report it in, so the 500 is Mastra-style
    # JSON saying what was wrong (Starlette's encoder raised: a text/plain 500).
    agent = Agent(id="a", model=FunctionModel(lambda r: text("fine so far \ud800 then"),
                                              model_id="m"))
    async with running(create_app(agent)) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.post("/api/agents/a/generate", json={"messages": "hi"})
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert "not valid Unicode" in response.json()["error"]


@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=20),
       st.sampled_from([InvalidArgument, MemoryStoreError, APICallError]))
def test_an_error_answer_is_json_whatever_its_text(message: str, kind: type[Exception]) -> None:
    # An error may quote what it refused, lone surrogates included: the answer is still JSON.
    response = error_response(kind(message))
    assert response.status_code in (400, 500)
    assert isinstance(json.loads(bytes(response.body))["error"], str)


# ------------------------------------------------------------------------------ headers


async def test_too_many_headers_is_a_431() -> None:
    app = create_app(echo_agent(), limits=Limits(max_headers=20))
    headers = "".join(f"x-h{i}: v\r\n" for i in range(30))
    async with running(app) as url:
        reply = await raw_exchange(url, f"GET /api/agents HTTP/1.1\r\nhost: x\r\n{headers}"
                                        f"\r\n".encode())
    status, error, head = json_of(reply)
    assert status == 431 and b"connection: close" in head
    assert error == {"error": "Request has too many headers: 31; the limit is 20"}


async def test_headers_over_max_header_bytes_are_a_431() -> None:
    app = create_app(echo_agent(), limits=Limits(max_header_bytes=4096))
    async with running(app) as url:
        reply = await raw_exchange(url, b"GET /api/agents HTTP/1.1\r\nhost: x\r\nx-big: " +
                                   b"v" * 5000 + b"\r\n\r\n")
        ok = await raw_exchange(url, b"GET /api/agents HTTP/1.1\r\nhost: x\r\nx-big: " +
                                b"v" * 3000 + b"\r\nconnection: close\r\n\r\n")
    status, error, head = json_of(reply)
    assert status == 431 and b"connection: close" in head
    assert error == {"error": "Request headers too large: 5018 bytes; the limit is 4096"}
    assert ok.startswith(b"HTTP/1.1 200 ")


@PROTOCOLS
async def test_a_head_that_keeps_growing_is_cut_off_at_max_header_bytes(http: str) -> None:
    app = create_app(echo_agent(), limits=Limits(max_header_bytes=4096))
    async with guarded(app, http=http) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(b"GET /api/agents HTTP/1.1\r\nhost: x\r\n")
            for i in range(100):  # 10 KB of headers in pieces, never the blank line
                if reader.at_eof() or writer.is_closing():
                    break
                writer.write(f"x-{i}: {'v' * 90}\r\n".encode())
                await writer.drain()
                await asyncio.sleep(0)  # lets the server read each piece on its own
            reply = await asyncio.wait_for(reader.read(), WAIT)
        except ConnectionError:
            reply = b"reset"  # closed while we still wrote: the kernel dropped the 400
        finally:
            writer.close()
    # Closed by the server either way (read() saw EOF, or the reset).
    assert reply.startswith(b"HTTP/1.1 400 ") or reply == b"reset", reply[:100]


# ------------------------------------------------------------------------------ deadlines


async def test_a_body_that_stops_arriving_gets_a_408() -> None:
    app = create_app(echo_agent(), limits=Limits(body_timeout=1))
    async with running(app) as url:
        reply = await raw_exchange(url, b"POST /api/agents/a/stream HTTP/1.1\r\nhost: x\r\n"
                                        b"content-length: 100\r\n\r\n{\"messages\"")
    status, error, head = json_of(reply)
    assert status == 408 and b"connection: close" in head
    assert error == {"error": "Request body not received in time: the limit is 1 seconds"}


@contextlib.asynccontextmanager
async def _trickling(writer: asyncio.StreamWriter) -> AsyncIterator[None]:
    """A slow-loris head: one more header line every 0.2 s, forever, while the block runs."""
    async def trickle() -> None:
        for i in range(10_000):
            writer.write(f"x-{i}: v\r\n".encode())
            await writer.drain()
            await asyncio.sleep(0.2)  # pacing the attacker, not measuring anything

    trickling = asyncio.create_task(trickle())
    try:
        yield
    finally:
        trickling.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await trickling


@PROTOCOLS
async def test_headers_that_never_finish_are_cut_off(http: str) -> None:
    app = create_app(echo_agent(), limits=Limits(header_timeout=1))
    async with guarded(app, http=http) as url:
        host, port = url.removeprefix("http://").split(":")
        silent = await asyncio.open_connection(host, int(port))
        loris = await asyncio.open_connection(host, int(port))
        loris[1].write(b"GET /api/agents HTTP/1.1\r\n")
        try:
            async with _trickling(loris[1]):
                # Both are closed by the server (EOF), each within the bounded wait.
                assert await asyncio.wait_for(silent[0].read(), WAIT) == b""
                assert await asyncio.wait_for(loris[0].read(), WAIT) == b""
        finally:
            for _, writer in (silent, loris):
                writer.close()


@PROTOCOLS
async def test_a_second_head_on_a_kept_alive_connection_that_never_finishes_is_cut_off(
        http: str) -> None:
    # The header deadline of every request on a connection, not only of its first.
    app = create_app(echo_agent(), limits=Limits(header_timeout=1))
    async with guarded(app, http=http) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(b"GET /api/agents HTTP/1.1\r\nhost: x\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
            assert head.startswith(b"HTTP/1.1 200")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await asyncio.wait_for(reader.readexactly(length), WAIT)
            writer.write(b"GET /api/agents HTTP/1.1\r\n")
            async with _trickling(writer):
                assert await asyncio.wait_for(reader.read(), WAIT) == b""  # closed by the server
        finally:
            writer.close()


@PROTOCOLS
@pytest.mark.parametrize("route", ROUTES)
async def test_a_client_that_stops_reading_is_dropped_and_its_run_cancelled(
        route: str, memory: Memory, http: str) -> None:
    model = TextModel(1_000_000, size=1024)  # ~1 GB of text: only a reader ends it
    agent = Agent(id="a", model=model, memory=memory)
    path, body = request_for(route)
    payload = json.dumps(body).encode()
    app = create_app(agent, limits=Limits(send_timeout=1))
    async with guarded(app, sndbuf=16 * 1024, http=http) as url:
        host, port = url.removeprefix("http://").split(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
            await asyncio.get_running_loop().sock_sendall(sock, (
                f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                f"content-length: {len(payload)}\r\n\r\n").encode() + payload)
            # The client never reads. The server gives up on it and the run ends as on a
            # disconnect: the model's stream is closed, nothing of the turn is stored.
            await asyncio.wait_for(model.closed.wait(), WAIT)
        finally:
            sock.close()
    assert not model.finished and model.produced < 10_000
    assert await memory.get_thread("t1") is None


# ------------------------------------------------------------------------------ the flood


FLOOD = 300  # connections held open, beyond the server's 128 open files
FILES = 128


async def _hold(host: str, port: int, head: bytes) -> tuple[asyncio.StreamReader,
                                                              asyncio.StreamWriter]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), WAIT)
    if head:
        writer.write(head)
    return reader, writer


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    with contextlib.suppress(ConnectionError):
        return await asyncio.wait_for(reader.read(), WAIT) == b""
    return True


def test_an_idle_and_slow_loris_flood_does_not_lock_out_a_keep_alive_client() -> None:
    # The server's open-file limit is 128; the flood keeps 300 connections open (half silent,
    # half sending a request head that never ends) and replaces every one the server closes.
    with serving("--demo", "--memory", ":memory:", "--header-timeout", "3",
                 preexec_fn=file_limit(FILES)) as url:
        asyncio.run(asyncio.wait_for(_flood_and_serve(url), 6 * WAIT))


async def _flood_and_serve(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    heads = [b"", b"POST /api/agents/support/stream HTTP/1.1\r\nhost: x\r\n"]
    held = list(await asyncio.gather(*(_hold(host, int(port), heads[i % 2])
                                       for i in range(FLOOD))))
    replaced = 0
    stop = asyncio.Event()

    async def keep_flooding() -> None:
        nonlocal replaced
        while not stop.is_set():
            for i, (reader, writer) in enumerate(held):
                if reader.at_eof() or writer.is_closing():
                    writer.close()
                    held[i] = await _hold(host, int(port), heads[i % 2])
                    replaced += 1
                elif i % 2:
                    writer.write(b"x-more: 1\r\n")  # slow-loris: a header line now and then
            await asyncio.sleep(0.1)  # pacing the attacker, not measuring anything

    flood = asyncio.create_task(keep_flooding())
    try:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
            for turn in range(5):
                listed = await client.get("/api/agents")
                assert listed.status_code == 200 and "support" in listed.json()
                answer = await client.post("/api/agents/support/generate",
                                           json={"messages": f"hello {turn}"})
                assert answer.status_code == 200, answer.text[:300]
        # The flood's connections are closed by the server (header deadline or eviction).
        assert all(await asyncio.gather(*(_closed_by_server(r) for r, _ in held[:40])))
    finally:
        # A flag as well as cancel(): on Python 3.11 a wait_for inside _hold can swallow the
        # cancellation (when its connect completes at the same moment), and the flood would
        # go on forever.
        stop.set()
        flood.cancel()
        await asyncio.wait({flood}, timeout=WAIT)
        if flood.done() and not flood.cancelled():
            flood.exception()  # an OSError of the attacker's own: retrieved, not reported
        for _, writer in held:
            writer.close()
    assert replaced > 0
