"""A provider's error over real HTTP, both ways (issue 26, point 10): a real OpenAI-compatible
provider on 127.0.0.1 with a password in its ``base_url`` answers an error that carries an
e-mail, a card number and an API key; the agent is served by uvicorn with the README's guards.
The ``/generate`` 500 body, the ``/stream`` error chunk and the ``/chat`` UI ``errorText`` carry
the one text the output guards let out — none of the secrets, no URL credentials."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from streamkit import Agent
from streamkit.models import OpenAIChatModel
from streamkit.serve import create_app
from streamkit_operators import PIIDetector, RegexFilter

from .._http_server import ReplayServer, Reply
from ._server import running

EMAIL = "bob.smith@example.com"
CARD = "4111 1111 1111 1111"
KEY = "sk-live_0123456789abcdefABCD"
PASSWORD = "hunter2-Pa55word"
SECRETS = (EMAIL, CARD, KEY, PASSWORD)
PROVIDER_TEXT = f"Invalid request for {EMAIL}: card {CARD} was declined; key {KEY} is revoked"


@pytest.fixture(scope="module")
def provider() -> Iterator[ReplayServer]:
    with ReplayServer() as srv:
        yield srv


@pytest.fixture
async def client(provider: ReplayServer) -> AsyncIterator[httpx.AsyncClient]:
    """A keep-alive client of the app serving the guarded agent, whose provider is ``provider``
    (a password in its base_url)."""
    provider.replies.clear()
    model = OpenAIChatModel("m", base_url=f"http://alice:{PASSWORD}@127.0.0.1:{provider.port}/v1",
                            max_retries=0)
    pii = PIIDetector(detection_types=["email", "credit-card", "api-key"])
    secrets = RegexFilter(presets="secrets")
    agent = Agent(id="a", model=model, input_processors=[pii, secrets],
                  output_processors=[pii, secrets])
    async with running(create_app([agent])) as url, \
            httpx.AsyncClient(base_url=url, timeout=30) as http:
        yield http
    await model.aclose()


def fail_next(provider: ReplayServer) -> None:
    provider.enqueue(Reply.json({"error": {"message": PROVIDER_TEXT,
                                           "type": "invalid_request_error"}}, status=400))


def events(body: str) -> list[Any]:
    """The JSON events of an SSE body (``[DONE]`` kept as the string)."""
    out = []
    for line in body.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def assert_clean(text: str, port: int) -> None:
    assert [s for s in SECRETS if s in text] == []
    assert "**** **** **** 1111" in text and f"http://***@127.0.0.1:{port}/v1" in text


async def test_every_route_answers_the_one_redacted_text(client: httpx.AsyncClient,
                                                         provider: ReplayServer) -> None:
    fail_next(provider)
    generated = await client.post("/api/agents/a/generate", json={"messages": "hi"})
    assert generated.status_code == 500
    shown = generated.json()["error"]
    assert_clean(shown, provider.port)

    fail_next(provider)
    streamed = await client.post("/api/agents/a/stream", json={"messages": "hi"})
    assert streamed.status_code == 200
    frames = events(streamed.text)
    errors = [e for e in frames if isinstance(e, dict) and e["type"] == "error"]
    assert [e["payload"]["error"]["message"] for e in errors] == [shown]
    assert frames[-1] == "[DONE]" and not [s for s in SECRETS if s in streamed.text]

    fail_next(provider)
    chat = await client.post("/chat/a", json={"id": "c", "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
    assert chat.status_code == 200
    frames = events(chat.text)
    assert [e["errorText"] for e in frames if isinstance(e, dict) and e["type"] == "error"] \
        == [f"APICallError: {shown}"]
    assert frames[-1] == "[DONE]" and not [s for s in SECRETS if s in chat.text]
