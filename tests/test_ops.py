"""Operators: semantics with sync and async functions, composition, standalone apply, reactivex."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import reactivex

from streamkit import Pipeline, Processor, ProcessorDefinitionError, ProcessorError, ops
from streamkit.chunks import DataChunk, TextDelta, ToolCall
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.processors import is_async_callable

from .conftest import P, as_mode


def td(text: str, id: str = "t1") -> TextDelta:
    return TextDelta(id=id, text=text, run_id="r", from_="AGENT")


def texts(chunks: list[Any]) -> list[str]:
    return [c.payload.text if c.type == "text-delta" else c.type for c in chunks]


async def collect(source: Any, pipeline: Any, **kw: Any) -> list[Any]:
    return [c async for c in ops.apply(source, pipeline, **kw)]


def upper(part: Any) -> Any:
    return td(part.payload.text.upper(), part.payload.id)


def is_b(part: Any) -> bool:
    return part.type == "text-delta" and part.payload.text == "b"


ABC = [td("a"), td("b"), td("c")]


class TestOperators:
    async def test_map(self, mode: str) -> None:
        assert texts(await collect(ABC, ops.map(as_mode(upper, mode)))) == ["A", "B", "C"]

    async def test_map_restricted_to_types(self, mode: str) -> None:
        call = ToolCall(tool_call_id="c1", tool_name="t", args={})
        out = await collect([td("a"), call], ops.map(as_mode(upper, mode), types="text-delta"))
        assert texts(out) == ["A", "tool-call"]

    async def test_filter_and_drop(self, mode: str) -> None:
        keep = await collect(ABC, ops.filter(as_mode(lambda c: not is_b(c), mode)))
        dropped = await collect(ABC, ops.drop(as_mode(is_b, mode)))
        assert texts(keep) == texts(dropped) == ["a", "c"]

    async def test_abort_ends_with_tripwire_chunk(self, mode: str) -> None:
        op = ops.abort(as_mode(is_b, mode), "no b allowed", metadata={"letter": "b"}, id="no-b")
        applied = ops.apply(ABC, op, run_id="run-1")
        out = [c async for c in applied]
        assert texts(out) == ["a", "tripwire"]
        trip = out[-1]
        assert (trip.payload.reason, trip.payload.processor_id, trip.payload.metadata,
                trip.payload.retry, trip.run_id, trip.from_) == \
            ("no b allowed", "no-b", {"letter": "b"}, False, "run-1", "AGENT")
        assert applied.tripwire is not None and applied.tripwire.processor_id == "no-b"

    async def test_abort_default_reason(self, mode: str) -> None:
        out = await collect(ABC, ops.abort(as_mode(is_b, mode), id="guard"))
        assert out[-1].payload.reason == "Tripwire triggered by guard"

    async def test_tap_sees_everything_and_changes_nothing(self, mode: str) -> None:
        seen: list[str] = []
        out = await collect(ABC, ops.tap(as_mode(lambda c: seen.append(c.payload.text), mode)))
        assert seen == ["a", "b", "c"] and texts(out) == ["a", "b", "c"]

    async def test_scan_keeps_accumulator_in_state(self, mode: str) -> None:
        op = ops.scan(as_mode(lambda acc, c: acc + len(c.payload.text), mode), 0, id="len")
        applied = ops.apply([td("ab"), td("cde")], op)
        assert texts([c async for c in applied]) == ["ab", "cde"]
        assert applied.state("len") == {"acc": 5}

    async def test_take_skip_take_while_distinct(self) -> None:
        assert texts(await collect(ABC, ops.take(2))) == ["a", "b"]
        assert texts(await collect(ABC, ops.skip(2))) == ["c"]
        assert texts(await collect(ABC, ops.take_while(lambda c: c.payload.text < "b"))) == ["a"]
        assert texts(await collect([td("a"), td("a"), td("b"), td("a")],
                                   ops.distinct_until_changed(lambda c: c.payload.text))) == \
            ["a", "b", "a"]

    async def test_start_with_and_flat_map(self, mode: str) -> None:
        assert texts(await collect(ABC[:1], ops.start_with(td("x")))) == ["x", "a"]
        out = await collect(ABC[:2], ops.flat_map(as_mode(lambda c: [c, c], mode)))
        assert texts(out) == ["a", "a", "b", "b"]
        assert await collect(ABC[:1], ops.flat_map(as_mode(lambda c: [], mode))) == []

    async def test_map_text(self, mode: str) -> None:
        out = await collect([td("hi"), DataChunk(type="data-x", data=1)],
                            ops.map_text(as_mode(str.upper, mode)))
        assert texts(out) == ["HI", "data-x"]

    async def test_data_chunks_only_reach_operators_that_ask(self, mode: str) -> None:
        seen: list[str] = []
        plain = ops.tap(as_mode(lambda c: seen.append("plain:" + c.type), mode))
        data = ops.tap(as_mode(lambda c: seen.append("data:" + c.type), mode), data=True)
        await collect([DataChunk(type="data-x", data=1)], plain | data)
        assert seen == ["data:data-x"]

    def test_operator_needs_a_function(self) -> None:
        with pytest.raises(InvalidType, match="expects a function"):
            ops.map(42)  # type: ignore[arg-type]


class TestBatch:
    async def test_by_count_with_remainder_flushed(self) -> None:
        out = await collect([td(ch) for ch in "hello"], ops.batch(2))
        assert texts(out) == ["he", "ll", "o"]

    async def test_by_sentence(self) -> None:
        parts = ["Hi", " there.", " How", " are", " you?", " Bye"]
        out = await collect([td(p) for p in parts], ops.batch(sentence=True))
        assert texts(out) == ["Hi there.", " How are you?", " Bye"]

    async def test_by_time_with_injected_clock(self) -> None:
        now = [0.0]

        def clock() -> float:
            return now[0]

        async def source() -> AsyncIterator[Any]:
            for i, ch in enumerate("abcd"):
                now[0] = i * 0.6
                yield td(ch)

        out = await collect(source(), ops.batch(interval=1.0, clock=clock))
        assert texts(out) == ["ab", "cd"]

    async def test_non_text_chunk_flushes_first_and_keeps_order(self) -> None:
        call = ToolCall(tool_call_id="c", tool_name="t", args={})
        out = await collect([td("a"), td("b"), call, td("c")], ops.batch(10))
        assert texts(out) == ["ab", "tool-call", "c"]

    async def test_new_text_id_starts_a_new_batch(self) -> None:
        out = await collect([td("a", "1"), td("b", "2")], ops.batch(10))
        assert [(c.payload.id, c.payload.text) for c in out] == [("1", "a"), ("2", "b")]

    @pytest.mark.parametrize("kwargs", [
        pytest.param({}, id="nothing"), pytest.param({"count": 0}, id="zero-count"),
        pytest.param({"interval": -1}, id="negative-interval")])
    def test_bad_arguments(self, kwargs: dict[str, Any]) -> None:
        with pytest.raises(InvalidArgument):
            ops.batch(**kwargs)


class TestComposition:
    async def test_pipe_composes_operators_and_processors(self, mode: str) -> None:
        class Exclaim(Processor):
            id = "exclaim"

            def process_output_stream(self, part: Any) -> Any:
                return td(part.payload.text + "!")

        pipe = ops.drop(as_mode(is_b, mode)) | Exclaim() | ops.map(as_mode(upper, mode))
        assert isinstance(pipe, Pipeline) and len(pipe) == 3
        assert texts(await collect(ABC, pipe)) == ["A!", "C!"]

    async def test_pipeline_flattens_and_keeps_member_state(self) -> None:
        a = ops.scan(lambda acc, c: acc + 1, 0, id="a")
        b = ops.scan(lambda acc, c: acc + 10, 0, id="b")
        applied = ops.apply(ABC, (a | b) | ops.take(1))
        await asyncio.gather(*[asyncio.sleep(0)])
        assert texts([c async for c in applied]) == ["a"]
        assert applied.state("a") == {"acc": 3} and applied.state("b") == {"acc": 30}

    async def test_a_pipe_is_a_processor(self, mode: str) -> None:
        class Exclaim(Processor):
            id = "exclaim"

            def process_output_stream(self, part: Any) -> Any:
                return td(part.payload.text + "!")

        pipe = ops.drop(as_mode(is_b, mode), id="no-b") | Exclaim() | \
            ops.map(as_mode(upper, mode), id="up")
        assert isinstance(pipe, Processor)
        assert pipe.id == pipe.name == "no-b | exclaim | up"
        assert Pipeline(*pipe, id="shout").id == "shout"
        hook = pipe.process_output_stream
        assert hook is not None and is_async_callable(hook) is (mode == "async")
        state: dict[Any, Any] = {}
        out = []
        for chunk in ABC:
            got = hook(part=chunk, state=state)
            out.append(await got if mode == "async" else got)
        assert [c.payload.text if c is not None else None for c in out] == ["A!", None, "C!"]
        assert pipe.flush_output_stream is None  # no member holds chunks back

    def test_a_pipe_without_stream_members_has_no_stream_hook(self) -> None:
        inputs = Pipeline(P("a", process_input=lambda: None), P("b", process_input=lambda: None))
        assert inputs.process_output_stream is None and inputs.flush_output_stream is None

    def test_a_bad_member_is_reported_when_the_pipe_is_first_used(self) -> None:
        pipe = ops.map(upper) | P("bad", process_output_stream=lambda chunk, extra: chunk)
        with pytest.raises(ProcessorDefinitionError, match="did you mean 'part'"):
            getattr(pipe, "process_output_stream")  # noqa: B009 - the access is the test

    async def test_a_pipe_as_one_processor_keeps_member_state_in_its_own(self, mode: str
                                                                         ) -> None:
        """Code that knows only the processor interface (here a duck-typed wrapper of the
        composite's hook) gets one processor: one trace record, the members' states under
        their ids in the pipeline's state, and a tripwire that names the member."""
        count = ops.scan(as_mode(lambda acc, c: acc + 1, mode), 0, id="count")
        stop = ops.abort(as_mode(lambda c: c.payload.text == "c", mode), "no c", id="no-c")
        pipe = count | stop
        outer = P("outer", process_output_stream=pipe.process_output_stream)
        applied = ops.apply(ABC, outer, timed=True)
        assert texts([c async for c in applied]) == ["a", "b", "tripwire"]
        assert applied.tripwire is not None and applied.tripwire.processor_id == "no-c"
        assert applied.state("outer")["count"] == {"acc": 3}
        assert [r.processor_id for r in applied.trace] == ["outer"]

    async def test_a_pipe_flushes_what_its_members_hold(self, mode: str) -> None:
        pipe = ops.batch(10, id="batch") | ops.map(as_mode(upper, mode), id="up")
        assert pipe.multi_emit is True
        state: dict[Any, Any] = {}
        hook, flush = pipe.process_output_stream, pipe.flush_output_stream
        assert hook is not None and flush is not None
        for chunk in (td("a"), td("b")):
            got = hook(part=chunk, state=state)
            assert (await got if mode == "async" else got) in (None, [])
        assert texts(await flush(state=state)) == ["AB"]
        outer = P("outer", process_output_stream=hook, flush_output_stream=flush,
                  multi_emit=True)
        assert texts(await collect(ABC, outer)) == ["ABC"]

    async def test_a_pipe_passes_data_chunks_only_to_members_that_ask(self, mode: str) -> None:
        seen: list[str] = []

        def note(name: str) -> Any:
            return as_mode(lambda c: seen.append(f"{name}:{c.type}") or c, mode)

        pipe = ops.map(note("data"), id="d", data=True) | ops.map(note("text"), id="t")
        assert pipe.process_data_parts is True
        outer = P("outer", process_output_stream=pipe.process_output_stream,
                  process_data_parts=True)
        out = await collect([DataChunk(type="data-x", data=1), td("a")], outer)
        assert [c.type for c in out] == ["data-x", "text-delta"]
        assert seen == ["data:data-x", "data:text-delta", "text:text-delta"]

    async def test_a_pipe_in_an_agent_list_is_flattened(self, mode: str) -> None:
        from streamkit import Agent
        from streamkit.testing import ScriptedModel, text

        count = ops.scan(as_mode(lambda acc, c: acc + 1, mode), 0, id="count",
                         types="text-delta")
        shout = ops.map(as_mode(upper, mode), id="up", types="text-delta")
        agent = Agent(id="a", model=ScriptedModel([text("hi there")]),
                      output_processors=[count | shout])
        result = await agent.generate("x")
        assert result.text == "HI THERE"
        assert result.states["count"] == {"acc": 2}
        stream_records = {r.processor_id for r in result.trace
                          if r.hook == "process_output_stream"}
        assert stream_records == {"count", "up"}

    async def test_processor_error_propagates(self) -> None:
        def boom(part: Any) -> Any:
            raise KeyError("x")

        with pytest.raises(ProcessorError, match="raised in process_output_stream"):
            await collect(ABC, ops.map(boom, id="boom"))


class TestSources:
    async def test_async_iterable_list_and_observable(self) -> None:
        async def agen() -> AsyncIterator[Any]:
            for c in ABC:
                yield c

        from_list = await collect(ABC, ops.map(upper))
        from_agen = await collect(agen(), ops.map(upper))
        from_obs = await collect(reactivex.from_iterable(ABC), ops.map(upper))
        assert texts(from_list) == texts(from_agen) == texts(from_obs) == ["A", "B", "C"]

    async def test_bad_source(self) -> None:
        from streamkit import StreamkitError

        with pytest.raises(StreamkitError, match="async iterable"):
            await collect(42, ops.map(upper))

    async def test_to_observable_and_back(self) -> None:
        async def agen() -> AsyncIterator[Any]:
            for c in ABC:
                await asyncio.sleep(0)
                yield c

        got: list[str] = []
        done = asyncio.Event()
        obs = ops.to_observable(ops.apply(agen(), ops.map(upper)))
        obs.subscribe(on_next=lambda c: got.append(c.payload.text), on_completed=done.set)
        await asyncio.wait_for(done.wait(), 5)
        assert got == ["A", "B", "C"]

    async def test_from_observable_across_threads(self) -> None:
        subject: reactivex.subject.Subject[Any] = reactivex.subject.Subject()

        def produce() -> None:
            for c in ABC:
                subject.on_next(c)
            subject.on_completed()

        async def consume() -> list[Any]:
            return [c async for c in ops.from_observable(subject)]

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.01)
        thread = threading.Thread(target=produce)
        thread.start()
        out = await asyncio.wait_for(task, 5)
        thread.join()
        assert texts(out) == ["a", "b", "c"]

    async def test_observable_error_is_raised(self) -> None:
        with pytest.raises(ZeroDivisionError):
            await collect(reactivex.throw(ZeroDivisionError("x")), ops.map(upper))

    async def test_merge_interleaves_sources(self) -> None:
        out = [c async for c in ops.merge([td("a")], reactivex.from_iterable([td("b")]))]
        assert sorted(texts(out)) == ["a", "b"]


class TestCleanup:
    """No async generator is left open after an abort, an early stop, or a cancellation."""

    @staticmethod
    async def endless(closed: list[bool]) -> AsyncIterator[Any]:
        try:
            i = 0
            while True:
                await asyncio.sleep(0)
                yield td("b" if i == 2 else "a")
                i += 1
        finally:
            closed.append(True)

    async def test_after_abort(self, asyncgens: Any) -> None:
        closed: list[bool] = []
        out = await collect(self.endless(closed), ops.abort(is_b, id="stop"))
        assert texts(out) == ["a", "a", "tripwire"]
        assert closed == [True] and asyncgens.open() == []

    async def test_after_consumer_stops_early(self, asyncgens: Any) -> None:
        closed: list[bool] = []
        applied = ops.apply(self.endless(closed), ops.map(upper))
        async for _ in applied:
            break
        await applied.aclose()
        assert closed == [True] and asyncgens.open() == []

    async def test_after_cancellation(self, asyncgens: Any) -> None:
        closed: list[bool] = []
        applied = ops.apply(self.endless(closed), ops.map(upper))

        async def consume() -> None:
            async for _ in applied:
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await applied.aclose()
        assert closed == [True] and asyncgens.open() == []


def test_unknown_chunk_type_in_types_is_an_error() -> None:
    with pytest.raises(InvalidArgument, match="did you mean 'text-delta'"):
        ops.map(lambda c: c, types="text_delta")


async def test_types_match_data_chunks_by_name() -> None:
    seen: list[str] = []
    op = ops.tap(lambda c: seen.append(c.type), types=["data-a", "tool-call"], data=True)
    await collect([DataChunk(type="data-a", data=1), DataChunk(type="data-b", data=2),
                   td("x"), ToolCall(tool_call_id="c", tool_name="t", args={})], op)
    assert seen == ["data-a", "tool-call"]


def test_take_and_skip_need_a_count() -> None:
    with pytest.raises(InvalidArgument, match="count >= 0"):
        ops.take(-1)
    with pytest.raises(InvalidType, match="int count >= 0, got str '3'"):
        ops.skip("3")  # type: ignore[arg-type]
