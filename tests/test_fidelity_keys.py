"""Every key Mastra puts in a chunk, streamkit puts there too, at every level.

The recordings of real Mastra 1.71.0 (``fixtures/mastra/*.jsonl``, and the SSE bodies its server
sent ``@mastra/client-js`` in ``fixtures/mastra-server/``) are walked chunk by chunk. streamkit runs
the same scenario (the same agent id, tool, tool output and steps; its own ids, times and model
names) and its wire encoding of the chunk of the same type, at the same position among the chunks
of that type, must have every key Mastra's has: in every nested object, and for every element of
a list, in an element of the same kind (same ``type`` or ``role``). Values may differ; keys under
application data (tool ``args``/``input``/``result``/``value``, a data chunk's ``data``) are the
application's own and are not compared.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit import Agent, wire
from streamkit.agent._step_end import model_messages
from streamkit.chunks import ResponseMetadata, Source, ToolResult
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import (
    Message,
    MessageContent,
    StepStartPart,
    TextPart,
    ToolInvocationPart,
    to_core,
)
from streamkit.models import ModelRequest
from streamkit.testing import ScriptedModel, api_error, reasoning, text, tool_call
from streamkit.tools import tool

from .conftest import P, as_mode

FIXTURES = Path(__file__).parent / "fixtures"
#: Keys whose values are the application's (tool arguments and results, data chunk bodies).
APPLICATION_DATA = frozenset(("args", "input", "result", "value", "data"))


def missing_keys(mastra: Any, ours: Any, path: str = "") -> list[str]:
    """The paths of keys present in ``mastra`` and absent from ``ours``, at every level.

    A list element of Mastra's is covered by the element of ours of the same kind (its ``type``,
    else its ``role``) that misses the fewest keys; an element kind ours never has is missing.
    """
    if isinstance(mastra, dict):
        if not isinstance(ours, dict):
            return [f"{path or '.'} (an object in Mastra's, {type(ours).__name__} in ours)"]
        found: list[str] = []
        for key, value in mastra.items():
            where = f"{path}.{key}"
            if key not in ours:
                found.append(where)
            elif key not in APPLICATION_DATA:
                found.extend(missing_keys(value, ours[key], where))
        return found
    if isinstance(mastra, list):
        if not isinstance(ours, list):
            return [f"{path} (a list in Mastra's, {type(ours).__name__} in ours)"]
        found = []
        for index, element in enumerate(mastra):
            kind = _kind(element)
            same = [o for o in ours if _kind(o) == kind]
            if not same:
                found.append(f"{path}[{index}] (no element of kind {kind!r} in ours)")
                continue
            found.extend(min((missing_keys(element, o, f"{path}[{index}]") for o in same),
                             key=len))
        return found
    return []


def _kind(element: Any) -> Any:
    if isinstance(element, dict):
        return element.get("type", element.get("role", "object"))
    return type(element).__name__


def _jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / "mastra" / name).read_text().splitlines()
            if line.strip()]


def _sse(name: str) -> list[dict[str, Any]]:
    body = (FIXTURES / "mastra-server" / name).read_text()
    return [json.loads(line[len("data: "):]) for line in body.splitlines()
            if line.startswith("data: {")]


# --- the same scenarios, run by streamkit -----------------------------------------------------


@tool
def lookupCustomer(customerId: str, writer: Any = None) -> dict[str, Any]:  # noqa: N802, N803
    """Look a customer up (the recordings' tool, spelled as Mastra's demo spells it)."""
    if writer is not None:
        writer.custom({"type": "data-progress", "data": {"pct": 50}})
    return {"customerId": customerId, "name": "Ada Lovelace", "tier": "gold", "openTickets": 2}


class CitingModel(ScriptedModel):
    """The recordings' model: its first step cites a source before it calls the tool."""

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        chunks = super().stream(request)
        if self.calls > 1:
            return chunks

        async def cited() -> AsyncIterator[Any]:
            yield Source(id="src-0", source_type="url", title="CRM record C-42",
                         url="https://crm.example.com/customers/C-42", run_id=request.run_id,
                         from_="AGENT")
            async for chunk in chunks:
                yield chunk
        return cited()


def _encoded(agent: Agent, prompt: str, **options: Any) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        return [json.loads(wire.encode(chunk))
                async for chunk in agent.stream(prompt, **options)]
    return asyncio.run(run())


def _echo_model() -> ScriptedModel:
    return ScriptedModel([[reasoning("The user said something; echo it."),
                           text("Echo: Hello there (turn 1)")]])


def text_turn() -> list[dict[str, Any]]:
    return _encoded(Agent(id="demo", instructions="Be brief.", model=_echo_model()),
                    "Hello there")


def memory_turn() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        memory = Memory(SQLiteStore(str(Path(folder) / "memory.sqlite3")), last_messages=10)
        try:
            agent = Agent(id="demo", instructions="Be brief.", model=_echo_model(),
                          memory=memory)
            return _encoded(agent, "My name is Ada", thread_id="thread-1",
                            resource_id="user-1")
        finally:
            asyncio.run(memory.close())


def tool_turn() -> list[dict[str, Any]]:
    model = CitingModel([tool_call("lookupCustomer", {"customerId": "C-42"}),
                         text("Ada Lovelace is a gold customer with 2 open tickets.")])
    agent = Agent(id="tool-agent", instructions="Look customers up.", model=model,
                  tools=[lookupCustomer])
    return _encoded(agent, "Who is customer C-42?")


RECORDINGS = [
    pytest.param(_jsonl, "text-only.jsonl", text_turn, id="agent-stream-text"),
    pytest.param(_jsonl, "tool-turn.jsonl", tool_turn, id="agent-stream-tool"),
    pytest.param(_sse, "04-stream-text.http", text_turn, id="server-stream-text"),
    pytest.param(_sse, "05-stream-tool.http", tool_turn, id="server-stream-tool"),
    pytest.param(_sse, "07-stream-memory-turn1.http", memory_turn, id="server-stream-memory"),
]


@pytest.mark.parametrize(("read", "name", "scenario"), RECORDINGS)
def test_every_key_mastra_sends_streamkit_sends(read: Any, name: str, scenario: Any) -> None:
    recorded = read(name)
    ours = scenario()
    by_type: dict[str, list[dict[str, Any]]] = {}
    for chunk in ours:
        by_type.setdefault(chunk["type"], []).append(chunk)
    seen: dict[str, int] = {}
    problems: list[str] = []
    for chunk in recorded:
        kind = chunk["type"]
        position = seen[kind] = seen.get(kind, -1) + 1
        same = by_type.get(kind)
        if not same:
            problems.append(f"{kind}: streamkit sends no such chunk in this scenario")
            continue
        counterpart = same[min(position, len(same) - 1)]
        problems.extend(f"{kind}#{position}: {p}" for p in missing_keys(chunk, counterpart))
    assert problems == [], "\n".join(dict.fromkeys(problems))


def test_the_walk_covers_every_chunk_type_of_the_recordings() -> None:
    types = {c["type"] for name in ("text-only.jsonl", "tool-turn.jsonl") for c in _jsonl(name)}
    assert {"start", "step-start", "text-start", "text-delta", "text-end", "source",
            "tool-call-input-streaming-start", "tool-call-delta", "tool-call-input-streaming-end",
            "tool-call", "data-progress", "tool-result", "step-finish", "finish"} == types


def test_step_end_metadata_names_the_model_of_the_step() -> None:
    """Issue 27, point 1: ``metadata`` is the step's response metadata, as Mastra's."""
    for chunk in tool_turn():
        if chunk["type"] in ("step-finish", "finish"):
            meta = chunk["payload"]["metadata"]
            assert meta["modelId"] == "scripted-model"
            assert meta["modelMetadata"] == {"modelId": "scripted-model", "modelVersion": "v2",
                                             "modelProvider": "scripted"}
            assert isinstance(meta["id"], str) and meta["id"]
            assert meta["timestamp"].endswith("Z")


# --- the walk itself ------------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["a", "b", "type", "role"]), inner,
                                       max_size=3), max_leaves=12)


@given(_json)
def test_a_value_misses_nothing_of_itself(value: Any) -> None:
    assert missing_keys(value, value) == []


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), _json, min_size=1))
def test_a_dropped_key_is_found(value: dict[str, Any]) -> None:
    key = sorted(value)[0]
    smaller = {k: v for k, v in value.items() if k != key}
    assert f".{key}" in missing_keys(value, smaller)


def test_a_nested_list_element_missing_a_key_is_found() -> None:
    mastra = {"steps": [{"content": [{"type": "text", "text": "x", "providerOptions": {}}]}]}
    ours = {"steps": [{"content": [{"type": "text", "text": "y"}]}]}
    assert missing_keys(mastra, ours) == [".steps[0].content[0].providerOptions"]
    assert missing_keys({"l": [{"role": "tool"}]}, {"l": [{"role": "user"}]}) == [
        ".l[0] (no element of kind 'tool' in ours)"]


# --- where the step ends' values come from --------------------------------------------------


class ReportingModel(ScriptedModel):
    """A model that reports its response metadata first, as OpenAI-compatible providers do."""

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        chunks = super().stream(request)

        async def reported() -> AsyncIterator[Any]:
            yield ResponseMetadata(id=f"chatcmpl-{self.calls}", model_id="gpt-served",
                                   timestamp=datetime(2026, 12, 4, 12, 0, tzinfo=UTC),
                                   run_id=request.run_id, from_="AGENT")
            async for chunk in chunks:
                yield chunk
        return reported()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_stream_processors_see_each_steps_metadata_and_records(mode: str) -> None:
    seen: list[Any] = []

    def look(part: Any) -> Any:
        if part.type == "step-finish":  # the run's finish does not pass the processors
            seen.append(part.payload)
        return part

    model = ReportingModel([tool_call("lookupCustomer", {"customerId": "C-42"}), text("Done.")],
                           model_id="gpt-asked")
    agent = Agent(id="a", instructions="x", model=model, tools=[lookupCustomer],
                  output_processors=[P("look", process_output_stream=as_mode(look, mode))])
    stream = agent.stream("Who is C-42?")
    finish = _collect(stream)[-1].payload
    result = asyncio.run(stream.result())
    assert result.text == "Done."
    first, second = seen
    seen.append(finish)
    assert [p.metadata["id"] for p in seen] == ["chatcmpl-1", "chatcmpl-2", "chatcmpl-2"]
    assert first.metadata["timestamp"] == "2026-12-04T12:00:00.000Z"
    assert first.metadata["modelId"] == "gpt-served"  # what the provider says it served
    assert first.metadata["modelMetadata"]["modelId"] == "gpt-asked"  # what was asked for
    assert [len(p.output.steps) for p in seen] == [1, 2, 2]
    assert [c["type"] for c in first.output.steps[0]["content"]] == ["tool-call", "tool-result"]
    assert first.output.steps[0]["content"][1]["output"] == {
        "type": "json", "value": {"customerId": "C-42", "name": "Ada Lovelace", "tier": "gold",
                                  "openTickets": 2}}
    assert [m["role"] for m in finish.messages["all"]] == ["user", "assistant", "tool",
                                                           "assistant"]
    assert [m["role"] for m in finish.messages["user"]] == ["user"]
    assert finish.response["uiMessages"][0]["parts"][-1]["text"] == "Done."
    assert finish.output.usage.total_tokens == result.usage.total_tokens


def test_a_withdrawn_attempt_is_not_a_step_record() -> None:
    def once(part: Any, abort: Any, retry_count: int) -> Any:
        if part.type == "text-delta" and retry_count == 0:
            abort("again", retry=True)
        return part

    agent = Agent(id="a", instructions="x", model=ScriptedModel([text("first"), text("second")]),
                  output_processors=[P("once", process_output_stream=once)],
                  max_processor_retries=1)
    ends = [json.loads(wire.encode(c)) for c in _collect(agent.stream("hi"))
            if c.type in ("step-finish", "finish")]
    assert [e["payload"]["stepResult"]["reason"] for e in ends] == ["retry", "stop", "stop"]
    assert "metadata" in ends[0]["payload"] and ends[0]["payload"]["output"]["steps"] == []
    assert [len(e["payload"]["output"]["steps"]) for e in ends[1:]] == [1, 1]
    assert ends[1]["payload"]["processorRetryCount"] == 1


def _collect(stream: Any) -> list[Any]:
    async def run() -> list[Any]:
        return [c async for c in stream]
    return asyncio.run(run())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_snapshot_holds_the_tool_result_the_stream_processors_let_out(mode: str) -> None:
    """A stream processor that rewrites a ``tool-result`` rewrites it in the step ends too: the
    snapshot is taken after the step's tool results passed the processors."""
    def hide(part: Any) -> Any:
        if part.type == "tool-result":
            return ToolResult(tool_call_id=part.payload.tool_call_id,
                              tool_name=part.payload.tool_name, args=part.payload.args,
                              result="[hidden]", run_id=part.run_id, from_=part.from_)
        return part

    model = ScriptedModel([tool_call("lookupCustomer", {"customerId": "C-42"}), text("Done.")])
    agent = Agent(id="a", instructions="x", model=model, tools=[lookupCustomer],
                  output_processors=[P("hide", process_output_stream=as_mode(hide, mode))])
    wire_json = [wire.encode(c).decode() for c in _collect(agent.stream("Who is C-42?"))]
    assert not [w for w in wire_json if "Ada Lovelace" in w]
    assert sum('"[hidden]"' in w for w in wire_json) >= 3  # the chunk and both step ends


_parts = st.lists(st.one_of(
    st.builds(TextPart, text=st.text(min_size=1, max_size=5)),
    st.builds(lambda i, v: ToolInvocationPart.returned(f"c{i}", "t", v, {"i": i}),
              st.integers(0, 9), st.integers() | st.text(max_size=3)),
    st.builds(lambda i: ToolInvocationPart.failed(f"e{i}", "t", "boom", {}), st.integers(0, 9)),
    st.just(StepStartPart())), max_size=6)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), _parts),
                max_size=4))
def test_model_messages_are_the_prompt_in_the_ai_sdk_form(spec: list[Any]) -> None:
    """The snapshot's messages are the provider prompt (``to_core``) message for message, each
    part stamped, a call's arguments as ``input`` and a result as a typed ``output``."""
    messages = [Message(role=role, content=MessageContent(parts=parts or [TextPart(text="x")]))
                for role, parts in spec]
    for message in messages:
        core = [m for m in to_core([message]) if m["role"] != "system"]
        converted = model_messages(message)
        assert [m["role"] for m in converted] == [m["role"] for m in core]
        for ours, theirs in zip(converted, core, strict=True):
            expected = 1 if isinstance(theirs["content"], str) else len(theirs["content"])
            assert len(ours["content"]) == expected
            for part in ours["content"]:
                assert isinstance(part["providerOptions"]["mastra"]["createdAt"], int)
                if part["type"] == "tool-result":
                    assert part["output"]["type"] in ("json", "error-text")
                    assert part["input"] is not None


def test_a_retried_model_call_does_not_keep_the_failed_attempts_metadata() -> None:
    class ReportsOnce(ScriptedModel):
        def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
            chunks = super().stream(request)
            if self.calls > 1:
                return chunks

            async def reported() -> AsyncIterator[Any]:
                yield ResponseMetadata(id="failed-attempt", run_id=request.run_id,
                                       from_="AGENT")
                async for chunk in chunks:
                    yield chunk
            return reported()

    model = ReportsOnce([[text("partial"), api_error(500, "boom")], text("ok")])
    agent = Agent(id="a", instructions="x", model=model,
                  error_processors=[P("again", process_api_error=lambda error: {"retry": True})])
    ends = [c.payload for c in _collect(agent.stream("hi")) if c.type == "step-finish"]
    assert [e.step_result.reason for e in ends] == ["retry", "stop"]
    assert ends[0].metadata["id"] == "failed-attempt"  # the withdrawn attempt's own
    assert ends[1].metadata["id"] != "failed-attempt"
