"""One run of an agent: its configuration, its state, and the one way its chunks leave.

A ``Run`` is created by ``Agent.stream()`` and owned by the ``AgentStream`` it returns. It holds
the frozen ``RunConfig``, the mutable ``RunState``, the request's ``RequestRuntime`` (processor
state, trace), the fused output chain and the ``Outbox``. ``Run.events()`` walks the loop graph
and is the only place a chunk reaches the consumer: every chunk it yields is first given to
``Run.deliver`` (recorded for the step, stored when it is a non-transient ``data-*`` chunk).

Nodes (``_nodes.py``) are ``async def node(run) -> LoopNode | Stream``: the next node, or a
``Stream`` of chunks to deliver followed by the next node. Either way the driver checks the
transition against the graph's edge table (``_loop_nodes.LOOP``, from which the sets used below
are derived too). Exceptions are routed here, in one place:

* ``TripWire`` → ``retry`` when the node is inside a step, the processor asked for a retry and
  ``max_processor_retries`` allows it; otherwise ``tripwire``.
* ``APICallError`` from the model's nodes → ``process_api_error``.
* any other ``StreamkitError`` → ``fail``.

Either error is first shown (``Run.show``, ``_shown``): its ``error`` chunk passes the output
processors once, and what comes out is the text the spans, the retry reason, the ``error``
chunk and ``result.error`` use.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Generic, TypeVar

from msgspec import UNSET

from .._loop_nodes import HOOK_OF_NODE, IN_STEP, MODEL_NODES, LoopNode
from .._message_model import _new_id
from .._tool_records import StepToolResult
from ..chunks import Chunk, DataChunk, ObjectChunk, TextDelta, ToolErrorChunk, ToolResult
from ..errors import APICallError, StreamkitError
from ..graph import Graph
from ..messages import (
    DataPart,
    Message,
    MessageContent,
    MessageList,
    SystemSnapshot,
    ToolInvocationPart,
)
from ..processors._chain import CHUNK_CLASSES, StreamChain, not_chunk
from ..processors._runtime import RequestRuntime, Writer
from ..tracing._settings import run_tracer
from ..tripwire import TripWire
from ._build import StepRecorder, error_text
from ._observe import NOOP, Observed, RunReporter
from ._result import AgentResult, TripwireInfo
from ._routing import Origin, Outbox
from ._shown import ShownError, show_error
from ._state import RunConfig, RunState, StepState

__all__ = ["Run", "Stream", "NodeResult", "NodeFn"]


#: The node a ``Stream`` hands over to (``Stream[Literal[LoopNode.COLLECT]]`` in a node's
#: return annotation, which ``_nodes`` checks against the loop table at import).
Then = TypeVar("Then", bound=LoopNode, covariant=True)


@dataclass(frozen=True, slots=True)
class Stream(Generic[Then]):
    """What a streaming node hands over: ``chunks`` to deliver as they come, then ``then``.

    ``hold`` set: ``chunks`` is the model's own stream, iterated by ``Run.events`` directly
    (a run with no output processors has no chain to drive it through): the chunks of the
    ``held`` classes go to ``hold`` instead of the consumer, anything that is not a chunk is an
    ``InvalidType``, and the model's stream is closed through ``Run.close_source`` — what the
    chain's ``drive`` does, without its generator as a second layer per chunk."""

    chunks: AsyncIterator[Chunk]
    then: Then
    hold: Callable[[Chunk], None] | None = None
    held: frozenset[type] = frozenset()


#: The chunk classes ``Run.deliver`` stores nothing of (every one but ``data-*`` chunks and
#: tool outcomes): the test each delivered chunk takes first.
_NOT_STORED: frozenset[type] = frozenset(
    c for c in CHUNK_CLASSES if not issubclass(c, (DataChunk, ToolResult, ToolErrorChunk)))

NodeResult = LoopNode | Stream[LoopNode]
NodeFn = Callable[["Run"], Awaitable[NodeResult]]


class Run:
    """One ``generate()``/``stream()`` call: configuration, state, and its chunk path.

    Args:
        config: what the call asked for (frozen).
        graph: the loop graph every transition is checked against.
        nodes: the node functions by name (``_loop.NODES``).
        messages: the caller's input (added by the ``start`` node, after remembered history).
    """

    def __init__(self, config: RunConfig, graph: Graph, nodes: Mapping[LoopNode, NodeFn],
                 messages: object) -> None:
        self.config = config
        self.graph = graph
        self._nodes = nodes
        self.run_id = _new_id()
        self.runtime = RequestRuntime(config.request_context, run_id=self.run_id,
                                      timed=config.timed, hook_timeout=config.hook_timeout)
        ml = MessageList(thread_id=config.thread_id, resource_id=config.resource_id)
        for text in config.instructions:
            if text:
                ml.add_system(text)
        # The run's snapshot is taken by ``process_input`` (after its hooks), which every path
        # to a step goes through: an empty one until then, not a copy made only to be replaced.
        self.state = RunState(message_list=ml, system_snapshot=SystemSnapshot(()),
                              input_messages=messages)
        self.outbox = Outbox()
        # What the run reports through (``_observe``; called per node, never per chunk): ``NOOP``
        # without observers; else the call's ``observers=`` and, when tracing is on, the run's
        # span tracer, resolved once per run, here, so its spans nest under the caller's current
        # span. Set up before the chain is bound, which reports every hook's result when an
        # observer wants chunk detail.
        spans = run_tracer()
        observers = config.observers if spans is None else (spans, *config.observers)
        self.tracer: RunReporter = Observed(self, observers) if observers else NOOP
        # Stream hooks get their writer when there are some (the empty chain writes nothing).
        self.chain = StreamChain(config.output_specs, self.runtime,
                                 writer=self.outbox.writer(Origin.STREAM_WRITER)
                                 if config.output_specs else None, message_list=ml)
        self._shown: ShownError | None = None

    # The writers of tools and of the other hooks, made when first asked for: most runs have
    # no tool and no hook that writes (four writers per run were ~1.4 µs of a short request).

    @cached_property
    def tool_writer(self) -> Writer:
        """The ``writer`` given to tools: through the output processors."""
        return self.outbox.writer(Origin.TOOL_WRITER)

    @cached_property
    def hook_writer(self) -> Writer:
        """The ``writer`` of in-step hooks: through the output processors."""
        return self.outbox.writer(Origin.HOOK_WRITER)

    @cached_property
    def result_writer(self) -> Writer:
        """The ``writer`` of ``process_output_result``: straight to the consumer."""
        return self.outbox.writer(Origin.RESULT_WRITER)

    @property
    def step(self) -> StepState:
        """The current step (the graph reaches step nodes only after ``process_input_step``)."""
        step = self.state.step
        if step is None:
            raise StreamkitError("streamkit bug: a step node ran outside a step")
        return step

    async def show(self, error: BaseException) -> ShownError:
        """``error`` as a client may see it (``_shown``): its ``error`` chunk after the output
        processors, computed once per error."""
        shown = self._shown
        if shown is None or not shown.is_of(error):
            shown = self._shown = await show_error(self.chain, error, self.run_id)
        return shown

    def shown_text(self, error: BaseException) -> str | None:
        """The text a client was (or will be) shown of ``error``; ``None`` if none was made."""
        shown = self._shown
        return shown.text if shown is not None and shown.is_of(error) else None

    def emit(self, chunk: Chunk, origin: Origin) -> None:
        """Queue a chunk the loop produced; ``ROUTES[origin]`` says whether processors see it."""
        self.outbox.put(chunk, origin)

    def deliver(self, chunk: Chunk) -> None:
        """What happens to every chunk as it leaves: the step records it (stored message,
        result text); a non-transient ``data-*`` chunk becomes a part of the turn's assistant
        message; the ``tool-result``/``tool-error`` of a tool this run called is stored as the
        call's outcome, as delivered. (The model's text deltas take an inlined copy of this in
        ``events``, held to this by tests/test_inline_deliver.py.)"""
        step = self.state.step
        if step is not None:
            rec = step.recorder
            if rec is not None:
                rec.add(chunk)
        if chunk.__class__ in _NOT_STORED:  # most chunks: one set lookup, no class tests
            return
        if isinstance(chunk, DataChunk):
            self._store_data(chunk)
        elif step is not None and isinstance(chunk, (ToolResult, ToolErrorChunk)):
            self._store_tool_outcome(step, chunk)

    def _store_tool_outcome(self, step: StepState, chunk: ToolResult | ToolErrorChunk) -> None:
        cid = chunk.payload.tool_call_id
        call = next((o.call for o in step.tool_outcomes if o.call.tool_call_id == cid), None)
        if call is None:
            return  # a provider-executed tool's result, from the model: recorded as streamed
        name = chunk.payload.tool_name
        args = chunk.payload.args if chunk.payload.args is not UNSET else call.args
        if isinstance(chunk, ToolResult):
            result = chunk.payload.result if chunk.payload.result is not UNSET else None
            part = ToolInvocationPart.returned(cid, name, result, args)
            is_error = False
        else:
            error = chunk.payload.error
            result = error_text(str(error.get("name", "Error")), str(error.get("message", ""))) \
                if isinstance(error, dict) else str(error)
            part = ToolInvocationPart.failed(cid, name, result, args)
            is_error = True
        self.state.message_list.update_tool_invocation(part)
        step.tool_results.append(StepToolResult(cid, name, args, result, is_error))

    def _store_data(self, chunk: DataChunk) -> None:
        if chunk.transient is True:
            return
        part = DataPart(type=chunk.type, data=chunk.data)
        if chunk.id is not None and chunk.id is not UNSET:
            part.id = chunk.id
        self.state.message_list.add(
            Message(role="assistant", content=MessageContent(parts=[part])), "response")

    async def events(self) -> AsyncGenerator[Chunk, None]:
        """Walk the graph from ``start`` to ``end``, yielding every chunk for the consumer —
        the one way out of a run."""
        st = self.state
        node = LoopNode.START
        end = LoopNode.END  # read once: an Enum member read through its class is slow (3.11)
        outbox = self.outbox
        tracer = self.tracer
        observed = tracer is not NOOP
        # The graph's edges, checked per transition without a call (``Graph.check`` raises
        # the error when one is missing).
        edges = self.graph.edge_set
        tracer.begin(self)
        try:
            while node is not end:
                try:
                    handed = await self._nodes[node](self)
                    if handed.__class__ is Stream:
                        # What the node queued (a step's step-start) goes before its stream.
                        # (``Outbox.__bool__``'s test, inline: this runs for every node.)
                        if outbox.queued or outbox.live:
                            await outbox.drain(self.chain)
                        for chunk in outbox.take():
                            self.deliver(chunk)
                            yield chunk
                        stream = handed.chunks
                        hold, held = handed.hold, handed.held
                        rec = st.step.recorder if st.step is not None else None
                        if rec is None:  # every stream runs in a recorded step; keep it simple
                            rec = StepRecorder(keep_chunks=False)
                        keep = rec.chunks
                        partial = rec.partial
                        text_id: str | None = None
                        buf: list[str] = []
                        try:
                            async for chunk in stream:
                                if chunk.__class__ is TextDelta:
                                    # The hot path, ``deliver`` inlined: a text delta is
                                    # recorded by appending its text to its part's buffer.
                                    payload = chunk.payload
                                    if payload.id != text_id:
                                        text_id = payload.id
                                        buf = rec.open_text(payload.id)
                                    buf.append(payload.text)
                                    if keep is not None:
                                        keep.append(chunk)
                                    if partial is not None and partial.feed(payload.text):
                                        # Structured output: the object so far, just before
                                        # the delta that changed it (as Mastra sends it).
                                        yield ObjectChunk(object=partial.snapshot(),
                                                          run_id=self.run_id, from_="AGENT")
                                else:
                                    if hold is not None:  # the model's own stream (``Stream``)
                                        if chunk.__class__ in held:
                                            hold(chunk)
                                            continue
                                        if chunk.__class__ not in CHUNK_CLASSES:
                                            not_chunk(chunk)
                                    self.deliver(chunk)
                                yield chunk
                        finally:
                            # ``async for`` does not close what it iterates when our consumer
                            # stops early; close it so the model's stream is closed too.
                            if hold is None:
                                await stream.aclose()  # type: ignore[attr-defined]
                            else:
                                await self.close_source()
                        nxt = handed.then
                    else:
                        nxt = handed  # type: ignore[assignment]
                    if outbox.queued or outbox.live:
                        await outbox.drain(self.chain)
                except TripWire as tw:
                    outbox.discard()
                    nxt = await self._tripwire(tw.fill(tw.processor_id or "processor"), node)
                except APICallError as exc:
                    outbox.discard()
                    await self.show(exc)  # before the spans record the failure
                    if node in MODEL_NODES and st.step is not None:
                        st.step.api_error = exc
                        nxt = LoopNode.PROCESS_API_ERROR
                    else:
                        st.error = exc
                        nxt = LoopNode.FAIL
                except StreamkitError as exc:
                    if node is LoopNode.FAIL or node is LoopNode.TRIPWIRE:
                        raise
                    outbox.discard()
                    await self.show(exc)
                    st.error = exc
                    nxt = LoopNode.FAIL
                if outbox.ready:
                    for chunk in outbox.take():
                        self.deliver(chunk)
                        yield chunk
                if observed:
                    tracer.transition(self, node, nxt)
                if (node, nxt) not in edges:
                    self.graph.check(node, nxt)
                node = nxt
        except BaseException as exc:
            tracer.end(self, exc)
            raise
        finally:
            await self.close_source()
        tracer.end(self, None)

    async def _tripwire(self, tw: TripWire, node: LoopNode) -> LoopNode:
        """Where a TripWire from ``node`` leads: ``retry`` or ``tripwire``."""
        cfg, st = self.config, self.state
        hook = HOOK_OF_NODE[node]
        await self.runtime.violation(cfg.spec_of(tw.processor_id), tw, hook)
        st.pending_tripwire = TripwireInfo(reason=tw.reason or "", retry=tw.retry,
                                           metadata=tw.metadata, processor_id=tw.processor_id,
                                           hook=hook)
        if hook == "process_output_stream":  # where the stream processors' outcome is counted
            self.chain.record(st.step_number, {tw.processor_id or "": ("tripwire", tw.reason)})
        if tw.retry and node in IN_STEP and cfg.max_processor_retries is not None \
                and st.retry_count < cfg.max_processor_retries:
            return LoopNode.RETRY
        return LoopNode.TRIPWIRE

    async def close_source(self) -> None:
        """Close the model's stream of the current step, if one is open."""
        step = self.state.step
        if step is not None and step.source is not None:
            closer = getattr(step.source, "aclose", None)
            step.source = None
            if closer is not None:
                try:
                    await closer()
                except Exception:  # noqa: BLE001 - closing must not mask the run's outcome
                    pass

    def stream_text(self) -> str:
        """``stream.text`` (``AgentStream.text``): the final step's text once the run got to
        ``process_output_result``, else the text deltas the consumer received."""
        st = self.state
        return st.final_text if st.has_result_text else st.delivered_text()

    def result(self) -> AgentResult:
        """The run's outcome (complete once ``events()`` is exhausted)."""
        st = self.state
        return AgentResult(
            text=st.text, usage=st.usage, finish_reason=st.finish_reason, steps=st.steps,
            tripwire=st.tripwire, messages=st.message_list.get.response.db(), object=st.object,
            run_id=self.run_id, trace=self.runtime.trace, error=st.error,
            states=self.runtime.states)
