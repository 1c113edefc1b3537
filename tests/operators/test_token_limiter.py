"""TokenLimiter: prompt trimming modes, the protected turn, tripwires, and the stream cap."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent, Message, get_text, tool
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import ToolInvocationPart
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.tokens import get_counter
from streamkit_operators import TokenLimiter

COUNTER = get_counter()


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "result " * 30


async def run_stream(agent: Agent, prompt: Any = "go", **kw: Any) -> tuple[list[Any], Any]:
    s = agent.stream(prompt, **kw)
    chunks = [c async for c in s]
    return chunks, await s.result()


def deltas(chunks: list[Any]) -> list[str]:
    return [c.payload.text for c in chunks if c.type == "text-delta"]


# -- output side ---------------------------------------------------------------------------


async def test_truncate_stops_the_stream_at_the_limit_and_says_so_once() -> None:
    limiter = TokenLimiter(3, phase="output")
    agent = Agent(id="t", model=ScriptedModel([text("a b c d e")]),
                  output_processors=[limiter])
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["a", " b", " c"]
    reached = [c for c in chunks if c.type == "data-token-limit-reached"]
    assert len(reached) == 1 and reached[0].transient is True
    assert reached[0].data == {"processorId": "token-limiter", "limit": 3, "tokens": 4}
    assert result.text == "a b c" and result.tripwire is None
    # stored == streamed, and the transient notice is not stored
    assert [p.type for p in result.messages[0].content.parts] == ["text"]


async def test_the_crossing_delta_is_cut_to_the_tokens_left() -> None:
    model = ScriptedModel([text("Hello world again and again", chunk_size=100)])
    agent = Agent(id="t", model=model, output_processors=[TokenLimiter(2, phase="output")])
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["Hello world"] and result.text == "Hello world"


async def test_abort_strategy_trips_the_wire() -> None:
    agent = Agent(id="t", model=ScriptedModel([text("a b c d e")]),
                  output_processors=[TokenLimiter(2, strategy="abort", phase="output")])
    chunks, result = await run_stream(agent)
    assert result.tripwire.processor_id == "token-limiter"
    assert result.tripwire.metadata == {"processorId": "token-limiter", "limit": 2, "tokens": 3}
    assert deltas(chunks) == ["a", " b"] and chunks[-1].type == "tripwire"


async def test_abort_reason_is_mastras_text() -> None:
    """Issue 27, point 5: Mastra's ``TokenLimiterProcessor`` aborts with
    ``"Token limit of <limit> exceeded (current: <tokens>)"``; the chunk and both results say it."""
    agent = Agent(id="t", model=ScriptedModel([text("a b c d e"), text("a b c d e")]),
                  output_processors=[TokenLimiter(3, strategy="abort", phase="output")])
    chunks, result = await run_stream(agent)
    reason = "Token limit of 3 exceeded (current: 4)"
    assert result.tripwire.reason == reason and chunks[-1].payload.reason == reason
    assert (await agent.generate("go")).tripwire.reason == reason


async def test_count_mode_part_limits_each_chunk() -> None:
    model = ScriptedModel([text("one two three four", chunk_size=8)])  # "one two ", "three fo"...
    agent = Agent(id="t", model=model,
                  output_processors=[TokenLimiter(2, count_mode="part", phase="output")])
    chunks, _ = await run_stream(agent)
    assert all(COUNTER.count_text(d) <= 2 for d in deltas(chunks))
    assert len(deltas(chunks)) == 3  # every chunk still streams, cut to the limit
    assert sum(c.type == "data-token-limit-reached" for c in chunks) == 1


async def test_cumulative_count_spans_steps() -> None:
    model = ScriptedModel([[text("a b"), tool_call("lookup", {"q": "x"})], text("c d e")])
    agent = Agent(id="t", model=model, tools=[lookup],
                  output_processors=[TokenLimiter(3, phase="output")])
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["a", " b", "c"]
    assert result.text == "a bc"


# -- prompt side ---------------------------------------------------------------------------


def conversation() -> list[Message]:
    """old (short), middle (long), recent (short) turns, then the current question."""
    return [Message.user("old question"), Message.assistant("old answer"),
            Message.user("middle " * 60), Message.assistant("middle answer"),
            Message.user("recent question"), Message.assistant("recent answer"),
            Message.user("current question")]


async def sent_prompt(limiter: TokenLimiter, messages: Any, **agent_kw: Any
                      ) -> tuple[list[dict[str, Any]], Any]:
    """The prompt the model got (``[]`` when it was not called) and the result."""
    model = ScriptedModel([text("ok")])
    agent = Agent(id="t", model=model, input_processors=[limiter], **agent_kw)
    result = await agent.generate(messages)
    return (model.requests[0].prompt if model.requests else []), result


def contents(prompt: list[dict[str, Any]]) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else "<parts>" for m in prompt]


@pytest.mark.parametrize("mode, expected", [
    pytest.param("best-fit", ["Be brief.", "old question", "old answer", "middle answer",
                              "recent question", "recent answer", "current question"],
                 id="best-fit-skips-what-does-not-fit"),
    pytest.param("contiguous", ["Be brief.", "middle answer", "recent question",
                                "recent answer", "current question"],
                 id="contiguous-stops-at-the-first-miss"),
])
async def test_trim_modes(mode: str, expected: list[str]) -> None:
    limiter = TokenLimiter(60, trim_mode=mode, phase="input")
    prompt, result = await sent_prompt(limiter, conversation(), instructions="Be brief.")
    assert contents(prompt) == expected
    assert COUNTER.count_messages(prompt) == result.states["token-limiter"]["prompt_tokens"] <= 60
    assert result.steps[0].usage.input_tokens <= 60  # what the model reports agrees


async def test_nothing_trimmed_when_it_fits() -> None:
    prompt, result = await sent_prompt(TokenLimiter(10_000), conversation())
    assert len(prompt) == 7 and "trimmed_messages" not in result.states["token-limiter"]


async def test_tool_schemas_count_against_the_budget() -> None:
    limiter = TokenLimiter(60, phase="input")
    model = ScriptedModel([text("ok")])
    await Agent(id="t", model=model, tools=[lookup], input_processors=[limiter]).generate(
        conversation())
    with_tools = model.requests[0].prompt
    assert COUNTER.count_request(with_tools, [lookup]) <= 60
    prompt, _ = await sent_prompt(TokenLimiter(60, phase="input"), conversation())
    assert len(with_tools) == 4 < len(prompt) == 6


async def test_the_current_turn_and_its_tool_calls_are_never_trimmed() -> None:
    model = ScriptedModel([tool_call("lookup", {"q": "x"}, id="c1"), text("done")])
    limiter = TokenLimiter(110, phase="input")
    agent = Agent(id="t", model=model, tools=[lookup], input_processors=[limiter])
    await agent.generate(conversation())
    second = model.requests[1].prompt
    assert second[-2]["role"] == "assistant" and second[-1]["role"] == "tool"
    assert second[-3] == {"role": "user", "content": "current question"}
    assert len(second) < len(conversation()) + 2  # history was trimmed instead


async def test_tool_call_and_result_are_kept_or_dropped_together() -> None:
    past = Message.assistant([ToolInvocationPart.returned("p1", "lookup", "x " * 40, {"q": "a"})])
    messages = [Message.user("earlier"), past, Message.assistant("so it was x"),
                Message.user("now?")]
    for limit in range(20, 140, 7):
        prompt, _ = await sent_prompt(TokenLimiter(limit, phase="input"), messages)
        roles = [m["role"] for m in prompt]
        for i, role in enumerate(roles):
            if role == "tool":
                assert roles[i - 1] == "assistant" and prompt[i - 1]["content"][0]["type"] \
                    == "tool-call", f"limit {limit}: a tool result without its call"


async def test_system_messages_alone_over_the_limit() -> None:
    _, result = await sent_prompt(TokenLimiter(20, phase="input"), "hi",
                                  instructions="You are a careful assistant. " * 10)
    assert result.tripwire.processor_id == "token-limiter" and not result.tripwire.retry
    assert set(result.tripwire.metadata) == {"systemTokens", "limit"}
    assert result.tripwire.metadata["systemTokens"] > 20


async def test_current_turn_over_the_limit() -> None:
    prompt, result = await sent_prompt(TokenLimiter(20, phase="input"), "long " * 50)
    assert prompt == []  # the model was never called
    assert result.tripwire.metadata["limit"] == 20 and result.tripwire.metadata["tokens"] > 20
    assert result.tripwire.metadata["messageCount"] == 1


async def test_memory_only_removes_oldest_remembered_messages(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "m.db"), last_messages=50)
    trims: list[dict[str, Any]] = []
    filler = ScriptedModel([text("answer number " + str(i)) for i in range(4)])
    agent = Agent(id="t", model=filler, memory=memory)
    for i in range(4):
        await agent.generate(f"question number {i} " + "pad " * 10, thread_id="th",
                             resource_id="u")
    limiter = TokenLimiter(80, trim_mode="memory-only", at_max_remove_tokens=20,
                           on_memory_trim=trims.append, phase="input")
    model = ScriptedModel([text("ok")])
    result = await Agent(id="t", model=model, memory=memory, input_processors=[limiter]) \
        .generate("the new question", thread_id="th", resource_id="u")
    prompt = model.requests[0].prompt
    assert prompt[-1]["content"] == "the new question"
    assert COUNTER.count_messages(prompt) <= 80 - 20
    assert len(trims) == 1 and trims[0]["tokens_before"] > 80
    removed = [get_text(m) for m in trims[0]["removed"]]
    assert removed[0].startswith("question number 0")  # oldest first
    kept = [m["content"] for m in prompt[:-1]]
    assert kept and kept[-1] == "answer number 3"  # the newest history stays
    assert result.states["token-limiter"]["memory_trimmed"] == len(removed)
    # memory itself is untouched: the next turn can still recall everything
    assert len(await memory.recall("th", "u")) == 10


def test_phase_decides_which_hooks_exist(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamkit.agent"):
        Agent(id="t", model=ScriptedModel([]), input_processors=[TokenLimiter(10, phase="input")],
              output_processors=[TokenLimiter(10, phase="output")])
    assert caplog.text == ""
    assert not hasattr(TokenLimiter(10, phase="input"), "process_output_stream")
    assert not hasattr(TokenLimiter(10, phase="output"), "process_llm_request")


@pytest.mark.parametrize("kwargs, error, match", [
    pytest.param({"limit": 0}, InvalidArgument, "positive int", id="zero"),
    pytest.param({"limit": True}, InvalidType, "positive int", id="bool"),
    pytest.param({"limit": 10, "strategy": "drop"}, InvalidArgument, "strategy", id="strategy"),
    pytest.param({"limit": 10, "count_mode": "words"}, InvalidArgument, "count_mode",
                 id="count-mode"),
    pytest.param({"limit": 10, "trim_mode": "oldest"}, InvalidArgument, "trim_mode",
                 id="trim-mode"),
    pytest.param({"limit": 10, "at_max_remove_tokens": 10}, InvalidArgument,
                 "at_max_remove_tokens", id="headroom"),
    pytest.param({"limit": 10, "phase": "both"}, InvalidArgument, "phase", id="phase"),
])
def test_options_are_checked(kwargs: dict[str, Any], error: type[Exception],
                             match: str) -> None:
    with pytest.raises(error, match=match):
        TokenLimiter(**kwargs)
