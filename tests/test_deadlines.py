"""Tools and processor hooks have an end by default (issue 26, point 7).

* ``Agent(tool_timeout=)`` and ``Agent(hook_timeout=)`` default to 300 s and 120 s (``None``
  opts out); a stuck async tool gets a ``tool-error``, a stuck async hook ends the run with
  ``ProcessorError`` — shown with the event loop's clock moved past the default (the only
  thing faked: time), not by waiting minutes.
* The per-chunk bound on async stream hooks is one lazily re-armed timer: many calls that are
  each quick never trip it however long they take together; a stuck one after them does; a
  cancellation from outside stays a cancellation.
* A plain ``def`` tool with ``timeout=`` runs in a worker thread: the model gets its
  ``tool-error`` while the function is still blocked, other coroutines run meanwhile, and its
  ``writer`` works from the thread.
* A sync tool or sync message hook that overruns (it cannot be interrupted) is reported: a
  warning naming it, the time it took and the limit.
* The README's "Bounded time and size" table states these defaults.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from typing import Any

import pytest

from streamkit import Agent, tool
from streamkit.errors import ProcessorError, ToolError
from streamkit.processors._runtime import DEFAULT_HOOK_TIMEOUT
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.tools import DEFAULT_TOOL_TIMEOUT

from .conftest import REPO, P, run_stream, types

WAIT = 10.0  # a bound on every test's own waits; never reached when the code is right


async def bounded_run(agent: Agent, **kw: Any) -> tuple[list[Any], Any]:
    """``run_stream`` bounded by WAIT seconds of real time (a thread's timer: the tests below
    move the loop's clock, which would trip an ``asyncio.timeout`` of the test itself)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run_stream(agent, **kw))
    guard = threading.Timer(WAIT, loop.call_soon_threadsafe, (task.cancel,))
    guard.start()
    try:
        return await task
    finally:
        guard.cancel()


@pytest.fixture(autouse=True)
def restore_clock() -> Any:
    real = time.monotonic
    yield
    time.monotonic = real


def jump_clock(seconds: float) -> None:
    """Move the monotonic clock ``seconds`` ahead, for the event loop (``loop.time()`` reads
    ``time.monotonic()``) and for the hook clock alike; timers due by then fire next."""
    real = time.monotonic
    time.monotonic = lambda: real() + seconds


async def past_the_default() -> None:
    """What a stuck tool or hook does here: the clock jumps an hour, then it waits for ever.
    Only a timeout that was armed (the default) can end it."""
    jump_clock(3600)
    await asyncio.Event().wait()


# --------------------------------------------------------------------------- the defaults


class TestDefaults:
    def test_an_agent_has_both_timeouts_by_default_and_none_opts_out(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("x")]))
        assert (agent.tool_timeout, agent.hook_timeout) == (300.0, 120.0)
        assert (DEFAULT_TOOL_TIMEOUT, DEFAULT_HOOK_TIMEOUT) == (300.0, 120.0)
        off = Agent(id="a", model=ScriptedModel([text("x")]), tool_timeout=None,
                    hook_timeout=None)
        assert (off.tool_timeout, off.hook_timeout) == (None, None)

    async def test_a_stuck_async_tool_ends_at_the_default(self) -> None:
        @tool
        async def stuck() -> str:
            """Never returns."""
            await past_the_default()
            return "x"

        agent = Agent(id="a", model=ScriptedModel([tool_call("stuck", {}), text("gave up")]),
                      tools=[stuck])
        chunks, result = await bounded_run(agent)
        error = next(c for c in chunks if c.type == "tool-error").payload.error
        assert "did not return within 300 s" in error["message"]
        assert result.text == "gave up"

    @pytest.mark.parametrize("hook", ["process_output_stream", "process_input",
                                      "process_output_result"])
    async def test_a_stuck_async_hook_ends_the_run_at_the_default(self, hook: str) -> None:
        async def stuck(**kwargs: Any) -> Any:
            await past_the_default()

        async def stuck_stream(part: Any) -> Any:
            await past_the_default()

        lane = "input_processors" if hook == "process_input" else "output_processors"
        processor = P("stuck", **{hook: stuck_stream if hook == "process_output_stream"
                                  else _messages_hook(stuck)})
        agent = Agent(id="a", model=ScriptedModel([text("hi")]), **{lane: [processor]})
        chunks, err = await bounded_run(agent)
        assert types(chunks)[-1] == "error" and isinstance(err, ProcessorError)
        assert (err.processor_id, err.hook, err.timeout) == ("stuck", hook, 120.0)
        assert "did not return within 120 s (hook_timeout)" in err.message

    async def test_none_opts_out(self) -> None:
        release = asyncio.Event()

        @tool
        async def slow() -> str:
            """Returns when released, long after the default would have ended it."""
            jump_clock(3600)
            asyncio.get_running_loop().call_soon(release.set)
            await release.wait()
            return "done"

        agent = Agent(id="a", model=ScriptedModel([tool_call("slow", {}), text("ok")]),
                      tools=[slow], tool_timeout=None)
        chunks, _ = await bounded_run(agent)
        assert next(c for c in chunks if c.type == "tool-result").payload.result == "done"

    def test_the_readme_table_states_the_defaults(self) -> None:
        readme = (REPO / "README.md").read_text(encoding="utf-8")
        rows = {row.split("|")[1].strip(): row.split("|")[2].strip()
                for row in readme.splitlines() if row.startswith("| one ")}
        tool_row = next(v for k, v in rows.items() if "tool call" in k)
        hook_row = next(v for k, v in rows.items() if "hook" in k)
        assert re.match(rf"{DEFAULT_TOOL_TIMEOUT:g} s\b", tool_row), tool_row
        assert re.match(rf"{DEFAULT_HOOK_TIMEOUT:g} s\b", hook_row), hook_row


def _messages_hook(fn: Any) -> Any:
    async def hook(messages: Any) -> Any:
        return await fn(messages=messages)
    return hook


# --------------------------------------------------------------------------- stream hooks


class TestStreamHookClock:
    async def test_quick_calls_never_trip_it_however_long_they_take_together(self) -> None:
        calls = 0

        async def slowish(part: Any) -> Any:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.02)  # each call: a fiftieth of the limit
            return part

        words = " ".join(f"w{i}" for i in range(60))  # 60 deltas: about 1.2 s in all
        agent = Agent(id="a", model=ScriptedModel([text(words)]), hook_timeout=1.0,
                      output_processors=[P("slowish", process_output_stream=slowish)])
        started = time.monotonic()
        chunks, result = await bounded_run(agent)
        assert time.monotonic() - started > 1.0  # together they did outlast the limit
        assert types(chunks)[-1] == "finish", result
        assert result.text == words and calls >= 60

    async def test_a_stuck_call_after_quick_ones_is_ended(self) -> None:
        seen = 0

        async def stalls_on_the_tenth(part: Any) -> Any:
            nonlocal seen
            if part.type == "text-delta":
                seen += 1
                if seen == 10:
                    await asyncio.Event().wait()
            await asyncio.sleep(0.01)
            return part

        words = " ".join(f"w{i}" for i in range(20))
        agent = Agent(id="a", model=ScriptedModel([text(words)]), hook_timeout=0.3,
                      output_processors=[P("s", process_output_stream=stalls_on_the_tenth)])
        chunks, err = await bounded_run(agent)
        assert isinstance(err, ProcessorError) and err.timeout == 0.3, err
        assert sum(c.type == "text-delta" for c in chunks) == 9

    async def test_a_hook_stuck_inside_an_async_generator_is_ended_too(self) -> None:
        async def never() -> Any:
            await asyncio.Event().wait()
            yield None

        async def stuck(part: Any) -> Any:
            if part.type == "text-delta":
                async for _ in never():  # its frames cannot be walked: the task is cancelled
                    pass
            return part

        agent = Agent(id="a", model=ScriptedModel([text("hi")]), hook_timeout=0.1,
                      output_processors=[P("gen", process_output_stream=stuck)])
        chunks, err = await bounded_run(agent)
        assert isinstance(err, ProcessorError) and err.timeout == 0.1, err
        assert types(chunks)[-1] == "error"
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    async def test_a_cancellation_from_outside_stays_a_cancellation(self) -> None:
        inside = asyncio.Event()

        async def waits(part: Any) -> Any:
            if part.type == "text-delta":
                inside.set()
                await asyncio.Event().wait()
            return part

        agent = Agent(id="a", model=ScriptedModel([text("hi")]), hook_timeout=60,
                      output_processors=[P("w", process_output_stream=waits)])
        stream = agent.stream("hi")

        async def consume() -> None:
            async for _ in stream:
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(inside.wait(), WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await stream.aclose()


# --------------------------------------------------------------------------- sync tools


class TestSyncTools:
    async def test_a_sync_tool_with_a_timeout_runs_in_a_thread_and_is_not_waited_for(
            self) -> None:
        release = threading.Event()
        ran_on: list[str] = []
        ticks = 0

        @tool(timeout=0.1)
        def blocking() -> str:
            """Blocks its thread until released."""
            ran_on.append(threading.current_thread().name)
            release.wait(WAIT)
            return "late"

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        agent = Agent(id="a", model=ScriptedModel([tool_call("blocking", {}), text("ok")]),
                      tools=[blocking])
        beat = asyncio.ensure_future(ticker())
        try:
            chunks, result = await bounded_run(agent)
        finally:
            beat.cancel()
        still_blocked = not release.is_set()
        release.set()
        error = next(c for c in chunks if c.type == "tool-error").payload.error
        assert "did not return within 0.1 s" in error["message"]
        assert "runs on in its thread" in error["message"]
        assert still_blocked and result.text == "ok"
        assert ran_on and ran_on[0] != threading.main_thread().name
        assert ticks > 1  # the loop kept running while the tool blocked its thread

    async def test_its_writer_works_from_the_thread(self) -> None:
        @tool(timeout=5)
        def reports(writer: Any) -> str:
            """Writes a progress chunk from its thread."""
            writer.custom({"type": "data-progress", "data": {"done": 1}})
            return "ok"

        agent = Agent(id="a", model=ScriptedModel([tool_call("reports", {}), text("fine")]),
                      tools=[reports])
        chunks, _ = await bounded_run(agent)
        got = [c for c in chunks if c.type == "data-progress"]
        assert [c.data for c in got] == [{"done": 1}]
        assert next(c for c in chunks if c.type == "tool-result").payload.result == "ok"

    async def test_its_own_timeout_error_is_reported_as_itself(self) -> None:
        @tool(timeout=5)
        def raises() -> str:
            """Raises TimeoutError itself."""
            raise TimeoutError("upstream timed out")

        agent = Agent(id="a", model=ScriptedModel([tool_call("raises", {}), text("ok")]),
                      tools=[raises])
        chunks, _ = await bounded_run(agent)
        error = next(c for c in chunks if c.type == "tool-error").payload.error
        assert error["name"] == "TimeoutError" and error["message"] == "upstream timed out"

    async def test_an_inline_sync_tool_that_overruns_is_reported(
            self, caplog: pytest.LogCaptureFixture) -> None:
        @tool
        def sleepy() -> str:
            """Blocks the loop a little."""
            time.sleep(0.2)
            return "ok"

        agent = Agent(id="a", model=ScriptedModel([tool_call("sleepy", {}), text("ok")]),
                      tools=[sleepy], tool_timeout=0.05)
        with caplog.at_level(logging.WARNING, logger="streamkit.tools"):
            chunks, _ = await bounded_run(agent)
        assert next(c for c in chunks if c.type == "tool-result").payload.result == "ok"
        [warning] = [r for r in caplog.records if r.name == "streamkit.tools"]
        assert "'sleepy'" in warning.getMessage() and "past its timeout of 0.05 s" in \
            warning.getMessage()

    def test_a_bad_timeout_is_refused(self) -> None:
        with pytest.raises(ToolError, match="timeout must be None or a number of seconds"):
            @tool(timeout=0)
            def t() -> str:
                """T."""
                return "x"


class TestSyncHooks:
    async def test_a_sync_message_hook_that_overruns_is_reported(
            self, caplog: pytest.LogCaptureFixture) -> None:
        def sleepy(messages: Any) -> None:
            time.sleep(0.2)

        agent = Agent(id="a", model=ScriptedModel([text("hi")]), hook_timeout=0.05,
                      input_processors=[P("sleepy", process_input=sleepy)])
        with caplog.at_level(logging.WARNING, logger="streamkit.processors"):
            chunks, _ = await bounded_run(agent)
        assert types(chunks)[-1] == "finish"
        [warning] = [r for r in caplog.records if r.name == "streamkit.processors"]
        assert "'sleepy'" in warning.getMessage() and "past hook_timeout 0.05 s" in \
            warning.getMessage()
