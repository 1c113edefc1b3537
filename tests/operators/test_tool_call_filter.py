"""ToolCallFilter: old tool calls leave the prompt, this run's stay, the stored history keeps
all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent, Message, tool
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import TextPart, ToolInvocationPart
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit_operators import ToolCallFilter


@tool
def weather(city: str) -> dict[str, Any]:
    """Current weather."""
    return {"city": city, "celsius": 21}


@tool
def search(query: str) -> str:
    """Search the web."""
    return "a very long page of search results " * 20


def history() -> list[Message]:
    """A previous turn that called both tools."""
    return [
        Message.user("Weather in Paris, and news?"),
        Message.assistant([TextPart("Checking."),
                           ToolInvocationPart.returned("old-w", "weather", {"celsius": 18},
                                                       {"city": "Paris"}),
                           ToolInvocationPart.returned("old-s", "search", "old news",
                                                       {"query": "news"})]),
        Message.assistant("18 degrees; nothing new."),
    ]


def tool_ids(prompt: list[dict[str, Any]]) -> set[str]:
    return {p["toolCallId"] for m in prompt if isinstance(m.get("content"), list)
            for p in m["content"] if p.get("type") in ("tool-call", "tool-result")}


async def run(filter_: ToolCallFilter, *steps: Any) -> tuple[ScriptedModel, Any]:
    model = ScriptedModel(list(steps) or [text("ok")])
    agent = Agent(id="f", model=model, tools=[weather, search], input_processors=[filter_])
    result = await agent.generate([*history(), Message.user("And now?")])
    return model, result


async def test_all_history_tools_removed_by_default_current_run_kept() -> None:
    model, result = await run(ToolCallFilter(), tool_call("weather", {"city": "Rome"}, id="new"),
                              text("Rome: 21."))
    first, second = (r.prompt for r in model.requests)
    assert tool_ids(first) == set() and tool_ids(second) == {"new"}
    # the text of the old assistant turn survives its tool calls
    assert {"role": "assistant", "content": "Checking."} in first
    assert not any(m["role"] == "tool" for m in first)
    assert result.text == "Rome: 21."
    assert result.states["tool-call-filter"]["removed_tokens"] > 0


async def test_exclude_by_name() -> None:
    model, _ = await run(ToolCallFilter(exclude=["search"]))
    assert tool_ids(model.requests[0].prompt) == {"old-w"}


async def test_unknown_name_removes_nothing() -> None:
    model, _ = await run(ToolCallFilter(exclude=["nope"]))
    assert tool_ids(model.requests[0].prompt) == {"old-w", "old-s"}


@pytest.mark.parametrize("keep, expected", [
    pytest.param(0, {"new"} - {"new"}, id="keep-none"),
    pytest.param(1, {"new"}, id="keep-last"),
    pytest.param(2, {"old-w", "old-s", "new"}, id="keep-two"),
])
async def test_filter_after_tool_steps(keep: int, expected: set[str]) -> None:
    model, _ = await run(ToolCallFilter(filter_after_tool_steps=keep),
                         tool_call("weather", {"city": "Rome"}, id="new"), text("done"))
    assert tool_ids(model.requests[1].prompt) == expected


async def test_preserve_model_output_keeps_the_result_as_text() -> None:
    model, _ = await run(ToolCallFilter(preserve_model_output=True, exclude=["weather"]))
    prompt = model.requests[0].prompt
    assert tool_ids(prompt) == {"old-s"}
    assistant = next(m for m in prompt if m["role"] == "assistant"
                     and isinstance(m["content"], list))
    texts = [p["text"] for p in assistant["content"] if p["type"] == "text"]
    assert texts == ["Checking.", 'weather result:\n{"celsius":18}']


async def test_stored_history_keeps_every_tool_call(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "memory.db"), last_messages=20)
    model = ScriptedModel([tool_call("weather", {"city": "Paris"}, id="t1-call"), text("18."),
                           text("Still 18.")])
    agent = Agent(id="f", model=model, tools=[weather], memory=memory,
                  input_processors=[ToolCallFilter()])
    await agent.generate("Weather in Paris?", thread_id="t", resource_id="u")
    assert tool_ids(model.requests[1].prompt) == {"t1-call"}  # this run's call is kept
    await agent.generate("And now?", thread_id="t", resource_id="u")
    assert tool_ids(model.requests[2].prompt) == set()  # next turn: it is history
    stored = await memory.recall("t", "u")
    assert any(isinstance(p, ToolInvocationPart) and p.tool_call_id == "t1-call"
               for m in stored for p in m.content.parts)


def test_options_are_checked() -> None:
    with pytest.raises(InvalidType, match="list of tool names"):
        ToolCallFilter(exclude="search")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=">= 0"):
        ToolCallFilter(filter_after_tool_steps=-1)
