"""The ``writer`` hooks and tools are given: ``writer.custom(chunk)`` emits a ``data-*`` (or any)
chunk into the run.

What belongs here: ``Writer`` and its thread-safe variant, nothing per request (that is
``_runtime``), so what reports on writers (``_probe``) can wrap one without importing the
runtime that holds the probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from ..chunks import coerce_chunk

__all__ = ["Writer"]


class Writer:
    """``writer.custom(chunk)``: emit a ``data-*`` (or any) chunk from a hook or a tool.

    Written chunks are handed to ``sink`` (the agent routes them as Mastra does: through the
    data-part processors, or straight to the consumer for the stream hook's own writer).
    """

    __slots__ = ("_sink",)

    def __init__(self, sink: Callable[[Any], object]) -> None:
        self._sink = sink

    def custom(self, chunk: object) -> Awaitable[None]:
        """Write ``chunk``: a ``DataChunk``, any chunk, or a dict ``{"type": "data-x", "data":
        ..., "id"?: ..., "transient"?: bool}``. The chunk is written when this returns; the
        returned awaitable is already done — awaiting it is optional (Mastra code awaits its
        writer's promise: ``await writer.custom(...)`` works here too)."""
        self._sink(coerce_chunk(chunk))
        return _WRITTEN

    def threadsafe(self, loop: asyncio.AbstractEventLoop) -> Writer:
        """A writer for code running in a worker thread (a plain ``def`` tool with a timeout):
        each write is handed to ``loop``, which runs this writer's sink. ``close()`` it when
        the wait for the thread ends; what the thread writes after that is dropped (its
        caller has given up on it, as on its result)."""
        return _ThreadWriter(self._sink, loop)

    def close(self) -> None:
        """Nothing to close (see ``threadsafe``)."""


class _ThreadWriter(Writer):
    """``Writer.threadsafe``: writes from a worker thread, run on the event loop."""

    __slots__ = ("_loop", "_is_open", "_target")

    def __init__(self, sink: Callable[[Any], object], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(self._on_loop)
        self._target = sink
        self._loop = loop
        self._is_open = True

    def _on_loop(self, chunk: object) -> None:
        if self._is_open:
            try:
                self._loop.call_soon_threadsafe(self._deliver, chunk)
            except RuntimeError:  # the loop is closed: the run is long over
                self._is_open = False

    def _deliver(self, chunk: object) -> None:
        if self._is_open:
            self._target(chunk)

    def close(self) -> None:
        self._is_open = False


class _Written:
    """What ``Writer.custom`` returns: an awaitable that is already done. Not a coroutine, so
    not awaiting it warns about nothing; one shared instance, so a write allocates nothing."""

    __slots__ = ()

    def __repr__(self) -> str:  # shown when a hook returns it by mistake (``lambda: w.custom()``)
        return "<done: what writer.custom returns; a hook should return None, not this>"

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # a generator that finishes at once: ``await`` gives ``None`` without suspending


_WRITTEN = _Written()
