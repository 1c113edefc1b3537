"""Fuzzed request bodies against a real server on 127.0.0.1: whatever a client sends, the answer
is never a 500, and a refused body is the 4xx JSON error shape (``{"error", "issues"?: [{field,
message}]}``); in-process, every body is a ``Call`` or a typed ``streamkit.errors`` error naming
the field (issue 32: bodies decoded into msgspec structs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import Agent
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.memory import Memory, SQLiteStore
from streamkit.models import ModelRequest
from streamkit.serve import create_app
from streamkit.serve._requests import decode_agent_call, decode_chat_call, decode_thread_body
from streamkit.testing import FunctionModel, text

from ._server import ServerThread
from .conftest import _anchor_step, lookup_customer

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=12)
VALID = {
    "messages": st.sampled_from(["hi", [{"role": "user", "content": "hi"}],
                                 [{"id": "u1", "role": "user",
                                   "parts": [{"type": "text", "text": "hi"}]}]]),
    "memory": st.fixed_dictionaries({"thread": st.sampled_from(["t1", {"id": "t2"}]),
                                     "resource": st.just("u1")}),
    "threadId": st.just("t1"), "resourceId": st.just("u1"),
    "requestContext": st.just({"locale": "en"}), "maxSteps": st.integers(-1, 3),
    "toolChoice": st.sampled_from(["auto", "none", {"type": "tool", "toolName": "x"}]),
    "activeTools": st.just(["lookupCustomer"]), "modelSettings": st.just({"temperature": 0}),
    "providerOptions": st.just({}), "structuredOutput": st.just({"schema": {"type": "object"}}),
    "trigger": st.sampled_from(["submit-message", "regenerate-message", "other"]),
}
#: Each known key with a well-formed value or any JSON at all, plus unknown keys.
BODIES = st.dictionaries(
    st.sampled_from([*VALID, "runId", "unknown"]), JSON, max_size=5).flatmap(
    lambda noise: st.fixed_dictionaries({}, optional={k: v | JSON for k, v in VALID.items()})
    .map(lambda good: {**noise, **good}))
RAW = st.binary(max_size=40) | st.sampled_from(
    [b"", b"  ", b"[]", b"null", b'{"messages": NaN}', b'{"messages": "\\ud800"}',
     b"[" * 150 + b"]" * 150, b'{"messages": "hi"'])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    path = Path(tmp_path_factory.mktemp("fuzz")) / "memory.sqlite3"
    def step(request: ModelRequest) -> Any:
        # With structured output (a JSON Schema from the body) the answer is a JSON object: a
        # model answering prose would fail the run, which is not what this fuzzes.
        return text("{}") if request.structured_output is not None else _anchor_step(request)

    agent = Agent(id="demo", model=FunctionModel(step), tools=[lookup_customer],
                  memory=Memory(SQLiteStore(str(path))))
    app = create_app(agent)
    with ServerThread(app) as url, httpx.Client(base_url=url, timeout=30.0) as client:
        yield client


def _check_answer(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text)
    if response.status_code >= 400:
        answer = response.json()
        assert isinstance(answer["error"], str) and answer["error"]
        for issue in answer.get("issues", []):
            assert set(issue) == {"field", "message"}
            assert isinstance(issue["field"], str) and isinstance(issue["message"], str)


ROUTES = ["/api/agents/demo/generate", "/api/agents/demo/stream", "/chat/demo",
          "/api/memory/threads?agentId=demo"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES, route=st.sampled_from(ROUTES))
def test_a_fuzzed_json_body_is_never_a_500(server: httpx.Client, body: dict[str, Any],
                                            route: str) -> None:
    _check_answer(server.post(route, content=json.dumps(body).encode(),
                              headers={"content-type": "application/json"}))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=RAW, route=st.sampled_from(ROUTES))
def test_fuzzed_bytes_are_never_a_500(server: httpx.Client, body: bytes, route: str) -> None:
    response = server.post(route, content=body, headers={"content-type": "application/json"})
    _check_answer(response)
    if route != "/api/memory/threads?agentId=demo":
        assert response.status_code == 400


def _decoded_or_typed(decode: Any, data: bytes) -> None:
    try:
        call = decode(data)
    except (InvalidArgument, InvalidType) as exc:
        assert isinstance(getattr(exc, "field", None), str), exc
        assert isinstance(getattr(exc, "issue", None), str) and exc.issue, exc
        assert str(exc).startswith("invalid request body: ")
        return
    assert call.messages


@settings(max_examples=300, deadline=None)
@given(BODIES | RAW)
def test_any_body_decodes_to_a_call_or_a_typed_error(body: dict[str, Any] | bytes) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    _decoded_or_typed(decode_agent_call, data)
    _decoded_or_typed(decode_chat_call, data)


@pytest.mark.parametrize("body, field, error", [
    (b'{"messages": "hi", "maxSteps": "3"}', "maxSteps", InvalidType),
    (b'{"messages": "hi", "maxSteps": true}', "maxSteps", InvalidType),
    (b'{"messages": "hi", "requestContext": []}', "requestContext", InvalidType),
    (b'{"messages": "hi", "memory": 1}', "memory", InvalidType),
    (b'{"messages": "hi", "memory": {"thread": ""}}', "memory.thread", InvalidArgument),
    (b'{"messages": "hi", "memory": {"resource": "u1"}}', "memory.thread", InvalidArgument),
    (b'{"messages": "hi", "threadId": ""}', "threadId", InvalidArgument),
    (b'{"messages": "hi", "structuredOutput": 1}', "structuredOutput.schema", InvalidType),
    (b'{"messages": "hi", "structuredOutput": {}}', "structuredOutput.schema",
     InvalidArgument),
    (b'{"messages": []}', "messages", InvalidArgument),
    (b'{"messages": 1}', "messages", InvalidArgument),
    (b"[1]", "(body)", InvalidArgument),
    (b"{", "(body)", InvalidArgument),
])
def test_each_body_error_has_its_field_and_class(body: bytes, field: str,
                                                 error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        decode_agent_call(body)
    assert type(caught.value) is error
    assert getattr(caught.value, "field", None) == field


@pytest.mark.parametrize("body, field", [
    (b'{"resourceId": 5}', "resourceId"), (b'{"resourceid": []}', "resourceId"),
    (b'{"resourceId": "u1", "title": 5}', "title"),
    (b'{"resourceId": "u1", "metadata": "x"}', "metadata"), (b"[]", "(body)"),
])
def test_a_malformed_thread_body_is_a_400_naming_the_field(server: httpx.Client, body: bytes,
                                                           field: str) -> None:
    with pytest.raises((InvalidArgument, InvalidType)) as caught:
        decode_thread_body(body)
    assert getattr(caught.value, "field", None) == field
    answer = server.post("/api/memory/threads?agentId=demo", content=body,
                         headers={"content-type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["issues"][0]["field"] == field
