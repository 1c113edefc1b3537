"""Served connections have Nagle's algorithm off (issue 28, "no stall").

With ``TCP_NODELAY`` off, every response on a reused keep-alive connection waited ~40 ms for
the client's delayed ACK. These tests read the option off the *server's* end of live
connections (the connection table of ``uvicorn_config``), never a timing.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from streamkit.errors import InvalidArgument
from streamkit.serve import create_app, uvicorn_config
from streamkit.serve._cli import _bind
from streamkit.serve._connections import SERVER_PROTOCOLS, GuardedConfig

from ._server import serving
from .test_limits import echo_agent

WAIT = 20.0
REQUEST = (b'POST /api/agents/a/stream HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n'
           b'content-length: 19\r\n\r\n{"messages":"hi"}\r\n')


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    """One chunked SSE response (the stream route's), read to its last chunk."""
    data = b""
    while not data.endswith(b"0\r\n\r\n"):
        chunk = await asyncio.wait_for(reader.read(65536), WAIT)
        assert chunk, f"the server closed the connection: {data[-300:]!r}"
        data += chunk
    return data


async def _server_nodelay(config: GuardedConfig, sock: socket.socket) -> list[int]:
    """Two requests on one keep-alive connection; then TCP_NODELAY of every open server-side
    connection, read while the client's connection is still open."""
    async with serving(config, sock):
        reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            for _ in range(2):  # the second on the reused connection (where the stall was)
                writer.write(REQUEST)
                reply = await _read_response(reader)
                assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
                assert b"data: [DONE]" in reply
            open_ = list(config.table.open)
            assert len(open_) == 1, open_
            return [conn.transport.get_extra_info("socket").getsockopt(
                socket.IPPROTO_TCP, socket.TCP_NODELAY) for conn in open_]
        finally:
            writer.close()


def _config(http: str, **options: Any) -> GuardedConfig:
    config = uvicorn_config(create_app([echo_agent()]), log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=2, http=http, **options)
    assert config.http is SERVER_PROTOCOLS[http]  # the name picks the guarded protocol
    return config


def test_uvicorn_config_refuses_a_protocol_without_the_limits() -> None:
    with pytest.raises(InvalidArgument, match=r"http must be one of \['h11', 'httptools'\]"):
        uvicorn_config(create_app([echo_agent()]), http="auto")


@pytest.mark.parametrize("http", sorted(SERVER_PROTOCOLS))
async def test_connections_on_a_socket_bound_with_protocol_0_have_nodelay(http: str) -> None:
    # A socket as users (and uvicorn's own tests) bind it: socket.socket(), protocol 0, for
    # which asyncio does not set TCP_NODELAY. The protocol sets it per connection.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    assert sock.proto == 0
    assert await _server_nodelay(_config(http), sock) == [1]


@pytest.mark.parametrize("http", sorted(SERVER_PROTOCOLS))
async def test_python_m_streamkit_serve_binds_a_tcp_socket_whose_connections_have_nodelay(
        http: str) -> None:
    sock = _bind("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP
    assert await _server_nodelay(_config(http), sock) == [1]
