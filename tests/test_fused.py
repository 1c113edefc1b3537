"""The fused stream chain against a plain reference interpreter, and its template's coverage.

``streamkit.processors._fused`` renders the per-chunk engine as Python source (its docstring says
why). Keeping generated code comes with conditions, each tested here:

* it behaves exactly as ``reference`` below — a plain loop over the hooks, written to be obviously
  right rather than fast — on random pipelines and chunk lists, through ``ops.apply`` (list and
  async sources, untimed and timed) and through an ``Agent`` (``TestAgainstReference``), and on a
  sweep of every hook shape (``TestShapeSweep``);
* every branch of its template runs: every ``Shape`` combination is rendered and compiled while
  coverage.py measures ``_fused.py``, and the test asserts no line or branch of a template
  function was missed (``TestTemplateCoverage``);
* tracebacks show its lines (``TestTracebacks``) and it can be printed for a pipeline
  (``TestFusedSource``).
"""

from __future__ import annotations

import ast
import asyncio
import doctest
import inspect
import itertools
import json
import linecache
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import Agent, MessageList, ProcessorError, TripWire, ops
from streamkit.chunks import (
    DataChunk,
    ReasoningDelta,
    StepFinish,
    TextDelta,
    TextEnd,
    TextStart,
    TripwireChunk,
    coerce_chunk,
)
from streamkit.processors import _fused
from streamkit.processors._fused import HookShape, Shape, factory_for, render
from streamkit.processors._spec import register
from streamkit.testing import ScriptedModel, reasoning, text

from .conftest import P, hook

RC = {"tag": "request"}


# --------------------------------------------------------------------------- the reference


#: In a reference source: ``flush_output_stream`` runs here. ``ops.apply`` flushes at the end of
#: its source; the agent at the end of the model's stream, before ``step-finish`` is pushed.
FLUSH = object()


@dataclass
class Outcome:
    """What a run of a pipeline produced.

    Attributes:
        out: the chunks that came out, a tripwire as ``("tripwire", reason, processor_id)``.
        error: ``(processor_id, hook)`` of the ``ProcessorError`` that ended the run, if any.
        states: each processor's ``state`` dict at the end.
        calls: per processor, ``(calls, dropped)`` of its stream hook outside the flush.
    """

    out: list[Any]
    error: tuple[str | None, str | None] | None = None
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: dict[str, tuple[int, int]] = field(default_factory=dict)


class _ListWriter:
    def __init__(self, into: list[Any]) -> None:
        self.into = into

    def custom(self, chunk: Any) -> None:
        self.into.append(coerce_chunk(chunk))


def _arguments(fn: Callable[..., Any], available: dict[str, Any]) -> dict[str, Any]:
    """What ``fn`` asks for by name; everything when it takes ``**kwargs``."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(available)
    return {name: available[name] for name in params}


async def reference(procs: list[Any], source: list[Any], *, request_context: Any = None,
                    message_list: Any = None) -> Outcome:
    """Run ``procs`` over ``source`` the plain way: one chunk at a time, one hook at a time.

    * A ``DataChunk`` reaches only processors with ``process_data_parts``; which processors a
      chunk goes to is decided as it enters (a hook turning text into data does not re-route it).
    * A hook returns ``None`` (the chunk is dropped), a chunk (it replaces the chunk), or — when
      its processor is ``multi_emit`` — a list whose items each go through the rest of the chain.
    * What hooks write through ``writer`` while a chunk is processed comes out before what the
      chunk became. A ``FLUSH`` calls each ``flush_output_stream`` in order and sends what it
      returns through the processors after it; what was written meanwhile comes out first.
    * A ``TripWire`` ends the stream with a tripwire (what the chunk being processed had written is
      dropped with it); any other exception ends it with ``ProcessorError``.
    """
    out: list[Any] = []
    pending: list[Any] = []
    writer = _ListWriter(pending)
    states: dict[str, dict[str, Any]] = {p.id: {} for p in procs}
    reached: dict[str, list[Any]] = {p.id: [] for p in procs}
    calls = {p.id: [0, 0] for p in procs}
    flushing = False

    def abort_for(pid: str) -> Callable[..., Any]:
        def abort(reason: str | None = None, *, retry: bool = False, metadata: Any = None) -> Any:
            raise TripWire(reason, retry=retry, metadata=metadata, processor_id=pid)
        return abort

    aborts = {p.id: abort_for(p.id) for p in procs}

    async def call(proc: Any, hook: str, **extra: Any) -> Any:
        fn = getattr(proc, hook)
        available = {"state": states[proc.id], "abort": aborts[proc.id], "retry_count": 0,
                     "request_context": request_context, "message_list": message_list,
                     "writer": writer, "tracing_context": None, **extra}
        try:
            result = fn(**_arguments(fn, available))
            if inspect.isawaitable(result):
                result = await result
        except TripWire as tw:
            tw.processor_id = tw.processor_id or proc.id
            tw.reason = tw.reason or f"Tripwire triggered by {tw.processor_id}"
            raise
        except Exception as exc:
            raise ProcessorError(str(exc), processor_id=proc.id, hook=hook) from exc
        return result

    async def through(chain: list[Any], part: Any) -> list[Any]:
        for k, proc in enumerate(chain):
            reached[proc.id].append(part)
            calls[proc.id][0] += not flushing
            result = await call(proc, "process_output_stream", part=part,
                                stream_parts=reached[proc.id])
            calls[proc.id][1] += not flushing and result is None
            if result is None:
                return []
            if proc.multi_emit and isinstance(result, list):
                emitted: list[Any] = []
                for item in result:
                    emitted += await through(chain[k + 1:], item)
                return emitted
            part = result
        return [part]

    def entering(part: Any, chain: list[Any]) -> list[Any]:
        return [p for p in chain if p.process_data_parts or part.__class__ is not DataChunk]

    def deliver(emitted: list[Any]) -> None:
        out.extend(pending)
        pending.clear()
        out.extend(emitted)

    try:
        for item in source:
            if item is not FLUSH:
                deliver(await through(entering(item, procs), item))
                continue
            flushing = True
            for k, proc in enumerate(procs):
                if getattr(proc, "flush_output_stream", None) is None:
                    continue
                result = await call(proc, "flush_output_stream")
                flushed = result if isinstance(result, list) else [result] if result else []
                emitted = []
                for part in flushed:
                    emitted += await through(entering(part, procs[k + 1:]), part)
                deliver(emitted)
            flushing = False
    except TripWire as tw:
        out.append(("tripwire", tw.reason, tw.processor_id))
    except ProcessorError as err:
        return Outcome(out, (err.processor_id, err.hook), states, _calls(calls))
    return Outcome(out, None, states, _calls(calls))


def _calls(calls: dict[str, list[int]]) -> dict[str, tuple[int, int]]:
    return {pid: (n, dropped) for pid, (n, dropped) in calls.items() if n}


# --------------------------------------------------------------------------- random pipelines


STREAM_NAMES = ("stream_parts", "state", "abort", "retry_count", "request_context",
                "tracing_context", "message_list", "writer")
FLUSH_NAMES = ("state", "abort", "writer", "message_list", "request_context", "retry_count",
               "tracing_context")
WORDS = ("a", "bb", "ccc", "dd", "", "z", "q")


@dataclass(frozen=True)
class Signature:
    """A hook's parameters: ``names`` in order, the last ``keyword_only`` of them after ``*``,
    then ``**kwargs`` when ``has_kwargs``."""

    names: tuple[str, ...]
    keyword_only: int = 0
    has_kwargs: bool = False

    def build(self) -> inspect.Signature:
        cut = len(self.names) - self.keyword_only
        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for n in self.names[:cut]]
        params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in self.names[cut:]]
        if self.has_kwargs:
            params.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
        return inspect.Signature(params)


@dataclass(frozen=True)
class Plan:
    """One random processor.

    ``action`` on content chunks (text, reasoning, data): ``pass``, ``upper``, ``drop`` (odd
    length), ``fan`` (multi-emit: 0, 1 or 2 chunks by length), ``to_data``/``from_data`` (text ↔
    data), ``hold`` (even-length text until the flush), ``trip`` (on ``"z"``), ``raise`` (on
    ``"q"``). Other chunks pass. ``writes``: a ``data-w`` chunk per content chunk (and a
    ``data-wf`` at flush) when the hook has a ``writer``. ``tail``: what a flush returns besides
    held chunks (``None``, ``"one"`` chunk, a ``"list"`` of two), with ``tail_word``.
    """

    sig: Signature
    is_async: bool = False
    multi: bool = False
    data: bool = False
    action: str = "pass"
    writes: bool = False
    flush: Signature | None = None
    flush_async: bool = False
    tail: str | None = None
    tail_word: str = "tail"


def key_of(part: Any) -> str:
    if part.__class__ is DataChunk:
        return str(part.data)
    if part.__class__ in (TextDelta, ReasoningDelta):
        return str(part.payload.text)
    return str(part.type)


def _is_content(part: Any) -> bool:
    return part.__class__ in (TextDelta, ReasoningDelta, DataChunk)


def _retext(part: Any, new: str) -> Any:
    if part.__class__ is DataChunk:
        return msgspec.structs.replace(part, data=new)
    return ops.with_text(part, new)


def _fingerprint(got: dict[str, Any]) -> tuple[Any, ...]:
    """What a hook saw, comparable between runs."""
    seen = []
    for name, value in sorted(got.items()):
        if name == "part":
            value = (value.type, key_of(value))
        elif name == "stream_parts":
            value = (len(value), value[-1] is got.get("part", value[-1]))
        elif name == "state":
            value = value.get("n", 0)
        elif name in ("writer", "abort"):
            value = callable(getattr(value, "custom", value))
        elif name == "request_context":
            value = value.get("tag")
        elif name == "message_list":
            value = type(value).__name__
        seen.append((name, value))
    return tuple(seen)


def _hook(sig: Signature, is_async: bool, body: Callable[[dict[str, Any]], Any]) -> Any:
    """A function with exactly the signature ``sig`` (sync or async) that calls ``body`` with
    the arguments it was given, by name — a wrong order or a missing argument fails here."""
    signature = sig.build()

    def receive(*args: Any, **kwargs: Any) -> Any:
        got = dict(signature.bind(*args, **kwargs).arguments)
        got.update(got.pop("kwargs", {}))
        return body(got)

    if is_async:
        async def hook(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return receive(*args, **kwargs)
        fn: Any = hook
    else:
        fn = receive
    fn.__signature__ = signature
    return fn


def build(plans: list[Plan] | tuple[Plan, ...]) -> tuple[list[Any], list[Any]]:
    """Fresh processors for ``plans`` and the log every hook call appends to."""
    log: list[Any] = []
    return [_processor(f"p{i}", plan, log) for i, plan in enumerate(plans)], log


def _processor(pid: str, plan: Plan, log: list[Any]) -> Any:
    held: list[Any] = []

    def stream(got: dict[str, Any]) -> Any:
        log.append((pid, "stream", _fingerprint(got)))
        part = got["part"]
        if "state" in got:
            got["state"]["n"] = got["state"].get("n", 0) + 1
            got["state"].setdefault("keys", []).append(key_of(part))
        if not _is_content(part):
            return part
        key = key_of(part)
        if plan.writes and "writer" in got:
            got["writer"].custom(DataChunk(type="data-w", data=f"{pid}:{key}"))
        action = plan.action
        if action == "upper":
            return _retext(part, key.upper())
        if action == "drop":
            return None if len(key) % 2 else part
        if action == "fan":
            return [[], [part], [part, _retext(part, key + "+")]][len(key) % 3]
        if action == "to_data" and part.__class__ is TextDelta:
            return DataChunk(type="data-t", data=key)
        if action == "from_data" and part.__class__ is DataChunk:
            return TextDelta(id="from-data", text=key)
        if action == "hold" and part.__class__ is TextDelta and len(key) % 2 == 0:
            held.append(part)
            return None
        if action == "trip" and key == "z":
            if "abort" in got:
                got["abort"](f"z reached {pid}")
            raise TripWire(f"z reached {pid}")
        if action == "raise" and key == "q":
            raise ValueError(f"q reached {pid}")
        return part

    def flush(got: dict[str, Any]) -> Any:
        log.append((pid, "flush", _fingerprint(got)))
        if plan.writes and "writer" in got:
            got["writer"].custom(DataChunk(type="data-wf", data=pid))
        out = held[:]
        held.clear()
        if plan.tail == "one":
            out.append(TextDelta(id="tail", text=plan.tail_word))
        elif plan.tail == "list":
            out += [TextDelta(id="tail", text=plan.tail_word),
                    DataChunk(type="data-tail", data=plan.tail_word)]
        return out[0] if len(out) == 1 else out

    attrs: dict[str, Any] = {"process_output_stream": _hook(plan.sig, plan.is_async, stream),
                             "process_data_parts": plan.data, "multi_emit": plan.multi}
    if plan.flush is not None:
        attrs["flush_output_stream"] = _hook(plan.flush, plan.flush_async, flush)
    return P(pid, **attrs)


@st.composite
def signatures(draw: st.DrawFn, names: tuple[str, ...], with_part: bool) -> Signature:
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=4))
    has_kwargs = draw(st.booleans())
    if with_part and (not has_kwargs or draw(st.booleans())):
        chosen.insert(draw(st.integers(0, len(chosen))), "part")
    return Signature(tuple(chosen), draw(st.integers(0, len(chosen))), has_kwargs)


ACTIONS = ("pass", "upper", "drop", "to_data", "from_data", "hold", "trip", "raise")


@st.composite
def plans(draw: st.DrawFn, actions: tuple[str, ...] = ACTIONS) -> Plan:
    multi = draw(st.booleans())
    action = draw(st.sampled_from(actions + (("fan",) if multi else ())))
    has_flush = action == "hold" or draw(st.booleans())
    return Plan(sig=draw(signatures(STREAM_NAMES, True)), is_async=draw(st.booleans()),
                multi=multi, data=draw(st.booleans()), action=action, writes=draw(st.booleans()),
                flush=draw(signatures(FLUSH_NAMES, False)) if has_flush else None,
                flush_async=draw(st.booleans()),
                tail=draw(st.sampled_from((None, "one", "list"))) if has_flush else None,
                tail_word=draw(st.sampled_from(("tail", "tails") + WORDS)))


def _chunk(kind: str, word: str) -> Any:
    if kind == "text":
        return TextDelta(id="t", text=word, run_id="r", from_="AGENT")
    if kind == "reasoning":
        return ReasoningDelta(id="r", text=word, run_id="r", from_="AGENT")
    if kind == "data":
        return DataChunk(type="data-x", data=word)
    return TextStart(id="t", run_id="r", from_="AGENT") if word else TextEnd(id="t")


_chunks = st.builds(_chunk, st.sampled_from(("text", "text", "reasoning", "data", "other")),
                    st.sampled_from(WORDS))
#: Repeated past ``SAMPLE_EVERY`` now and then, so the sampled chain's timed path runs too.
chunk_lists = st.builds(lambda chunks, times: chunks * times,
                        st.lists(_chunks, max_size=10), st.sampled_from((1, 1, 1, 7)))

_SETTINGS = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------- running the engine


def _normal(chunk: Any) -> Any:
    if chunk.__class__ is TripwireChunk:
        return ("tripwire", chunk.payload.reason, chunk.payload.processor_id)
    return chunk


async def _async_source(chunks: list[Any]) -> Any:
    for chunk in chunks:
        yield chunk


async def run_apply(procs: list[Any], chunks: list[Any], *, source: str,
                    timed: bool) -> Outcome:
    """``procs`` over ``chunks`` through ``ops.apply`` (a ``list`` or an ``aiter`` source)."""
    applied = ops.apply(chunks if source == "list" else _async_source(chunks), procs,
                        request_context=RC, timed=timed)
    outcome = Outcome([])
    try:
        async for chunk in applied:
            outcome.out.append(_normal(chunk))
    except ProcessorError as err:
        outcome.error = (err.processor_id, err.hook)
    outcome.states = {p.id: applied.runtime.states.get(p.id, {}) for p in procs}
    # A processor that tripped is recorded even with no call; the reference lists callers only.
    outcome.calls = {r.processor_id: (r.calls, r.dropped) for r in applied.trace if r.calls}
    return outcome


async def expected_for(plans: list[Plan], source: list[Any], **kw: Any) -> tuple[Outcome,
                                                                                  list[Any]]:
    procs, log = build(plans)
    return await reference(procs, source, **kw), log


APPLY_RUNS = [
    pytest.param("list", False, id="ops.apply over a list runs the inlined untimed chain"),
    pytest.param("aiter", False, id="ops.apply over an async iterator runs the same chain"),
    pytest.param("list", True, id="timed ops.apply samples the main chain and times data chunks"),
    pytest.param("aiter", True, id="timed ops.apply over an async iterator"),
]


class TestAgainstReference:
    @pytest.mark.parametrize("source,timed", APPLY_RUNS)
    @_SETTINGS
    @given(pipeline=st.lists(plans(), min_size=1, max_size=5), chunks=chunk_lists)
    def test_apply_matches_the_reference(self, source: str, timed: bool, pipeline: list[Plan],
                                         chunks: list[Any]) -> None:
        expected, expected_log = asyncio.run(expected_for(pipeline, [*chunks, FLUSH],
                                                          request_context=RC))
        procs, log = build(pipeline)
        got = asyncio.run(run_apply(procs, chunks, source=source, timed=timed))
        assert got.out == expected.out
        assert got.error == expected.error
        assert got.states == expected.states
        assert log == expected_log
        if timed and expected.error is None:
            assert got.calls == expected.calls

    @_SETTINGS
    @given(pipeline=st.lists(plans(("pass", "upper", "drop", "to_data", "hold")), min_size=1,
                             max_size=4),
           words=st.lists(st.sampled_from(WORDS[:5]), max_size=8),
           thoughts=st.lists(st.sampled_from(WORDS[:5]), max_size=3))
    def test_agent_matches_the_reference(self, pipeline: list[Plan], words: list[str],
                                         thoughts: list[str]) -> None:
        """The agent drives the model's stream through the same chain; what enters it (recorded
        by a pass-through processor in front) run through the reference, with the flush before
        ``step-finish``, gives what the agent streams between ``start`` and ``finish``."""
        entered: list[Any] = []

        def record(part: Any) -> Any:
            entered.append(part)
            return part

        recorder = P("recorder", process_output_stream=record, process_data_parts=True)
        procs, log = build(pipeline)
        step = [text(" ".join(words))]
        if thoughts:
            step.insert(0, reasoning(" ".join(thoughts)))
        agent = Agent(id="a", model=ScriptedModel([step]), output_processors=[recorder, *procs])

        async def run() -> list[Any]:
            return [c async for c in agent.stream("hi", request_context=RC)]

        streamed = asyncio.run(run())
        assert [streamed[0].type, streamed[-1].type] == ["start", "finish"]
        cut = next(i for i, c in enumerate(entered) if c.__class__ is StepFinish)
        expected, expected_log = asyncio.run(expected_for(
            pipeline, [*entered[:cut], FLUSH, *entered[cut:]], request_context=RC,
            message_list=MessageList()))
        assert streamed[1:-1] == expected.out
        assert log == expected_log


# --------------------------------------------------------------------------- tracebacks


def _fail(part: Any) -> Any:
    raise ValueError(f"cannot take {key_of(part)!r}")


async def _afail(part: Any) -> Any:
    raise ValueError(f"cannot take {key_of(part)!r}")


def _flush_fail() -> Any:
    raise ValueError("cannot flush")


async def _apply_error(procs: list[Any], timed: bool = False) -> ProcessorError:
    with pytest.raises(ProcessorError) as info:
        async for _ in ops.apply([TextDelta(id="t", text="a")], procs, timed=timed):
            pass
    return info.value


class TestTracebacks:
    @pytest.mark.parametrize("fn,timed", [
        pytest.param(_fail, False, id="a sync hook raising in the inlined chain"),
        pytest.param(_afail, False, id="an async hook raising in the inlined chain"),
        pytest.param(_fail, True, id="a sync hook raising in the sampled chain"),
    ])
    async def test_hook_error_traceback_shows_generated_lines(self, fn: Any,
                                                              timed: bool) -> None:
        """The hook's exception stays the ``ProcessorError``'s cause, and its traceback runs
        through the generated source, registered under the chain's file name."""
        procs = [P("ok", process_output_stream=lambda part: part),
                 P("bad", process_output_stream=fn)]
        err = await _apply_error(procs, timed)
        assert (err.processor_id, err.hook) == ("bad", "process_output_stream")
        cause = err.__cause__
        assert isinstance(cause, ValueError)
        shown = "".join(traceback.format_exception(err))
        assert "ValueError: cannot take 'a'" in shown
        assert "The above exception was the direct cause of the following exception" in shown
        frames = traceback.extract_tb(cause.__traceback__)
        generated = [f for f in frames if f.filename.startswith("<streamkit fused chain")]
        assert any((f.line or "").startswith("out = ") and "f1(part)" in (f.line or "")
                   for f in generated)
        assert frames[-1].name == fn.__name__

    async def test_flush_error_keeps_its_cause(self) -> None:
        err = await _apply_error([P("bad", process_output_stream=lambda part: part,
                                    flush_output_stream=_flush_fail)])
        assert (err.processor_id, err.hook) == ("bad", "flush_output_stream")
        assert isinstance(err.__cause__, ValueError)
        assert "cannot flush" in "".join(traceback.format_exception(err))


# --------------------------------------------------------------------------- every shape


#: How a hook names its parameters: every argument through ``**kwargs``, positionally, or with
#: keyword-only ones (then the generated call passes keywords).
STYLES = {
    "wants_all": lambda writes: Signature(("part",), 0, True),
    "positional": lambda writes: Signature(
        ("part", "stream_parts", "state", "retry_count") + (("writer",) if writes else ())),
    "keyword": lambda writes: Signature(
        ("part", "state", "request_context") + (("writer",) if writes else ()), 2),
}


def _sweep() -> list[tuple[Plan, Plan]]:
    """Two-processor pipelines covering every hook shape: the first in every style, sync or
    async, multi-emit or not, writing or not, seeing ``data-*`` chunks or not; the second sync
    or async, multi-emit or not, seeing ``data-*`` or not."""
    pipelines = []
    for style, is_async, multi, writes, data in itertools.product(
            STYLES, (False, True), (False, True), (False, True), (False, True)):
        first = Plan(STYLES[style](writes), is_async=is_async, multi=multi, data=data,
                     action="fan" if multi else "drop", writes=writes,
                     flush=Signature(("writer",)), tail="list")
        for second_async, second_multi, second_data in itertools.product((False, True),
                                                                         repeat=3):
            second = Plan(STYLES["positional"](True), is_async=second_async, multi=second_multi,
                          data=second_data, action="fan" if second_multi else "to_data",
                          writes=True)
            pipelines.append((first, second))
    return pipelines


#: Long enough for the sampled chain's timed path (chunk 65) and varied enough for every action.
SWEEP_CHUNKS = [_chunk(kind, word) for kind, word in itertools.product(
    ("text", "reasoning", "data", "other"), ("a", "bb", "ccc", "dd", ""))] * 4


class TestShapeSweep:
    @pytest.mark.parametrize("timed", [
        pytest.param(False, id="every hook shape in the inlined untimed chain"),
        pytest.param(True, id="every hook shape in the sampled chain and the timed data chain"),
    ])
    async def test_every_hook_shape_matches_the_reference(self, timed: bool) -> None:
        for pipeline in _sweep():
            expected, expected_log = await expected_for(list(pipeline), [*SWEEP_CHUNKS, FLUSH],
                                                        request_context=RC)
            procs, log = build(pipeline)
            got = await run_apply(procs, SWEEP_CHUNKS, source="list", timed=timed)
            assert (got.out, got.states, log) == (expected.out, expected.states,
                                                  expected_log), pipeline
            assert not timed or got.calls == expected.calls, pipeline


def _hook_shapes() -> list[HookShape]:
    """One ``HookShape`` per style × sync/async × multi-emit × writing, from registered hooks."""
    shapes = []
    for style, is_async, multi, writes in itertools.product(STYLES, (False, True),
                                                            (False, True), (False, True)):
        proc = P("p", process_output_stream=_hook(STYLES[style](writes), is_async, dict))
        shapes.append(HookShape.of(register(proc).hooks["process_output_stream"], multi))
    return shapes


def all_shapes() -> list[Shape]:
    """Every ``Shape`` the template distinguishes: each timing mode, with and without a separate
    ``data-*`` chain, a sync or async ``push``, and chains of zero, one and two hooks over every
    hook shape (a multi-emit hook first or last, so continuations exist or do not)."""
    hooks = _hook_shapes()
    chains: list[tuple[HookShape, ...]] = [()]
    chains += [(h,) for h in hooks]
    chains += [(h, hooks[0]) for h in hooks] + [(hooks[0], h) for h in hooks]
    shapes = []
    for chain, timing, dispatch, is_async in itertools.product(
            chains, ("off", "sampled", "always"), (False, True), (False, True)):
        if is_async or not any(h.is_async for h in chain):  # an async hook needs async push
            shapes.append(Shape(chain, timing, dispatch, is_async))  # type: ignore[arg-type]
    return shapes


def _function_lines(path: str) -> set[int]:
    """The lines inside the bodies of the module's functions and methods."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.body[0].lineno, (node.end_lineno or 0) + 1))
    return lines


class TestTemplateCoverage:
    def test_every_shape_renders_compiles_and_binds(self) -> None:
        """Each shape's source compiles (once per shape), is registered in ``linecache`` under
        its file name, and its factory binds: ``push`` is a coroutine function exactly when the
        shape is async, ``drive`` an async generator function."""
        for shape in all_shapes():
            factory = factory_for(shape)
            assert factory_for(shape) is factory
            filename = factory.__code__.co_filename
            assert filename.startswith("<streamkit fused chain")
            assert "".join(linecache.getlines(filename)) == render(shape)
            n = len(shape.hooks)
            consts = [{name: None for name in (*_fused.PER_REQUEST, "stream_parts")}] * n
            env = SimpleNamespace(ctx=None, fail=None, perf_counter_ns=None, data_cls=DataChunk,
                                  text_cls=TextDelta, run_data=None, tripwire_cls=TripWire,
                                  checked=None, chunk_classes=frozenset(),
                                  multi_classes=frozenset(), not_chunk=None)
            push, count, arm, drive = factory([dict] * n, consts, [None] * n, env)
            assert inspect.iscoroutinefunction(push) is shape.is_async, shape
            assert inspect.isasyncgenfunction(drive) and count() == 0 and arm() is None

    def test_every_line_and_branch_of_the_template_runs(self, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
        """Rendering and compiling every shape, measured by coverage.py, leaves no line and no
        branch of ``_fused.py``'s functions unrun."""
        coverage = pytest.importorskip("coverage")
        # A fresh factory cache, so each shape is rendered and compiled here; its linecache
        # entries (numbered from 1 again) are put back as they were afterwards.
        monkeypatch.setattr(_fused, "_FACTORIES", {})
        cached = {k: v for k, v in linecache.cache.items() if k.startswith("<streamkit fused")}
        cov = coverage.Coverage(branch=True, data_file=None, config_file=False,
                                include=[_fused.__file__])
        cov.start()
        try:
            shapes = all_shapes()
            for shape in shapes:
                factory_for(shape)
            factory_for(shapes[0])
        finally:
            cov.stop()
            for key in [k for k in linecache.cache if k.startswith("<streamkit fused")]:
                del linecache.cache[key]
            linecache.cache.update(cached)
        report = tmp_path / "coverage.json"
        cov.json_report(outfile=str(report))
        (measured,) = json.loads(report.read_text())["files"].values()
        inside = _function_lines(_fused.__file__)
        missing_lines = [n for n in measured["missing_lines"] if n in inside]
        missing_branches = [b for b in measured["missing_branches"] if b[0] in inside]
        assert (missing_lines, missing_branches) == ([], []), \
            f"template lines/branches no shape reaches: {missing_lines} {missing_branches}"
        assert measured["summary"]["covered_branches"] > 40


# --------------------------------------------------------------------------- regressions


def td(text: str) -> TextDelta:
    return TextDelta(id="t", text=text, run_id="r", from_="AGENT")


async def _collect(source: Any, procs: list[Any], **kw: Any) -> tuple[list[Any], Any]:
    applied = ops.apply(source, procs, **kw)
    out: list[Any] = []
    try:
        async for chunk in applied:
            out.append(_normal(chunk))
    except ProcessorError as err:
        out.append(("error", err.processor_id))
    return out, applied


def _texts(out: list[Any]) -> list[Any]:
    return [c.payload.text if c.__class__ is TextDelta else c.data if c.__class__ is DataChunk
            else c for c in out]


class TestRegressions:
    """Each was a difference between the generated chain and the reference, found by the tests
    above; the example that failed is kept here."""

    @pytest.mark.parametrize("timed", [pytest.param(False, id="untimed"),
                                       pytest.param(True, id="timed")])
    async def test_stream_parts_is_one_list_per_processor_across_data_and_flush(
            self, mode: str, timed: bool) -> None:
        """A processor seeing ``data-*`` chunks, in a pipeline where another does not, had one
        ``stream_parts`` for data chunks and another for the rest; the chain a flush pushes
        through started a third, empty one."""
        seen: list[int] = []

        def count(part: Any, stream_parts: list[Any]) -> Any:
            seen.append(len(stream_parts))
            return part

        procs = [P("hold", process_output_stream=hook(mode, lambda part: part),
                   flush_output_stream=lambda: [td("tail"), DataChunk(type="data-tail")]),
                 P("count", process_output_stream=hook(mode, count), process_data_parts=True)]
        await _collect([td("a"), DataChunk(type="data-x"), td("b")], procs, timed=timed)
        assert seen == [1, 2, 3, 4, 5]

    async def test_flush_continues_with_the_requests_retry_count(self, mode: str) -> None:
        from streamkit.processors._chain import StreamChain
        from streamkit.processors._runtime import RequestRuntime
        seen: list[int] = []

        def note(part: Any, retry_count: int) -> Any:
            seen.append(retry_count)
            return part

        chain = StreamChain([register(P("flush", process_output_stream=lambda part: part,
                                        flush_output_stream=lambda: td("tail"))),
                             register(P("note", process_output_stream=hook(mode, note)))],
                            RequestRuntime())
        chain.retry_count = 2
        assert _texts(await chain.flush()) == ["tail"] and seen == [2]

    @pytest.mark.parametrize("timed", [pytest.param(False, id="untimed"),
                                       pytest.param(True, id="timed")])
    async def test_what_a_flush_writes_comes_before_what_it_flushed(self, mode: str,
                                                                    timed: bool) -> None:
        def flush(writer: Any) -> Any:
            writer.custom(DataChunk(type="data-wf", data="written"))
            return td("tail")

        def tag(part: Any, writer: Any) -> Any:
            writer.custom(DataChunk(type="data-w", data=f"before {part.payload.text}"))
            return part

        procs = [P("flush", process_output_stream=lambda part: part, flush_output_stream=flush),
                 P("tag", process_output_stream=hook(mode, tag))]
        out, _ = await _collect([td("a")], procs, timed=timed)
        assert _texts(out) == ["before a", "a", "written", "before tail", "tail"]

    async def test_what_an_earlier_processor_flushed_comes_out_before_a_later_trip(
            self, mode: str) -> None:
        def guard(part: Any, abort: Any) -> Any:
            if part.payload.text == "z":
                abort("no z")
            return part

        procs = [P("first", process_output_stream=lambda part: part,
                   flush_output_stream=lambda: td("held")),
                 P("second", process_output_stream=lambda part: part,
                   flush_output_stream=lambda: td("z")),
                 P("guard", process_output_stream=hook(mode, guard))]
        out, _ = await _collect([td("a")], procs)
        assert _texts(out) == ["a", "held", ("tripwire", "no z", "guard")]

    @pytest.mark.parametrize("source", [pytest.param("list", id="over a list"),
                                        pytest.param("aiter", id="over an async iterator")])
    async def test_writes_for_a_dropped_chunk_come_out_at_once(self, mode: str,
                                                               source: str) -> None:
        """The inlined chain delivered what hooks wrote for a chunk only with a chunk that got
        through: a write for a dropped chunk waited, and was lost when the stream then failed."""
        def tag(part: Any, writer: Any) -> Any:
            writer.custom(DataChunk(type="data-w", data=f"saw {part.payload.text}"))
            return part

        def strict(part: Any) -> Any:
            if part.payload.text == "q":
                raise ValueError("q")
            return None

        procs = [P("tag", process_output_stream=hook(mode, tag)),
                 P("strict", process_output_stream=hook(mode, strict))]
        chunks = [td("a"), td("q")]
        out, _ = await _collect(chunks if source == "list" else _async_source(chunks), procs)
        assert _texts(out) == ["saw a", ("error", "strict")]

    async def test_a_tripped_chunk_is_no_call_of_the_processors_after(self, mode: str) -> None:
        def trip_on_z(part: Any) -> Any:
            if part.payload.text == "z":
                raise TripWire("z")
            return part

        def fan(part: Any) -> Any:
            return [part, td("z"), td("never sent")]

        procs = [P("fan", process_output_stream=hook(mode, fan), multi_emit=True),
                 P("trip", process_output_stream=hook(mode, trip_on_z)),
                 P("after", process_output_stream=hook(mode, lambda part: part))]
        out, applied = await _collect([td("a")], procs, timed=True)
        assert _texts(out) == [("tripwire", "z", "trip")]
        assert {r.processor_id: r.calls for r in applied.trace} == {"fan": 1, "trip": 2,
                                                                   "after": 1}


# --------------------------------------------------------------------------- fused_source


def _push_calls(source: str) -> list[str]:
    """The hooks ``push`` of the (first) generated module calls, in order."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith(("    def push(", "    async def push("))) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("        "))
    calls = (re.match(r"\s*out = (?:await )?(f\d+)\(", line) for line in lines[start:end])
    return [call.group(1) for call in calls if call]


class TestFusedSource:
    @pytest.mark.parametrize("timed", [pytest.param(False, id="the untimed chain"),
                                       pytest.param(True, id="the timed chain")])
    def test_one_call_per_stream_hook(self, mode: str, timed: bool) -> None:
        pipeline = [ops.map_text(hook(mode, str.upper)),
                    P("input only", process_input=lambda messages: messages),
                    P("guard", process_output_stream=hook(mode, lambda part, state: part)),
                    ops.take(3)]
        source = ops.fused_source(pipeline, timed=timed)
        assert _push_calls(source) == ["f0", "f1", "f2"]
        assert "f3" not in source
        compile(source, "<fused_source>", "exec")

    def test_pipelines_of_the_same_shape_print_the_same_source(self) -> None:
        first = ops.map(lambda part: part) | ops.filter(lambda part: True)
        second = [ops.drop(lambda part: False), ops.tap(print)]
        assert ops.fused_source(first) == ops.fused_source(second)
        assert ops.fused_source(first, timed=True) == ops.fused_source(second, timed=True)
        assert ops.fused_source(first) != ops.fused_source(first, timed=True)

    def test_it_is_the_source_tracebacks_show(self) -> None:
        pipeline = [P("a", process_output_stream=lambda part, writer: part),
                    P("b", process_output_stream=lambda part: part, process_data_parts=True)]
        source = ops.fused_source(pipeline)
        assert "# data-* chunks: processors with process_data_parts = True" in source
        main = source.split("\n# data-* chunks")[0]
        procs = [register(p) for p in pipeline]
        shape = Shape(tuple(HookShape.of(s.hooks["process_output_stream"], s.multi_emit)
                            for s in procs), "off", True, False)
        filename = factory_for(shape).__code__.co_filename
        assert "".join(linecache.getlines(filename)) == main

    def test_the_docstring_example_runs(self) -> None:
        globs = {"ops": ops, "is_reasoning": lambda part: part.__class__ is ReasoningDelta}
        runner = doctest.DocTestRunner()
        for test in doctest.DocTestFinder().find(ops.fused_source, globs=globs):
            runner.run(test)
        assert (runner.failures, runner.tries) == (0, 2)
