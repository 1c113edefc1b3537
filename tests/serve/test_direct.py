"""The direct path to the streaming routes (``_app._App``, issue 28): it answers what the full
Starlette stack answers, and steps aside whenever the full stack could answer differently."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from streamkit import Agent
from streamkit.serve import Limits, create_app
from streamkit.testing import FunctionModel, text

from ._server import running

WAIT = 20.0
STREAMS = [
    pytest.param("/api/agents/a/stream", {"messages": "hi"}, id="mastra-stream"),
    pytest.param("/chat/a", {"id": "c", "trigger": "submit-message", "messages": [
        {"id": "m", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]},
        id="ai-sdk-chat"),
]
#: What differs between two runs of one request: ids and timestamps.
_VARYING = re.compile(rb'"(?:runId|id|messageId|createdAt|timestamp|toolCallId)":"[^"]*"'
                      rb'|"(?:createdAt|timestamp|startedAt)":\d+')


def _agent() -> Agent:
    return Agent(id="a", model=FunctionModel(lambda request: text("hello there", chunk_size=3),
                                             model_id="m"))


def _normal(body: bytes) -> bytes:
    return _VARYING.sub(b"_", body)


@pytest.mark.parametrize("path, body", STREAMS)
async def test_the_direct_path_answers_what_the_full_stack_answers(path: str,
                                                                   body: Any) -> None:
    # An Origin header sends the request through the full stack (CORS is on); without one it
    # takes the direct path. Apart from CORS's headers, the answers are the same.
    async with running(create_app(_agent())) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        direct = await client.post(path, json=body)
        full = await client.post(path, json=body, headers={"origin": "http://localhost:3000"})
        for bad in ("/chat/nobody", "/api/agents/nobody/stream"):
            missing = await client.post(bad, json=body)
            missing_full = await client.post(bad, json=body,
                                             headers={"origin": "http://localhost:3000"})
            assert missing.status_code == missing_full.status_code == 404
            assert missing.json() == missing_full.json()
        invalid = await client.post(path, content=b"[1,2")
        invalid_full = await client.post(path, content=b"[1,2",
                                         headers={"origin": "http://localhost:3000"})
    assert direct.status_code == full.status_code == 200
    assert "access-control-allow-origin" not in direct.headers
    assert full.headers["access-control-allow-origin"] == "*"
    cors = {"access-control-allow-origin", "access-control-expose-headers", "vary"}
    assert {k: v for k, v in direct.headers.items()} == \
        {k: v for k, v in full.headers.items() if k not in cors}
    assert _normal(direct.content) == _normal(full.content)
    assert direct.content.endswith(b"data: [DONE]\n\n")
    assert invalid.status_code == invalid_full.status_code == 400
    assert invalid.json() == invalid_full.json()


@pytest.mark.parametrize("path, body", STREAMS)
async def test_request_limits_hold_on_the_direct_path(path: str, body: Any) -> None:
    app = create_app(_agent(), limits=Limits(max_body_bytes=64))
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        large = await client.post(path, json={**body, "pad": "x" * 100})
    assert large.status_code == 413
    assert large.json() == {"error": "Request body too large: the limit is 64 bytes"}


@pytest.mark.parametrize("path, body", STREAMS)
async def test_middleware_added_after_create_app_sees_the_streaming_routes(
        path: str, body: Any) -> None:
    seen: list[str] = []

    class Record:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                seen.append(scope["path"])
            await self.app(scope, receive, send)

    app = create_app(_agent())
    app.add_middleware(Record)
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        answer = await client.post(path, json=body)
    assert answer.status_code == 200
    assert seen == [path]


@pytest.mark.parametrize("path, body", STREAMS)
async def test_a_hook_raising_http_exception_answers_as_starlette_does(path: str,
                                                                        body: Any) -> None:
    def refuse(request: Request) -> str:
        raise HTTPException(401, "log in first", headers={"www-authenticate": "Bearer"})

    app = create_app(_agent(), resource=refuse)
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        direct = await client.post(path, json=body)
        full = await client.post(path, json=body, headers={"origin": "http://localhost:3000"})
    assert direct.status_code == full.status_code == 401
    assert direct.text == full.text == "log in first"
    assert direct.headers["www-authenticate"] == "Bearer"
    assert direct.headers["content-type"] == full.headers["content-type"]
