"""``step_snapshots=False`` (``CallOptions``): the ``step-finish`` and ``finish`` payloads leave
out what is rebuilt from the whole conversation at each step end (``messages``, ``metadata``,
``output.steps``, ``response``); everything else — the chunks' order, each step's reason,
``isContinued``, text, usage and tool calls, the run's result and its memory — is what a run with
snapshots gives. Output processors turn it off (their stream hooks may read those fields). The
AI SDK chat route runs this way, and its frames are the same either way."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit import Agent, tool
from streamkit.chunks import Chunk, Finish, StepFinish
from streamkit.errors import InvalidType
from streamkit.memory import Memory, SQLiteStore
from streamkit.processors import Processor
from streamkit.serve._app import UIFraming
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.wire import encode

_DROPPED = ("messages", "metadata", "response")


@tool
def lookup(order: str) -> str:
    """Looks an order up."""
    return f"{order}: shipped"


def _model(words: list[str], calls: int) -> ScriptedModel:
    steps: list[Any] = [[text(f"Checking {i}."),
                          tool_call("lookup", {"order": f"A{i}"}, id=f"call-{i}")]
                        for i in range(calls)]
    return ScriptedModel([*steps, text(" ".join(words) or "done")])


async def _run(agent: Agent, **options: Any) -> tuple[list[Chunk], Any]:
    stream = agent.stream("where are my orders?", **options)
    chunks = [c async for c in stream]
    return chunks, await stream.result()


def _kept(chunk: StepFinish | Finish) -> dict[str, Any]:
    """What a run without snapshots must still say of a step end."""
    p = chunk.payload
    return {"stepResult": msgspec.to_builtins(p.step_result), "text": p.output.text,
            "usage": msgspec.to_builtins(p.output.usage), "toolCalls": p.output.tool_calls,
            "retries": p.processor_retry_count}


def _ends(chunks: list[Chunk]) -> list[StepFinish | Finish]:
    return [c for c in chunks if isinstance(c, (StepFinish, Finish))]


@settings(max_examples=25, deadline=None)
@given(words=st.lists(st.sampled_from(["it", "has", "shipped", "ü", "😀"]), max_size=6),
       calls=st.integers(0, 2))
def test_without_snapshots_a_run_says_the_same_but_the_snapshots(words: list[str],
                                                                  calls: int) -> None:
    def both() -> tuple[tuple[list[Chunk], Any], tuple[list[Chunk], Any]]:
        async def go() -> tuple[tuple[list[Chunk], Any], tuple[list[Chunk], Any]]:
            full = await _run(Agent(id="a", model=_model(words, calls), tools=[lookup]))
            lean = await _run(Agent(id="a", model=_model(words, calls), tools=[lookup]),
                              step_snapshots=False)
            return full, lean
        return asyncio.run(go())

    (full, full_result), (lean, lean_result) = both()
    assert [c.type for c in lean] == [c.type for c in full]
    assert len(_ends(lean)) == calls + 2  # a step-finish per step, then the finish
    for a, b in zip(_ends(full), _ends(lean), strict=True):
        assert _kept(b) == _kept(a)
        for name in _DROPPED:
            assert getattr(b.payload, name) is msgspec.UNSET, name
            assert getattr(a.payload, name) is not msgspec.UNSET or name == "response", name
        assert b.payload.output.steps is msgspec.UNSET
        assert len(a.payload.output.steps) >= 1
        encode(b)  # still a chunk of the wire form
    assert lean_result.text == full_result.text
    assert lean_result.usage == full_result.usage
    assert [(s.text, s.finish_reason, s.tool_calls) for s in lean_result.steps] == \
        [(s.text, s.finish_reason, s.tool_calls) for s in full_result.steps]
    assert [(m.role, m.content.parts) for m in lean_result.messages] == \
        [(m.role, m.content.parts) for m in full_result.messages]


def _ui_body(chunks: list[Chunk]) -> bytes:
    framing = UIFraming()
    body = b"".join(framing.frame(c) for c in chunks) + framing.end()
    body = re.sub(rb'"messageId":"[^"]*"', b'"messageId":"-"', body)
    return re.sub(rb'"id":"text-[0-9a-f]+"', b'"id":"text-"', body)  # the model's random ids


async def test_the_chat_routes_frames_are_the_same_without_snapshots() -> None:
    full, _ = await _run(Agent(id="a", model=_model(["it", "shipped"], 1), tools=[lookup]))
    lean, _ = await _run(Agent(id="a", model=_model(["it", "shipped"], 1), tools=[lookup]),
                         step_snapshots=False)
    assert _ui_body(lean) == _ui_body(full)
    assert b'"finish-step"' in _ui_body(lean) and b'"finishReason":"stop"' in _ui_body(lean)


async def test_memory_keeps_the_same_turn_without_snapshots(tmp_path: object) -> None:
    memory = Memory(SQLiteStore(f"{tmp_path}/m.sqlite3"), last_messages=20)
    agent = Agent(id="a", model=_model(["shipped"], 1), tools=[lookup], memory=memory)
    _, result = await _run(agent, step_snapshots=False, thread_id="t1", resource_id="u1")
    recalled = await memory.recall("t1", "u1")
    assert [m.role for m in recalled] == ["user", "assistant"]
    assert result.text.endswith("shipped")
    await memory.close()


class _ReadsSteps(Processor):
    id = "reads-steps"

    def __init__(self) -> None:
        self.seen: list[object] = []

    def process_output_stream(self, part: Chunk, state: dict[str, Any]) -> Chunk:
        if isinstance(part, (StepFinish, Finish)):
            self.seen.append(part.payload.messages)
        return part


async def test_output_processors_get_the_snapshots_whatever_the_call_asks() -> None:
    reader = _ReadsSteps()
    agent = Agent(id="a", model=_model(["ok"], 0), output_processors=[reader])
    chunks, _ = await _run(agent, step_snapshots=False)
    assert reader.seen and all(m is not msgspec.UNSET for m in reader.seen)
    assert all(c.payload.messages is not msgspec.UNSET for c in _ends(chunks))


async def test_step_snapshots_must_be_a_bool() -> None:
    agent = Agent(id="a", model=_model(["ok"], 0))
    with pytest.raises(InvalidType, match="step_snapshots must be True or False, got str"):
        agent.stream("hi", step_snapshots="no")  # type: ignore[arg-type]
