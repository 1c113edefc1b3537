"""Router ids, the environment they read, and real providers driving the agent and the demo."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from streamkit import Agent, tool
from streamkit.errors import APICallError, StreamkitError
from streamkit.models import AnthropicModel, ModelRequest, OpenAIChatModel, resolve_model
from streamkit.models._router import resolve

from ._http_server import ReplayServer, Reply

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as srv:
        yield srv


def test_openai_ids_read_key_and_url_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve("openai/gpt-4o-mini")
    assert isinstance(model, OpenAIChatModel)
    assert (model.provider, model.model_id, model.base_url) == \
        ("openai", "gpt-4o-mini", "https://api.openai.com/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert resolve("openai/gpt-4o-mini").base_url == "http://127.0.0.1:1/v1"
    assert resolve("openai/x", base_url="http://h:2/v1").base_url == "http://h:2/v1"


def test_anthropic_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve("anthropic/claude-sonnet-4-5", timeout=5.0, max_retries=4)
    assert isinstance(model, AnthropicModel)
    assert (model.provider, model.model_id, model.base_url) == \
        ("anthropic", "claude-sonnet-4-5", "https://api.anthropic.com")
    assert model.retry_policy.max_retries == 4
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:3")
    assert resolve("anthropic/c").base_url == "http://127.0.0.1:3"


@pytest.mark.parametrize("model_id,variable", [
    pytest.param("openai/gpt-4o-mini", "OPENAI_API_KEY", id="openai"),
    pytest.param("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY", id="anthropic"),
])
def test_a_missing_key_is_reported_at_first_use(monkeypatch: pytest.MonkeyPatch, model_id: str,
                                                variable: str) -> None:
    model = resolve_model(model_id)  # resolving works without the key
    with pytest.raises(StreamkitError, match=variable) as info:
        model.stream(ModelRequest(prompt=[{"role": "user", "content": "hi"}]))
    assert info.value.env_var == variable
    monkeypatch.setenv(variable, "sk-later")  # set after resolving: read at use
    assert model.stream(ModelRequest(prompt=[{"role": "user", "content": "hi"}])) is not None


def test_openai_compatible_needs_a_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StreamkitError, match="OPENAI_BASE_URL"):
        resolve("openai-compatible/llama3.1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    model = resolve("openai-compatible/meta-llama/Llama-3.1-8B")
    assert (model.provider, model.model_id, model.base_url) == \
        ("openai-compatible", "meta-llama/Llama-3.1-8B", "http://127.0.0.1:11434/v1")
    assert model.stream(ModelRequest(prompt=[{"role": "user", "content": "hi"}])) is not None


@pytest.mark.parametrize("model_id,message", [
    pytest.param("gemini/flash", "known providers: openai, anthropic, openai-compatible",
                 id="unknown-provider"),
    pytest.param("gpt-4o-mini", "must look like '<provider>/<model>'", id="no-slash"),
    pytest.param("openai/", "must look like", id="no-model"),
])
def test_bad_ids(model_id: str, message: str) -> None:
    with pytest.raises(StreamkitError, match=message):
        resolve(model_id)


def test_unknown_options_are_named() -> None:
    with pytest.raises(StreamkitError, match="unknown option.*temprature.*accepted: .*timeout"):
        resolve("openai/gpt-4o-mini", temprature=0)


async def test_a_router_model_calls_the_server(server: ReplayServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.enqueue(Reply.sse("openai/text-stream-usage.sse"))
    async with resolve_model("openai-compatible/mock-text", base_url=server.base_url) as model:
        chunks = [c async for c in model.stream(ModelRequest(
            prompt=[{"role": "user", "content": "hi"}]))]
    assert chunks[-1].payload.step_result.reason == "stop"
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"
    assert server.requests[0].body["model"] == "mock-text"


# --- the agent and the demo over real HTTP --------------------------------------------------------


@tool
def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "temp": 21, "unit": unit}


async def test_agent_runs_a_tool_step_then_a_text_step(server: ReplayServer) -> None:
    server.enqueue(Reply.sse("openai/tool-stream.sse"), Reply.sse("openai/text-stream-usage.sse"))
    async with OpenAIChatModel("mock", base_url=server.base_url) as model:
        agent = Agent(id="weather", instructions="Answer weather questions.", model=model,
                      tools=[get_weather])
        result = await agent.generate("What is the weather in Paris?")
    assert result.text == "Hello from the LiteLLM mock server."
    assert result.finish_reason == "stop"
    assert [r["result"] for r in result.tool_results] == \
        [{"city": "Paris", "temp": 21, "unit": "celsius"}]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (12 + 14, 7 + 9)
    first, second = (r.body for r in server.requests)
    assert first["messages"] == [
        {"role": "system", "content": "Answer weather questions."},
        {"role": "user", "content": "What is the weather in Paris?"}]
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert second["messages"][2:] == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_peer_weather_1", "type": "function",
             "function": {"name": "get_weather",
                          "arguments": '{"city":"Paris","unit":"celsius"}'}}]},
        {"role": "tool", "tool_call_id": "call_peer_weather_1",
         "content": '{"city":"Paris","temp":21,"unit":"celsius"}'}]


def test_demo_cli_against_an_openai_compatible_server(server: ReplayServer) -> None:
    server.enqueue(Reply.sse("openai/demo-lookup-stream.sse"),
                   Reply.sse("openai/text-stream-usage.sse"))
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    done = subprocess.run(
        [sys.executable, "-m", "streamkit", "demo", "--model", "openai-compatible/demo-model",
         "--base-url", server.base_url], capture_output=True, text=True, timeout=60, cwd=REPO,
        env=env)
    assert done.returncode == 0, done.stderr
    assert "[calling lookup_customer({'customer_id': 'C-42'})]" in done.stdout
    assert "Hello from the LiteLLM mock server." in done.stdout
    assert "[email]" in server.requests[1].raw_body.decode()  # the PII processor ran
    assert "ada@example.com" not in server.requests[1].raw_body.decode()


# --- a missing key against a server that wants one ----------------------------------------------

# What a LiteLLM proxy with a master key answers a request without one (hand-written from its
# error shape: LiteLLM's ``auth_error`` type; the proxy reports it as HTTP 500).
NO_KEY = {"error": {"message": "Authentication Error, No api key passed in.",
                    "type": "auth_error", "param": "None", "code": "500"}}


@pytest.mark.parametrize("status", [pytest.param(500, id="litellm-500"),
                                    pytest.param(401, id="plain-401")])
async def test_a_keyless_request_refused_by_the_server_names_the_variable(
        server: ReplayServer, status: int) -> None:
    server.enqueue(Reply.json(NO_KEY if status == 500 else {"error": "nope"}, status=status))
    async with resolve_model("openai-compatible/m", base_url=server.base_url) as model:
        with pytest.raises(APICallError, match="no API key was sent: set the OPENAI_API_KEY"
                           ) as info:
            [c async for c in model.stream(ModelRequest(prompt=[{"role": "user",
                                                                 "content": "hi"}]))]
    assert info.value.status_code == status and info.value.is_retryable is False
    assert len(server.requests) == 1  # not retried: the same request would fail the same way


async def test_a_refused_request_that_carried_a_key_gets_no_key_hint(server: ReplayServer) -> None:
    server.enqueue(Reply.json({"error": {"message": "Invalid api key"}}, status=401))
    async with resolve_model("openai-compatible/m", base_url=server.base_url,
                             api_key="sk-wrong") as model:
        with pytest.raises(APICallError) as info:
            [c async for c in model.stream(ModelRequest(prompt=[{"role": "user",
                                                                 "content": "hi"}]))]
    assert "no API key was sent" not in str(info.value) and "Invalid api key" in str(info.value)


def test_demo_api_key_is_sent_and_a_missing_one_is_named(server: ReplayServer) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    base = [sys.executable, "-m", "streamkit", "demo", "--model", "openai-compatible/demo-model",
            "--base-url", server.base_url]
    server.enqueue(Reply.json(NO_KEY, status=500))
    refused = subprocess.run(base, capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert refused.returncode == 1
    assert "no API key was sent: set the OPENAI_API_KEY" in refused.stdout + refused.stderr
    server.enqueue(Reply.sse("openai/demo-lookup-stream.sse"),
                   Reply.sse("openai/text-stream-usage.sse"))
    done = subprocess.run([*base, "--api-key", "sk-demo"], capture_output=True, text=True,
                          timeout=60, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr
    assert server.requests[-1].headers["authorization"] == "Bearer sk-demo"


def test_demo_without_a_model_refuses_an_api_key() -> None:
    done = subprocess.run([sys.executable, "-m", "streamkit", "demo", "--api-key", "sk-x"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and "add --model" in done.stderr


def test_demo_against_openai_without_a_key_says_which_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    done = subprocess.run([sys.executable, "-m", "streamkit", "demo", "--model",
                           "openai/gpt-4o-mini"], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env=env)
    assert done.returncode == 1
    assert "OPENAI_API_KEY" in done.stdout + done.stderr  # before any request is made
