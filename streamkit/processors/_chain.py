"""The fused stream chain of one request: every ``process_output_stream`` in one pass per chunk.

``StreamChain`` binds a request's hook functions and per-request constants (state, abort,
writer...) to the compiled code of its shape (``_fused``: rendered and compiled once per shape),
and owns what runs once per step rather than per chunk: flushing held-back chunks at the end of a
source, and the trace records. Per chunk this costs one call per processor that has a stream
hook, with sync hooks called inline (no ``await``, no ``isawaitable`` check) and no generator or
task per stage. Processors without ``process_output_stream`` cost nothing per chunk.

``StreamChain.drive`` is the one loop that drives a chunk source through the chain, for
``ops.apply`` and for the agent's model step alike.

``data-*`` chunks take a second compiled chain holding only processors with
``process_data_parts = True``; which chain runs is decided by the chunk's class as it *enters* the
pipeline (a processor that turns a text chunk into a data chunk does not re-route it).

A non-``TripWire`` exception raised by a stream hook fails the request with ``ProcessorError``
(naming processor and hook) instead of letting the chunk through: for guards, failing closed is
the safe default. (Mastra logs and passes the chunk on; we chose not to.)
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import (
    Any,
    NoReturn,
    get_args,
)

from ..chunks import Chunk, ChunkBase, DataChunk, TextDelta
from ..errors import InvalidType, ProcessorError, StreamkitError
from ..tripwire import TripWire
from ._fused import HookShape, Shape, Timing, factory_for, render
from ._runtime import RequestRuntime, StreamStats, Writer
from ._spec import ProcessorSpec

__all__ = ["StreamChain", "hook_failure", "bad_return", "bounded"]

HOOK = "process_output_stream"


async def bounded(awaitable: Awaitable[object], seconds: float, processor_id: str, hook: str
                  ) -> Any:
    """``await awaitable`` (an async hook's call), cancelled after ``seconds``.

    Raises:
        ProcessorError: the hook did not return in time (``timeout`` is set); it was cancelled.
    """
    try:
        async with asyncio.timeout(seconds) as scope:
            return await awaitable
    except TimeoutError as exc:
        if not scope.expired():
            raise  # the hook's own TimeoutError: wrapped like any other exception
        raise ProcessorError(f"processor {processor_id!r}: {hook} did not return within "
                             f"{seconds:g} s (hook_timeout); it was cancelled",
                             processor_id=processor_id, hook=hook, timeout=seconds) from exc


class _HookClock:
    """Bounds each call of one async stream hook with one timer, re-armed lazily.

    ``bounded``'s ``asyncio.timeout`` per call cost ~4-5 µs per chunk (a timer scheduled and
    cancelled, ``current_task()``: on this machine's Python 3.11 ``get_running_loop()`` alone
    is ~0.5 µs); on by default, that is more than the rest of a chunk's path. Here a call costs
    a clock read and a few attribute writes (``bounded_hook``): one timer is pending at a time,
    armed by the first call after it last fired, and when it fires it either ends the call that
    has run past its limit or re-arms itself for the call now running. After the request, the
    last timer fires once more and finds nothing to do.

    Ending a call: the future the hook's coroutine is suspended on (found through
    ``cr_await``) is cancelled, which is what ``Task.cancel()`` does to the task's waiter, so
    the hook sees ``CancelledError`` where it waits and the wrapper turns it into
    ``ProcessorError``. When no future can be found (the hook waits inside an async generator,
    whose frames cannot be walked), the task that armed the timer is cancelled instead.
    """

    __slots__ = ("seconds", "processor_id", "started", "task", "handle", "expired", "coro",
                 "via_task")

    def __init__(self, seconds: float, processor_id: str) -> None:
        self.seconds = seconds
        self.processor_id = processor_id
        self.started = 0.0  # ``time.monotonic()`` when the running call started; 0.0: none
        self.coro: Any = None  # what the running call awaits
        self.task: asyncio.Task[Any] | None = None
        self.handle: asyncio.TimerHandle | None = None
        self.expired = False
        self.via_task = False

    def arm(self) -> None:
        self.task = asyncio.current_task()
        self.handle = asyncio.get_running_loop().call_later(self.seconds, self._check)

    def _check(self) -> None:
        self.handle = None
        if not self.started:
            self.task = None  # no call runs: the next one arms a timer
            return
        left = self.started + self.seconds - time.monotonic()
        if left > 0:
            self.handle = asyncio.get_running_loop().call_later(left, self._check)
            return
        self.expired = True
        self.via_task = not _cancel_waiter(self.coro)
        if self.via_task and self.task is not None:
            self.task.cancel()

    def failure(self, exc: asyncio.CancelledError) -> BaseException:
        """What a cancellation of the hook's call becomes: ``ProcessorError`` when this clock
        cancelled it (and nothing else asked to cancel the task meanwhile), else itself."""
        if not self.expired:
            return exc
        self.expired = False
        task = asyncio.current_task()
        if task is not None and (task.uncancel() if self.via_task else task.cancelling()) > 0:
            return exc  # cancelled from outside as well: that wins
        err = ProcessorError(f"processor {self.processor_id!r}: {HOOK} did not return within "
                             f"{self.seconds:g} s (hook_timeout); it was cancelled",
                             processor_id=self.processor_id, hook=HOOK, timeout=self.seconds)
        err.__cause__ = exc
        return err


def _cancel_waiter(awaitable: object) -> bool:
    """Cancel the future at the bottom of ``awaitable``'s await chain; whether there was one."""
    for _ in range(1000):  # a chain of awaits is short; never loop on a cycle
        if isinstance(awaitable, asyncio.Future):
            return awaitable.cancel()
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom",
                                                                    None)
        if awaitable is None:
            return False
    return False


def bounded_hook(fn: Callable[..., Awaitable[object]], seconds: float, processor_id: str
                 ) -> Callable[..., Any]:
    """An async stream hook whose every call ends with ``ProcessorError`` after ``seconds``
    (see ``_HookClock``)."""
    clock = _HookClock(seconds, processor_id)

    async def call(*args: object, **kwargs: object) -> Any:
        clock.coro = coro = fn(*args, **kwargs)
        clock.started = time.monotonic() or 1e-9
        if clock.handle is None:
            clock.arm()
        try:
            return await coro
        except asyncio.CancelledError as exc:
            raise clock.failure(exc)  # noqa: B904 - the cause is set by failure()
        finally:
            clock.started = 0.0
            clock.coro = None

    return call


def hook_failure(spec_id: str, hook: str, exc: BaseException) -> BaseException:
    """Turn an exception raised inside a hook into what the runtime propagates: a TripWire gets
    its processor id, control flow passes through, anything else becomes ``ProcessorError``."""
    if isinstance(exc, TripWire):
        return exc.fill(spec_id)
    if isinstance(exc, ProcessorError):
        if exc.hook is None:  # raised by the processor itself: say where, as for a TripWire
            exc.processor_id = exc._attrs["processor_id"] = spec_id
            exc.hook = exc._attrs["hook"] = hook
        return exc
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt, SystemExit)):
        return exc
    err = ProcessorError(f"processor {spec_id!r} raised in {hook}: {type(exc).__name__}: {exc}",
                         processor_id=spec_id, hook=hook)
    err.__cause__ = exc
    return err


#: Every chunk class: what the driving loop lets in without a second look.
CHUNK_CLASSES: frozenset[type] = frozenset(get_args(Chunk))


def not_chunk(item: object) -> None:
    """What the driving loop calls for an item whose class is not a chunk class: nothing for an
    instance of a chunk subclass, else ``InvalidType`` naming the item — before any processor
    sees it (a processor would fail on it with a confusing ``AttributeError``)."""
    if isinstance(item, (ChunkBase, DataChunk)):
        return
    shown = repr(item)
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    raise InvalidType(
        f"a chunk source yielded an item of type {type(item).__name__}, not a chunk: {shown}. "
        f"Build chunks with their classes (TextDelta(id=..., text=...)) or convert wire-form "
        f"mappings with streamkit.chunks.coerce_chunk (bytes: streamkit.wire.decode)")


class _Ctx:
    """Per-request values that change during a request and are read per chunk by hooks."""

    __slots__ = ("retry_count",)

    def __init__(self) -> None:
        self.retry_count = 0


@dataclass(frozen=True, slots=True)
class _Env:
    """What the generated code reads from outside (``factory``'s ``env``)."""

    ctx: _Ctx
    fail: Callable[[int, BaseException], BaseException]
    perf_counter_ns: Callable[[], int]
    data_cls: type
    text_cls: type
    run_data: Callable[[Chunk], Any] | None
    tripwire_cls: type[TripWire]
    #: ``checked(i, value, is_item=False)``: raise ``ProcessorError`` unless ``value`` (what hook
    #: ``i`` returned, or an item of the list it returned) is a chunk or an allowed list.
    checked: Callable[..., None]
    chunk_classes: frozenset[type]
    multi_classes: frozenset[type]
    not_chunk: Callable[[object], None]


#: The classes a stream hook may return (checked by class first, subclasses by ``isinstance``):
#: a chunk (``CHUNK_CLASSES``), or a list from a ``multi_emit`` processor.
_MULTI_CLASSES: frozenset[type] = CHUNK_CLASSES | {list}


def bad_return(spec: ProcessorSpec, hook: str, value: object, *, is_item: bool = False
               ) -> ProcessorError | None:
    """The ``ProcessorError`` for a stream hook's return value that is not a chunk (``None``
    when it is one after all: a subclass, or a list from a ``multi_emit`` processor)."""
    if isinstance(value, (ChunkBase, DataChunk)) or (
            not is_item and spec.multi_emit and isinstance(value, list)):
        return None
    shown = f"{type(value).__name__} {value!r:.60}"
    where = "an item of the list it returned is" if is_item else "it returned"
    lists = "" if spec.multi_emit else \
        " (a list needs multi_emit = True on the processor)"
    # ``returned``: the type alone, for where the value's repr (content) must not go.
    return ProcessorError(f"processor {spec.id!r}, {hook}: {where} {shown}; expected a "
                          f"chunk, None to drop it, or a list of chunks{lists}",
                          processor_id=spec.id, hook=hook, returned=type(value).__name__)


@dataclass(frozen=True, slots=True)
class _Bound:
    """One compiled chain bound to one request."""

    push: Callable[[Chunk], Any]
    count: Callable[[], int]
    arm: Callable[[], None]
    drive: Callable[..., AsyncGenerator[Chunk, None]]
    stats: list[StreamStats]
    shape: Shape
    #: Index of each hook that raised on a chunk: that chunk reached no hook after it.
    failed: list[int]


def _bind(specs: Sequence[ProcessorSpec], runtime: RequestRuntime, writer: Writer | None,
          message_list: object, ctx: _Ctx, timing: Timing,
          run_data: Callable[[Chunk], object] | None,
          is_async: bool, parts: dict[str, list[Chunk]]) -> _Bound:
    hooks = [s.hooks[HOOK] for s in specs]
    probe = runtime.probe  # chunk detail asked for: every hook is called through a reporter
    shape = Shape(tuple(HookShape.of(h, s.multi_emit) if probe is None else
                        probe.shape(h, s.multi_emit) for h, s in zip(hooks, specs)), timing,
                  run_data is not None, is_async)
    consts = [{
        "state": runtime.state(s.id), "abort": runtime.abort(s.id), "message_list": message_list,
        "request_context": runtime.request_context, "writer": writer, "tracing_context": None,
        "stream_parts": parts.setdefault(s.id, []),
    } for s in specs]
    if probe is not None and writer is not None:
        for c, s in zip(consts, specs):
            c["writer"] = probe.writer(s, writer)
    stats = [StreamStats() for _ in specs]
    failed: list[int] = []

    def fail(i: int, exc: BaseException) -> BaseException:
        failed.append(i)
        return hook_failure(specs[i].id, HOOK, exc)

    def checked(i: int, value: object, is_item: bool = False) -> None:
        err = bad_return(specs[i], HOOK, value, is_item=is_item)
        if err is not None:
            raise fail(i, err)

    env = _Env(ctx, fail, time.perf_counter_ns, DataChunk, TextDelta, run_data, TripWire,
               checked, CHUNK_CLASSES, _MULTI_CLASSES, not_chunk)
    limit = runtime.hook_timeout
    fns = [h.fn if limit is None or not h.is_async else bounded_hook(h.fn, limit, s.id)
           for h, s in zip(hooks, specs)]
    if probe is not None:
        fns = [probe.hook(s, h, fn) for s, h, fn in zip(specs, hooks, fns)]
    push, count, arm, drive = factory_for(shape)(fns, consts, stats, env)
    return _Bound(push, count, arm, drive, stats, shape, failed)


_EMPTY: list[_Bound] = []


def _no_hook(*args: object) -> NoReturn:
    """``fail``/``checked`` of the empty chain, whose code calls neither (it has no hook)."""
    raise StreamkitError(f"streamkit bug: the empty stream chain reported a hook {args!r}")


def _empty() -> _Bound:
    """The chain of no hooks, bound once per process and shared by every request that has no
    stream hook (most of them).

    Sharing is safe because nothing in it belongs to a request: its code (``Shape((), "off",
    ...)``) calls no hook, so it never reads the request's state, writer, message list or
    ``retry_count``, never calls ``fail``/``checked`` (``failed`` stays empty), has no stats,
    and, untimed, counts nothing (``count()`` is always 0, ``arm()`` sets ``probing`` to the
    ``False`` it already is). Each ``drive(...)`` call is its own generator with its own
    arguments (source, pending, held...). Binding it per request cost ~5 µs of a 100-chunk
    request's ~180 (a ``Shape`` hash, the factory call and its closures).
    """
    if not _EMPTY:
        env = _Env(_Ctx(), _no_hook, time.perf_counter_ns, DataChunk, TextDelta, None,
                   TripWire, _no_hook, CHUNK_CLASSES, _MULTI_CLASSES, not_chunk)
        shape = Shape((), "off", False, False)
        push, count, arm, drive = factory_for(shape)([], [], [], env)
        _EMPTY.append(_Bound(push, count, arm, drive, [], shape, []))
    return _EMPTY[0]


_NOTHING: tuple[Chunk, ...] = ()


async def _nothing_flushed() -> AsyncIterator[Chunk]:
    for part in _NOTHING:  # an async generator that yields nothing
        yield part


class StreamChain:
    """All stream processors of one request, fused.

    ``push(part)`` returns ``None`` (dropped), a chunk, or a list of chunks (a multi-emit
    processor fanned out); it is a coroutine function only when some stream hook is async
    (``is_async``), decided here once. ``flush()`` calls ``flush_output_stream`` of each processor
    in order when the source ends and pushes what it returns through the rest of the chain.
    ``drive(source, ...)`` runs a whole source through the chain (see its docstring).

    ``data-*`` chunks take a second chain holding only processors with
    ``process_data_parts = True``; which chain runs is decided by the chunk's class as it
    *enters* the pipeline (a processor that turns a text chunk into a data chunk does not
    re-route it).

    A non-``TripWire`` exception raised by a stream hook fails the request with
    ``ProcessorError`` (naming processor and hook) instead of letting the chunk through: for
    guards, failing closed is the safe default. (Mastra logs and passes the chunk on; we chose
    not to.)

    Raises (from ``push``/``flush``/``drive``): ``TripWire`` with its ``processor_id`` filled in,
    or ``ProcessorError`` wrapping any other exception.

    ``continues``: the chain this one is the rest of (``flush`` pushes what a processor flushed
    through the processors after it). The two share the request's ``retry_count`` and each
    processor's ``stream_parts`` — the parts that reached it, whichever chain they came through.
    """

    def __init__(self, specs: Sequence[ProcessorSpec], runtime: RequestRuntime, *,
                 writer: Writer | None = None, message_list: object = None,
                 timed: bool | None = None, continues: StreamChain | None = None) -> None:
        self.runtime = runtime
        # (A run without output processors builds its chain with no specs: no comprehensions
        # over nothing, once per request.)
        self.specs = [s for s in specs if HOOK in s.hooks] if specs else []
        self.flushers = [s for s in specs if s.flush is not None] if specs else []
        self._all_specs = list(specs)
        self._writer = writer
        self._message_list = message_list
        self.timed = runtime.timed if timed is None else timed
        self.ctx: _Ctx = _Ctx() if continues is None else continues.ctx
        # Processor id -> the parts that reached it (its hook's ``stream_parts``), one list for
        # the main and the ``data-*`` chain alike.
        self._parts: dict[str, list[Chunk]] = {} if continues is None else continues._parts
        if self.specs:
            data_specs = [s for s in self.specs if s.process_data_parts]
            self.is_async = any(s.hooks[HOOK].is_async for s in self.specs)
            self._data = _bind(data_specs, runtime, writer, message_list, self.ctx,
                               "always" if self.timed else "off", None, self.is_async,
                               self._parts)
            # When every stream processor sees data chunks, no dispatch is needed.
            run_data = None if len(data_specs) == len(self.specs) else self._data.push
            self._main = _bind(self.specs, runtime, writer, message_list, self.ctx,
                               "sampled" if self.timed else "off", run_data, self.is_async,
                               self._parts)
            self._data_index = [self.specs.index(s) for s in data_specs]
        else:
            # No stream hook: nothing to time, count, dispatch or write, so the one empty chain
            # of the process serves both lanes (see ``_empty``).
            self.is_async = False
            self._main = self._data = _empty()
            self._data_index = []
        self.push: Callable[[Chunk], Any] = self._main.push
        self.empty = not self.specs
        self._counted = 0
        self._data_counted = 0

    @property
    def source(self) -> str:
        """The generated source of this chain (the ``data-*`` chain's follows when data chunks
        take a separate chain) — what a traceback through the chain points into."""
        text = render(self._main.shape)
        if self._main.shape.dispatch:
            text += "\n# data-* chunks: processors with process_data_parts = True\n" + \
                render(self._data.shape)
        return text

    def drive(self, source: Iterable[Chunk] | AsyncIterator[Chunk], *, pending: list[Chunk],
              held: frozenset[type] = frozenset(), on_held: Callable[[Chunk], None] | None = None,
              on_trip: Callable[[TripWire], Awaitable[Chunk]] | None = None,
              on_close: Callable[[], Awaitable[None]] | None = None,
              flush: bool = True) -> AsyncGenerator[Chunk, None]:
        """Drive ``source`` through the chain: the one loop that does it, for ``ops.apply`` and
        for the agent's model step.

        Args:
            source: a list/tuple (iterated with ``for``) or an async iterator of chunks.
            pending: the list this chain's writer fills; what hooks wrote is yielded before the
                chunk being processed (as Mastra orders it).
            held: chunk classes taken out of the stream and given to ``on_held`` instead (the
                agent keeps the model's ``finish``; the consumer never sees it). Not
                ``TextDelta``: the loop's fast path lets text deltas by unchecked.
            on_trip: turns a ``TripWire`` into the last chunk of the stream; ``None`` re-raises.
            on_close: awaited however the loop ends (closing the source is the caller's).
            flush: call ``flush_output_stream`` of each processor at the end of the source.

        Yields:
            The chunks that came out of the chain, in order.
        """
        if TextDelta in held:
            raise InvalidType("StreamChain.drive(held=...) cannot hold TextDelta")
        is_list = isinstance(source, (list, tuple))
        flushed = functools.partial(self._flushed, pending) if flush and self.flushers \
            else _nothing_flushed
        return self._main.drive(source, is_list, pending, held, on_held, flushed, on_trip,
                                on_close)

    @property
    def retry_count(self) -> int:
        return self.ctx.retry_count

    @retry_count.setter
    def retry_count(self, value: int) -> None:
        self.ctx.retry_count = value

    def _rest(self, spec: ProcessorSpec) -> StreamChain:
        pos = self._all_specs.index(spec)
        return StreamChain(self._all_specs[pos + 1:], self.runtime, writer=self._writer,
                           message_list=self._message_list, timed=False, continues=self)

    async def flush(self) -> list[Any]:
        """End of source: collect what each processor still holds (``flush_output_stream``),
        passing each flushed chunk through the processors after it. Returns the chunks to emit
        (what hooks wrote meanwhile stays with the writer)."""
        return [part async for part in self._flushed(None)]

    async def _flushed(self, pending: list[Chunk] | None) -> AsyncIterator[Chunk]:
        """``flush`` as ``drive`` runs it: yields as each processor is flushed — first what was
        written into ``pending`` meanwhile (as for any chunk: writes come out before the chunk
        being processed), then what its flushed chunks became — so what an earlier processor
        flushed still comes out when a later one trips or fails."""
        for spec in self.flushers:
            hook = spec.flush
            if hook is None:  # pragma: no cover - flushers only holds specs with a flush
                continue
            available = {"state": self.runtime.state(spec.id), "abort": self.runtime.abort(spec.id),
                         "writer": self._writer, "message_list": self._message_list,
                         "request_context": self.runtime.request_context,
                         "retry_count": self.ctx.retry_count, "tracing_context": None}
            try:
                res = hook.fn(**hook.call_kwargs(available))
                if hook.is_async:
                    limit = self.runtime.hook_timeout
                    res = await (res if limit is None else
                                 bounded(res, limit, spec.id, "flush_output_stream"))
            except BaseException as exc:
                # hook_failure sets the cause itself, or returns exc (a TripWire, a cancellation)
                raise hook_failure(spec.id, "flush_output_stream", exc)  # noqa: B904
            out: list[Chunk] = []
            if res:
                flushed = res if isinstance(res, list) else [res]
                for part in flushed:
                    err = bad_return(spec, "flush_output_stream", part, is_item=True)
                    if err is not None:
                        raise err
                if self.timed:
                    self._note_flushed_text(spec, flushed)
                if self.runtime.probe is not None:
                    self.runtime.probe.flushed(spec, flushed)
                rest = self._rest(spec)
                for part in flushed:
                    r = rest.push(part)
                    if rest.is_async:
                        r = await r
                    if r is None:
                        continue
                    (out.extend if r.__class__ is list else out.append)(r)
            if pending:
                out[:0] = pending
                pending.clear()
            for part in out:
                yield part

    def _note_flushed_text(self, spec: ProcessorSpec, flushed: list[Any]) -> None:
        """Text a processor first lets out at the end of the step (it held everything) counts
        as its first text out; the processors after it (run untimed here) add nothing."""
        if spec not in self.specs or not any(p.__class__ is TextDelta for p in flushed):
            return
        now = time.perf_counter_ns()
        for st in self._main.stats[self.specs.index(spec):]:
            if not st.text_in_ns:
                st.text_in_ns = now
            if not st.text_out_ns:
                st.text_out_ns = now

    def record(self, step: int | None, outcome_for: dict[str, tuple[str, str | None]] | None = None
               ) -> None:
        """Write one trace record per stream processor for this step and reset the counters.

        ``calls`` and ``dropped`` are exact: calls of processor *i* are the chunks that entered
        minus what processors before it dropped or raised on (a tripwire), plus what they
        fanned out. Durations come from the sampled calls, scaled to all calls (data chunks are
        always timed)."""
        if not self.timed or self.empty:
            return  # no stream processor: nothing to record
        entered = self._main.count() - self._counted
        self._counted += entered
        data_entered = self._data.count() - self._data_counted
        self._data_counted += data_entered
        calls = [0] * len(self.specs)
        flowing = entered
        for i, st in enumerate(self._main.stats):
            calls[i] = flowing
            flowing += st.fanout - st.dropped - self._main.failed.count(i)
        flowing = data_entered
        data_calls = {}
        for k, (j, st) in enumerate(zip(self._data_index, self._data.stats)):
            data_calls[j] = flowing
            flowing += st.fanout - st.dropped - self._data.failed.count(k)
        for i, spec in enumerate(self.specs):
            main = self._main.stats[i]
            ns = main.ns * calls[i] / main.sampled if main.sampled else 0.0
            dropped, first = main.dropped, main.first_ns
            n_calls = calls[i]
            if i in data_calls:
                data = self._data.stats[self._data_index.index(i)]
                n_calls += data_calls[i]
                ns += data.ns
                dropped += data.dropped
                first = first or data.first_ns
            outcome, detail = (outcome_for or {}).get(spec.id, ("ok", None))
            delay = max(0, main.text_out_ns - main.text_in_ns) / 1e9 \
                if main.text_in_ns and main.text_out_ns else None
            if n_calls or outcome != "ok":
                self.runtime.record_stream(spec.id, step, n_calls, dropped, ns, first, outcome,
                                           detail, first_chunk_delay=delay)
        for st in self._main.stats + self._data.stats:
            st.sampled = st.dropped = st.ns = st.first_ns = st.fanout = 0
            st.text_in_ns = st.text_out_ns = 0
        self._main.failed.clear()
        self._data.failed.clear()
        self._main.arm()
