"""StructuredOutput: a second model structures the final answer; strict / warn / fallback."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamkit import Agent, tool
from streamkit.errors import InvalidArgument
from streamkit.memory import Memory, SQLiteStore
from streamkit.testing import ScriptedModel, api_error, text, tool_call
from streamkit_operators import StructuredOutput


class Weather(msgspec.Struct):
    city: str
    celsius: float


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"},
                                           "celsius": {"type": "number"}},
          "required": ["city", "celsius"]}
ANSWER = "It is 21 degrees in Paris."


@tool
def forecast(city: str) -> str:
    """Forecast."""
    return "21C"


async def run(so: StructuredOutput, main: list[Any] | None = None, **kw: Any
              ) -> tuple[list[Any], Any]:
    agent = Agent(id="w", model=ScriptedModel(main or [text(ANSWER)]), tools=[forecast],
                  output_processors=[so], **kw)
    stream = agent.stream("Weather in Paris?")
    chunks = [c async for c in stream]
    return chunks, await stream.result()


async def test_typed_object_in_stream_result_and_message() -> None:
    judge = ScriptedModel([text('{"city": "Paris", "celsius": 21}')])
    chunks, result = await run(StructuredOutput(Weather, model=judge))
    assert StructuredOutput.object_of(result) == Weather("Paris", 21.0)
    objects = [c for c in chunks if c.type == "object-result"]
    assert len(objects) == 1 and objects[0].object == {"city": "Paris", "celsius": 21.0}
    assert objects[0].metadata == {"from": "structured-output"}
    assert objects[0].run_id == result.run_id and objects[0].from_ == "AGENT"
    types = [c.type for c in chunks]
    assert types.index("text-end") < types.index("object-result") < types.index("step-finish")
    assert result.messages[-1].content.metadata == {
        "structuredOutput": {"city": "Paris", "celsius": 21.0}}
    request = judge.requests[0]
    assert request.prompt[-1] == {"role": "user", "content": ANSWER}
    assert '"celsius"' in request.prompt[0]["content"] and request.prompt[0]["role"] == "system"
    assert request.model_settings == {"temperature": 0}
    assert request.structured_output["required"] == ["city", "celsius"]


async def test_only_the_answer_step_is_structured() -> None:
    judge = ScriptedModel([text('```json\n{"city": "Paris", "celsius": 21}\n```')])
    _, result = await run(StructuredOutput(SCHEMA, model=judge),
                          [tool_call("forecast", {"city": "Paris"}), text(ANSWER)])
    assert judge.calls == 1 and StructuredOutput.object_of(result) == {"city": "Paris",
                                                                       "celsius": 21}


@pytest.mark.parametrize("judge_step, error", [
    pytest.param(api_error(500, "judge is down"), "judge is down", id="model-fails"),
    pytest.param(text("I cannot help with that."), "expected a JSON object", id="not-json"),
    pytest.param(text('{"city": "Paris"}'), "celsius", id="schema-mismatch"),
])
async def test_strict_aborts_with_retry(judge_step: Any, error: str) -> None:
    judge = ScriptedModel([judge_step])
    chunks, result = await run(StructuredOutput(Weather, model=judge))
    assert result.tripwire is not None and result.tripwire.processor_id == "structured-output"
    assert result.tripwire.reason.startswith("Structured output failed:")
    assert result.tripwire.retry is True and error in result.tripwire.metadata["error"]
    assert chunks[-1].type == "tripwire" and StructuredOutput.object_of(result) is None


async def test_strict_with_retries_reruns_the_step() -> None:
    judge = ScriptedModel([api_error(503, "busy"), text('{"city": "Paris", "celsius": 21}')])
    main = [text("Paris, warm."), text(ANSWER)]
    chunks, result = await run(StructuredOutput(Weather, model=judge), main,
                               max_processor_retries=1)
    assert result.tripwire is None and result.text == ANSWER
    assert StructuredOutput.object_of(result) == Weather("Paris", 21.0)
    assert any(c.type == "data-step-retry" for c in chunks)
    assert [s.finish_reason for s in result.steps] == ["retry", "stop"]


async def test_warn_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    judge = ScriptedModel([api_error(500, "judge is down")])
    with caplog.at_level(logging.WARNING, logger="streamkit_operators"):
        chunks, result = await run(StructuredOutput(Weather, model=judge,
                                                    error_strategy="warn"))
    assert result.tripwire is None and result.text == ANSWER
    assert StructuredOutput.object_of(result) is None
    assert not any(c.type == "object-result" for c in chunks)
    assert "judge is down" in caplog.text
    assert result.states["structured-output"]["error"].startswith("APICallError")


async def test_fallback_value() -> None:
    judge = ScriptedModel([text("no json here")])
    fallback = Weather("unknown", 0.0)
    chunks, result = await run(StructuredOutput(Weather, model=judge, error_strategy="fallback",
                                                fallback_value=fallback))
    assert StructuredOutput.object_of(result) is fallback
    chunk = next(c for c in chunks if c.type == "object-result")
    assert chunk.metadata == {"from": "structured-output", "fallback": True}
    assert chunk.object == {"city": "unknown", "celsius": 0.0}


async def test_the_object_is_stored_with_the_message(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "m.db"))
    judge = ScriptedModel([text('{"city": "Paris", "celsius": 21}')])
    agent = Agent(id="w", model=ScriptedModel([text(ANSWER)]), memory=memory,
                  output_processors=[StructuredOutput(SCHEMA, model=judge)])
    await agent.generate("Weather?", thread_id="t", resource_id="u")
    stored = await memory.recall("t", "u")
    assert stored[-1].content.metadata["structuredOutput"] == {"city": "Paris", "celsius": 21}


async def test_empty_answer_is_a_failure() -> None:
    judge = ScriptedModel([])
    _, result = await run(StructuredOutput(Weather, model=judge, error_strategy="warn"),
                          [text("")])
    assert judge.calls == 0 and "no text" in result.states["structured-output"]["error"]


def test_options_are_checked() -> None:
    with pytest.raises(InvalidArgument, match="model="):
        StructuredOutput(Weather, model=None)
    with pytest.raises(InvalidArgument, match="error_strategy"):
        StructuredOutput(Weather, model=ScriptedModel([]), error_strategy="ignore")
    custom = StructuredOutput(SCHEMA, model=ScriptedModel([]), instructions="Schema: {schema}")
    assert custom.instructions.startswith("Schema: {") and '"city"' in custom.instructions
