"""A run with no output processors iterates the model's stream itself (``agent/_run.Stream``
with ``hold``), one generator fewer per chunk than driving it through an empty chain. It must
do what the chain's ``drive`` does: the model's ``finish`` and ``response-metadata`` are kept
from the consumer, a non-chunk is an ``InvalidType`` naming it, and the model's stream is
closed however the run ends. Each test runs both ways (no processors / a pass-through one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from streamkit import Agent
from streamkit.chunks import Finish, ResponseMetadata, TextDelta
from streamkit.errors import InvalidType
from streamkit.models import ModelRequest
from streamkit.processors import Processor
from streamkit.testing import ScriptedModel, text


class Same(Processor):
    def process_output_stream(self, part: Any) -> Any:
        return part


WAYS = pytest.mark.parametrize("processors", [[], [Same("same")]], ids=["direct", "chain"])


class _Closing:
    """A model whose stream records that it was closed."""

    provider = "closing"
    model_id = "closing"

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.closed = 0

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        try:
            for item in self.items:
                yield item
        finally:
            self.closed += 1


async def _scripted(words: str) -> list[Any]:
    """What ``ScriptedModel`` streams for ``text(words)``: text-start, deltas, text-end,
    finish."""
    return [c async for c in ScriptedModel([text(words)]).stream(ModelRequest(prompt=[]))]


@WAYS
async def test_a_model_yielding_a_non_chunk_fails_the_run_naming_it(
        processors: list[Processor]) -> None:
    model = _Closing([{"type": "text-delta", "payload": {"id": "t", "text": "x"}}])
    agent = Agent(id="a", model=model, output_processors=processors)
    with pytest.raises(InvalidType, match="of type dict, not a chunk"):
        await agent.generate("hi")
    assert model.closed == 1


@WAYS
async def test_the_models_finish_and_metadata_are_held_and_the_run_is_the_same(
        processors: list[Processor]) -> None:
    agent = Agent(id="a", model=ScriptedModel([text("one two three")]),
                  output_processors=processors)
    stream = agent.stream("hi")
    chunks = [c async for c in stream]
    kinds = [c.type for c in chunks]
    assert not any(isinstance(c, ResponseMetadata) for c in chunks)
    assert kinds.count("finish") == 1 and kinds[-1] == "finish"  # the run's, not the model's
    assert "".join(c.payload.text for c in chunks if isinstance(c, TextDelta)) == "one two three"
    result = await stream.result()
    assert result.text == "one two three" and result.finish_reason == "stop"


@WAYS
async def test_a_consumer_that_leaves_early_closes_the_models_stream(
        processors: list[Processor]) -> None:
    model = _Closing(await _scripted("a b c d e f"))
    agent = Agent(id="a", model=model, output_processors=processors)
    stream = agent.stream("hi")
    async for chunk in stream:
        if isinstance(chunk, TextDelta):
            break
    await stream.aclose()
    assert model.closed == 1


@WAYS
async def test_a_model_finish_never_reaches_the_consumer_even_mid_stream(
        processors: list[Processor]) -> None:
    # A finish in the middle of the model's stream is still held (the last one counts).
    scripted = await _scripted("x y")
    finishes = [c for c in scripted if isinstance(c, Finish)]
    model = _Closing([*scripted[:-1], *finishes, scripted[-1]])
    chunks = [c async for c in Agent(id="a", model=model,
                                     output_processors=processors).stream("hi")]
    assert [c.type for c in chunks].count("finish") == 1


@WAYS
async def test_each_steps_model_stream_is_closed_before_the_next_step_opens_one(
        processors: list[Processor]) -> None:
    from streamkit import tool
    from streamkit.testing import tool_call

    @tool
    def lookup(order: str) -> str:
        """Looks an order up."""
        return "shipped"

    log: list[str] = []
    inner = ScriptedModel([[tool_call("lookup", {"order": "A1"})], text("It has shipped.")])

    class Logged:
        provider = "logged"
        model_id = "logged"

        async def stream(self, request: Any) -> AsyncIterator[Any]:
            step = request.step_number
            log.append(f"open {step}")
            try:
                async for chunk in inner.stream(request):
                    yield chunk
                log.append(f"drained {step}")
                # A provider stream that keeps its connection until closed: after its finish,
                # it waits to be closed, as an HTTP stream does.
            finally:
                log.append(f"close {step}")

    result = await Agent(id="a", model=Logged(), tools=[lookup],
                         output_processors=processors).generate("where is A1?")
    assert result.text == "It has shipped."
    assert log == ["open 0", "drained 0", "close 0", "open 1", "drained 1", "close 1"]


@WAYS
async def test_a_failed_models_stream_is_closed_before_the_run_reports_the_error(
        processors: list[Processor]) -> None:
    from streamkit.chunks import ErrorChunk

    model = _Closing([*(await _scripted("a b"))[:2], {"not": "a chunk"}])
    stream = Agent(id="a", model=model, output_processors=processors).stream("hi")
    closed_at_error = None
    async for chunk in stream:
        if isinstance(chunk, ErrorChunk):
            closed_at_error = model.closed
    assert closed_at_error == 1
