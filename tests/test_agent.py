"""The agent loop: hook order, results, streams, tools, overrides, graph, concurrency."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from streamkit import (
    Agent,
    APICallError,
    Override,
    Processor,
    ProcessorDefinitionError,
    StreamkitError,
    ToolError,
    get_text,
    tool,
)
from streamkit.chunks import TextDelta
from streamkit.errors import GraphError, ScriptExhausted
from streamkit.testing import FunctionModel, ScriptedModel, api_error, text, tool_call

from .conftest import P, as_mode, run_stream, types


@tool
def lookup(customer_id: str) -> dict[str, Any]:
    """Look up a customer by id."""
    return {"id": customer_id, "email": "ada@example.com", "tier": "gold"}


class Recorder(Processor):
    """Records every hook it sees, in both lanes."""

    id = "rec"

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def process_input(self) -> None:
        self.log.append("process_input")

    def process_input_step(self, step_number: int) -> None:
        self.log.append(f"process_input_step#{step_number}")

    def process_llm_request(self, step_number: int) -> None:
        self.log.append(f"process_llm_request#{step_number}")

    def process_output_stream(self, part: Any) -> Any:
        self.log.append(f"stream:{part.type}")
        return part

    def process_llm_response(self, step_number: int, from_cache: bool) -> None:
        self.log.append(f"process_llm_response#{step_number}")

    def process_output_step(self, step_number: int, finish_reason: str) -> None:
        self.log.append(f"process_output_step#{step_number}:{finish_reason}")

    def process_tool_result(self, tool_name: str, result: Any) -> None:
        self.log.append(f"process_tool_result:{tool_name}")

    def process_output_result(self, result: dict[str, Any]) -> None:
        self.log.append(f"process_output_result:{result['finish_reason']}")


class TestRun:
    async def test_text_answer_stream_and_result(self) -> None:
        agent = Agent(id="a", instructions="Be brief.", model=ScriptedModel([text("Hello world")]))
        chunks, result = await run_stream(agent)
        assert types(chunks) == ["start", "step-start", "text-start", "text-delta", "text-delta",
                                 "text-end", "step-finish", "finish"]
        assert [c.payload.text for c in chunks if c.type == "text-delta"] == ["Hello", " world"]
        assert {c.run_id for c in chunks} == {result.run_id}
        assert {c.from_ for c in chunks} == {"AGENT"}
        assert result.text == "Hello world" and result.finish_reason == "stop"
        assert result.usage.output_tokens == 2 and result.usage.total_tokens > 2
        assert [get_text(m) for m in result.messages] == ["Hello world"]

    async def test_full_hook_order_with_tools_and_prepare_step(self) -> None:
        log: list[str] = []
        rec = Recorder(log)

        @tool
        def noted(customer_id: str) -> str:
            """Look up."""
            log.append("TOOL")
            return "ok"

        def prepare_step(step_number: int) -> None:
            log.append(f"prepare_step#{step_number}")

        model = ScriptedModel([tool_call("noted", {"customer_id": "C-1"}), text("done")])
        agent = Agent(id="a", model=model, tools=[noted], input_processors=[rec],
                      output_processors=[rec], prepare_step=prepare_step)
        result = await agent.generate("hi")
        assert result.text == "done"
        assert log == [
            "process_input", "process_input_step#0", "prepare_step#0", "process_llm_request#0",
            "stream:step-start", "stream:tool-call-input-streaming-start",
            "stream:tool-call-delta", "stream:tool-call-input-streaming-end", "stream:tool-call",
            "process_llm_response#0", "process_output_step#0:tool-calls", "TOOL",
            "process_tool_result:noted", "stream:tool-result", "stream:step-finish",
            "process_input_step#1", "prepare_step#1", "process_llm_request#1",
            "stream:step-start", "stream:text-start", "stream:text-delta", "stream:text-end",
            "process_llm_response#1", "process_output_step#1:stop", "stream:step-finish",
            "process_output_result:stop"]

    async def test_tool_turn_messages_and_prompt(self) -> None:
        model = ScriptedModel([tool_call("lookup", {"customer_id": "C-42"}, id="call-1"),
                               text("Ada is gold.")])
        agent = Agent(id="a", instructions="Be brief.", model=model, tools=[lookup])
        chunks, result = await run_stream(agent, "Who is C-42?")
        assert types(chunks).index("tool-result") > types(chunks).index("tool-call")
        second = model.requests[1].prompt
        assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
        assert second[3]["content"][0]["result"]["tier"] == "gold"
        (msg,) = result.messages
        assert [p.type for p in msg.content.parts] == ["tool-invocation", "step-start", "text"]
        assert msg.content.parts[0].state == "result"
        assert result.steps[0].tool_results[0]["result"]["id"] == "C-42"
        assert model.requests[0].tools == ["lookup"]
        schema = model.requests[0].tool_specs[0].parameters
        assert schema["required"] == ["customer_id"]

    async def test_concurrent_tools(self) -> None:
        started: list[str] = []
        both = asyncio.Event()

        @tool
        async def slow(name: str) -> str:
            """Waits for the other tool."""
            started.append(name)
            if len(started) == 2:
                both.set()
            await asyncio.wait_for(both.wait(), 2)
            return name.upper()

        model = ScriptedModel([[tool_call("slow", {"name": "a"}), tool_call("slow", {"name": "b"})],
                               text("ok")])
        result = await Agent(id="a", model=model, tools=[slow]).generate("go")
        assert [r["result"] for r in result.steps[0].tool_results] == ["A", "B"]

    @pytest.mark.parametrize("call,error", [
        pytest.param(tool_call("nope", {}), "unknown tool 'nope'", id="unknown-tool"),
        pytest.param(tool_call("lookup", {"customer_id": 5}), "argument 'customer_id'",
                     id="invalid-args"),
        pytest.param(tool_call("lookup", {}), "missing required argument", id="missing-arg"),
        pytest.param(tool_call("boom", {}), "kaput", id="tool-raises"),
    ])
    async def test_tool_errors_go_back_to_the_model(self, call: Any, error: str) -> None:
        @tool
        def boom() -> str:
            """Fails."""
            raise RuntimeError("kaput")

        seen: list[str] = []
        proc = P("r", process_tool_result=lambda tool_name: seen.append(tool_name))
        model = ScriptedModel([call, text("sorry")])
        agent = Agent(id="a", model=model, tools=[lookup, boom], output_processors=[proc])
        chunks, result = await run_stream(agent)
        err = next(c for c in chunks if c.type == "tool-error")
        assert error in str(err.payload.error) or error in result.steps[0].tool_results[0][
            "result"]
        assert "tool-result" not in types(chunks)
        assert seen == []  # process_tool_result does not run for a failed tool
        tool_msg = model.requests[1].prompt[-1]
        assert tool_msg["role"] == "tool" and tool_msg["content"][0]["isError"] is True
        assert result.text == "sorry"

    async def test_max_steps_stops_the_loop(self) -> None:
        model = ScriptedModel([tool_call("lookup", {"customer_id": "1"})] * 3)
        result = await Agent(id="a", model=model, tools=[lookup], max_steps=2).generate("x")
        assert model.calls == 2 and result.finish_reason == "tool-calls"

    async def test_script_exhausted_surfaces(self) -> None:
        with pytest.raises(ScriptExhausted):
            await Agent(id="a", model=ScriptedModel([])).generate("x")

    async def test_structured_output(self) -> None:
        class Answer(msgspec.Struct):
            name: str
            tier: str

        model = ScriptedModel([text('{"name": "Ada", "tier": "gold"}')])
        result = await Agent(id="a", model=model).generate("x", structured_output=Answer)
        assert result.object == Answer("Ada", "gold")
        assert model.requests[0].structured_output["required"] == ["name", "tier"]

    async def test_stream_handles(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("one two"), text("three")]))
        assert [t async for t in agent.stream("x").text_stream] == ["one", " two"]
        stream = agent.stream("x")
        assert await stream.text == "three"
        assert (await stream.result()).text == "three"

    async def test_stream_to_observable(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("a b")]))
        got: list[str] = []
        done = asyncio.Event()
        agent.stream("x").to_observable().subscribe(on_next=lambda c: got.append(c.type),
                                                    on_completed=done.set)
        await asyncio.wait_for(done.wait(), 5)
        assert got[0] == "start" and got[-1] == "finish"

    async def test_early_stop_closes_the_model_stream(self, asyncgens: Any) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("a b c d e f")]))
        stream = agent.stream("x")
        async for chunk in stream:
            if chunk.type == "text-delta":
                break
        await stream.aclose()
        assert asyncgens.open() == []

    async def test_unknown_option(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("x")]))
        with pytest.raises(StreamkitError, match="did you mean 'max_steps'"):
            agent.stream("x", max_step=3)

    async def test_function_model_and_request_fields(self) -> None:
        def fn(request: Any) -> Any:
            return text("echo " + request.prompt[-1]["content"])

        model = FunctionModel(fn)
        result = await Agent(id="a", model=model, tools=[lookup]).generate(
            "ping", tool_choice="none", model_settings={"temperature": 0},
            provider_options={"x": {"y": 1}})
        assert result.text == "echo ping"
        req = model.requests[0]
        assert (req.tool_choice, req.model_settings, req.provider_options) == \
            ("none", {"temperature": 0}, {"x": {"y": 1}})


    async def test_reasoning_and_sources_are_stored(self) -> None:
        from streamkit.testing import reasoning

        agent = Agent(id="a", model=ScriptedModel([[reasoning("think first"), text("answer")]]))
        chunks, result = await run_stream(agent)
        assert "reasoning-delta" in types(chunks)
        parts = result.messages[0].content.parts
        assert [p.type for p in parts] == ["reasoning", "text"]
        assert parts[0].text == "think first"
        assert result.steps[0].reasoning == "think first"


class TestDataChunks:
    async def test_tool_writer_routed_persisted_and_transient(self) -> None:
        @tool
        async def progress(writer: Any) -> str:
            """Reports progress."""
            writer.custom({"type": "data-progress", "data": {"pct": 50}})
            writer.custom({"type": "data-log", "data": "noise", "transient": True})
            return "done"

        model = ScriptedModel([tool_call("progress", {}), text("ok")])
        chunks, result = await run_stream(Agent(id="a", model=model, tools=[progress]))
        t = types(chunks)
        assert t.index("tool-call") < t.index("data-progress") < t.index("tool-result")
        assert "data-log" in t
        parts = [p.type for p in result.messages[0].content.parts]
        assert "data-progress" in parts and "data-log" not in parts

    async def test_data_processors_can_modify_drop_and_mark_transient(self, mode: str) -> None:
        @tool
        def progress(writer: Any) -> str:
            """Reports progress."""
            writer.custom({"type": "data-a", "data": 1})
            writer.custom({"type": "data-b", "data": 2})
            return "x"

        def edit(part: Any) -> Any:
            if part.type == "data-a":
                return msgspec.structs.replace(part, transient=True)
            if part.type == "data-b":
                return None
            return part

        blind: list[str] = []
        procs = [P("blind", process_output_stream=as_mode(
            lambda part: blind.append(part.type) or part, mode)),
            P("editor", process_output_stream=as_mode(edit, mode), process_data_parts=True)]
        model = ScriptedModel([tool_call("progress", {}), text("ok")])
        chunks, result = await run_stream(Agent(id="a", model=model, tools=[progress],
                                                output_processors=procs))
        assert "data-a" in types(chunks) and "data-b" not in types(chunks)
        assert not any(b.startswith("data-") for b in blind)
        assert not any(p.type.startswith("data-") for p in result.messages[0].content.parts)

    async def test_stream_hook_writer_bypasses_processors(self, mode: str) -> None:
        seen: list[str] = []

        def note(part: Any, writer: Any) -> Any:
            if part.type == "text-delta":
                writer.custom({"type": "data-note", "data": part.payload.text})
            return part

        procs = [P("w", process_output_stream=as_mode(note, mode)),
                 P("d", process_output_stream=as_mode(lambda part: seen.append(part.type) or part,
                                                      mode), process_data_parts=True)]
        chunks, result = await run_stream(Agent(id="a", model=ScriptedModel([text("hi")]),
                                                output_processors=procs))
        assert types(chunks).count("data-note") == 1 and "data-note" not in seen
        assert [p.type for p in result.messages[0].content.parts] == ["data-note", "text"]


class TestOverrides:
    async def test_per_call_lists_replace_agent_lists(self) -> None:
        log: list[str] = []
        a = P("a", process_input=lambda: log.append("a"))
        b = P("b", process_input=lambda: log.append("b"))
        agent = Agent(id="x", model=ScriptedModel([text("1"), text("2")]), input_processors=[a])
        await agent.generate("q", input_processors=[b])
        await agent.generate("q")
        assert log == ["b", "a"]

    async def test_override_by_id(self) -> None:
        log: list[str] = []

        def mk(name: str) -> P:
            return P(name, process_input=lambda: log.append(name))

        agent = Agent(id="x", model=ScriptedModel([text("1")] * 4),
                      input_processors=[mk("a"), mk("b"), mk("c")])
        await agent.generate("q", input_processors=Override(remove=["b"], add=[mk("d")]))
        await agent.generate("q", input_processors=Override(replace={"a": mk("z")},
                                                            add=[mk("e")], before="c"))
        await agent.generate("q")
        assert log == ["a", "c", "d", "z", "b", "e", "c", "a", "b", "c"]

    async def test_override_with_unknown_id_is_an_error(self) -> None:
        agent = Agent(id="x", model=ScriptedModel([text("1")]),
                      output_processors=[P("pii", process_output_stream=lambda part: part)])
        with pytest.raises(ProcessorDefinitionError, match="'pi'"):
            agent.stream("q", output_processors=Override(remove=["pi"]))

    async def test_processor_lists_from_request_context(self) -> None:
        log: list[str] = []

        def lanes(request_context: dict[str, Any]) -> list[Any]:
            return [P("ctx", process_input=lambda: log.append(request_context["user"]))]

        agent = Agent(id="x", model=ScriptedModel([text("1")]), input_processors=lanes)
        await agent.generate("q", request_context={"user": "u1"})
        assert log == ["u1"]

    async def test_step_overrides_apply_to_one_step_and_system_resets(self, mode: str) -> None:
        def step_hook(step_number: int, system_messages: list[Any]) -> Any:
            if step_number == 0:
                return {"tool_choice": "required", "system_messages": ["step zero only"]}
            return None

        model = ScriptedModel([tool_call("lookup", {"customer_id": "1"}), text("ok")])
        agent = Agent(id="x", instructions="base", model=model, tools=[lookup],
                      input_processors=[P("s", process_input_step=as_mode(step_hook, mode))])
        await agent.generate("q", tool_choice="auto")
        first, second = model.requests
        assert first.tool_choice == "required" and second.tool_choice == "auto"
        assert first.prompt[0]["content"] == "step zero only"
        assert second.prompt[0]["content"] == "base"

    async def test_step_override_model_and_active_tools(self) -> None:
        other = ScriptedModel([text("from other")])
        base = ScriptedModel([])
        agent = Agent(id="x", model=base, tools=[lookup],
                      input_processors=[P("m", process_input_step=lambda: {
                          "model": other, "active_tools": []})])
        result = await agent.generate("q")
        assert result.text == "from other" and base.calls == 0 and other.requests[0].tools == []

    async def test_bad_active_tools(self) -> None:
        with pytest.raises(ToolError, match="nope"):
            Agent(id="x", model=ScriptedModel([]), tools=[lookup]).stream(
                "q", active_tools=["nope"])


class TestLLMRequestReplay:
    async def test_cached_response_replayed_through_stream_processors(self, mode: str) -> None:
        seen: list[str] = []
        from_cache: list[bool] = []

        def cache() -> Any:
            return {"response": [
                {"type": "text-start", "payload": {"id": "t"}},
                {"type": "text-delta", "payload": {"id": "t", "text": "cached"}},
                {"type": "text-end", "payload": {"id": "t"}},
                {"type": "finish", "payload": {"stepResult": {"reason": "stop"},
                                               "output": {"usage": {"inputTokens": 0,
                                                                    "outputTokens": 0}}}}]}

        def response(from_cache_: bool = False, **kw: Any) -> None:
            from_cache.append(kw["from_cache"])

        model = ScriptedModel([])
        agent = Agent(id="x", model=model,
                      input_processors=[P("c", process_llm_request=as_mode(cache, mode),
                                          process_llm_response=lambda **kw: from_cache.append(
                                              kw["from_cache"]))],
                      output_processors=[P("s", process_output_stream=as_mode(
                          lambda part: seen.append(part.type) or part, mode))])
        chunks, result = await run_stream(agent)
        assert model.calls == 0 and result.text == "cached"
        assert "text-delta" in seen and from_cache == [True]
        assert {c.run_id for c in chunks} == {result.run_id}
        assert result.steps[0].from_cache is True

    async def test_prompt_change_is_transient(self) -> None:
        model = ScriptedModel([text("a")])
        agent = Agent(id="x", model=model, input_processors=[P("p", process_llm_request=lambda
                      prompt: {"prompt": prompt + [{"role": "user", "content": "extra"}]})])
        result = await agent.generate("q")
        assert model.requests[0].prompt[-1]["content"] == "extra"
        assert all(get_text(m) != "extra" for m in result.messages)


class TestGraph:
    def test_graph_nodes_edges_and_renderings(self) -> None:
        agent = Agent(id="g", model=ScriptedModel([]), tools=[lookup],
                      output_processors=[P("pii", process_tool_result=lambda: None)])
        graph = agent.graph()
        names = [n.name for n in graph.nodes]
        assert names.index("process_input") < names.index("process_input_step") \
            < names.index("prepare_step") < names.index("process_llm_request") \
            < names.index("model") < names.index("process_output_stream") \
            < names.index("process_llm_response") < names.index("process_output_step") \
            < names.index("tools") < names.index("process_tool_result") \
            < names.index("process_output_result")
        assert graph.node("process_tool_result").processors == ("pii",)
        assert "process_output_step -->|tool calls| tools" in graph.to_mermaid()
        assert "(process_tool_result)" in graph.to_text()
        bundle = graph._repr_mimebundle_()
        assert {"text/plain", "text/html"} <= set(bundle)

    def test_busy_names_exactly_the_nodes_whose_processors_run(self) -> None:
        agent = Agent(id="g", model=ScriptedModel([]),
                      input_processors=[P("in", process_input=lambda: None,
                                          process_llm_request=lambda: None)],
                      output_processors=[P("out", process_output_result=lambda: None)])
        graph = agent.graph()
        assert graph.busy == {n.name for n in graph.nodes if n.processors} == {
            "process_input", "process_llm_request", "process_output_result"}
        assert Agent(id="bare", model=ScriptedModel([])).graph().busy == frozenset()

    def test_graph_validation(self) -> None:
        from streamkit.graph import END, START, Edge, Graph, Node

        with pytest.raises(GraphError, match="unknown node"):
            Graph([Node(START), Node(END)], [Edge(START, "x")])
        with pytest.raises(GraphError, match="cannot be reached"):
            Graph([Node(START), Node("island"), Node(END)], [Edge(START, END)])
        g = Graph([Node(START), Node(END)], [Edge(START, END)])
        with pytest.raises(GraphError, match="no edge"):
            g.check(END, START)


class TestConcurrency:
    async def test_thousand_concurrent_streams_keep_state_apart(self) -> None:
        class Tagger(Processor):
            id = "tagger"

            def process_input(self, messages: list[Any], state: dict[str, Any]) -> None:
                state["me"] = get_text(messages[0])
                state["count"] = 0

            async def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
                await asyncio.sleep(0)
                if part.type == "text-delta":
                    state["count"] += 1
                    return TextDelta(id=part.payload.id, text=state["me"],
                                     run_id=part.run_id, from_=part.from_)
                return part

            def process_output_result(self, state: dict[str, Any], result: Any) -> None:
                if state["count"] != 3:
                    raise AssertionError("state leaked between requests")

        def fn(request: Any) -> Any:
            return text("a b c")

        tagger = Tagger()
        agent = Agent(id="c", model=FunctionModel(fn), input_processors=[tagger],
                      output_processors=[tagger])

        async def one(i: int) -> str:
            return await agent.stream(f"user-{i}").text

        outs = await asyncio.gather(*[one(i) for i in range(1000)])
        assert outs == [f"user-{i}" * 3 for i in range(1000)]


class TestLanes:
    def test_processor_with_no_hook_of_its_lane_is_rejected(self) -> None:
        with pytest.raises(ProcessorDefinitionError, match="input_processors"):
            Agent(id="x", model=ScriptedModel([]),
                  output_processors=[P("in-only", process_input=lambda: None)])
        with pytest.raises(ProcessorDefinitionError, match="process_api_error"):
            Agent(id="x", model=ScriptedModel([]),
                  error_processors=[P("s", process_output_stream=lambda part: part)])

    async def test_hooks_of_the_other_lane_warn(self, caplog: pytest.LogCaptureFixture) -> None:
        import logging

        hybrid = P("hybrid", process_input=lambda: None,
                   process_output_stream=lambda part: part)
        with caplog.at_level(logging.WARNING, logger="streamkit.agent"):
            Agent(id="x", model=ScriptedModel([]), input_processors=[hybrid])
        assert "process_output_stream" in caplog.text and "output_processors" in caplog.text


class TestErrors:
    async def test_api_error_without_error_processors(self) -> None:
        agent = Agent(id="e", model=ScriptedModel([api_error(400, "bad request", "{}")]))
        with pytest.raises(APICallError) as info:
            await agent.generate("x")
        assert info.value.status_code == 400
        chunks, err = await run_stream(Agent(id="e", model=ScriptedModel(
            [api_error(500, "down")])))
        assert types(chunks)[-1] == "error" and isinstance(err, APICallError)
        assert chunks[-1].payload.error["statusCode"] == 500


class TestHookWriters:
    async def test_routed_writers_of_step_hooks(self, mode: str) -> None:
        def step(writer: Any, step_number: int) -> None:
            writer.custom({"type": "data-step", "data": step_number})

        def result(writer: Any) -> None:
            writer.custom({"type": "data-summary", "data": "done"})

        seen: list[str] = []
        agent = Agent(id="w", model=ScriptedModel([text("hi")]),
                      input_processors=[P("i", process_input_step=as_mode(step, mode))],
                      output_processors=[
                          P("o", process_output_result=as_mode(result, mode)),
                          P("d", process_output_stream=lambda part: seen.append(part.type) or part,
                            process_data_parts=True)])
        chunks, res = await run_stream(agent)
        t = types(chunks)
        assert t.index("data-step") < t.index("text-delta")
        assert t.index("data-summary") < t.index("finish")
        assert "data-step" in seen  # routed through data-part processors
        assert "data-summary" not in seen  # process_output_result's writer bypasses them
        parts = [p.type for p in res.messages[0].content.parts]
        assert "data-step" in parts and "data-summary" in parts


class TestFailures:
    async def test_processor_error_raises_from_generate_and_ends_stream(self, mode: str
                                                                        ) -> None:
        def broken(messages: Any) -> None:
            raise ValueError("bug in my processor")

        agent = Agent(id="f", model=ScriptedModel([text("x")] * 2),
                      input_processors=[P("broken", process_input=as_mode(broken, mode))])
        from streamkit import ProcessorError

        with pytest.raises(ProcessorError, match="'broken' raised in process_input"):
            await agent.generate("q")
        chunks, err = await run_stream(agent)
        assert types(chunks) == ["error"] and isinstance(err, ProcessorError)

    async def test_no_generator_left_open_after_abort(self, asyncgens: Any) -> None:
        def stop(part: Any, abort: Any) -> Any:
            if part.type == "text-delta":
                abort("no")
            return part

        agent = Agent(id="a", model=ScriptedModel([text("a b c")]),
                      output_processors=[P("g", process_output_stream=stop)])
        chunks, _ = await run_stream(agent)
        assert types(chunks)[-1] == "tripwire" and asyncgens.open() == []

    async def test_no_generator_left_open_after_cancellation(self, asyncgens: Any) -> None:
        gate = asyncio.Event()

        @tool
        async def wait_forever() -> str:
            """Never returns."""
            gate.set()
            await asyncio.sleep(3600)
            return "x"

        agent = Agent(id="a", model=ScriptedModel([tool_call("wait_forever", {})]),
                      tools=[wait_forever])
        stream = agent.stream("x")

        async def consume() -> None:
            async for _ in stream:
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(gate.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await stream.aclose()
        assert asyncgens.open() == []


class TestModels:
    async def test_reasoning_signature_goes_back_to_the_model(self) -> None:
        from streamkit.chunks import (
            Finish,
            FinishPayload,
            ReasoningDelta,
            ReasoningEnd,
            ReasoningStart,
            StepOutputPayload,
        )
        from streamkit.chunks import StepResultPayload as SR
        from streamkit.chunks import UsagePayload as U

        class Thinking:
            provider, model_id = "test", "thinking"

            def __init__(self) -> None:
                self.prompts: list[Any] = []

            async def _step(self, request: Any) -> Any:
                run = request.run_id
                if not self.prompts[1:]:
                    yield ReasoningStart(id="r1", run_id=run, from_="AGENT")
                    yield ReasoningDelta(id="r1", text="hmm", run_id=run, from_="AGENT")
                    yield ReasoningEnd(id="r1", signature="sig-123", run_id=run, from_="AGENT")
                    async for c in ScriptedModel([tool_call("lookup", {"customer_id": "1"})]
                                                 ).stream(request):
                        yield c
                else:
                    yield Finish(payload=FinishPayload(step_result=SR(reason="stop"),
                                                       output=StepOutputPayload(usage=U())),
                                 run_id=run, from_="AGENT")

            def stream(self, request: Any) -> Any:
                self.prompts.append(request.prompt)
                return self._step(request)

        model = Thinking()
        await Agent(id="a", model=model, tools=[lookup]).generate("x")
        assistant = model.prompts[1][-2]
        assert assistant["role"] == "assistant"
        assert {"type": "reasoning", "text": "hmm", "signature": "sig-123"} in assistant["content"]

    def test_router_id_is_resolved_once_per_agent(self, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        agent = Agent(id="r", model="openai/gpt-4o-mini")  # no key needed until first use
        assert agent.model.model_id == "gpt-4o-mini"
        assert agent._config({}).model is agent.model is agent._config({}).model

    async def test_bad_model(self) -> None:
        with pytest.raises(StreamkitError, match="router id"):
            Agent(id="r", model=42)


def test_processor_index_is_the_position_in_its_list() -> None:
    a, b = Processor("a"), Processor("b")
    a.process_input = lambda: None  # type: ignore[attr-defined]
    b.process_input = lambda: None  # type: ignore[attr-defined]
    Agent(id="i", model=ScriptedModel([]), input_processors=[a, b])
    assert (a.processor_index, b.processor_index) == (0, 1)
    assert (a.name, a.description, a.process_data_parts) == ("a", None, False)
    assert a.display_name == "a"


async def test_empty_active_tools_means_no_tools() -> None:
    model = ScriptedModel([text("no tools")])
    await Agent(id="t", model=model, tools=[lookup]).generate("x", active_tools=[])
    assert model.requests[0].tools == []


async def test_llm_response_gets_the_model_finish_and_object_from_a_processor() -> None:
    from streamkit.chunks import ObjectResult

    seen: list[str] = []

    def emit_object(part: Any) -> Any:
        if part.type == "text-end":
            return [part, ObjectResult(object={"ok": True}, run_id=part.run_id, from_="AGENT")]
        return part

    agent = Agent(id="t", model=ScriptedModel([text("hi")]),
                  input_processors=[P("r", process_llm_response=lambda chunks: seen.extend(
                      c.type for c in chunks))],
                  output_processors=[P("o", process_output_stream=emit_object, multi_emit=True)])
    result = await agent.generate("x")
    assert seen[-1] == "finish" and result.object == {"ok": True}


class _Interleaving:
    """Streams the words of the prompt one delta each, yielding to the event loop between
    chunks, so concurrent runs interleave chunk by chunk."""

    provider = "test"
    model_id = "interleaving"

    async def stream(self, request: Any) -> Any:
        from streamkit.chunks import (
            Finish,
            FinishPayload,
            StepOutputPayload,
            StepResultPayload,
            TextEnd,
            TextStart,
            UsagePayload,
        )

        run_id = request.run_id
        yield TextStart(id="t", run_id=run_id, from_="AGENT")
        for word in request.prompt[-1]["content"].split():
            await asyncio.sleep(0)
            yield TextDelta(id="t", text=word + " ", run_id=run_id, from_="AGENT")
        yield TextEnd(id="t", run_id=run_id, from_="AGENT")
        yield Finish(payload=FinishPayload(step_result=StepResultPayload(reason="stop"),
                                           output=StepOutputPayload(usage=UsagePayload())),
                     run_id=run_id, from_="AGENT")


async def test_runs_without_stream_hooks_share_one_empty_chain_and_interleave_apart() -> None:
    agent = Agent(id="a", model=_Interleaving(),
                  input_processors=[P("guard", process_input=lambda messages: messages)])
    prompts = [" ".join(f"r{r}w{i}" for i in range(20)) for r in range(12)]
    streams = [agent.stream(p) for p in prompts]
    assert len({id(s._run.chain._main) for s in streams}) == 1  # one chain for all of them

    async def read(stream: Any) -> tuple[str, set[str]]:
        deltas = [c async for c in stream if isinstance(c, TextDelta)]
        return "".join(c.payload.text for c in deltas), {c.run_id for c in deltas}

    results = await asyncio.gather(*(read(s) for s in streams))
    for prompt, stream, (streamed, run_ids) in zip(prompts, streams, results):
        assert streamed == prompt + " "
        assert run_ids == {stream.run_id}
        assert (await stream.result()).text == prompt + " "
