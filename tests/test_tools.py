"""Tool arguments: what a tool receives of what the model sent.

Undeclared keys are dropped before the call (Mastra's object schemas strip unknown keys), a
``**kwargs`` tool receives them, and a missing or ill-typed declared argument stays a
``tool-error``. The recorded LiteLLM tool calls (``get_weather`` with an extra ``unit``) are
replayed over real HTTP through a ``get_weather(city)`` that does not declare ``unit``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit import Agent, Tool, ToolError, tool
from streamkit.models import OpenAIChatModel
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.tools import INJECTED

from ._http_server import ReplayServer, Reply
from .conftest import run_stream, types


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def get_time(timezone: str) -> str:
    """Current time in a timezone."""
    return f"noon in {timezone}"


@tool
def open_weather(city: str, **extra: str) -> dict[str, Any]:
    """Weather with any options the model adds."""
    return {"city": city, "extra": extra}


@tool
def anything(city: str, **extra: Any) -> dict[str, Any]:
    """Weather with options of any type."""
    return {"city": city, "extra": extra}


async def test_an_undeclared_argument_is_dropped_and_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="streamkit.tools"):
        assert await get_weather.run({"city": "Paris", "unit": "celsius"}) == "sunny in Paris"
    assert "'get_weather': dropped undeclared argument(s) ['unit']" in caplog.text


_declared = frozenset(("city",))
_extras = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(lambda k: k not in _declared and k not in INJECTED),
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
              st.lists(st.integers(), max_size=3)),
    max_size=5)


@given(extras=_extras, city=st.text(max_size=10))
async def test_a_tool_gets_exactly_its_declared_arguments(extras: dict[str, Any],
                                                          city: str) -> None:
    assert await get_weather.run({"city": city, **extras}) == f"sunny in {city}"
    assert await anything.run({"city": city, **extras}) == {"city": city, "extra": extras}


async def test_kwargs_receive_the_extras_typed_by_their_hint() -> None:
    assert await open_weather.run({"city": "Paris", "unit": "celsius"}) == \
        {"city": "Paris", "extra": {"unit": "celsius"}}
    with pytest.raises(ToolError, match="extra argument 'days'"):
        await open_weather.run({"city": "Paris", "days": 3})
    assert open_weather.input_schema["additionalProperties"] == {"type": "string"}
    assert anything.input_schema["additionalProperties"] is True
    assert get_weather.input_schema["additionalProperties"] is False


async def test_injected_names_are_never_taken_from_the_model() -> None:
    got: list[Any] = []

    @tool
    def noted(city: str, tool_call_id: str, **extra: Any) -> str:
        """Notes its call id."""
        got.append((tool_call_id, extra))
        return city

    await noted.run({"city": "Paris", "tool_call_id": "forged", "writer": 1, "unit": "c"},
                    tool_call_id="real")
    assert got == [("real", {"unit": "c"})]


@pytest.mark.parametrize("schema,expected", [
    pytest.param({"type": "object", "properties": {"city": {"type": "string"}}},
                 {"city": "Paris"}, id="declared properties only"),
    pytest.param({"type": "object", "properties": {"city": {"type": "string"}},
                  "additionalProperties": False}, {"city": "Paris"}, id="closed schema"),
    pytest.param({"type": "object", "properties": {"city": {"type": "string"}},
                  "additionalProperties": True}, {"city": "Paris", "unit": "c"},
                 id="open schema keeps extras"),
    pytest.param({"type": "object"}, {"city": "Paris", "unit": "c"},
                 id="no properties: any object"),
])
async def test_a_schema_tool_drops_what_its_schema_does_not_declare(
        schema: dict[str, Any], expected: dict[str, Any]) -> None:
    raw = Tool("weather", "Weather.", schema, lambda args: args)
    assert await raw.run({"city": "Paris", "unit": "c"}) == expected


@pytest.mark.parametrize("args,error", [
    pytest.param({"unit": "celsius"}, "missing required argument 'city'", id="missing"),
    pytest.param({"city": 7, "unit": "celsius"}, "argument 'city'", id="ill-typed"),
])
async def test_declared_arguments_are_still_checked(args: dict[str, Any], error: str) -> None:
    model = ScriptedModel([tool_call("get_weather", args), text("sorry")])
    chunks, result = await run_stream(Agent(id="a", model=model, tools=[get_weather]))
    (err,) = [c for c in chunks if c.type == "tool-error"]
    assert error in err.payload.error["message"]
    assert "tool-result" not in types(chunks) and result.text == "sorry"


def test_star_args_are_still_refused() -> None:
    with pytest.raises(ToolError, match=r"\*args"):
        @tool
        def star(*cities: str) -> str:
            """No."""
            return ""


# ----------------------------------------------------------------------------- recorded calls


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as srv:
        yield srv


@pytest.mark.parametrize("recording,stream", [
    pytest.param("openai/tool-stream.sse", True, id="streamed"),
    pytest.param("openai/tool.json", False, id="not streamed"),
])
async def test_recorded_call_with_an_extra_argument_runs_the_tool(
        server: ReplayServer, recording: str, stream: bool) -> None:
    answer = Reply.sse("openai/text-stream-usage.sse") if stream else Reply.json("openai/text.json")
    server.enqueue(Reply.sse(recording) if stream else Reply.json(recording), answer)
    async with OpenAIChatModel("peer-tool-stream", base_url=server.base_url,
                               stream=stream) as model:
        agent = Agent(id="weather", model=model, tools=[get_weather])
        chunks, result = await run_stream(agent, "What is the weather in Paris?")
    (call,) = [c for c in chunks if c.type == "tool-call"]
    assert call.payload.args == {"city": "Paris", "unit": "celsius"}  # as the server sent it
    assert "tool-error" not in types(chunks)
    (done,) = [c for c in chunks if c.type == "tool-result"]
    assert done.payload.result == "sunny in Paris"
    assert result.text == "Hello from the LiteLLM mock server."
    tool_msg = server.requests[1].body["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_peer_weather_1"
    assert "sunny in Paris" in tool_msg["content"]
    sent = server.requests[0].body["tools"][0]["function"]["parameters"]
    assert "unit" not in sent["properties"] and sent["additionalProperties"] is False


async def test_recorded_parallel_calls_run_both_tools(server: ReplayServer) -> None:
    server.enqueue(Reply.sse("openai/tool-stream-parallel.sse"),
                   Reply.sse("openai/text-stream-usage.sse"))
    async with OpenAIChatModel("peer-tool-stream-parallel", base_url=server.base_url) as model:
        agent = Agent(id="weather", model=model, tools=[get_weather, get_time])
        chunks, result = await run_stream(agent, "Weather and time in Paris?")
    results = {c.payload.tool_name: c.payload.result for c in chunks if c.type == "tool-result"}
    assert results == {"get_weather": "sunny in Paris", "get_time": "noon in Europe/Paris"}
    assert [r["is_error"] for r in result.steps[0].tool_results] == [False, False]


async def test_recorded_call_reaches_kwargs(server: ReplayServer) -> None:
    server.enqueue(Reply.sse("openai/tool-stream.sse"), Reply.sse("openai/text-stream-usage.sse"))
    weather = tool(open_weather.execute, name="get_weather")
    async with OpenAIChatModel("peer-tool-stream", base_url=server.base_url) as model:
        chunks, _ = await run_stream(Agent(id="w", model=model, tools=[weather]), "Paris?")
    (done,) = [c for c in chunks if c.type == "tool-result"]
    assert msgspec.to_builtins(done.payload.result) == \
        {"city": "Paris", "extra": {"unit": "celsius"}}


def test_a_tools_spec_is_made_once_and_anew_after_a_reassignment() -> None:
    # Every step asks each tool for its spec: made once, and made again when the id, the
    # description or the schema was reassigned (never a stale spec).
    @tool
    def lookup(customer_id: str) -> str:
        """Look a customer up."""
        return customer_id

    first = lookup.spec
    assert lookup.spec is first
    assert (first.name, first.description) == ("lookup", "Look a customer up.")
    lookup.description = "Find a customer."
    assert lookup.spec.description == "Find a customer."
    schema = {"type": "object", "properties": {}}
    lookup.input_schema = schema
    assert lookup.spec.parameters is schema
    lookup.id = "find"
    assert lookup.spec.name == "find"
