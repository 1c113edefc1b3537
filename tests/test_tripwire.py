"""Tripwires and retries through the agent loop: the outcome of an abort from every hook
(``docs/mastra-fidelity.md``, "Tripwire outcomes", with streamkit's decided behaviour), retries
with feedback, rollback and limits, and error processors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamkit import Agent, APICallError, get_text, tool
from streamkit.testing import ScriptedModel, api_error, text, tool_call

from .conftest import P, as_mode


@tool
def lookup(customer_id: str) -> str:
    """Look up."""
    return f"customer {customer_id}"


def types(chunks: list[Any]) -> list[str]:
    return [c.type for c in chunks]


async def run(agent: Agent, **kw: Any) -> tuple[list[Any], Any]:
    stream = agent.stream("question", **kw)
    chunks = [c async for c in stream]
    return chunks, await stream.result()


def tripper(hook_name: str, mode: str, *, retry: bool = False, when: Callable[..., bool]
            | None = None) -> P:
    """A processor whose ``hook_name`` aborts (with ``retry``) while ``when(**kw)`` holds."""
    params = {"process_output_stream": "part", "process_tool_result": "result"}

    def fire(abort: Any, retry_count: int, **kw: Any) -> Any:
        if when is None or when(retry_count=retry_count, **kw):
            abort(f"blocked in {hook_name}", retry=retry, metadata={"hook": hook_name})
        return kw.get("part")

    if hook_name == "process_output_stream":
        def fn(part: Any, abort: Any, retry_count: int) -> Any:
            if part.type == "text-delta" and (when is None or when(retry_count=retry_count,
                                                                    part=part)):
                abort(f"blocked in {hook_name}", retry=retry, metadata={"hook": hook_name})
            return part
    else:
        def fn(abort: Any, retry_count: int) -> Any:  # type: ignore[misc]
            return fire(abort, retry_count)
    _ = params
    return P("guard", **{hook_name: as_mode(fn, mode)})


INPUT_HOOKS = ["process_input", "process_input_step", "process_llm_request",
               "process_llm_response"]
OUTPUT_HOOKS = ["process_output_stream", "process_output_step", "process_tool_result",
                "process_output_result"]


def agent_for(hook_name: str, proc: P, model: ScriptedModel, **kw: Any) -> Agent:
    lane = "input_processors" if hook_name in INPUT_HOOKS else "output_processors"
    return Agent(id="t", instructions="sys", model=model, tools=[lookup], **{lane: [proc]}, **kw)


# What the consumer sees before the tripwire chunk, per hook (CONTRACT §5: the stream emits the
# tripwire chunk and ends, no finish; for process_output_step the tool calls do not run).
MATRIX = {
    "process_input": ([], 0),
    "process_input_step": (["start"], 0),
    "process_llm_request": (["start"], 0),
    "process_output_stream": (["start", "step-start", "tool-call-input-streaming-start",
                               "tool-call-delta", "tool-call-input-streaming-end", "tool-call",
                               "tool-result", "step-finish", "step-start", "text-start"], 2),
    "process_llm_response": (["start", "step-start", "tool-call-input-streaming-start",
                              "tool-call-delta", "tool-call-input-streaming-end", "tool-call"],
                             1),
    "process_output_step": (["start", "step-start", "tool-call-input-streaming-start",
                             "tool-call-delta", "tool-call-input-streaming-end", "tool-call"], 1),
    "process_tool_result": (["start", "step-start", "tool-call-input-streaming-start",
                             "tool-call-delta", "tool-call-input-streaming-end", "tool-call"], 1),
    "process_output_result": (["start", "step-start", "tool-call-input-streaming-start",
                               "tool-call-delta", "tool-call-input-streaming-end", "tool-call",
                               "tool-result", "step-finish", "step-start", "text-start",
                               "text-delta", "text-delta", "text-end", "step-finish"], 2),
}


class TestOutcomeMatrix:
    @pytest.mark.parametrize("hook_name", list(MATRIX))
    async def test_abort_from_every_hook(self, hook_name: str, mode: str) -> None:
        tool_ran: list[str] = []

        @tool
        def lookup(customer_id: str) -> str:  # noqa: F811 - shadows the module tool on purpose
            """Look up."""
            tool_ran.append(customer_id)
            return "c"

        results: list[str] = []
        later = P("later", process_output_result=lambda: results.append("ran"))
        model = ScriptedModel([tool_call("lookup", {"customer_id": "1"}), text("final answer")])
        lane = "input_processors" if hook_name in INPUT_HOOKS else "output_processors"
        procs: dict[str, list[Any]] = {"input_processors": [], "output_processors": [later]}
        procs[lane].insert(0, tripper(hook_name, mode))
        agent = Agent(id="t", model=model, tools=[lookup], **procs)
        chunks, result = await run(agent)
        expected_before, model_calls = MATRIX[hook_name]
        assert types(chunks) == expected_before + ["tripwire"]
        trip = chunks[-1]
        assert (trip.run_id, trip.from_) == (result.run_id, "AGENT")
        assert (trip.payload.reason, trip.payload.retry, trip.payload.processor_id,
                trip.payload.metadata) == (f"blocked in {hook_name}", False, "guard",
                                          {"hook": hook_name})
        assert model.calls == model_calls
        assert result.finish_reason == "other" and result.text == ""
        assert result.tripwire.reason == f"blocked in {hook_name}"
        assert result.tripwire.processor_id == "guard"
        assert result.tripwire.hook == hook_name
        if hook_name in ("process_output_step", "process_llm_response"):
            assert tool_ran == []
        assert results == []  # later output processors' process_output_result did not run

    async def test_generate_returns_instead_of_raising(self, mode: str) -> None:
        agent = agent_for("process_input", tripper("process_input", mode), ScriptedModel([]))
        result = await agent.generate("x")
        assert result.tripwire is not None and result.finish_reason == "other"

    async def test_stream_text_is_what_was_streamed_before_the_block(self) -> None:
        def second_delta(part: Any, abort: Any, state: dict[str, Any]) -> Any:
            if part.type == "text-delta":
                state["n"] = state.get("n", 0) + 1
                if state["n"] == 2:
                    abort("leak")
            return part

        agent = Agent(id="t", model=ScriptedModel([text("hello secret world")]),
                      output_processors=[P("g", process_output_stream=second_delta)])
        stream = agent.stream("x")
        assert await stream.text == "hello"
        assert (await stream.result()).text == ""

    async def test_tripwire_chunk_default_reason_and_absent_metadata(self) -> None:
        agent = Agent(id="t", model=ScriptedModel([]),
                      input_processors=[P("g", process_input=lambda abort: abort())])
        chunks, _ = await run(agent)
        import json

        from streamkit import wire

        body = json.loads(wire.encode(chunks[-1]))
        assert body["payload"] == {"reason": "Tripwire triggered by g", "retry": False,
                                   "processorId": "g"}
        assert body["runId"] and body["from"] == "AGENT"

    async def test_on_violation_fires_from_agent_hooks(self, mode: str) -> None:
        seen: list[Any] = []
        proc = tripper("process_tool_result", mode)
        proc.on_violation = seen.append
        agent = agent_for("process_tool_result", proc, ScriptedModel(
            [tool_call("lookup", {"customer_id": "1"}), text("x")]))
        await run(agent)
        assert [(v.processor_id, v.message, v.hook) for v in seen] == \
            [("guard", "blocked in process_tool_result", "process_tool_result")]

    async def test_stream_tripwire_fires_on_violation(self, mode: str) -> None:
        seen: list[Any] = []
        proc = tripper("process_output_stream", mode)
        proc.on_violation = seen.append
        await run(agent_for("process_output_stream", proc, ScriptedModel([text("a b")])))
        assert [v.hook for v in seen] == ["process_output_stream"]


IN_STEP = ["process_input_step", "process_llm_request", "process_output_stream",
           "process_llm_response", "process_output_step", "process_tool_result"]


class TestRetry:
    @pytest.mark.parametrize("hook_name", IN_STEP)
    async def test_retry_from_every_in_step_hook(self, hook_name: str, mode: str) -> None:
        proc = tripper(hook_name, mode, retry=True, when=lambda retry_count, **kw:
                       retry_count == 0)
        before_model = hook_name in ("process_input_step", "process_llm_request")
        if hook_name == "process_tool_result":
            model = ScriptedModel([tool_call("lookup", {"customer_id": "1"}),
                                   tool_call("lookup", {"customer_id": "2"}), text("done")])
        elif before_model:
            model = ScriptedModel([text("accepted answer")])
        else:
            model = ScriptedModel([text("rejected answer"), text("accepted answer")])
        chunks, result = await run(agent_for(hook_name, proc, model, max_processor_retries=2))
        assert result.tripwire is None
        expected = "done" if hook_name == "process_tool_result" else "accepted answer"
        assert result.text == expected
        assert "rejected" not in " ".join(get_text(m) for m in result.messages)
        retried = [s for s in result.steps if s.finish_reason == "retry"]
        assert len(retried) == 1 and retried[0].tripwire.reason == f"blocked in {hook_name}"
        assert retried[0].step_number == 0  # a retry keeps its step number
        feedback = model.requests[0 if before_model else 1].prompt[-1]
        assert feedback["role"] == "system"
        assert f"blocked in {hook_name}" in feedback["content"]
        assert ("data-step-retry" in types(chunks)) is not before_model
        if not before_model:
            retry_chunk = next(c for c in chunks if c.type == "data-step-retry")
            assert retry_chunk.transient is True
            assert retry_chunk.data == {"stepNumber": 0, "reason": f"blocked in {hook_name}",
                                        "processorId": "guard", "retryCount": 1}
        assert types(chunks)[-1] == "finish"

    async def test_rolled_back_output_is_not_seen_by_the_model(self) -> None:
        guard = tripper("process_output_step", "sync", retry=True,
                        when=lambda retry_count, **kw: retry_count == 0)
        model = ScriptedModel([text("bad answer"), text("good answer")])
        await run(agent_for("process_output_step", guard, model, max_processor_retries=1))
        second = model.requests[1].prompt
        assert not any("bad answer" in str(m["content"]) for m in second)
        assert [m["role"] for m in second] == ["system", "user", "system"]

    async def test_retries_exhausted_become_an_abort(self, mode: str) -> None:
        guard = tripper("process_output_step", mode, retry=True)
        model = ScriptedModel([text("no")] * 5)
        chunks, result = await run(agent_for("process_output_step", guard, model,
                                             max_processor_retries=2))
        assert model.calls == 3 and types(chunks)[-1] == "tripwire"
        assert result.tripwire.retry is True and result.finish_reason == "other"
        assert [s.retry_count for s in result.steps] == [0, 1]

    async def test_no_max_processor_retries_means_abort(self, mode: str) -> None:
        guard = tripper("process_output_step", mode, retry=True)
        model = ScriptedModel([text("no")] * 2)
        _, result = await run(agent_for("process_output_step", guard, model))
        assert model.calls == 1 and result.tripwire is not None

    async def test_per_call_max_overrides_agent(self, mode: str) -> None:
        guard = tripper("process_output_step", mode, retry=True,
                        when=lambda retry_count, **kw: retry_count < 3)
        model = ScriptedModel([text("x")] * 4)
        agent = agent_for("process_output_step", guard, model, max_processor_retries=1)
        _, result = await run(agent, max_processor_retries=5)
        assert model.calls == 4 and result.tripwire is None

    @pytest.mark.parametrize("hook_name", ["process_input", "process_output_result"])
    async def test_no_step_to_retry_is_a_plain_abort(self, hook_name: str, mode: str) -> None:
        guard = tripper(hook_name, mode, retry=True)
        model = ScriptedModel([text("x")] * 3)
        chunks, result = await run(agent_for(hook_name, guard, model, max_processor_retries=3))
        assert types(chunks)[-1] == "tripwire" and result.tripwire is not None

    async def test_retries_do_not_use_up_max_steps_and_counter_resets(self, mode: str) -> None:
        counts: list[int] = []

        def reject_first_attempt(abort: Any, retry_count: int, step_number: int) -> None:
            counts.append(retry_count)
            if retry_count == 0:
                abort("again", retry=True)

        model = ScriptedModel([tool_call("lookup", {"customer_id": "1"}),
                               tool_call("lookup", {"customer_id": "2"}), text("a"), text("b")])
        agent = Agent(id="t", model=model, tools=[lookup], max_steps=2, max_processor_retries=1,
                      output_processors=[P("g", process_output_step=as_mode(
                          reject_first_attempt, mode))])
        _, result = await run(agent)
        assert counts == [0, 1, 0, 1]  # the counter resets after an accepted step
        assert result.text == "b" and result.finish_reason == "stop"
        assert [s.step_number for s in result.steps] == [0, 0, 1, 1]


class TestErrorProcessors:
    async def test_recovering_error_processor(self, mode: str) -> None:
        seen: list[Any] = []

        def handle(error: Any, retry_count: int) -> Any:
            seen.append((error.status_code, retry_count))
            return {"retry": True}

        model = ScriptedModel([api_error(400, "prefill not supported"), text("recovered")])
        agent = Agent(id="e", model=model,
                      error_processors=[P("fix", process_api_error=as_mode(handle, mode))])
        result = await agent.generate("x")
        assert result.text == "recovered" and seen == [(400, 0)]
        assert [s.finish_reason for s in result.steps] == ["retry", "stop"]

    async def test_default_cap_is_ten_with_error_processors(self, mode: str) -> None:
        model = ScriptedModel([api_error(500, "down")] * 20)
        agent = Agent(id="e", model=model, error_processors=[
            P("always", process_api_error=as_mode(lambda: {"retry": True}, mode))])
        with pytest.raises(APICallError):
            await agent.generate("x")
        assert model.calls == 11

    async def test_explicit_cap(self, mode: str) -> None:
        model = ScriptedModel([api_error(500, "down")] * 20)
        agent = Agent(id="e", model=model, max_processor_retries=0, error_processors=[
            P("always", process_api_error=as_mode(lambda: {"retry": True}, mode))])
        with pytest.raises(APICallError):
            await agent.generate("x")
        assert model.calls == 1

    async def test_handler_mutation_reaches_the_retried_prompt(self, mode: str) -> None:
        def add_continue(message_list: Any) -> Any:
            message_list.add({"role": "user", "content": "continue"}, "input")
            return {"retry": True}

        model = ScriptedModel([api_error(400, "x"), text("ok")])
        agent = Agent(id="e", model=model, error_processors=[
            P("fix", process_api_error=as_mode(add_continue, mode))])
        await agent.generate("x")
        assert model.requests[1].prompt[-1] == {"role": "user", "content": "continue"}

    async def test_api_error_hook_on_output_processor_runs(self, mode: str) -> None:
        calls: list[str] = []
        proc = P("o", process_api_error=as_mode(lambda: calls.append("o"), mode),
                 process_output_stream=lambda part: part)
        agent = Agent(id="e", model=ScriptedModel([api_error(400, "x")]),
                      output_processors=[proc], error_processors=[proc])
        with pytest.raises(APICallError):
            await agent.generate("x")
        assert calls == ["o"]  # once per failure, even when registered in two lanes

    async def test_tripwire_from_error_processor(self, mode: str) -> None:
        agent = Agent(id="e", model=ScriptedModel([api_error(400, "x")]), error_processors=[
            P("stop", process_api_error=as_mode(lambda abort: abort("give up"), mode))])
        result = await agent.generate("x")
        assert result.tripwire.reason == "give up" and result.tripwire.processor_id == "stop"
