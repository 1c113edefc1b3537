"""The ``finish`` chunk's message snapshot (``messages: {all, user, nonUser}``) is the last
``step-finish``'s when no processor hook ran between them, and is walked again when one did
(``agent/_step_end.StepEnd.finish``, ``unchanged=``): reused, it is the same dicts; walked, it
shows what a ``process_output_result`` hook changed."""

from __future__ import annotations

from typing import Any

from streamkit import Agent, MessageList, tool
from streamkit.chunks import Chunk, Finish, StepFinish
from streamkit.messages import TextPart
from streamkit.testing import ScriptedModel, text, tool_call

from .conftest import P, as_mode


@tool
def lookup(order: str) -> str:
    """Looks an order up."""
    return f"{order}: shipped"


def _model() -> ScriptedModel:
    return ScriptedModel([[text("Let me check."), tool_call("lookup", {"order": "A1"})],
                          text("It has shipped.")])


async def _ends(agent: Agent) -> tuple[StepFinish, Finish, Any]:
    stream = agent.stream("where is A1?")
    chunks: list[Chunk] = [c async for c in stream]
    result = await stream.result()
    last_step = [c for c in chunks if isinstance(c, StepFinish)][-1]
    finish = [c for c in chunks if isinstance(c, Finish)][-1]
    return last_step, finish, result


async def test_without_hooks_after_the_last_step_the_snapshot_is_shared_and_complete() -> None:
    step, finish, result = await _ends(Agent(id="a", model=_model(), tools=[lookup]))
    assert finish.payload.messages is step.payload.messages
    assert [m["role"] for m in finish.payload.messages["all"]] == \
        ["user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in finish.payload.messages["user"]] == ["user"]
    assert result.text == "Let me check.It has shipped."
    assert finish.payload.response["messages"] == finish.payload.messages["nonUser"]


async def test_an_output_stream_processor_makes_finish_walk_the_messages_again(mode: str) -> None:
    agent = Agent(id="a", model=_model(), tools=[lookup], output_processors=[
        P("same", process_output_stream=as_mode(lambda part: part, mode))])
    step, finish, _ = await _ends(agent)
    assert finish.payload.messages is not step.payload.messages
    assert finish.payload.messages == step.payload.messages


async def test_an_output_result_edit_shows_in_finish_and_not_in_the_step_finish(
        mode: str) -> None:
    def shout(message_list: MessageList) -> MessageList:
        last = [m for m in message_list.get.response.db() if m.role == "assistant"][-1]
        last.content.parts = [TextPart(text=p.text.upper()) if isinstance(p, TextPart) else p
                              for p in last.content.parts]
        return message_list

    agent = Agent(id="a", model=_model(), tools=[lookup], output_processors=[
        P("shout", process_output_result=as_mode(shout, mode))])
    step, finish, _ = await _ends(agent)

    def texts(snapshot: dict[str, list[dict[str, Any]]]) -> list[str]:
        return [p["text"] for m in snapshot["nonUser"] for p in m["content"]
                if p["type"] == "text"]

    assert "IT HAS SHIPPED." in texts(finish.payload.messages)
    assert "It has shipped." in texts(step.payload.messages)
    assert "IT HAS SHIPPED." not in texts(step.payload.messages)


async def test_a_step_without_response_metadata_gets_a_fresh_id_and_a_millisecond_time() -> None:
    import re

    ids = set()
    for _ in range(3):
        step, finish, _ = await _ends(Agent(id="a", model=_model(), tools=[lookup]))
        meta = step.payload.metadata
        assert re.fullmatch(r"resp-[0-9a-f]{24}", meta["id"]), meta["id"]
        # JavaScript's toISOString: three fractional digits, Z.
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", meta["timestamp"])
        assert finish.payload.metadata["id"] == meta["id"]
        ids.add(meta["id"])
    assert len(ids) == 3
