"""The run's two texts (issue 27, point 2), as Mastra's: ``await stream.text`` is the final
step's text ("narration before tool calls is excluded"); ``result.text`` (Mastra's
``getFullOutput().text``) joins every step's text. After a retried step, neither contains the
withdrawn attempt's text."""

from __future__ import annotations

from typing import Any

import pytest

from streamkit import Agent, MessageList, tool
from streamkit.messages import StepStartPart, TextPart
from streamkit.testing import ScriptedModel, text, tool_call

from .conftest import P, as_mode


@tool
def lookup(order: str) -> str:
    """Looks an order up."""
    return f"{order}: shipped"


def _narrating_model() -> ScriptedModel:
    return ScriptedModel([[text("Let me check."), tool_call("lookup", {"order": "A1"})],
                          text("It has shipped.")])


async def _both(agent: Agent, **kw: Any) -> tuple[str, Any]:
    stream = agent.stream("where is A1?", **kw)
    said = await stream.text
    return said, await stream.result()


async def test_stream_text_is_the_final_step_and_result_text_joins_every_step() -> None:
    said, result = await _both(Agent(id="a", model=_narrating_model(), tools=[lookup]))
    assert said == "It has shipped."
    assert result.text == "Let me check.It has shipped."
    assert [s.text for s in result.steps] == ["Let me check.", "It has shipped."]
    generated = await Agent(id="a", model=_narrating_model(), tools=[lookup]).generate("x")
    assert generated.text == result.text


async def test_a_final_step_without_text_gives_an_empty_stream_text() -> None:
    model = ScriptedModel([[text("Checking."), tool_call("lookup", {"order": "A1"})], []])
    said, result = await _both(Agent(id="a", model=model, tools=[lookup]))
    assert (said, result.text) == ("", "Checking.")


def _rejecting(mode: str, bad: str) -> P:
    def output_step(text: str, abort: Any, retry_count: int) -> None:
        if bad in text and retry_count == 0:
            abort("no such words", retry=True)

    return P("judge", process_output_step=as_mode(output_step, mode))


@pytest.mark.parametrize("where", ["final-step", "narration-step"])
async def test_a_withdrawn_attempt_is_in_neither_text(mode: str, where: str) -> None:
    if where == "final-step":
        steps = [[text("Let me check."), tool_call("lookup", {"order": "A1"})],
                 text("WRONG answer."), text("It has shipped.")]
    else:
        steps = [[text("WRONG guess."), tool_call("lookup", {"order": "A1"})],
                 [text("Let me check."), tool_call("lookup", {"order": "A1"})],
                 text("It has shipped.")]
    agent = Agent(id="a", model=ScriptedModel(steps), tools=[lookup],
                  output_processors=[_rejecting(mode, "WRONG")], max_processor_retries=2)
    stream = agent.stream("where is A1?")
    chunks = [c async for c in stream]
    said, result = await stream.text, await stream.result()
    assert any(c.type == "data-step-retry" for c in chunks)  # the attempt was streamed
    assert said == "It has shipped."
    assert result.text == "Let me check.It has shipped."
    assert "WRONG" not in said + result.text


async def test_an_output_result_edit_changes_both_texts(mode: str) -> None:
    def shout(message_list: MessageList) -> MessageList:
        # One assistant message holds the turn's steps; the final step follows the last
        # step-start part.
        last = [m for m in message_list.get.response.db() if m.role == "assistant"][-1]
        parts = last.content.parts
        cut = max(i for i, p in enumerate(parts) if isinstance(p, StepStartPart))
        last.content.parts = parts[:cut] + [
            TextPart(text=p.text.upper()) if isinstance(p, TextPart) else p
            for p in parts[cut:]]
        return message_list

    agent = Agent(id="a", model=_narrating_model(), tools=[lookup],
                  output_processors=[P("shout", process_output_result=as_mode(shout, mode))])
    said, result = await _both(agent)
    assert said == "IT HAS SHIPPED."
    assert result.text == "Let me check.IT HAS SHIPPED."


async def test_an_output_result_hook_that_leaves_the_text_keeps_the_final_step(
        mode: str) -> None:
    seen: list[str] = []
    agent = Agent(id="a", model=_narrating_model(), tools=[lookup], output_processors=[
        P("look", process_output_result=as_mode(lambda result: seen.append(result["text"]),
                                                mode))])
    said, result = await _both(agent)
    assert said == "It has shipped." and seen == [result.text]


async def test_after_a_stream_tripwire_stream_text_is_what_was_received(mode: str) -> None:
    def block(part: Any, abort: Any) -> Any:
        if part.type == "text-delta" and "shipped" in part.payload.text:
            abort("no spoilers")
        return part

    agent = Agent(id="a", model=_narrating_model(), tools=[lookup],
                  output_processors=[P("g", process_output_stream=as_mode(block, mode))])
    said, result = await _both(agent)
    assert said == "Let me check.It has"  # every delta the consumer received, as Mastra
    assert result.text == "" and result.tripwire is not None
