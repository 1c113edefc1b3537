"""Which output processors see which chunk: the routing table, and the run's outbox.

Every chunk a run produces has an *origin*; ``ROUTES`` says, once, whether chunks of that origin
pass the output processors' ``process_output_stream`` before the consumer sees them. This is
Mastra's routing by writer origin (``docs/mastra-fidelity.md``, "Which chunks reach
process_output_stream" and
"Routing by writer origin"):

==================  ==========================================================  ==============
origin              chunks                                                      processors?
==================  ==========================================================  ==============
``MODEL``           the model's stream, or a ``process_llm_request`` replay     yes
``STEP``            the loop's step chunks: step-start, tool-result,            yes
                    tool-error, step-finish
``RUN``             the loop's run framing: start, finish, tripwire, error,     no
                    data-step-retry and the withdrawn attempt's step-finish,
                    object-result, and the partial ``object`` chunks (made by
                    ``Run.events`` from the text deltas it delivers)
``TOOL_WRITER``     ``writer.custom`` in a tool                                 yes
``HOOK_WRITER``     ``writer.custom`` in process_input_step, prepare_step,      yes
                    process_llm_request, process_llm_response,
                    process_output_step, process_tool_result, process_api_error
``STREAM_WRITER``   ``writer.custom`` in process_output_stream /                no
                    flush_output_stream (yielded before the chunk being
                    processed)
``RESULT_WRITER``   ``writer.custom`` in process_output_result                  no
==================  ==========================================================  ==============

"yes" means through the fused chain, where a ``data-*`` chunk reaches only processors with
``process_data_parts = True`` and passes the others untouched; a processor may change, drop or
abort on it. Every non-transient ``data-*`` chunk that reaches the consumer, whatever its origin,
is stored as a part of the turn's assistant message (``Run.deliver``). The run's ``error``
chunk is routed ``RUN`` because it has passed the processors already, once, in ``Run.show``
(``_shown``): its text is the one every way out of the error uses.

What does not belong here: the driving of a source through the chain (``StreamChain.drive``) and
the one place chunks leave a run (``Run.events``).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..chunks import Chunk
from ..processors._chain import StreamChain
from ..processors._runtime import Writer

__all__ = ["Origin", "Route", "ROUTES", "Outbox"]


class Origin(enum.Enum):
    """Where a chunk of a run comes from (see the module's table)."""

    MODEL = "model"
    STEP = "step"
    RUN = "run"
    TOOL_WRITER = "tool writer"
    HOOK_WRITER = "hook writer"
    STREAM_WRITER = "stream hook writer"
    RESULT_WRITER = "result hook writer"


@dataclass(frozen=True, slots=True)
class Route:
    """How chunks of one origin travel: ``processors`` — through the output stream chain;
    ``live`` — written while the chain drives a stream, so that loop yields them before the
    chunk being processed (``Outbox.live``) instead of after the node (the queue)."""

    processors: bool
    live: bool = False


#: The routing table, written once.
ROUTES: Mapping[Origin, Route] = MappingProxyType({
    Origin.MODEL: Route(processors=True),
    Origin.STEP: Route(processors=True),
    Origin.RUN: Route(processors=False),
    Origin.TOOL_WRITER: Route(processors=True),
    Origin.HOOK_WRITER: Route(processors=True),
    Origin.STREAM_WRITER: Route(processors=False, live=True),
    Origin.RESULT_WRITER: Route(processors=False),
})


class Outbox:
    """Chunks produced by a run that wait for the consumer, in the order they were produced.

    ``put(chunk, origin)`` queues a chunk with its route; ``drain(chain)`` moves the queued
    chunks, in order, to ``ready`` — the ones whose route says so through the chain first; the
    run's driver delivers ``ready``. Chunks of the model's
    stream do not wait here: ``StreamChain.drive`` yields them as they come, together with
    ``live`` — what stream hooks write while it runs, yielded before the chunk being processed.

    ``arrived`` (when set by the tools node) is signalled on every put, so chunks written by
    running tools stream live.
    """

    __slots__ = ("live", "ready", "queued", "arrived")

    def __init__(self) -> None:
        self.live: list[Chunk] = []
        self.ready: list[Chunk] = []
        #: Chunks waiting for ``drain``, each with whether it passes the processors.
        self.queued: list[tuple[Chunk, bool]] = []
        self.arrived: asyncio.Event | None = None

    def put(self, chunk: Chunk, origin: Origin) -> None:
        """Queue ``chunk`` of ``origin`` for the consumer (routed per ``ROUTES``)."""
        route = ROUTES[origin]
        if route.live:
            self.live.append(chunk)
        else:
            self.queued.append((chunk, route.processors))
        if self.arrived is not None:
            self.arrived.set()

    def writer(self, origin: Origin) -> Writer:
        """The ``writer`` given to hooks or tools of ``origin``."""
        return Writer(lambda chunk: self.put(chunk, origin))

    def __bool__(self) -> bool:
        return bool(self.queued) or bool(self.live)

    def discard(self) -> None:
        """Forget what has not passed the processors yet (a processor aborted or failed the
        run: nothing more of it is delivered). What is ``ready`` is still delivered."""
        self.queued.clear()
        self.live.clear()

    def take(self) -> list[Chunk]:
        """The ready chunks, handed over (``ready`` starts empty again)."""
        ready, self.ready = self.ready, []
        return ready

    async def drain(self, chain: StreamChain) -> None:
        """Move every waiting chunk, in order, to ``ready`` — through ``chain`` first where its
        route says so; what a stream hook writes meanwhile goes before the chunk it was
        processing. Appends as it goes, so what passed before a processor raised is kept (it is
        delivered; the rest is discarded: the run ends with that error)."""
        into = self.ready
        while self.queued or self.live:
            if self.live:
                into.extend(self.live)
                self.live.clear()
            batch, self.queued = self.queued, []
            for chunk, through in batch:
                if not through:
                    into.append(chunk)
                    continue
                out = chain.push(chunk)
                if chain.is_async:
                    out = await out
                if self.live:
                    into.extend(self.live)
                    self.live.clear()
                if out is None:
                    continue
                if out.__class__ is list:
                    into.extend(out)
                else:
                    into.append(out)
