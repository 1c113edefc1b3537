"""``Run.events`` records a model's text deltas with an inlined copy of ``Run.deliver`` (a
measured hot-path choice, benchmarks/README.md "issue 32"); every other chunk goes through
``deliver`` → ``StepRecorder.add``. These tests hold the two together: the recorder a run filled
(inline path for text deltas) equals a fresh recorder fed every delivered chunk through ``add``
(the path ``deliver`` takes), step by step, with and without the full chunk list kept."""

from __future__ import annotations

from typing import Any

import pytest

from streamkit import Agent, tool
from streamkit.agent._build import StepRecorder
from streamkit.chunks import StepFinish, StepStart
from streamkit.messages import ToolInvocationPart
from streamkit.testing import ScriptedModel, reasoning, text, tool_call

from .conftest import P


@tool
def lookup(order: str) -> str:
    """Looks an order up."""
    return f"{order}: shipped"


def _model() -> ScriptedModel:
    return ScriptedModel([
        [text("Let me check that order for you.", chunk_size=4), reasoning("thinking it over"),
         text("One moment.", chunk_size=3), tool_call("lookup", {"order": "A1"})],
        [text("It has shipped.", chunk_size=2)],
    ])


def _steps(chunks: list[Any]) -> list[list[Any]]:
    """The chunks delivered inside each step, ``step-start`` to ``step-finish``."""
    steps: list[list[Any]] = []
    current: list[Any] | None = None
    for chunk in chunks:
        if isinstance(chunk, StepStart):
            current = []
            steps.append(current)
        if current is not None:
            current.append(chunk)
        if isinstance(chunk, StepFinish):
            current = None
    return steps


def _entries(rec: StepRecorder) -> list[Any]:
    """The recorder's entries; a tool call as its call (the run stores its result in the same
    part afterwards)."""
    return [(e.tool_invocation.tool_call_id, e.tool_invocation.tool_name, e.tool_invocation.args)
            if isinstance(e, ToolInvocationPart) else e for e in rec.entries]


def _same(recorded: StepRecorder, replayed: StepRecorder) -> None:
    assert recorded.texts == replayed.texts
    assert _entries(recorded) == _entries(replayed)
    assert recorded.tool_calls == replayed.tool_calls
    assert recorded.text() == replayed.text()


@pytest.mark.parametrize("keep_chunks", [False, True], ids=["chunks-dropped", "chunks-kept"])
async def test_the_inlined_text_path_records_what_deliver_records(keep_chunks: bool) -> None:
    # A process_llm_response hook makes every step keep its full chunk list.
    processors = [P("keep", process_llm_response=lambda **kw: None)] if keep_chunks else []
    agent = Agent(id="a", model=_model(), tools=[lookup], input_processors=processors)
    stream = agent.stream("where is A1?")
    seen = [chunk async for chunk in stream]
    recorders = stream._run.state.delivered
    assert len(recorders) == 2
    assert [rec.text() for rec in recorders] == ["Let me check that order for you.One moment.",
                                                 "It has shipped."]
    for rec, step in zip(recorders, _steps(seen), strict=True):
        replayed = StepRecorder(keep_chunks=keep_chunks)
        delivered = rec.chunks if keep_chunks else step
        assert delivered is not None
        for chunk in delivered:
            replayed.add(chunk)
        _same(rec, replayed)
        if keep_chunks:  # the inline path keeps each text delta in the list, in order
            assert rec.chunks is not None
            assert [c for c in rec.chunks if c.type == "text-delta"] == \
                [c for c in step if c.type == "text-delta"]
