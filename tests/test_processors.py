"""Processor registration, hook calling conventions, the fused stream chain and the hook runners."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streamkit import Processor, ProcessorDefinitionError, ProcessorError, TripWire
from streamkit.chunks import DataChunk, TextDelta, TextStart
from streamkit.messages import Message, MessageList
from streamkit.processors import StepOverrides
from streamkit.processors._chain import StreamChain
from streamkit.processors._runner import (
    run_api_error,
    run_input_step,
    run_llm_request,
    run_message_hook,
)
from streamkit.processors._runtime import RequestRuntime
from streamkit.processors._spec import register

from .conftest import P, hook


def td(text: str, id: str = "t1") -> TextDelta:
    return TextDelta(id=id, text=text, run_id="r1", from_="AGENT")


async def push_all(chain: StreamChain, parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        r = chain.push(part)
        if chain.is_async:
            r = await r
        if r is None:
            continue
        out.extend(r if isinstance(r, list) else [r])
    out.extend(await chain.flush())
    return out


def chain_of(*procs: Any, runtime: RequestRuntime | None = None, **kw: Any) -> StreamChain:
    return StreamChain([register(p) for p in procs], runtime or RequestRuntime(), **kw)


# ------------------------------------------------------------------------- registration


class TestRegistration:
    def test_unknown_process_method_names_closest_hook(self) -> None:
        class Typo(Processor):
            id = "typo"

            def process_output_streem(self, part):  # noqa: ANN001
                return part

        with pytest.raises(ProcessorDefinitionError, match="process_output_stream"):
            register(Typo())

    def test_unknown_parameter_names_closest_valid_name(self) -> None:
        class Bad(Processor):
            id = "bad"

            def process_output_stream(self, chunk):  # noqa: ANN001
                return chunk

        with pytest.raises(ProcessorDefinitionError, match=r"'chunk'.*did you mean 'part'"):
            register(Bad())

    def test_parameter_of_another_hook_is_explained(self) -> None:
        bad = P("x", process_input=lambda part: None)
        with pytest.raises(ProcessorDefinitionError, match="process_output_stream"):
            register(bad)

    def test_positional_only_and_star_args_are_rejected(self) -> None:
        def pos_only(part, /):  # noqa: ANN001, ANN202
            return part

        def star(*args):  # noqa: ANN002, ANN202
            return None

        with pytest.raises(ProcessorDefinitionError, match="positional-only"):
            register(P("a", process_output_stream=pos_only))
        with pytest.raises(ProcessorDefinitionError, match=r"\*args"):
            register(P("b", process_output_stream=star))

    def test_no_id_and_no_hook(self) -> None:
        class NoId(Processor):
            def process_input(self):  # noqa: ANN202
                return None

        with pytest.raises(ProcessorDefinitionError, match="no string 'id'"):
            register(NoId())
        with pytest.raises(ProcessorDefinitionError, match="implements no hook"):
            register(P("empty"))

    def test_base_class_defines_no_hook(self) -> None:
        with pytest.raises(ProcessorDefinitionError, match="implements no hook"):
            register(Processor("bare"))

    def test_sync_or_async_decided_at_registration(self, mode: str) -> None:
        spec = register(P("p", process_output_stream=hook(mode, lambda part: part)))
        assert spec.hooks["process_output_stream"].is_async is (mode == "async")

    def test_kwargs_hook_receives_everything(self) -> None:
        seen: dict[str, Any] = {}

        def everything(**kwargs: Any) -> Any:
            seen.update(kwargs)
            return kwargs["part"]

        chain = chain_of(P("k", process_output_stream=everything))
        chain.push(td("x"))
        assert {"part", "state", "abort", "stream_parts", "writer", "message_list",
                "request_context", "retry_count"} <= set(seen)

    def test_processor_data_flags(self) -> None:
        spec = register(P("d", process_output_stream=lambda part: part, process_data_parts=True))
        assert spec.process_data_parts is True
        assert register(Processor.__new__(type("X", (Processor,), {
            "id": "x", "process_input": lambda self: None}))).process_data_parts is False


# ------------------------------------------------------------------------- stream chain


class TestStreamChain:
    async def test_transform_drop_and_order(self, mode: str) -> None:
        calls: list[str] = []

        def upper(part: Any) -> Any:
            calls.append("upper")
            return TextDelta(id=part.payload.id, text=part.payload.text.upper())

        def drop_b(part: Any) -> Any:
            calls.append("drop")
            return None if part.payload.text == "B" else part

        chain = chain_of(P("u", process_output_stream=hook(mode, upper)),
                         P("d", process_output_stream=hook(mode, drop_b)))
        out = await push_all(chain, [td("a"), td("b"), td("c")])
        assert [c.payload.text for c in out] == ["A", "C"]
        assert calls == ["upper", "drop"] * 3
        assert chain.is_async is (mode == "async")

    async def test_dropped_chunk_skips_later_processors(self, mode: str) -> None:
        later: list[Any] = []
        chain = chain_of(P("d", process_output_stream=hook(mode, lambda part: None)),
                         P("l", process_output_stream=hook(mode, lambda part: later.append(part))))
        assert await push_all(chain, [td("a")]) == []
        assert later == []

    async def test_hook_receives_only_named_parameters(self, mode: str) -> None:
        got: list[tuple[Any, ...]] = []

        def only_part(part: Any) -> Any:
            got.append((part,))
            return part

        chain = chain_of(P("p", process_output_stream=hook(mode, only_part)))
        await push_all(chain, [td("a")])
        assert len(got) == 1 and got[0][0].payload.text == "a"

    async def test_state_shared_across_chunks(self, mode: str) -> None:
        def count(part: Any, state: dict[str, Any]) -> Any:
            state["n"] = state.get("n", 0) + 1
            return part

        runtime = RequestRuntime()
        chain = chain_of(P("c", process_output_stream=hook(mode, count)), runtime=runtime)
        await push_all(chain, [td("a"), td("b"), td("c")])
        assert runtime.state("c") == {"n": 3}

    async def test_data_chunks_reach_only_opted_in_processors(self, mode: str) -> None:
        seen_plain: list[str] = []
        seen_data: list[str] = []

        def plain(part: Any) -> Any:
            seen_plain.append(part.type)
            return part

        def data(part: Any) -> Any:
            seen_data.append(part.type)
            if part.type == "data-progress":
                return DataChunk(type="data-progress", data={"pct": 100}, transient=True)
            return part

        chain = chain_of(P("plain", process_output_stream=hook(mode, plain)),
                         P("data", process_output_stream=hook(mode, data),
                           process_data_parts=True))
        out = await push_all(chain, [td("a"), DataChunk(type="data-progress", data={"pct": 5})])
        assert seen_plain == ["text-delta"]
        assert seen_data == ["text-delta", "data-progress"]
        assert out[1].data == {"pct": 100} and out[1].transient is True

    async def test_data_chunks_pass_untouched_when_nobody_opted_in(self, mode: str) -> None:
        chain = chain_of(P("plain", process_output_stream=hook(mode, lambda part: None)))
        chunk = DataChunk(type="data-x", data=1)
        assert await push_all(chain, [chunk]) == [chunk]

    async def test_stream_parts_accumulate_per_processor(self, mode: str) -> None:
        lengths: list[int] = []

        def drop_first(part: Any) -> Any:
            return None if part.payload.text == "a" else part

        def look(part: Any, stream_parts: list[Any]) -> Any:
            lengths.append(len(stream_parts))
            assert stream_parts[-1] is part
            return part

        chain = chain_of(P("d", process_output_stream=hook(mode, drop_first)),
                         P("l", process_output_stream=hook(mode, look)))
        await push_all(chain, [td("a"), td("b"), td("c")])
        assert lengths == [1, 2]  # only the parts that reached this processor

    async def test_abort_in_stream_fills_processor_id_and_default_reason(self, mode: str
                                                                         ) -> None:
        def stop(part: Any, abort: Any) -> Any:
            if part.payload.text == "b":
                abort()
            return part

        chain = chain_of(P("guard", process_output_stream=hook(mode, stop)))
        with pytest.raises(TripWire) as info:
            await push_all(chain, [td("a"), td("b")])
        assert info.value.processor_id == "guard"
        assert info.value.reason == "Tripwire triggered by guard"

    async def test_raising_tripwire_directly(self, mode: str) -> None:
        def stop(part: Any) -> Any:
            raise TripWire("nope", metadata={"k": 1})

        chain = chain_of(P("g2", process_output_stream=hook(mode, stop)))
        with pytest.raises(TripWire) as info:
            await push_all(chain, [td("a")])
        assert (info.value.processor_id, info.value.reason, info.value.metadata) == \
            ("g2", "nope", {"k": 1})

    async def test_other_exception_fails_closed(self, mode: str) -> None:
        def boom(part: Any) -> Any:
            raise ValueError("bad regex")

        chain = chain_of(P("boom", process_output_stream=hook(mode, boom)))
        with pytest.raises(ProcessorError, match="'boom' raised in process_output_stream"):
            await push_all(chain, [td("a")])

    async def test_processors_without_stream_hook_are_not_in_the_chain(self) -> None:
        chain = chain_of(P("in", process_input=lambda: None))
        assert chain.empty and chain.push(td("a")).payload.text == "a"

    async def test_multi_emit_fans_out_through_the_rest(self, mode: str) -> None:
        def twice(part: Any) -> Any:
            return [part, td(part.payload.text * 2)]

        def upper(part: Any) -> Any:
            return td(part.payload.text.upper())

        chain = chain_of(P("twice", process_output_stream=hook(mode, twice), multi_emit=True),
                         P("up", process_output_stream=hook(mode, upper)))
        out = await push_all(chain, [td("a")])
        assert [c.payload.text for c in out] == ["A", "AA"]

    async def test_flush_runs_through_later_processors(self, mode: str) -> None:
        def hold(part: Any, state: dict[str, Any]) -> Any:
            state.setdefault("held", []).append(part)
            return None

        def flush(state: dict[str, Any]) -> Any:
            return state["held"]

        chain = chain_of(P("hold", process_output_stream=hook(mode, hold),
                           flush_output_stream=hook(mode, flush)),
                         P("up", process_output_stream=hook(mode, lambda part: td(
                             part.payload.text.upper()))))
        out = await push_all(chain, [td("a"), td("b")])
        assert [c.payload.text for c in out] == ["A", "B"]

    async def test_timed_chain_records_calls_and_drops(self) -> None:
        runtime = RequestRuntime(timed=True)
        chain = chain_of(P("d", process_output_stream=lambda part: None
                           if part.payload.text == "x" else part), runtime=runtime)
        await push_all(chain, [td("a"), td("x"), td("b")])
        chain.record(0)
        (rec,) = runtime.trace
        assert (rec.processor_id, rec.calls, rec.dropped, rec.outcome) == ("d", 3, 1, "dropped")
        assert rec.duration >= 0 and rec.first_call is not None

    async def test_writer_in_stream_hook(self, mode: str) -> None:
        written: list[Any] = []
        from streamkit.processors import Writer

        def note(part: Any, writer: Any) -> Any:
            writer.custom({"type": "data-note", "data": part.payload.text})
            return part

        chain = chain_of(P("w", process_output_stream=hook(mode, note)),
                         writer=Writer(written.append))
        await push_all(chain, [td("a")])
        assert written == [DataChunk(type="data-note", data="a")]


# ------------------------------------------------------------------------- message hooks


def ml_with(*texts: str) -> MessageList:
    ml = MessageList()
    ml.add_system("be nice")
    for t in texts:
        ml.add(t, "input")
    return ml


class TestMessageHooks:
    async def test_none_means_no_change(self, mode: str) -> None:
        ml = ml_with("hi")
        await run_message_hook(RequestRuntime(), [register(P("p", process_input=hook(
            mode, lambda messages: None)))], "process_input", ml, {}, default_source="input")
        assert [m.content.parts[0].text for m in ml.get.input.db()] == ["hi"]

    async def test_same_list_mutated_in_place(self, mode: str) -> None:
        def add(message_list: MessageList) -> Any:
            message_list.add("added", "input")
            return message_list

        ml = ml_with("hi")
        await run_message_hook(RequestRuntime(), [register(P("p", process_input=hook(mode, add)))],
                               "process_input", ml, {}, default_source="input")
        assert len(ml.get.input.db()) == 2

    async def test_list_is_reconciled_by_id(self, mode: str) -> None:
        def keep_last(messages: list[Message]) -> Any:
            return messages[-1:] + [Message.user("new one")]

        ml = ml_with("first", "second")
        await run_message_hook(RequestRuntime(), [register(P("p", process_input=hook(
            mode, keep_last)))], "process_input", ml, {}, default_source="input")
        from streamkit import get_text

        assert [get_text(m) for m in ml.get.input.db()] == ["second", "new one"]

    async def test_empty_list_deletes_every_given_message(self, mode: str) -> None:
        ml = ml_with("a", "b")
        await run_message_hook(RequestRuntime(), [register(P("p", process_input=hook(
            mode, lambda messages: [])))], "process_input", ml, {}, default_source="input")
        assert ml.get.input.db() == []

    async def test_dict_with_system_messages(self, mode: str) -> None:
        def rewrite(messages: list[Message], system_messages: list[Any]) -> Any:
            assert [getattr(m, "content", m) for m in system_messages]
            return {"messages": messages, "system_messages": ["be terse"]}

        ml = ml_with("a")
        await run_message_hook(RequestRuntime(), [register(P("p", process_input=hook(
            mode, rewrite)))], "process_input", ml, {}, default_source="input")
        assert ml.prompt()[0] == {"role": "system", "content": "be terse"}

    async def test_different_message_list_is_an_error(self, mode: str) -> None:
        ml = ml_with("a")
        with pytest.raises(ProcessorError, match="'p'"):
            await run_message_hook(RequestRuntime(), [register(P("p", process_input=hook(
                mode, lambda: MessageList())))], "process_input", ml, {}, default_source="input")

    async def test_wrong_return_type_is_an_error(self, mode: str) -> None:
        ml = ml_with("a")
        with pytest.raises(ProcessorError):
            await run_message_hook(RequestRuntime(), [register(P("p", process_input=hook(
                mode, lambda: 42)))], "process_input", ml, {}, default_source="input")

    async def test_chain_order_and_first_tripwire_stops(self, mode: str) -> None:
        order: list[str] = []

        def first(abort: Any) -> None:
            order.append("first")
            abort("stop here", metadata={"n": 1})

        def second() -> None:
            order.append("second")

        ml = ml_with("a")
        specs = [register(P("one", process_input=hook(mode, first))),
                 register(P("two", process_input=hook(mode, second)))]
        runtime = RequestRuntime()
        with pytest.raises(TripWire) as info:
            await run_message_hook(runtime, specs, "process_input", ml, {},
                                   default_source="input")
        assert order == ["first"]
        assert (info.value.processor_id, info.value.reason) == ("one", "stop here")
        assert [r.outcome for r in runtime.trace] == ["tripwire"]

    async def test_state_shared_between_hooks_of_one_processor(self, mode: str) -> None:
        def inp(state: dict[str, Any]) -> None:
            state["seen"] = ["input"]

        def step(state: dict[str, Any]) -> None:
            state["seen"].append("step")

        proc = P("s", process_input=hook(mode, inp), process_input_step=hook(mode, step))
        runtime = RequestRuntime()
        ml = ml_with("a")
        await run_message_hook(runtime, [register(proc)], "process_input", ml, {},
                               default_source="input")
        await run_input_step(runtime, [register(proc)], ml, {}, step=0)
        assert runtime.state("s") == {"seen": ["input", "step"]}
        assert RequestRuntime().state("s") == {}


class TestOnViolation:
    async def test_called_for_every_tripwire(self, mode: str) -> None:
        seen: list[Any] = []
        proc = P("v", process_input=hook(mode, lambda abort: abort("bad", metadata=7)),
                 on_violation=hook(mode, seen.append))
        with pytest.raises(TripWire):
            await run_message_hook(RequestRuntime(), [register(proc)], "process_input",
                                   ml_with("a"), {}, default_source="input")
        (v,) = seen
        assert (v.processor_id, v.message, v.detail) == ("v", "bad", 7)

    async def test_exceptions_inside_it_are_logged_not_raised(
            self, mode: str, caplog: pytest.LogCaptureFixture) -> None:
        def broken(violation: Any) -> None:
            raise RuntimeError("callback broke")

        proc = P("v", process_input=hook(mode, lambda abort: abort()),
                 on_violation=hook(mode, broken))
        with caplog.at_level(logging.ERROR, logger="streamkit.processors"):
            with pytest.raises(TripWire) as info:
                await run_message_hook(RequestRuntime(), [register(proc)], "process_input",
                                       ml_with("a"), {}, default_source="input")
        assert info.value.reason == "Tripwire triggered by v"
        assert "on_violation of processor 'v' raised" in caplog.text


class TestInputStep:
    async def test_overrides_chain_to_the_next_processor(self, mode: str) -> None:
        seen: list[Any] = []

        def first() -> Any:
            return {"tool_choice": "none", "model_settings": {"temperature": 0}}

        def second(tool_choice: Any, model_settings: Any) -> Any:
            seen.append((tool_choice, model_settings))
            return StepOverrides(active_tools=["a"])

        ov = await run_input_step(RequestRuntime(), [
            register(P("1", process_input_step=hook(mode, first))),
            register(P("2", process_input_step=hook(mode, second)))], ml_with("x"),
            {"tool_choice": "auto", "model_settings": {}}, step=0)
        assert seen == [("none", {"temperature": 0})]
        assert (ov.tool_choice, ov.active_tools) == ("none", ["a"])

    async def test_unknown_override_key_and_both_message_forms(self, mode: str) -> None:
        with pytest.raises(ProcessorError, match="unknown key"):
            await run_input_step(RequestRuntime(), [register(P("1", process_input_step=hook(
                mode, lambda: {"tool_choise": "none"})))], ml_with("x"), {}, step=0)
        ml = ml_with("x")
        with pytest.raises(ProcessorError, match="both 'messages' and 'message_list'"):
            await run_input_step(RequestRuntime(), [register(P("1", process_input_step=hook(
                mode, lambda messages, message_list: {"messages": messages,
                                                      "message_list": message_list})))],
                ml, {}, step=0)


class TestLLMRequestAndAPIError:
    async def test_prompt_replaced_for_next_processor_and_first_response_wins(
            self, mode: str) -> None:
        seen: list[Any] = []

        def shorten(prompt: list[Any]) -> Any:
            return {"prompt": prompt[-1:]}

        def cache(prompt: list[Any]) -> Any:
            seen.append(len(prompt))
            return {"response": [TextStart(id="t")]}

        def later() -> Any:
            return {"response": [td("ignored")]}

        prompt, replay = await run_llm_request(RequestRuntime(), [
            register(P("a", process_llm_request=hook(mode, shorten))),
            register(P("b", process_llm_request=hook(mode, cache))),
            register(P("c", process_llm_request=hook(mode, later)))],
            {"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]},
            step=0)
        assert seen == [1] and len(prompt) == 1
        assert replay is not None and replay[0].type == "text-start"

    async def test_bad_llm_request_return(self, mode: str) -> None:
        with pytest.raises(ProcessorError, match="process_llm_request must return"):
            await run_llm_request(RequestRuntime(), [register(P("a", process_llm_request=hook(
                mode, lambda: {"promt": []})))], {"prompt": []}, step=0)

    async def test_api_error_first_retry_wins_and_errors_are_swallowed(self, mode: str
                                                                       ) -> None:
        calls: list[str] = []

        def broken(error: Any) -> Any:
            calls.append("broken")
            raise RuntimeError("handler bug")

        def fixer(error: Any) -> Any:
            calls.append("fixer")
            return {"retry": True}

        def never() -> Any:
            calls.append("never")

        retried_by = await run_api_error(RequestRuntime(), [
            register(P("b", process_api_error=hook(mode, broken))),
            register(P("f", process_api_error=hook(mode, fixer))),
            register(P("n", process_api_error=hook(mode, never)))], ml_with("x"),
            {"error": ValueError("x")}, step=0)
        assert retried_by == "f" and calls == ["broken", "fixer"]
