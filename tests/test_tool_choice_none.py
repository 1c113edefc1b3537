"""``tool_choice="none"`` sends no tools to the provider (issue 27, point 3), as Mastra strips
them (some providers reject tools with ``"none"``), while the hooks still see the tool set.
Over real HTTP to a server on 127.0.0.1, for the OpenAI-compatible and the Anthropic adapter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streamkit import Agent, tool
from streamkit.models import AnthropicModel, OpenAIChatModel
from streamkit.testing import ScriptedModel, text

from ._http_server import ReplayServer, Reply
from .conftest import P, as_mode


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as srv:
        yield srv


def _model(kind: str, server: ReplayServer) -> Any:
    if kind == "openai":
        server.enqueue(Reply.sse("openai/text-stream-usage.sse"))
        return OpenAIChatModel("gpt-4o-mini", base_url=server.url, api_key="sk-test")
    server.enqueue(Reply.sse("anthropic/text-stream.sse"))
    return AnthropicModel("claude-sonnet-4-5", base_url=server.url, api_key="sk-ant-test")


def _watcher(mode: str, seen: dict[str, Any], override: str | None) -> P:
    def input_step(tools: dict[str, Any], tool_choice: Any) -> Any:
        seen["input_step"] = (sorted(tools), tool_choice)
        return {"tool_choice": override} if override is not None else None

    def llm_request(tools: dict[str, Any], tool_choice: Any) -> None:
        seen["llm_request"] = (sorted(tools), tool_choice)

    return P("watch", process_input_step=as_mode(input_step, mode),
             process_llm_request=as_mode(llm_request, mode))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("how", ["call-option", "process_input_step"])
async def test_none_sends_no_tools_and_hooks_see_them(server: ReplayServer, mode: str,
                                                      kind: str, how: str) -> None:
    seen: dict[str, Any] = {}
    by_hook = how == "process_input_step"
    async with _model(kind, server) as model:
        agent = Agent(id="a", model=model, tools=[get_weather],
                      input_processors=[_watcher(mode, seen, "none" if by_hook else None)])
        result = await agent.generate("Weather in Paris?",
                                      **({} if by_hook else {"tool_choice": "none"}))
    assert result.text  # the recorded answer came back through the adapter
    (sent,) = server.requests
    assert "tools" not in sent.body and "tool_choice" not in sent.body
    assert seen["input_step"] == (["get_weather"], "auto" if by_hook else "none")
    assert seen["llm_request"] == (["get_weather"], "none")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_other_choices_still_send_the_tools(server: ReplayServer, kind: str) -> None:
    async with _model(kind, server) as model:
        await Agent(id="a", model=model, tools=[get_weather]).generate(
            "Weather in Paris?", tool_choice="auto")
    (sent,) = server.requests
    assert [t.get("name") or t["function"]["name"] for t in sent.body["tools"]] == \
        ["get_weather"]


async def test_the_model_request_carries_no_tools(mode: str) -> None:
    """Any model (not only the HTTP adapters) gets a request without tools."""
    seen: dict[str, Any] = {}
    model = ScriptedModel([text("no tools today")])
    agent = Agent(id="a", model=model, tools=[get_weather],
                  input_processors=[_watcher(mode, seen, None)])
    await agent.generate("hi", tool_choice="none")
    assert (model.requests[0].tools, model.requests[0].tool_choice) == ([], "none")
    assert seen["llm_request"] == (["get_weather"], "none")
