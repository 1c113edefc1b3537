"""Routing by origin: which output processors see a chunk, that it arrives once, where it is stored.

Every row of the routing table (``streamkit.agent._routing.ROUTES``) is driven through the public
API — an ``Agent`` with a ``ScriptedModel`` and processors written here — and checked three ways:
whether a stream processor saw the chunk (data chunks only when it has
``process_data_parts = True``), that the consumer got it exactly once, and, for ``data-*``
chunks, that it is stored in the response messages unless transient. Then: the order chunks of
different origins arrive in, what a data-part processor may do to a tool's chunk, step tool
overrides, and a property over random interleavings (stored equals streamed).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit import Agent, DataChunk, StepOverrides, tool
from streamkit.agent._routing import ROUTES, Origin
from streamkit.chunks import TextDelta
from streamkit.messages import DataPart
from streamkit.testing import ScriptedModel, api_error, text, tool_call

from .conftest import P, as_mode, run_stream, types


def stored_data(result: Any) -> list[tuple[str, Any]]:
    """The ``data-*`` parts of the run's response messages, in order."""
    return [(p.type, p.data) for m in result.messages for p in m.content.parts
            if isinstance(p, DataPart)]


class Seen:
    """Two recording stream processors: ``data`` opts into ``data-*`` chunks, ``blind`` does
    not. They pass every chunk on unchanged."""

    def __init__(self, mode: str) -> None:
        self.data: list[Any] = []
        self.blind: list[Any] = []
        self.processors = [
            P("blind", process_output_stream=as_mode(
                lambda part: self.blind.append(part) or part, mode)),
            P("data", process_output_stream=as_mode(
                lambda part: self.data.append(part) or part, mode), process_data_parts=True)]


def write_both(writer: Any, label: str) -> None:
    """What every writer under test writes: one stored and one transient data chunk."""
    writer.custom({"type": "data-x", "data": label})
    writer.custom({"type": "data-x-transient", "data": label, "transient": True})


def once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` for the first step only (hooks that run every step write once)."""
    def first(writer: Any, step_number: int) -> Any:
        if step_number == 0:
            return fn(writer)
        return None
    return first


@tool
def lookup(customer_id: str) -> str:
    """Look up a customer."""
    return f"customer {customer_id}"


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("boom")


@tool
def progress_sync(writer: Any) -> str:
    """Reports progress (sync)."""
    write_both(writer, "tool")
    return "done"


@tool
async def progress_async(writer: Any) -> str:
    """Reports progress (async)."""
    write_both(writer, "tool")
    return "done"


def progress_tool(mode: str) -> Any:
    return progress_sync if mode == "sync" else progress_async


#: A cached response a ``process_llm_request`` hook replays instead of calling the model.
REPLAY = [
    {"type": "text-start", "payload": {"id": "t"}},
    {"type": "text-delta", "payload": {"id": "t", "text": "cached"}},
    {"type": "text-end", "payload": {"id": "t"}},
    {"type": "finish", "payload": {"stepResult": {"reason": "stop"},
                                   "output": {"usage": {"inputTokens": 0, "outputTokens": 0}}}}]


class Answer(msgspec.Struct):
    a: int


# ---------------------------------------------------------------------------- the table, row by row

Build = Callable[[str, list[Any]], Agent]


def answer(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=procs)


def tool_turn(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([tool_call("lookup", {"customer_id": "C-1"}),
                                              text("found")]),
                 tools=[lookup], output_processors=procs)


def failing_tool_turn(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([tool_call("broken"), text("sorry")]),
                 tools=[broken], output_processors=procs)


def replayed(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([]), output_processors=procs, input_processors=[
        P("cache", process_llm_request=as_mode(lambda: {"response": REPLAY}, mode))])


def output_step_tripwire(mode: str, procs: list[Any]) -> Agent:
    def block(abort: Any) -> None:
        abort("blocked")
    return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=[
        P("guard", process_output_step=as_mode(block, mode)), *procs])


def model_down(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([api_error(500, "down")]), output_processors=procs)


def api_error_retried(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([api_error(503, "busy"), text("ok")]),
                 output_processors=procs, error_processors=[
                     P("again", process_api_error=as_mode(lambda: {"retry": True}, mode))])


def output_step_retried(mode: str, procs: list[Any]) -> Agent:
    def once_more(abort: Any, retry_count: int) -> None:
        if retry_count == 0:
            abort("again", retry=True)
    return Agent(id="r", model=ScriptedModel([text("first"), text("second")]),
                 max_processor_retries=1, output_processors=[
                     P("again", process_output_step=as_mode(once_more, mode)), *procs])


def structured(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([text('{"a": 1}')]), structured_output=Answer,
                 output_processors=procs)


def tool_writer(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([tool_call("progress_" + mode), text("ok")]),
                 tools=[progress_tool(mode)], output_processors=procs)


def input_hook_writer(hook: str) -> Build:
    """An input-lane ``hook`` that writes on the first step of a one-step answer."""
    def build(mode: str, procs: list[Any]) -> Agent:
        return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=procs,
                     input_processors=[P("w", **{hook: as_mode(once(
                         lambda writer: write_both(writer, hook)), mode)})])
    return build


def prepare_step_writer(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=procs,
                 prepare_step=as_mode(once(lambda writer: write_both(writer, "prepare_step")),
                                      mode))


def output_step_writer(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=[
        P("w", process_output_step=as_mode(once(
            lambda writer: write_both(writer, "process_output_step")), mode)), *procs])


def tool_result_writer(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([tool_call("lookup", {"customer_id": "C-1"}),
                                              text("found")]),
                 tools=[lookup], output_processors=[
                     P("w", process_tool_result=as_mode(
                         lambda writer: write_both(writer, "process_tool_result"), mode)),
                     *procs])


def api_error_writer(mode: str, procs: list[Any]) -> Agent:
    def recover(writer: Any) -> dict[str, bool]:
        write_both(writer, "process_api_error")
        return {"retry": True}
    return Agent(id="r", model=ScriptedModel([api_error(503, "busy"), text("ok")]),
                 output_processors=procs,
                 error_processors=[P("w", process_api_error=as_mode(recover, mode))])


def stream_hook_writer(mode: str, procs: list[Any]) -> Agent:
    def note(part: Any, writer: Any) -> Any:
        if part.type == "text-delta":
            write_both(writer, "process_output_stream")
        return part
    # The recorders come after the writer: a written chunk sent down the rest of the chain
    # would reach them.
    return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=[
        P("w", process_output_stream=as_mode(note, mode), process_data_parts=True), *procs])


def flush_writer(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=[
        P("w", process_output_stream=lambda part: part, process_data_parts=True,
          flush_output_stream=as_mode(lambda writer: write_both(writer, "flush"), mode)),
        *procs])


def result_writer(mode: str, procs: list[Any]) -> Agent:
    return Agent(id="r", model=ScriptedModel([text("hello")]), output_processors=[
        P("w", process_output_result=as_mode(
            lambda writer: write_both(writer, "process_output_result"), mode)), *procs])


def is_retry_step_finish(chunk: Any) -> bool:
    return chunk.payload.step_result.reason == "retry"


@dataclass(frozen=True)
class Row:
    """One chunk source: its origin, whether its chunks pass the processors (written here, not
    read from ``ROUTES``), the run that produces them and the chunk types it produces."""

    origin: Origin
    through: bool
    build: Build
    targets: tuple[str, ...]
    pick: Callable[[Any], bool] = lambda chunk: True
    #: Passed the processors once before it was routed (an error chunk, in ``Run.show``): its
    #: text is what the output guards let out, and routing then adds no second pass.
    shown: bool = False


DATA = ("data-x", "data-x-transient")

#: Whether each data chunk under test is stored in the response messages.
STORED = {"data-x": True, "data-x-transient": False, "data-step-retry": False}

ROWS = [
    pytest.param(Row(Origin.MODEL, True, answer, ("text-delta",)),
                 id="model text deltas pass the processors"),
    pytest.param(Row(Origin.MODEL, True, replayed, ("text-delta",)),
                 id="a process_llm_request replay passes the processors"),
    pytest.param(Row(Origin.STEP, True, answer, ("step-start",)),
                 id="step-start passes the processors"),
    pytest.param(Row(Origin.STEP, True, tool_turn, ("tool-result",)),
                 id="tool-result passes the processors"),
    pytest.param(Row(Origin.STEP, True, failing_tool_turn, ("tool-error",)),
                 id="tool-error passes the processors"),
    pytest.param(Row(Origin.STEP, True, answer, ("step-finish",)),
                 id="step-finish passes the processors"),
    pytest.param(Row(Origin.RUN, False, answer, ("start",)),
                 id="start skips the processors"),
    pytest.param(Row(Origin.RUN, False, answer, ("finish",)),
                 id="finish skips the processors"),
    pytest.param(Row(Origin.RUN, False, output_step_tripwire, ("tripwire",)),
                 id="tripwire skips the processors"),
    pytest.param(Row(Origin.RUN, False, model_down, ("error",), shown=True),
                 id="error passes the processors once, before it is routed"),
    pytest.param(Row(Origin.RUN, False, api_error_retried, ("data-step-retry",)),
                 id="data-step-retry skips the processors and is not stored"),
    pytest.param(Row(Origin.RUN, False, output_step_retried, ("step-finish",),
                     is_retry_step_finish),
                 id="a withdrawn attempt's step-finish skips the processors"),
    pytest.param(Row(Origin.RUN, False, structured, ("object-result",)),
                 id="object-result skips the processors"),
    pytest.param(Row(Origin.TOOL_WRITER, True, tool_writer, DATA),
                 id="tool writer chunks pass data-part processors"),
    pytest.param(Row(Origin.HOOK_WRITER, True, input_hook_writer("process_input_step"), DATA),
                 id="process_input_step writer chunks pass data-part processors"),
    pytest.param(Row(Origin.HOOK_WRITER, True, prepare_step_writer, DATA),
                 id="prepare_step writer chunks pass data-part processors"),
    pytest.param(Row(Origin.HOOK_WRITER, True, input_hook_writer("process_llm_request"), DATA),
                 id="process_llm_request writer chunks pass data-part processors"),
    pytest.param(Row(Origin.HOOK_WRITER, True, input_hook_writer("process_llm_response"), DATA),
                 id="process_llm_response writer chunks pass data-part processors"),
    pytest.param(Row(Origin.HOOK_WRITER, True, output_step_writer, DATA),
                 id="process_output_step writer chunks pass data-part processors"),
    pytest.param(Row(Origin.HOOK_WRITER, True, tool_result_writer, DATA),
                 id="process_tool_result writer chunks pass data-part processors"),
    pytest.param(Row(Origin.HOOK_WRITER, True, api_error_writer, DATA),
                 id="process_api_error writer chunks pass data-part processors"),
    pytest.param(Row(Origin.STREAM_WRITER, False, stream_hook_writer, DATA),
                 id="process_output_stream writer chunks skip the processors"),
    pytest.param(Row(Origin.STREAM_WRITER, False, flush_writer, DATA),
                 id="flush_output_stream writer chunks skip the processors"),
    pytest.param(Row(Origin.RESULT_WRITER, False, result_writer, DATA),
                 id="process_output_result writer chunks skip the processors"),
]


def test_every_origin_has_a_row() -> None:
    covered = {p.values[0].origin for p in ROWS}
    assert covered == set(Origin), f"add a row for {set(Origin) - covered}"
    assert set(ROUTES) == set(Origin)


@pytest.mark.parametrize("row", ROWS)
async def test_route_of_origin(row: Row, mode: str) -> None:
    assert ROUTES[row.origin].processors is row.through  # the table says what the run does
    seen = Seen(mode)
    chunks, result = await run_stream(row.build(mode, seen.processors))
    for kind in row.targets:
        def match(chunk: Any, kind: str = kind) -> bool:
            return chunk.type == kind and row.pick(chunk)

        delivered = [c for c in chunks if match(c)]
        assert len(delivered) == 1, f"the consumer got {len(delivered)} {kind} chunks"
        assert sum(map(match, seen.data)) == (row.through or row.shown)
        if kind.startswith("data-"):
            assert (delivered[0].transient is True) is not STORED[kind]
            stored = [data for t, data in stored_data(result) if t == kind]
            assert stored == ([delivered[0].data] if STORED[kind] else [])
        else:
            assert sum(map(match, seen.blind)) == (row.through or row.shown)
    assert not [c.type for c in seen.blind if c.type.startswith("data-")]


# ----------------------------------------------------------------------------- order


async def test_stream_hook_writes_arrive_before_the_delta_being_processed(mode: str) -> None:
    def note(part: Any, writer: Any) -> Any:
        if part.type == "text-delta":
            writer.custom({"type": "data-before", "data": part.payload.text})
        return part

    model = ScriptedModel([text("one two three")])
    chunks, _ = await run_stream(Agent(id="o", model=model, output_processors=[
        P("w", process_output_stream=as_mode(note, mode))]))
    pairs = [(a.data, b.payload.text) for a, b in zip(chunks, chunks[1:])
             if a.type == "data-before"]
    assert pairs == [("one", "one"), (" two", " two"), (" three", " three")]


async def test_api_error_writes_and_step_retry_keep_production_order(mode: str) -> None:
    def recover(writer: Any) -> dict[str, bool]:
        writer.custom({"type": "data-first", "data": 1})
        writer.custom({"type": "data-second", "data": 2})
        return {"retry": True}

    # The hook's chunks pass an (async, in async mode) data-part processor; data-step-retry
    # does not: neither path may overtake the other.
    agent = Agent(id="o", model=ScriptedModel([api_error(503, "busy"), text("ok")]),
                  error_processors=[P("w", process_api_error=as_mode(recover, mode))],
                  output_processors=[P("d", process_output_stream=as_mode(lambda part: part, mode),
                                       process_data_parts=True)])
    chunks, _ = await run_stream(agent)
    data = [c.type for c in chunks if c.type.startswith("data-")]
    assert data == ["data-first", "data-second", "data-step-retry"]
    t = types(chunks)
    assert t.index("data-step-retry") < t.index("text-delta")


async def test_step_start_comes_before_the_steps_first_model_chunk(mode: str) -> None:
    def request(writer: Any, step_number: int) -> None:
        writer.custom({"type": "data-req", "data": step_number})

    # A process_llm_request writer queues its chunk before the step starts.
    model = ScriptedModel([tool_call("lookup", {"customer_id": "C-1"}), text("found")])
    agent = Agent(id="o", model=model, tools=[lookup], input_processors=[
        P("w", process_llm_request=as_mode(request, mode))])
    chunks, _ = await run_stream(agent)
    assert types(chunks) == [
        "start",
        "data-req", "step-start", "tool-call-input-streaming-start", "tool-call-delta",
        "tool-call-input-streaming-end", "tool-call", "tool-result", "step-finish",
        "data-req", "step-start", "text-start", "text-delta", "text-end", "step-finish",
        "finish"]


# ----------------------------------------------------------------------------- data-part processors


def guarded_agent(guard: Callable[..., Any], mode: str) -> Agent:
    """A tool turn whose tool writes ``data-x`` and ``data-x-transient``, behind ``guard``
    (a data-part stream processor)."""
    return Agent(id="g", model=ScriptedModel([tool_call("progress_" + mode), text("ok")]),
                 tools=[progress_tool(mode)], output_processors=[
                     P("guard", process_output_stream=as_mode(guard, mode),
                       process_data_parts=True)])


async def test_data_part_processor_drops_a_tool_chunk(mode: str) -> None:
    def drop(part: Any) -> Any:
        return None if part.type == "data-x" else part

    chunks, result = await run_stream(guarded_agent(drop, mode))
    t = types(chunks)
    assert "data-x" not in t and "data-x-transient" in t
    assert t.index("tool-call") < t.index("data-x-transient") < t.index("tool-result")
    assert stored_data(result) == [] and result.text == "ok"


async def test_data_part_processor_changes_a_tool_chunk(mode: str) -> None:
    def change(part: Any) -> Any:
        if part.type == "data-x":
            return msgspec.structs.replace(part, data={"changed": part.data})
        if part.type == "data-x-transient":  # and a transient chunk made permanent
            return msgspec.structs.replace(part, data="kept", transient=False)
        return part

    chunks, result = await run_stream(guarded_agent(change, mode))
    delivered = [(c.type, c.data) for c in chunks if c.type.startswith("data-")]
    assert delivered == [("data-x", {"changed": "tool"}), ("data-x-transient", "kept")]
    assert stored_data(result) == delivered


async def test_data_part_processor_aborts_on_a_tool_chunk(mode: str, asyncgens: Any) -> None:
    def block(part: Any, abort: Any) -> Any:
        if part.type == "data-x":
            abort("no data for you")
        return part

    chunks, result = await run_stream(guarded_agent(block, mode))
    # The tripwire is the last chunk: no data chunk, tool-result, step-finish or finish after.
    assert types(chunks)[-2:] == ["tool-call", "tripwire"]
    assert chunks[-1].payload.reason == "no data for you"
    assert chunks[-1].payload.processor_id == "guard"
    assert not [c for c in chunks if c.type.startswith("data-")]
    assert result.tripwire is not None and result.tripwire.processor_id == "guard"
    assert result.finish_reason == "other" and stored_data(result) == []
    assert asyncgens.open() == []


# ----------------------------------------------------------------------------- step tool overrides


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_input_step_replaces_the_tool_set(mode: str) -> None:
    def swap(tools: dict[str, Any]) -> dict[str, Any]:
        assert list(tools) == ["lookup"]  # each step starts from the agent's tools
        return {"tools": [weather]}

    model = ScriptedModel([tool_call("weather", {"city": "Oslo"}), text("nice")])
    agent = Agent(id="t", model=model, tools=[lookup],
                  input_processors=[P("swap", process_input_step=as_mode(swap, mode))])
    chunks, result = await run_stream(agent)
    assert [r.tools for r in model.requests] == [["weather"], ["weather"]]
    results = [c.payload.result for c in chunks if c.type == "tool-result"]
    assert results == ["sunny in Oslo"] and result.text == "nice"


async def test_input_step_replaces_the_tool_set_with_step_overrides(mode: str) -> None:
    model = ScriptedModel([tool_call("weather", {"city": "Oslo"}), text("nice")])
    agent = Agent(id="t", model=model, tools=[lookup], input_processors=[
        P("swap", process_input_step=as_mode(lambda: StepOverrides(tools=[weather]), mode))])
    chunks, result = await run_stream(agent)
    assert [r.tools for r in model.requests] == [["weather"], ["weather"]]
    assert [c.payload.result for c in chunks if c.type == "tool-result"] == ["sunny in Oslo"]


async def test_active_tools_naming_an_unknown_tool_ends_with_an_error_chunk(mode: str) -> None:
    model = ScriptedModel([text("never")])
    agent = Agent(id="t", model=model, tools=[lookup], input_processors=[
        P("pick", process_input_step=as_mode(lambda: {"active_tools": ["nope"]}, mode))])
    chunks, err = await run_stream(agent)
    assert types(chunks) == ["start", "error"]
    assert chunks[-1].payload.error["name"] == "ToolError"
    assert "nope" in chunks[-1].payload.error["message"]
    assert type(err).__name__ == "ToolError" and model.calls == 0


# ----------------------------------------------------------------------------- property

MARKS = {"w": None, "e": False, "t": True}  # a word: no echo, a stored echo, a transient echo

words = st.lists(st.sampled_from(sorted(MARKS)), max_size=4)
tool_writes = st.lists(st.tuples(st.booleans(), st.sampled_from(sorted(MARKS))), max_size=3)
tool_steps = st.lists(st.tuples(words, st.lists(tool_writes, min_size=1, max_size=2)),
                      max_size=3)


def key(chunk: Any) -> tuple[str, str] | None:
    if chunk.__class__ is TextDelta:
        return ("text", chunk.payload.text.strip())
    if chunk.__class__ is DataChunk:
        return (chunk.type, chunk.data)
    return None


@settings(max_examples=50, deadline=None)
@given(steps=tool_steps, last=words, mode=st.sampled_from(["sync", "async"]),
       trace=st.booleans())
async def test_every_chunk_is_delivered_once_and_stored_equals_streamed(
        steps: list[tuple[list[str], list[list[tuple[bool, str]]]]], last: list[str],
        mode: str, trace: bool) -> None:
    # trace=False runs the fused chain's inlined (untimed) code, trace=True its sampled path.
    n = iter(range(1000))
    expected: list[tuple[str, str]] = []

    def spell(marks: list[str]) -> str:
        """Unique words (``e3``: echo it, stored; ``t3``: transient; ``w3``: plain)."""
        out = []
        for mark in marks:
            word = f"{mark}{next(n)}"
            out.append(word)
            expected.append(("text", word))
            if MARKS[mark] is not None:
                expected.append(("data-echo", word))
        return " ".join(out)

    writes: dict[str, list[tuple[bool, str]]] = {}
    script: list[Any] = []
    for marks, calls in steps:
        step: list[Any] = [text(spell(marks))] if marks else []
        for call in calls:
            cid = f"call-{next(n)}"
            labelled = [(transient, f"{mark}{next(n)}") for transient, mark in call]
            writes[cid] = labelled
            for _transient, label in labelled:
                expected.append(("data-tool", label))
                if MARKS[label[0]] is not None:
                    expected.append(("data-echo", label))
            step.append(tool_call("emit_" + mode, {}, id=cid))
        script.append(step)
    script.append(text(spell(last) or "."))
    if not last:
        expected.append(("text", "."))
    # Each step-finish is echoed too (written while the outbox drains, not during the model's
    # stream).
    expected += [("data-echo", f"finish-{i}") for i in range(len(script))]

    def emit(writer: Any, tool_call_id: str) -> str:
        """Writes this call's data chunks."""
        for transient, label in writes[tool_call_id]:
            writer.custom({"type": "data-tool", "data": label, "transient": transient})
        return "ok"

    async def emit_async(writer: Any, tool_call_id: str) -> str:
        """Writes this call's data chunks."""
        return emit(writer, tool_call_id)

    finished = iter(range(len(script)))

    def echo(part: Any, writer: Any) -> Any:
        label = part.payload.text.strip() if part.__class__ is TextDelta else \
            part.data if part.__class__ is DataChunk else None
        if label and label[0] in MARKS and MARKS[label[0]] is not None:
            writer.custom({"type": "data-echo", "data": label, "transient": MARKS[label[0]]})
        elif part.type == "step-finish":
            writer.custom({"type": "data-echo", "data": f"finish-{next(finished)}"})
        return part

    emit_tool = tool(emit, name="emit_sync") if mode == "sync" else \
        tool(emit_async, name="emit_async")
    seen = Seen(mode)
    agent = Agent(id="p", model=ScriptedModel(script), tools=[emit_tool],
                  max_steps=len(script), output_processors=[
                      P("echo", process_output_stream=as_mode(echo, mode),
                        process_data_parts=True), *seen.processors])
    chunks, result = await run_stream(agent, trace=trace)
    assert result.finish_reason == "stop"
    delivered = collections.Counter(k for c in chunks if (k := key(c)) is not None)
    assert delivered == collections.Counter(expected)
    assert max(delivered.values(), default=1) == 1
    # Stored equals streamed: the non-transient data chunks, in the order they arrived.
    streamed = [(c.type, c.data) for c in chunks
                if c.__class__ is DataChunk and c.transient is not True]
    assert stored_data(result) == streamed
    # An echo arrives right before the chunk it echoes; the blind processor saw no data.
    for a, b in zip(chunks, chunks[1:]):
        if a.type == "data-echo":
            assert key(b) in {("text", a.data), ("data-tool", a.data)} or (
                b.type == "step-finish" and a.data.startswith("finish-"))
    assert not [c for c in seen.blind if c.__class__ is DataChunk]


# ----------------------------------------------------------------------------- awaiting the writer


@tool
async def awaiting_progress(writer: Any) -> str:
    """Reports progress the way Mastra tools do: ``await writer.custom(...)``."""
    await writer.custom({"type": "data-x", "data": "tool"})
    return "done"


async def awaited(writer: Any) -> None:
    await writer.custom({"type": "data-x", "data": "hook"})


async def awaited_in_stream(part: Any, writer: Any) -> Any:
    if part.type == "text-delta":
        await writer.custom({"type": "data-x", "data": "stream"})
    return part


@pytest.mark.parametrize("agent", [
    pytest.param(lambda: Agent(id="w", model=ScriptedModel([tool_call("awaiting_progress"),
                                                            text("ok")]),
                               tools=[awaiting_progress]),
                 id="a tool may await writer.custom"),
    pytest.param(lambda: Agent(id="w", model=ScriptedModel([text("ok")]),
                               input_processors=[P("w", process_input_step=awaited)]),
                 id="a step hook may await writer.custom"),
    pytest.param(lambda: Agent(id="w", model=ScriptedModel([text("ok")]), output_processors=[
        P("w", process_output_stream=awaited_in_stream)]),
                 id="a stream hook may await writer.custom"),
    pytest.param(lambda: Agent(id="w", model=ScriptedModel([text("ok")]),
                               output_processors=[P("w", process_output_result=awaited)]),
                 id="a result hook may await writer.custom"),
])
async def test_writer_custom_can_be_awaited(agent: Callable[[], Agent]) -> None:
    chunks, result = await run_stream(agent())
    assert "tool-error" not in types(chunks) and result.finish_reason == "stop"
    assert [c.type for c in chunks if c.type.startswith("data-")] == ["data-x"]
    assert len(stored_data(result)) == 1
