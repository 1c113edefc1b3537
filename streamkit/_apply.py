"""Running a pipeline without an agent, and the edges to reactivex and aiostream.

What belongs here: ``apply`` (the standalone runner: ``StreamChain.drive``, the one loop that
drives a source through a chain, over any chunk source), ``AppliedStream``, ``fused_source`` (the
generated code of a pipeline's chain, for reading), and the source adapters (``to_observable``,
``from_observable``, ``merge``). Everything is re-exported from ``streamkit.ops``; the operators
themselves live there. reactivex and aiostream are used only at these edges, never per chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Iterable
from typing import Any, Protocol, TypeVar, cast

import reactivex
from aiostream import stream as aiostream_stream
from msgspec import UNSET
from reactivex import Observable, abc
from reactivex.disposable import Disposable

from .chunks import Chunk, TripwireChunk
from .errors import InvalidType
from .processors._base import flatten_processors
from .processors._chain import StreamChain
from .processors._runtime import RequestRuntime, TraceRecord, Writer
from .processors._spec import register
from .tripwire import TripWire

__all__ = ["apply", "AppliedStream", "fused_source", "to_observable", "from_observable", "merge"]


#: An item of a source (a chunk, for ``apply``).
T = TypeVar("T")

# --------------------------------------------------------------------------- standalone runs


class _Indexed(Protocol):
    """A processor as ``apply`` numbers it (one without the attribute is skipped)."""

    processor_index: int | None


async def _aiter_source(source: AsyncIterable[T] | Iterable[T] | Observable[T]
                        ) -> AsyncIterator[T]:
    # Duck-typed as before (an object with ``__aiter__``, an Observable-like with ``subscribe``
    # and ``pipe``); the casts say which member of the union each test found.
    if hasattr(source, "__aiter__"):
        iterator = cast("AsyncIterable[T]", source).__aiter__()
        try:
            async for item in iterator:
                yield item
        finally:
            # ``async for`` does not close what it iterates; an early stop must close the source.
            closer = getattr(iterator, "aclose", None)
            if closer is not None:
                await closer()
    elif hasattr(source, "subscribe") and hasattr(source, "pipe"):
        async for item in from_observable(cast("Observable[T]", source)):
            yield item
    elif isinstance(source, Iterable):
        for item in source:
            yield item
    else:
        raise InvalidType(
            f"ops.apply needs an async iterable, an iterable or a reactivex Observable of "
            f"chunks; got {type(source).__name__}")


class AppliedStream:
    """The async iterator ``apply()`` returns. After (or during) iteration, ``state(id)`` gives a
    processor's state dict, ``trace`` the per-processor records, ``tripwire`` the TripWire that
    ended it (if any). ``aclose()`` closes the source as well."""

    def __init__(self, source: object, pipeline: object, *, request_context: object, run_id: str,
                 timed: bool) -> None:
        if not (hasattr(source, "__aiter__") or isinstance(source, Iterable)
                or (hasattr(source, "subscribe") and hasattr(source, "pipe"))):
            raise InvalidType(
                f"ops.apply needs an async iterable, an iterable or a reactivex Observable of "
                f"chunks; got {type(source).__name__}")
        self.runtime = RequestRuntime(request_context, run_id=run_id, timed=timed)
        self.specs = [register(p) for p in flatten_processors(pipeline)]
        for i, p in enumerate(flatten_processors(pipeline)):
            try:
                cast(_Indexed, p).processor_index = i
            except AttributeError:
                pass
        self._pending: list[Chunk] = []
        self.writer = Writer(self._pending.append)
        self.chain = StreamChain(self.specs, self.runtime, writer=self.writer)
        self.tripwire: TripWire | None = None
        self._source = source
        self._gen: AsyncGenerator[Chunk, None] = self._run()

    def state(self, processor_id: str) -> dict[str, Any]:
        # Any: the values are the processor's own, read back by the user who knows them.
        return self.runtime.state(processor_id)

    @property
    def trace(self) -> list[TraceRecord]:
        return self.runtime.trace

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return self._gen

    def __anext__(self) -> Awaitable[Chunk]:
        return self._gen.__anext__()

    async def aclose(self) -> None:
        await self._gen.aclose()

    def _run(self) -> AsyncGenerator[Chunk, None]:
        """The run's generator: the chain's one driving loop over the source."""
        src = self._source
        if not isinstance(src, (list, tuple)):
            src = _aiter_source(cast("AsyncIterable[Chunk] | Iterable[Chunk]", src))
        return self.chain.drive(src, pending=self._pending, on_trip=self._on_trip,
                                on_close=lambda: self._on_close(src))

    async def _on_trip(self, tw: TripWire) -> Chunk:
        self.tripwire = tw
        spec = next((s for s in self.specs if s.id == tw.processor_id), None)
        await self.runtime.violation(spec, tw, "process_output_stream")
        return TripwireChunk(reason=tw.reason or "", retry=tw.retry,
                             metadata=UNSET if tw.metadata is None else tw.metadata,
                             processor_id=tw.processor_id or UNSET,
                             run_id=self.runtime.run_id, from_="AGENT")

    async def _on_close(self, src: object) -> None:
        tw = self.tripwire
        self.chain.record(None, {tw.processor_id: ("tripwire", tw.reason)}
                          if tw is not None and tw.processor_id else None)
        closer = getattr(src, "aclose", None)
        if closer is not None:
            await closer()


def apply(source: object, pipeline: object, *, request_context: object = None, run_id: str = "",
          timed: bool = False) -> AppliedStream:
    """Run ``pipeline`` (a processor, a ``Pipeline`` or a list) over any chunk source, no agent.

    Args:
        source: an async iterable, an iterable (a list), or a reactivex ``Observable`` of chunks.
        pipeline: processors/operators; only their ``process_output_stream`` (and
            ``flush_output_stream``) run, fused into one pass per chunk.
        request_context: given to hooks that ask for ``request_context``.
        run_id: put on the tripwire chunk if a processor aborts.
        timed: record per-processor timing in ``trace`` (off by default: it costs ~100 ns/chunk).

    Returns:
        An ``AppliedStream`` (async iterator of chunks). A tripwire ends it with a ``tripwire``
        chunk; a processor that raises makes iteration raise ``ProcessorError``. Closing it early
        (``break``, ``aclose()``, cancellation) closes the source too.

    Example:
        >>> async for chunk in ops.apply(chunks, ops.drop(is_reasoning) | Redactor()):
        ...     print(chunk.type)
    """
    return AppliedStream(source, pipeline, request_context=request_context, run_id=run_id,
                         timed=timed)


def fused_source(pipeline: object, *, timed: bool = False) -> str:
    """The Python source of the fused chain that runs ``pipeline``'s stream hooks.

    Every ``process_output_stream`` of a pipeline runs in one generated function per chunk
    (``streamkit.processors._fused``); this is that function's module, as a traceback through
    it shows it. ``f0``, ``f1``... are the stream hooks in pipeline order (processors without
    one are not in it), each called with exactly the parameters it names. When some processor
    does not see ``data-*`` chunks, the source of the separate ``data-*`` chain follows. The
    text depends only on the pipeline's *shape* (sync/async hooks, their parameters,
    ``multi_emit``, ``process_data_parts``), not on what the hooks do.

    Args:
        pipeline: a processor, a ``Pipeline`` or a list of them (registered here, as ``apply``
            does; an invalid processor raises ``ProcessorDefinitionError``).
        timed: the chain ``apply(..., timed=True)`` and the agent run (sampled timing), instead
            of the untimed one ``apply`` runs by default.

    Returns:
        The generated module's source.

    Example:
        >>> source = ops.fused_source(ops.map_text(str.upper) | ops.drop(is_reasoning))
        >>> [line.strip() for line in source.splitlines() if "out = f" in line][:2]
        ['out = f0(part)', 'out = f1(part)']
    """
    specs = [register(p) for p in flatten_processors(pipeline)]
    return StreamChain(specs, RequestRuntime(timed=timed)).source


# --------------------------------------------------------------------------- reactivex bridges


def to_observable(source: AsyncIterable[T], *, loop: asyncio.AbstractEventLoop | None = None
                  ) -> Observable[T]:
    """An ``Observable`` of the chunks of an async iterable, consumed on the asyncio loop.

    Subscribing starts a task on ``loop`` (default: the running loop) that reads the source and
    calls ``on_next`` for each chunk, then ``on_completed`` (or ``on_error``); disposing the
    subscription cancels the task and closes the source. Nothing blocks the event loop.
    """
    def subscribe(observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
                  ) -> abc.DisposableBase:
        the_loop = loop or asyncio.get_running_loop()

        async def pump() -> None:
            iterator = source.__aiter__()
            try:
                async for item in iterator:
                    observer.on_next(item)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - delivered to the observer
                # reactivex types on_error as taking Exception; any error the source raised
                # (KeyboardInterrupt too) has always been delivered, and still is.
                observer.on_error(exc)  # type: ignore[arg-type]
                return
            finally:
                closer = getattr(iterator, "aclose", None)
                if closer is not None:
                    await closer()
            observer.on_completed()

        task = the_loop.create_task(pump())

        def dispose() -> None:
            the_loop.call_soon_threadsafe(task.cancel)

        return Disposable(dispose)

    return reactivex.create(subscribe)


_DONE = object()


class _Error:
    """An Observable's ``on_error``, queued to be raised where it is iterated."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


async def from_observable(observable: Observable[T]) -> AsyncIterator[T]:
    """Iterate the items of a reactivex ``Observable`` asynchronously.

    Items may be emitted from any thread; they are handed to the loop with
    ``call_soon_threadsafe`` and buffered (Rx has no back-pressure). ``on_error`` is raised here;
    leaving the loop early disposes the subscription.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[T | _Error | object] = asyncio.Queue()

    def put(item: object) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    subscription = observable.subscribe(on_next=put, on_error=lambda e: put(_Error(e)),
                                        on_completed=lambda: put(_DONE))
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Error):
                raise item.exc
            yield cast(T, item)  # neither the end mark nor an error: an item
    finally:
        subscription.dispose()


async def merge(*sources: AsyncIterable[T] | Iterable[T] | Observable[T]) -> AsyncIterator[T]:
    """Interleave several chunk sources as their items arrive (aiostream ``merge``); each source
    may be an async iterable, an iterable or an Observable."""
    async with aiostream_stream.merge(*[_aiter_source(s) for s in sources]).stream() as streamer:
        async for item in streamer:
            yield item
