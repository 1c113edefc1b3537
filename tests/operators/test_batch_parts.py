"""BatchParts: batches by size, time and non-text chunks; nothing lost, nothing reordered."""

from __future__ import annotations

from typing import Any

import pytest

from streamkit import Agent, get_text, ops, tool
from streamkit.chunks import TextDelta, ToolCall
from streamkit.errors import InvalidArgument
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit_operators import BatchParts


def deltas(chunks: list[Any]) -> list[str]:
    return [c.payload.text for c in chunks if c.type == "text-delta"]


async def stream(processor: Any, *steps: Any, tools: Any = None) -> tuple[list[Any], Any]:
    agent = Agent(id="b", model=ScriptedModel(list(steps)), tools=tools,
                  output_processors=[processor])
    s = agent.stream("go")
    chunks = [c async for c in s]
    return chunks, await s.result()


@pytest.mark.parametrize("size, expected", [
    pytest.param(1, ["a", " b", " c", " d", " e"], id="size-1-passes-through"),
    pytest.param(2, ["a b", " c d", " e"], id="size-2-rest-at-step-end"),
    pytest.param(5, ["a b c d e"], id="exact-fit"),
    pytest.param(50, ["a b c d e"], id="held-until-step-end"),
])
async def test_batch_size(size: int, expected: list[str]) -> None:
    chunks, result = await stream(BatchParts(size), text("a b c d e"))
    assert deltas(chunks) == expected
    assert result.text == "a b c d e" and get_text(result.messages[0]) == "a b c d e"
    types = [c.type for c in chunks]
    assert types.index("text-start") < types.index("text-delta") \
        < types.index("text-end") < types.index("step-finish")


async def test_a_non_text_chunk_flushes_the_batch_before_itself() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return "found"

    chunks, result = await stream(BatchParts(10), [text("one two three"), tool_call(
        "lookup", {"q": "x"})], text("done"), tools=[lookup])
    types = [c.type for c in chunks]
    assert deltas(chunks) == ["one two three", "done"]
    assert types.index("text-end") == types.index("text-delta") + 1
    assert result.text == "one two threedone"


async def test_emit_on_non_text_false_batches_everything_in_order() -> None:
    chunks, result = await stream(BatchParts(3, emit_on_non_text=False), text("a b c d"))
    # step-start and text-start fill the first batch with "a"; runs of deltas are merged
    assert [c.type for c in chunks][:4] == ["start", "step-start", "text-start", "text-delta"]
    assert deltas(chunks) == ["a", " b c d"]
    assert result.text == "a b c d"


async def test_max_wait_time_with_an_injected_clock() -> None:
    now = [0.0]
    batch = BatchParts(100, max_wait_time=0.5, clock=lambda: now[0])

    def tick(part: Any) -> Any:
        now[0] += 0.2  # each chunk arrives 0.2 s after the previous one
        return part

    chunks, _ = await stream(ops.map(tick) | batch, text("a b c d e f g"))
    # a batch opened at t is emitted by the first chunk arriving at t + 0.5 or later
    assert deltas(chunks) == ["a b c d", " e f g"]


def test_merge_keeps_ids_apart_and_flush_drains() -> None:
    batch = BatchParts(10)
    state: dict[str, Any] = {}
    for tid, piece in [("t1", "a"), ("t1", "b"), ("t2", "c")]:
        assert batch.process_output_stream(TextDelta(id=tid, text=piece, run_id="r"),
                                           state) is None
    out = batch.flush(state)
    assert [(c.payload.id, c.payload.text, c.run_id) for c in out] == [("t1", "ab", "r"),
                                                                       ("t2", "c", "r")]
    assert batch.flush(state) == [] and batch.flush_output_stream(state) is None
    call = ToolCall(tool_call_id="c", tool_name="t", args={})
    assert batch.process_output_stream(call, state) is call  # nothing held: passes as is


def test_options_are_checked() -> None:
    with pytest.raises(InvalidArgument, match="batch_size"):
        BatchParts(0)
    with pytest.raises(InvalidArgument, match="max_wait_time"):
        BatchParts(max_wait_time=0)
