"""Structured output streams like Mastra's (issue 27, point 6): partial ``object`` chunks as
the JSON text grows, each just before the text delta that changed it, and ``object-result``
after ``text-end`` and before that step's ``step-finish``."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import Agent, tool
from streamkit.chunks import ObjectChunk, ObjectResult, TextDelta
from streamkit.testing import ScriptedModel, text, tool_call

from .conftest import P, as_mode, run_stream, types
from .test_partial_json import _documents, extends


class Answer(msgspec.Struct):
    name: str
    tier: str


ANSWER = '{"name": "Ada", "tier": "gold"}'


@tool
def lookup(customer: str) -> str:
    """Looks a customer up."""
    return f"{customer}: gold"


def _objects(chunks: list[Any]) -> list[Any]:
    return [c.object for c in chunks if isinstance(c, ObjectChunk)]


def _assert_streamed_like_mastra(chunks: list[Any], final: Any) -> None:
    """Each partial object comes right before a text delta; they only grow and end in the
    final value; one object-result, after the step's text-end, right before its step-finish
    (no other chunk of the step between them)."""
    for i, chunk in enumerate(chunks):
        if isinstance(chunk, ObjectChunk):
            assert isinstance(chunks[i + 1], TextDelta), types(chunks[i:i + 2])
            assert chunk.run_id == chunks[i + 1].run_id and chunk.from_ == "AGENT"
    objects = _objects(chunks)
    assert objects and objects[-1] == final
    for before, after in zip(objects, objects[1:]):
        assert extends(before, after) and before != after
    kinds = types(chunks)
    (at,) = [i for i, k in enumerate(kinds) if k == "object-result"]
    assert kinds[at - 1] == "text-end" and kinds[at + 1] == "step-finish"
    assert max(i for i, k in enumerate(kinds) if k == "text-delta") < at


async def test_partial_objects_then_the_result_in_mastra_order() -> None:
    agent = Agent(id="a", model=ScriptedModel([text(ANSWER)]), structured_output=Answer)
    chunks, result = await run_stream(agent)
    assert types(chunks) == [
        "start", "step-start", "text-start",
        "object", "text-delta",  # {"name":          -> {}
        "object", "text-delta",  # "Ada",            -> {"name": "Ada"}
        "text-delta",  # "tier":                     -> no change: no object
        "object", "text-delta",  # "gold"}           -> {"name": "Ada", "tier": "gold"}
        "text-end", "object-result", "step-finish", "finish"]
    assert _objects(chunks) == [{}, {"name": "Ada"}, {"name": "Ada", "tier": "gold"}]
    (done,) = [c for c in chunks if isinstance(c, ObjectResult)]
    assert done.object == result.object == Answer("Ada", "gold")
    _assert_streamed_like_mastra(chunks, {"name": "Ada", "tier": "gold"})


async def test_a_tool_step_before_the_answer_sends_no_object() -> None:
    model = ScriptedModel([[text("Let me look."), tool_call("lookup", {"customer": "Ada"})],
                           text(ANSWER)])
    agent = Agent(id="a", model=model, tools=[lookup], structured_output=Answer)
    chunks, result = await run_stream(agent)
    first_step = types(chunks)[:types(chunks).index("step-finish")]
    assert "object" not in first_step and "object-result" not in first_step
    _assert_streamed_like_mastra(chunks, {"name": "Ada", "tier": "gold"})
    assert result.object == Answer("Ada", "gold")


async def test_a_retried_answer_gets_its_object_from_the_accepted_attempt(mode: str) -> None:
    def judge(text: str, abort: Any, retry_count: int) -> None:
        if retry_count == 0:
            abort("use the other customer", retry=True)

    model = ScriptedModel([text('{"name": "Bob", "tier": "tin"}'), text(ANSWER)])
    agent = Agent(id="a", model=model, structured_output=Answer, max_processor_retries=1,
                  output_processors=[P("judge", process_output_step=as_mode(judge, mode))])
    chunks, result = await run_stream(agent)
    retry = types(chunks).index("data-step-retry")
    assert "object" in types(chunks)[:retry]  # the withdrawn attempt streamed its partials
    assert "object-result" not in types(chunks)[:retry]  # but no result: it was rejected
    _assert_streamed_like_mastra(chunks[retry:], {"name": "Ada", "tier": "gold"})
    assert result.object == Answer("Ada", "gold")


async def test_partials_follow_the_text_the_consumer_received(mode: str) -> None:
    seen: list[str] = []

    def redact(part: Any) -> Any:
        seen.append(part.type)
        if isinstance(part, TextDelta):
            return msgspec.structs.replace(part, payload=msgspec.structs.replace(
                part.payload, text=part.payload.text.replace("Ada", "***")))
        return part

    agent = Agent(id="a", model=ScriptedModel([text(ANSWER)]), structured_output=Answer,
                  output_processors=[P("redact", process_output_stream=as_mode(redact, mode))])
    chunks, result = await run_stream(agent)
    assert _objects(chunks)[1] == {"name": "***"}
    assert result.object == Answer("***", "gold")
    assert "object" not in seen and "object-result" not in seen  # run framing, as in Mastra


async def test_a_step_override_streams_its_own_schema(mode: str) -> None:
    def ask(step_number: int) -> Any:
        return {"structured_output": Answer}

    agent = Agent(id="a", model=ScriptedModel([text(ANSWER)]),
                  input_processors=[P("ask", process_input_step=as_mode(ask, mode))])
    chunks, result = await run_stream(agent)
    _assert_streamed_like_mastra(chunks, {"name": "Ada", "tier": "gold"})
    assert result.object == Answer("Ada", "gold")


async def test_an_answer_that_is_not_json_ends_with_an_error_and_no_result() -> None:
    agent = Agent(id="a", model=ScriptedModel([text('{"name": "Ada", oops}')]),
                  structured_output=Answer)
    chunks, error = await run_stream(agent)
    assert _objects(chunks) == [{}, {"name": "Ada"}]  # nothing after the text broke off
    assert "object-result" not in types(chunks) and types(chunks)[-1] == "error"
    assert "not JSON" in str(error)


async def test_without_structured_output_no_object_is_sent() -> None:
    chunks, _ = await run_stream(Agent(id="a", model=ScriptedModel([text(ANSWER)])))
    assert "object" not in types(chunks) and "object-result" not in types(chunks)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_documents, size=st.integers(1, 12))
async def test_any_split_streams_monotone_partials_ending_in_the_object(doc: Any,
                                                                         size: int) -> None:
    body = json.dumps(doc)
    schema = {"type": "object"} if isinstance(doc, dict) else {"type": "array"}
    agent = Agent(id="a", model=ScriptedModel([text(body, chunk_size=size)]),
                  structured_output=schema)
    chunks, result = await run_stream(agent)
    _assert_streamed_like_mastra(chunks, doc)
    assert result.object == doc


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```"])
async def test_a_fenced_answer_streams_too(fence: str) -> None:
    body = fence.replace("{}", ANSWER)
    agent = Agent(id="a", model=ScriptedModel([text(body, chunk_size=4)]),
                  structured_output=Answer)
    chunks, result = await run_stream(agent)
    _assert_streamed_like_mastra(chunks, {"name": "Ada", "tier": "gold"})
    assert result.object == Answer("Ada", "gold")
