"""Hooks may return typed result objects as well as Mastra's dict forms, with the same effect."""

from __future__ import annotations

from typing import Any

import pytest

from streamkit import Agent, APIErrorResult, LLMRequestUpdate, MessagesUpdate, StepOverrides, tool
from streamkit.messages import get_text
from streamkit.testing import ScriptedModel, api_error, text, tool_call

from .conftest import P, hook


def _both(typed: Any, as_dict: Any) -> list[Any]:
    return [pytest.param(typed, id="typed object"), pytest.param(as_dict, id="documented dict")]


@pytest.mark.parametrize("value", _both(
    lambda messages: MessagesUpdate(messages=[m for m in messages if get_text(m) != "drop me"],
                                    system_messages=["You are terse."]),
    lambda messages: {"messages": [m for m in messages if get_text(m) != "drop me"],
                      "system_messages": ["You are terse."]}))
async def test_process_input_messages_update(mode: str, value: Any) -> None:
    model = ScriptedModel([text("ok")])
    agent = Agent(id="a", instructions="You are chatty.", model=model,
                  input_processors=[P("trim", process_input=hook(mode, value))])
    await agent.generate(["keep me", "drop me"])
    prompt = model.requests[0].prompt
    assert [m["content"] for m in prompt if m["role"] == "user"] == ["keep me"]
    assert [m["content"] for m in prompt if m["role"] == "system"] == ["You are terse."]


@pytest.mark.parametrize("value", _both(
    lambda prompt: LLMRequestUpdate(prompt=[*prompt, {"role": "system", "content": "terse"}]),
    lambda prompt: {"prompt": [*prompt, {"role": "system", "content": "terse"}]}))
async def test_process_llm_request_prompt_update(mode: str, value: Any) -> None:
    model = ScriptedModel([text("ok")])
    agent = Agent(id="a", model=model,
                  input_processors=[P("p", process_llm_request=hook(mode, value))])
    result = await agent.generate("hi")
    assert model.requests[0].prompt[-1] == {"role": "system", "content": "terse"}
    assert result.text == "ok"


@pytest.mark.parametrize("value", _both(
    lambda: LLMRequestUpdate(response=[{"type": "text-delta", "payload": {"id": "t",
                                                                          "text": "cached"}}]),
    lambda: {"response": [{"type": "text-delta", "payload": {"id": "t", "text": "cached"}}]}))
async def test_process_llm_request_replay(mode: str, value: Any) -> None:
    from streamkit.chunks import Finish

    def replay() -> Any:
        out = value()
        finish = Finish(step_result={"reason": "stop"}, output={"usage": {}})
        if isinstance(out, LLMRequestUpdate):
            return LLMRequestUpdate(response=[*(out.response or []), finish])
        return {"response": [*out["response"], finish]}

    model = ScriptedModel([])
    agent = Agent(id="a", model=model,
                  input_processors=[P("cache", process_llm_request=hook(mode, replay))])
    result = await agent.generate("hi")
    assert result.text == "cached"
    assert model.requests == []


@pytest.mark.parametrize("value", _both(lambda: APIErrorResult(retry=True),
                                        lambda: {"retry": True}))
async def test_process_api_error_retry(mode: str, value: Any) -> None:
    model = ScriptedModel([api_error(503, "busy"), text("second time")])
    agent = Agent(id="a", model=model,
                  error_processors=[P("again", process_api_error=hook(mode, value))])
    result = await agent.generate("hi")
    assert result.text == "second time"
    assert len(model.requests) == 2


@pytest.mark.parametrize("value", _both(lambda: APIErrorResult(retry=False),
                                        lambda: {"retry": False}))
async def test_process_api_error_no_retry_surfaces_the_error(mode: str, value: Any) -> None:
    from streamkit import APICallError

    agent = Agent(id="a", model=ScriptedModel([api_error(503, "busy"), text("never")]),
                  error_processors=[P("no", process_api_error=hook(mode, value))])
    with pytest.raises(APICallError, match="busy"):
        await agent.generate("hi")


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def clock() -> str:
    """The time."""
    return "noon"


@pytest.mark.parametrize("value", [
    pytest.param(lambda: {"tools": [weather]}, id="a dict replaces the tool set"),
    pytest.param(lambda: StepOverrides(tools=[weather]), id="StepOverrides replaces the tool set"),
    pytest.param(lambda: {"tools": {"weather": weather}}, id="a dict of tools by name"),
])
async def test_process_input_step_replaces_the_tool_set(mode: str, value: Any) -> None:
    model = ScriptedModel([tool_call("weather", {"city": "Oslo"}), text("done")])
    agent = Agent(id="a", model=model, tools=[clock],
                  input_processors=[P("swap", process_input_step=hook(mode, value))])
    result = await agent.generate("weather?")
    assert model.requests[0].tools == ["weather"]
    assert result.tool_results[0]["result"] == "sunny in Oslo"
    assert result.text == "done"
