"""How a redacting guard covers each way out of a run, piece by piece: hold-back per text part
(interleaved chunks release nothing), context across parts and steps, streamed tool-call
argument deltas, tool results and errors (keys too), data chunks, a retried attempt's held text,
and what the store keeps of tool outcomes (the delivered chunks). The leak matrix over every
secret kind, path and guard is ``test_guard_leaks.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamkit import Agent, Processor, TripWire, ops, tool
from streamkit.chunks import (
    DataChunk,
    ReasoningDelta,
    TextDelta,
    TextEnd,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolErrorChunk,
    ToolResult,
    TripwireChunk,
)
from streamkit.memory import Memory, SQLiteStore
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit_operators import Detection, PIIDetector, RegexFilter
from streamkit_operators._redact import map_strings

CARD = "4111 1111 1111 1111"
MASKED = "**** **** **** 1111"
ENV = {"run_id": "r1", "from_": "AGENT"}


def delta(piece: str, id: str = "t1") -> TextDelta:
    return TextDelta(id=id, text=piece, **ENV)


def reasoning(piece: str, id: str = "r1") -> ReasoningDelta:
    return ReasoningDelta(id=id, text=piece, **ENV)


async def through(guard: Any, chunks: list[Any]) -> list[Any]:
    return [c async for c in ops.apply(chunks, guard)]


def texts(chunks: list[Any], cls: type = TextDelta) -> str:
    return "".join(c.payload.text for c in chunks if c.__class__ is cls)


# ----------------------------------------------------------------------------- text parts


@pytest.mark.parametrize("between", [
    pytest.param(reasoning(" thinking "), id="reasoning-delta"),
    pytest.param(DataChunk("data-progress", {"pct": 50}), id="data-chunk"),
    pytest.param(delta("other part ", id="t2"), id="text-of-another-part"),
    pytest.param(ToolCallDelta(tool_call_id="c9", args_text_delta='{"a"', **ENV),
                 id="tool-call-delta"),
])
async def test_a_chunk_between_two_halves_releases_nothing(between: Any) -> None:
    out = await through(PIIDetector(), [delta("my card is 4"), between,
                                        delta("111 1111 1111 1111 ok"), TextEnd(id="t1", **ENV)])
    assert texts([c for c in out if getattr(getattr(c, "payload", None), "id", None) == "t1"]) == \
        f"my card is {MASKED} ok"
    assert "4111" not in str(out)


async def test_parts_keep_their_order_and_ends() -> None:
    """The other part's chunk passes at once (it holds nothing: it ends with a space); the held
    card comes out masked before its own ``text-end``."""
    out = await through(PIIDetector(), [delta("card 4111 1111"), reasoning("hmm, "),
                                        delta(" 1111 1111"), TextEnd(id="t1", **ENV)])
    assert [(c.type, getattr(c.payload, "text", None)) for c in out] == [
        ("text-delta", "card "), ("reasoning-delta", "hmm, "), ("text-delta", MASKED),
        ("text-end", None)]


async def test_a_value_split_across_parts_never_appears_whole() -> None:
    """What part 1 released stays; the rest of the value in part 2 is replaced by stars (no
    mask that would show its last digits)."""
    out = await through(PIIDetector(), [
        delta("card 4111 1111"), TextEnd(id="t1", **ENV),
        delta(" 1111 1111 done", id="t2"), TextEnd(id="t2", **ENV)])
    assert texts(out) == "card 4111 1111" + "*" * 8 + " done"


async def test_parts_that_cannot_join_leave_no_context() -> None:
    out = await through(PIIDetector(), [
        delta("card 4111 1111. "), TextEnd(id="t1", **ENV),
        delta("1111 1111 1111 done", id="t2"), TextEnd(id="t2", **ENV)])
    assert texts(out) == "card 4111 1111. 1111 1111 1111 done"


class TripOnce(Processor):
    """Asks for a retry at the first step-finish: the attempt's text is withdrawn."""

    id = "trip-once"

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if part.type == "tool-call" and not state.get("tripped"):
            state["tripped"] = True
            raise TripWire("again", retry=True)
        return part


@tool
async def lookup(q: str) -> str:
    """Look something up."""
    return "found"


async def test_a_withdrawn_attempt_is_no_context_for_the_retry() -> None:
    """Attempt 1 streams "code 4111 1111" and a tool call that trips with a retry: the client
    withdraws attempt 1, so attempt 2's " 1111 1111" is not joined to it (not starred), while
    within one accepted run it would be."""
    model = ScriptedModel([[text("code 4111 1111"), tool_call("lookup", {"q": "x"})],
                           text(" 1111 1111 fine")])
    agent = Agent(id="a", model=model, tools=[lookup], max_processor_retries=2,
                  output_processors=[PIIDetector(phase="output"), TripOnce()])
    stream = agent.stream("hi")
    chunks = [c async for c in stream]
    result = await stream.result()
    assert result.text == " 1111 1111 fine"
    retry = next(i for i, c in enumerate(chunks) if c.type == "data-step-retry")
    assert texts(chunks[retry:]) == " 1111 1111 fine"


# ----------------------------------------------------------------------------- tool calls


def arg_deltas(args: dict[str, Any], call: str = "c1") -> list[Any]:
    raw = json.dumps(args)
    return [ToolCallDelta(tool_call_id=call, tool_name="lookup", args_text_delta=raw[i:i + 5],
                          **ENV) for i in range(0, len(raw), 5)]


async def test_clean_argument_deltas_come_out_as_they_came() -> None:
    chunks = [*arg_deltas({"q": "weather in Paris"}),
              ToolCallInputStreamingEnd(tool_call_id="c1", **ENV),
              ToolCall(tool_call_id="c1", tool_name="lookup", args={"q": "weather in Paris"},
                       **ENV)]
    assert await through(PIIDetector(), chunks) == chunks


@pytest.mark.parametrize("end", [True, False], ids=["with-streaming-end", "tool-call-only"])
async def test_argument_deltas_with_a_secret_become_one_redacted_delta(end: bool) -> None:
    args = {"q": f"card {CARD}", "ada@example.com": 1}
    chunks = [*arg_deltas(args)]
    if end:
        chunks.append(ToolCallInputStreamingEnd(tool_call_id="c1", **ENV))
    chunks.append(ToolCall(tool_call_id="c1", tool_name="lookup", args=args, **ENV))
    out = await through(PIIDetector(), chunks)
    deltas = [c for c in out if c.__class__ is ToolCallDelta]
    calls = [c for c in out if c.__class__ is ToolCall]
    assert len(deltas) == 1 and len(calls) == 1
    assert json.loads(deltas[0].payload.args_text_delta) == calls[0].payload.args == {
        "q": f"card {MASKED}", "a*a@*******.com": 1}
    assert out.index(deltas[0]) < out.index(calls[0])


async def test_argument_deltas_never_completed_are_released_at_the_end_of_the_step() -> None:
    out = await through(PIIDetector(), [*arg_deltas({"q": CARD})])
    assert [json.loads(c.payload.args_text_delta) for c in out] == [{"q": MASKED}]


async def test_unparseable_arguments_are_redacted_as_text() -> None:
    out = await through(PIIDetector(), [
        ToolCallDelta(tool_call_id="c1", args_text_delta=f'{{"q": "{CARD}', **ENV),
        ToolCallInputStreamingEnd(tool_call_id="c1", **ENV)])
    assert out[0].payload.args_text_delta == f'{{"q": "{MASKED}'


async def test_check_tool_args_off_passes_arguments_as_they_are() -> None:
    guard = PIIDetector(include_tool_args=False)
    chunks = [*arg_deltas({"q": CARD}), ToolCall(tool_call_id="c1", tool_name="lookup",
                                                 args={"q": CARD}, **ENV)]
    assert await through(guard, chunks) == chunks


@pytest.mark.parametrize("chunk, field", [
    pytest.param(ToolResult(tool_call_id="c1", tool_name="t", args={"q": CARD},
                            result={"cards": [{CARD: CARD}]}, **ENV), "result", id="tool-result"),
    pytest.param(ToolErrorChunk(tool_call_id="c1", tool_name="t", args={"q": CARD},
                                error={"name": "ValueError", "message": f"bad {CARD}"}, **ENV),
                 "error", id="tool-error"),
])
async def test_tool_outcomes_are_redacted_keys_and_values(chunk: Any, field: str) -> None:
    (out,) = await through(RegexFilter(presets="pii", strategy="redact"), [chunk])
    assert CARD not in json.dumps(out.payload.args) + json.dumps(getattr(out.payload, field))
    assert out.payload.args == {"q": "[CREDIT_CARD]"}


async def test_data_chunks_are_checked() -> None:
    guard = PIIDetector()
    assert guard.process_data_parts is True
    (out,) = await through(guard, [DataChunk("data-x", {"v": CARD, CARD: [CARD]})])
    assert out.data == {"v": MASKED, MASKED: [MASKED]}


async def test_block_names_where_it_found_the_value() -> None:
    (out,) = await through(PIIDetector(strategy="block"),
                           [ToolCall(tool_call_id="c1", tool_name="t", args={"q": CARD}, **ENV)])
    assert out.__class__ is TripwireChunk
    assert out.payload.reason == "PII detected in tool-call arguments. Types: credit-card"


def test_keys_that_become_the_same_key_keep_every_value() -> None:
    assert map_strings({"a@x.io": 1, "b@y.io": 2, "c": {"d@z.io": 3}},
                       lambda s: "[EMAIL]" if "@" in s else s) == \
        {"[EMAIL]": 1, "[EMAIL]#2": 2, "c": {"[EMAIL]": 3}}


class Card(msgspec.Struct):
    number: str
    seen: set[str]


def test_objects_are_mapped_as_the_wire_sends_them() -> None:
    """A struct (or dataclass, set, datetime...) is mapped as its JSON form; bytes as their
    UTF-8 text; a value ``fn`` does not change comes back as the same object."""
    def redact(s: str) -> str:
        return s.replace(CARD, MASKED)

    value = Card(CARD, {CARD})
    assert map_strings(value, redact) == {"number": MASKED, "seen": [MASKED]}
    clean = Card("none", {"x"})
    assert map_strings(clean, redact) is clean
    assert map_strings([CARD.encode(), b"\xff"], redact) == [MASKED, b"\xff"]
    raw = b"plain"
    assert map_strings(raw, redact) is raw
    opaque = object()
    assert map_strings({"o": opaque}, redact)["o"] is opaque


# ----------------------------------------------------------------------------- in an agent


@tool
async def charge(card: str) -> dict[str, Any]:
    """Charge a card; returns what it charged."""
    return {"charged": card}


@tool
async def fails(q: str) -> str:
    """Always fails, naming a card."""
    raise ValueError(f"card {CARD} declined")


async def test_the_tool_runs_with_the_arguments_the_guard_let_through(tmp_path: Path) -> None:
    seen: list[Detection] = []
    guard = PIIDetector(on_detection=seen.append)
    memory = Memory(store=SQLiteStore(str(tmp_path / "m.db")))
    agent = Agent(id="a", model=ScriptedModel([tool_call("charge", {"card": CARD}), text("ok")]),
                  tools=[charge], output_processors=[guard], memory=memory)
    result = await agent.generate("pay", thread_id="t", resource_id="u")
    (step,) = [s for s in result.steps if s.tool_results]
    assert step.tool_calls[0]["args"] == {"card": MASKED}
    assert step.tool_results[0]["result"] == {"charged": MASKED}
    assert {d.source for d in seen} == {"tool-call"}
    assert CARD not in str(await memory.recall("t", "u"))


async def test_a_failed_tool_is_stored_as_the_client_saw_it(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(str(tmp_path / "m.db")))
    agent = Agent(id="a", model=ScriptedModel([tool_call("fails", {"q": "x"}), text("sorry")]),
                  tools=[fails], output_processors=[PIIDetector()], memory=memory)
    stream = agent.stream("pay", thread_id="t", resource_id="u")
    chunks = [c async for c in stream]
    result = await stream.result()
    (error,) = [c for c in chunks if c.__class__ is ToolErrorChunk]
    assert error.payload.error["message"] == f"card {MASKED} declined"
    stored = [dict(r) for s in result.steps for r in s.tool_results]  # the old-dict view
    assert stored == [{"tool_call_id": error.payload.tool_call_id, "tool_name": "fails",
                       "args": {"q": "x"}, "result": f"card {MASKED} declined",
                       "is_error": True}]
    assert CARD not in str(await memory.recall("t", "u"))
