"""The routes read the body ``RequestLimits`` already read and checked (``request_body``), not
through Starlette's ``request.body()`` again; without the middleware they read it themselves."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request

from streamkit.serve import Limits
from streamkit.serve._limits import BODY, RequestLimits, request_body

SCOPE = {"type": "http", "method": "POST", "path": "/", "query_string": b"", "headers": []}


def _sends_once(*parts: bytes) -> Any:
    messages = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1}
                for i, p in enumerate(parts)]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        raise AssertionError("the body was read twice")
    return receive


@given(st.lists(st.binary(max_size=40).map(lambda b: b'{"a":"' + b.hex().encode() + b'"}'),
                min_size=1, max_size=1) | st.just([b'{"messages":', b'"hi"}']))
async def test_the_app_sees_the_whole_body_the_middleware_read(parts: list[bytes]) -> None:
    seen: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(await request_body(Request(scope, receive)))

    async def send(message: Any) -> None:
        raise AssertionError(f"refused: {message}")

    scope = dict(SCOPE)
    await RequestLimits(app, Limits())(scope, _sends_once(*parts), send)
    assert seen == [b"".join(parts)] == [scope[BODY]]


async def test_without_the_middleware_the_body_is_read_from_the_request() -> None:
    request = Request(dict(SCOPE), _sends_once(b'{"x":', b"1}"))
    assert await request_body(request) == b'{"x":1}'
