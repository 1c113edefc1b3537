"""Misbehaving processors and tools, cancellation and bad memory ids: typed errors, nothing leaks.

* A stream hook (or ``flush_output_stream``) returning something that is not a chunk fails the
  run with ``ProcessorError`` naming processor and hook, as a message hook's bad return does.
* A tool whose result cannot be encoded is a ``tool-error`` the model sees when the tool
  returns, not a failure when the turn is stored.
* Cancelling a run during a tool call leaves no task behind.
* ``Tool(timeout=)``, ``Agent(tool_timeout=)`` and ``Agent(hook_timeout=)`` bound a tool or
  hook that never returns (a ``tool-error``; a ``ProcessorError``, and nothing stored).
* A lone surrogate in ``thread_id``/``resource_id`` is refused before anything is written, and
  a message the store cannot encode is a ``MemoryStoreError``, also before any write.

Processor behaviours run with a sync and an async hook (the ``mode`` fixture); a timeout can
only interrupt an async hook, so the sync variant checks that it is left alone.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent, ops, tool
from streamkit.chunks import TextDelta
from streamkit.errors import InvalidArgument, InvalidType, ProcessorError, ToolError
from streamkit.memory import Memory, SQLiteStore
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.tools import Tool

from .conftest import P, as_mode, run_stream

WAIT = 10.0


def types(chunks: list[Any]) -> list[str]:
    return [c.type for c in chunks]


async def bounded_run(agent: Agent, **kw: Any) -> tuple[list[Any], Any]:
    async with asyncio.timeout(WAIT):
        return await run_stream(agent, **kw)


# --------------------------------------------------------------------------- bad stream returns

NOT_CHUNKS = [pytest.param("x", id="a-string"), pytest.param(42, id="a-number"),
              pytest.param({"type": "text-delta"}, id="a-dict"),
              pytest.param([TextDelta(id="t", text="a")], id="a-list-without-multi-emit")]


class TestStreamHookReturns:
    @pytest.mark.parametrize("value", NOT_CHUNKS)
    async def test_the_agent_stream_ends_with_an_error_chunk(self, mode: str, value: Any
                                                             ) -> None:
        def bad(part: Any) -> Any:
            return value if part.type == "text-delta" else part

        agent = Agent(id="a", model=ScriptedModel([text("hi there")]),
                      output_processors=[P("bad", process_output_stream=as_mode(bad, mode))])
        chunks, err = await bounded_run(agent)
        assert types(chunks)[-1] == "error"
        assert isinstance(err, ProcessorError)
        assert (err.processor_id, err.hook) == ("bad", "process_output_stream")
        assert type(value).__name__ in err.message and "expected a chunk" in err.message

    @pytest.mark.parametrize("value", NOT_CHUNKS[:3])
    async def test_ops_apply_raises_processor_error(self, mode: str, value: Any) -> None:
        procs = [P("bad", process_output_stream=as_mode(lambda part: value, mode))]
        with pytest.raises(ProcessorError, match="'bad', process_output_stream: it returned"):
            async with asyncio.timeout(WAIT):
                [c async for c in ops.apply([TextDelta(id="t", text="a")], procs)]

    async def test_an_item_of_a_multi_emit_list(self, mode: str) -> None:
        procs = [P("fan", multi_emit=True, process_output_stream=as_mode(
            lambda part: [part, "not a chunk"], mode))]
        with pytest.raises(ProcessorError, match="an item of the list it returned is str"):
            async with asyncio.timeout(WAIT):
                [c async for c in ops.apply([TextDelta(id="t", text="a")], procs)]

    async def test_chunks_of_every_kind_still_pass(self, mode: str) -> None:
        def fan(part: Any) -> Any:
            return [part, TextDelta(id="t", text="!")]

        procs = [P("same", process_output_stream=as_mode(lambda part: part, mode)),
                 P("fan", multi_emit=True, process_output_stream=as_mode(fan, mode))]
        async with asyncio.timeout(WAIT):
            out = [c async for c in ops.apply([TextDelta(id="t", text="a")], procs)]
        assert [c.payload.text for c in out] == ["a", "!"]

    async def test_flush_returning_a_non_chunk(self, mode: str) -> None:
        procs = [P("hold", process_output_stream=as_mode(lambda part: part, mode),
                   flush_output_stream=lambda: ["tail"])]
        with pytest.raises(ProcessorError, match="'hold', flush_output_stream"):
            async with asyncio.timeout(WAIT):
                [c async for c in ops.apply([TextDelta(id="t", text="a")], procs)]


# --------------------------------------------------------------------------- tool results


class Opaque:
    """Not JSON: msgspec cannot encode it."""


async def test_an_unencodable_tool_result_is_a_tool_error_the_model_sees(tmp_path: Path
                                                                         ) -> None:
    @tool
    def lookup() -> Any:
        """Returns something JSON cannot hold."""
        return {"row": Opaque()}

    model = ScriptedModel([tool_call("lookup", {}), text("Sorry.")])
    async with Memory(SQLiteStore(tmp_path / "m.db")) as memory:
        agent = Agent(id="a", model=model, tools=[lookup], memory=memory)
        chunks, result = await bounded_run(agent, thread_id="t1", resource_id="u1")
        assert "tool-error" in types(chunks) and "tool-result" not in types(chunks)
        assert types(chunks)[-1] == "finish" and result.text == "Sorry."
        error = next(c for c in chunks if c.type == "tool-error").payload.error
        assert error["name"] == "ToolError" and "cannot be encoded as JSON" in error["message"]
        assert "cannot be encoded as JSON" in str(model.requests[1].prompt[-1])
        assert [m.role for m in await memory.get_messages("t1")] == ["user", "assistant"]


async def test_a_tool_result_with_a_lone_surrogate() -> None:
    @tool
    async def echo() -> str:
        """Returns invalid Unicode."""
        return "\ud800"

    agent = Agent(id="a", model=ScriptedModel([tool_call("echo", {}), text("ok")]),
                  tools=[echo])
    chunks, _ = await bounded_run(agent)
    assert "tool-error" in types(chunks)


# --------------------------------------------------------------------------- cancellation


async def test_cancelling_during_a_tool_call_leaves_no_task() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "x"

    agent = Agent(id="a", model=ScriptedModel([tool_call("wait_forever", {})]),
                  tools=[wait_forever])
    stream = agent.stream("x")

    async def consume() -> None:
        async for _ in stream:
            pass

    before = asyncio.all_tasks()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(started.wait(), WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await stream.aclose()
        gc.collect()
    assert asyncio.all_tasks() - before == set()


# --------------------------------------------------------------------------- timeouts


def never_returns() -> Any:
    @tool(timeout=0.05)
    async def stuck() -> str:
        """Waits for ever."""
        await asyncio.Event().wait()
        return "x"

    return stuck


class TestToolTimeouts:
    async def test_a_tools_own_timeout(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([tool_call("stuck", {}), text("gave up")]),
                      tools=[never_returns()], tool_timeout=3600)
        chunks, result = await bounded_run(agent)
        error = next(c for c in chunks if c.type == "tool-error").payload.error
        assert "did not return within 0.05 s" in error["message"]
        assert result.text == "gave up"

    async def test_the_agents_tool_timeout(self) -> None:
        @tool
        async def slow() -> str:
            """Waits for ever."""
            await asyncio.Event().wait()
            return "x"

        agent = Agent(id="a", model=ScriptedModel([tool_call("slow", {}), text("gave up")]),
                      tools=[slow], tool_timeout=0.05)
        chunks, _ = await bounded_run(agent)
        assert "did not return within 0.05 s" in str(
            next(c for c in chunks if c.type == "tool-error").payload.error)

    async def test_a_tool_that_returns_in_time_is_untouched(self) -> None:
        @tool(timeout=30)
        async def quick() -> str:
            """Returns at once."""
            return "done"

        agent = Agent(id="a", model=ScriptedModel([tool_call("quick", {}), text("ok")]),
                      tools=[quick], tool_timeout=30)
        chunks, _ = await bounded_run(agent)
        assert next(c for c in chunks if c.type == "tool-result").payload.result == "done"

    async def test_the_tools_own_timeout_error_is_reported_as_itself(self) -> None:
        @tool(timeout=30)
        async def raises() -> str:
            """Raises TimeoutError itself."""
            raise TimeoutError("upstream timed out")

        agent = Agent(id="a", model=ScriptedModel([tool_call("raises", {}), text("ok")]),
                      tools=[raises])
        chunks, _ = await bounded_run(agent)
        error = next(c for c in chunks if c.type == "tool-error").payload.error
        assert error["name"] == "TimeoutError" and error["message"] == "upstream timed out"

    def test_a_bad_tool_timeout_is_refused(self) -> None:
        # A sync tool may have a timeout (it then runs in a thread: tests/test_deadlines.py).
        with pytest.raises(ToolError, match="timeout must be None or a number"):
            Tool("t", "d", {"type": "object"}, lambda args: 1, timeout=-1)

    @pytest.mark.parametrize("name", ["tool_timeout", "hook_timeout"])
    @pytest.mark.parametrize("bad, error", [(0, InvalidArgument), (-1, InvalidArgument),
                                            ("5", InvalidType), (True, InvalidType)])
    def test_agent_timeouts_are_checked(self, name: str, bad: Any, error: type) -> None:
        # Out of range: InvalidArgument (a ValueError); not a number: InvalidType (a TypeError).
        with pytest.raises(error, match=name):
            Agent(id="a", model=ScriptedModel([text("x")]), **{name: bad})


class TestHookTimeouts:
    async def test_a_stuck_stream_hook(self, mode: str, tmp_path: Path) -> None:
        async def stuck(part: Any) -> Any:
            await asyncio.Event().wait()
            return part

        hook = stuck if mode == "async" else (lambda part: part)
        async with Memory(SQLiteStore(tmp_path / "m.db")) as memory:
            agent = Agent(id="a", model=ScriptedModel([text("hi")]), memory=memory,
                          output_processors=[P("stuck", process_output_stream=hook)],
                          hook_timeout=0.05)
            chunks, err = await bounded_run(agent, thread_id="t1", resource_id="u1")
            stored = await memory.get_messages("t1")
        if mode == "sync":  # a sync hook runs to completion: nothing to time out
            assert types(chunks)[-1] == "finish" and len(stored) == 2
            return
        assert types(chunks)[-1] == "error" and isinstance(err, ProcessorError)
        assert (err.processor_id, err.hook) == ("stuck", "process_output_stream")
        assert "did not return within 0.05 s" in err.message
        assert stored == []  # the turn is not stored

    async def test_a_stuck_message_hook(self, mode: str) -> None:
        async def stuck(messages: Any) -> None:
            await asyncio.Event().wait()

        hook = stuck if mode == "async" else (lambda messages: None)
        agent = Agent(id="a", model=ScriptedModel([text("hi")]), hook_timeout=0.05,
                      input_processors=[P("stuck", process_input=hook)])
        chunks, err = await bounded_run(agent)
        if mode == "sync":
            assert types(chunks)[-1] == "finish"
            return
        assert types(chunks) == ["error"] and isinstance(err, ProcessorError)
        assert (err.processor_id, err.hook) == ("stuck", "process_input")

    async def test_a_stuck_flush(self, mode: str) -> None:
        async def stuck() -> Any:
            await asyncio.Event().wait()

        flush = stuck if mode == "async" else (lambda: None)
        agent = Agent(id="a", model=ScriptedModel([text("hi")]), hook_timeout=0.05,
                      output_processors=[P("hold", process_output_stream=lambda part: part,
                                           flush_output_stream=flush)])
        chunks, err = await bounded_run(agent)
        if mode == "sync":
            assert types(chunks)[-1] == "finish"
            return
        assert isinstance(err, ProcessorError) and err.hook == "flush_output_stream"

    async def test_a_hooks_own_timeout_error_is_wrapped_as_raised(self, mode: str) -> None:
        def raises(part: Any) -> Any:
            raise TimeoutError("upstream")

        agent = Agent(id="a", model=ScriptedModel([text("hi")]), hook_timeout=30,
                      output_processors=[P("r", process_output_stream=as_mode(raises, mode))])
        _, err = await bounded_run(agent)
        assert isinstance(err, ProcessorError) and "raised in process_output_stream" in err.message


# --------------------------------------------------------------------------- memory ids


@pytest.mark.parametrize("field", ["thread_id", "resource_id"])
async def test_a_lone_surrogate_id_is_refused_before_anything_is_written(
        field: str, tmp_path: Path) -> None:
    ids = {"thread_id": "t1", "resource_id": "u1", field: "bad\ud800id"}
    async with Memory(SQLiteStore(tmp_path / "m.db")) as memory:
        agent = Agent(id="a", model=ScriptedModel([text("hi")]), memory=memory)
        with pytest.raises(InvalidArgument, match=f"{field} .* lone surrogate"):
            agent.stream("hi", **ids)
        with pytest.raises(InvalidArgument, match="lone surrogate"):
            await memory.recall(ids["thread_id"], ids["resource_id"])
        with pytest.raises(InvalidArgument, match="lone surrogate"):
            await memory.create_thread(ids["thread_id"], resource_id=ids["resource_id"])
        assert await memory.store.list_threads("u1") == []
        assert await memory.store.get_thread("t1") is None


def _surrogate_text() -> Any:
    from streamkit.messages import Message
    return Message.user("\ud800")


def _opaque_data() -> Any:
    from streamkit.messages import DataPart, Message
    message = Message.user("ok")
    message.content.parts.append(DataPart(type="data-x", data=Opaque()))
    return message


@pytest.mark.parametrize("make", [pytest.param(_surrogate_text, id="lone-surrogate"),
                                  pytest.param(_opaque_data, id="arbitrary-object")])
async def test_a_message_that_cannot_be_encoded_is_a_store_error(make: Any, tmp_path: Path
                                                                 ) -> None:
    from streamkit.errors import MemoryStoreError

    store = SQLiteStore(tmp_path / "m.db")
    try:
        with pytest.raises(MemoryStoreError, match="cannot be encoded as JSON"):
            await store.save_messages("t1", "u1", [make()])
        assert await store.get_thread("t1") is None
    finally:
        await store.close()
