"""The response head goes out with the response's first body write, and never waits for it
(``_connections._HeadFirst``, issue 28).

The guarded httptools protocol holds the status line and headers until the response's next
write so that a short response is one write; a response whose body comes later must still get
its head at once (at the end of the loop's turn). Here the app sends its head and then waits
until the client has read that head: if the head were held for the body, the client would
never see it and the test would fail at its bounded read, not pass slowly.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamkit.serve import uvicorn_config
from streamkit.serve._cli import _bind
from streamkit.serve._connections import SERVER_PROTOCOLS

from ._server import serving

WAIT = 20.0
REQUEST = b"GET /late HTTP/1.1\r\nhost: x\r\n\r\n"


def _late_body_app(release: asyncio.Event) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await asyncio.wait_for(release.wait(), WAIT)  # until the client has read the head
        await send({"type": "http.response.body", "body": b"late body", "more_body": False})
    return app


async def _head_then_body(http: str) -> tuple[bytes, bytes]:
    release = asyncio.Event()
    sock = _bind("127.0.0.1", 0)
    config = uvicorn_config(_late_body_app(release), log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=2, http=http)
    async with serving(config, sock):
        reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            writer.write(REQUEST)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
            release.set()
            body = b""
            while not body.endswith(b"0\r\n\r\n"):
                got = await asyncio.wait_for(reader.read(65536), WAIT)
                assert got, body
                body += got
            return head, body
        finally:
            writer.close()


@pytest.mark.parametrize("http", sorted(SERVER_PROTOCOLS))
def test_a_head_whose_body_comes_later_is_sent_at_once(http: str) -> None:
    head, body = asyncio.run(_head_then_body(http))
    assert head.startswith(b"HTTP/1.1 200 ") and b"content-type: text/plain" in head
    assert b"late body" in body
