"""The agent loop as data: the node table and edge table, built in one function, and the driver
that walks them.

Every transition the driver makes is checked against the edge table (``Graph.check``), so the
graph ``agent.graph()`` shows is exactly the graph that runs. Node logic lives in short functions
in ``streamkit.agent._nodes``; a node returns the name of the next node (control nodes) or is an
async generator of chunks that sets ``state.next`` (streaming nodes).

Tripwires are handled here, in one place: a ``TripWire`` from any node goes to ``retry`` when the
node is inside a step, the processor asked for a retry, and ``max_processor_retries`` allows it;
otherwise to ``abort``. A ``StreamkitError`` goes to ``fail``.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable

from ..errors import StreamkitError
from ..graph import END, START, Edge, Graph, Node
from ..processors import TripWire
from . import _nodes as n
from ._result import TripwireInfo
from ._state import RunConfig, RunState

__all__ = ["build_graph", "drive", "IN_STEP"]

#: Nodes that run inside a step: a TripWire with ``retry=True`` from here can re-run the step.
IN_STEP = frozenset((
    "process_input_step", "prepare_step", "process_llm_request", "model",
    "process_output_stream", "process_api_error", "process_llm_response", "process_output_step",
    "tools", "process_tool_result", "step_finish",
))

_HOOK_OF_NODE = {
    "process_input": "process_input", "process_input_step": "process_input_step",
    "prepare_step": "process_input_step", "process_llm_request": "process_llm_request",
    "model": "process_output_stream", "process_output_stream": "process_output_stream",
    "process_api_error": "process_api_error", "process_llm_response": "process_llm_response",
    "process_output_step": "process_output_step", "tools": "process_output_stream",
    "process_tool_result": "process_tool_result", "step_finish": "process_output_stream",
    "process_output_result": "process_output_result", "finish": "process_output_stream",
}


def _ids(specs: Any, hook: str) -> tuple[str, ...]:
    return tuple(s.id for s in specs if hook in s.hooks)


def build_graph(cfg: RunConfig | None = None, *, title: str = "agent") -> Graph:
    """The loop's nodes and edges (with the processors that run at each node when ``cfg`` is
    given). The order is the Processor document's: ``process_input`` once; per step
    ``process_input_step`` → ``prepare_step`` → ``process_llm_request`` → model (errors:
    ``process_api_error``, retry back to the call) → ``process_output_stream`` per chunk →
    ``process_llm_response`` → ``process_output_step`` → tools → ``process_tool_result`` → loop;
    then ``process_output_result``."""
    ins = cfg.input_specs if cfg else ()
    outs = cfg.output_specs if cfg else ()
    errs = cfg.error_specs if cfg else ()
    prep = (cfg.prepare_step.id,) if cfg and cfg.prepare_step else ()
    memory = ("memory",) if cfg and cfg.memory is not None else ()
    step = "step"
    nodes = [
        Node(START, "build MessageList (instructions, memory, input)", "io", memory),
        Node("process_input", "process_input (once)", "hook", _ids(ins, "process_input")),
        Node("process_input_step", "process_input_step", "hook",
             _ids(ins, "process_input_step"), step),
        Node("prepare_step", "prepare_step", "hook", prep, step),
        Node("process_llm_request", "process_llm_request (prompt, cache replay)", "hook",
             _ids(ins, "process_llm_request"), step),
        Node("model", "model call", "model", (), step),
        Node("process_output_stream", "process_output_stream (fused, per chunk)", "hook",
             _ids(outs, "process_output_stream"), step),
        Node("process_api_error", "process_api_error", "hook",
             _ids((*ins, *outs, *errs), "process_api_error"), step),
        Node("process_llm_response", "process_llm_response", "hook",
             _ids(ins, "process_llm_response"), step),
        Node("process_output_step", "process_output_step", "hook",
             _ids(outs, "process_output_step"), step),
        Node("tools", "execute tools (concurrently)", "tools", (), step),
        Node("process_tool_result", "process_tool_result (per tool)", "hook",
             _ids(outs, "process_tool_result"), step),
        Node("step_finish", "step-finish", "control", (), step),
        Node("retry", "roll back step, feed reason back", "control", (), step),
        Node("process_output_result", "process_output_result (once)", "hook",
             _ids(outs, "process_output_result")),
        Node("finish", "save to memory, finish chunk", "io", memory),
        Node("abort", "tripwire chunk", "control"),
        Node("fail", "error chunk", "control"),
        Node(END, "end", "control"),
    ]
    e = Edge
    edges = [
        e(START, "process_input"), e(START, "fail", "error"),
        e("process_input", "process_input_step"), e("process_input", "abort", "tripwire"),
        e("process_input", "fail", "error"),
        e("process_input_step", "prepare_step"),
        e("prepare_step", "process_llm_request"),
        e("process_llm_request", "model"),
        e("process_llm_request", "process_output_stream", "cached response"),
        e("model", "process_output_stream"), e("model", "process_api_error", "API error"),
        e("process_output_stream", "process_llm_response"),
        e("process_output_stream", "process_api_error", "API error"),
        e("process_api_error", "process_llm_request", "retry"),
        e("process_api_error", "fail", "not recovered"),
        e("process_llm_response", "process_output_step"),
        e("process_output_step", "tools", "tool calls"),
        e("process_output_step", "step_finish", "no tool calls"),
        e("tools", "process_tool_result"),
        e("process_tool_result", "step_finish"),
        e("step_finish", "process_input_step", "tools ran, steps left"),
        e("step_finish", "process_output_result", "done"),
        e("retry", "process_input_step"),
        e("process_output_result", "finish"),
        e("process_output_result", "abort", "tripwire"),
        e("process_output_result", "fail", "error"),
        e("finish", END), e("finish", "fail", "error"), e("abort", END), e("fail", END),
    ]
    for node in sorted(IN_STEP):
        edges.append(e(node, "retry", "tripwire(retry)"))
        edges.append(e(node, "abort", "tripwire"))
        edges.append(e(node, "fail", "error"))
    return Graph(nodes, edges, title=title)


Control = Callable[[RunConfig, RunState], Any]

_NODES: dict[str, tuple[bool, Control]] = {
    START: (False, n.start),
    "process_input": (False, n.process_input),
    "process_input_step": (False, n.process_input_step),
    "prepare_step": (False, n.prepare_step),
    "process_llm_request": (False, n.process_llm_request),
    "model": (False, n.model),
    "process_output_stream": (True, n.process_output_stream),
    "process_api_error": (False, n.process_api_error),
    "process_llm_response": (False, n.process_llm_response),
    "process_output_step": (False, n.process_output_step),
    "tools": (True, n.tools),
    "process_tool_result": (False, n.process_tool_result),
    "step_finish": (False, n.step_finish),
    "retry": (False, n.retry),
    "process_output_result": (False, n.process_output_result),
    "finish": (False, n.finish),
    "abort": (False, n.abort),
    "fail": (False, n.fail),
}


async def _tripwire(cfg: RunConfig, st: RunState, tw: TripWire, node: str) -> str:
    hook = _HOOK_OF_NODE.get(node, node)
    spec = next((s for s in (*cfg.input_specs, *cfg.output_specs, *cfg.error_specs)
                 if s.id == tw.processor_id), None)
    await st.runtime.violation(spec, tw, hook)
    info = TripwireInfo(reason=tw.reason or "", retry=tw.retry, metadata=tw.metadata,
                        processor_id=tw.processor_id, hook=hook)
    st.pending_tripwire = info
    if hook == "process_output_stream" or node in ("process_output_stream", "step_finish",
                                                   "tools"):
        st.chain.record(st.step_number, {tw.processor_id or "": ("tripwire", tw.reason)})
    if tw.retry and node in IN_STEP and cfg.max_processor_retries is not None \
            and st.retry_count < cfg.max_processor_retries:
        return "retry"
    return "abort"


async def drive(cfg: RunConfig, prepare: Callable[[], Awaitable[RunState]], graph: Graph
                ) -> AsyncIterator[Any]:
    """Prepare the run state, then walk ``graph`` from ``start`` to ``end``, yielding every
    chunk for the consumer (this generator is what ``async for`` on an ``AgentStream`` runs)."""
    st = await prepare()
    node = START
    out = st.out
    try:
        while node != END:
            streaming, fn = _NODES[node]
            try:
                if streaming:
                    gen = fn(cfg, st)
                    try:
                        async for chunk in gen:
                            yield chunk
                    finally:
                        # ``async for`` does not close the node's generator when our consumer
                        # stops early; close it so the model's stream is closed too.
                        await gen.aclose()
                    nxt = n.take_next(st)
                else:
                    nxt = await fn(cfg, st)
                if st.routed:
                    await n.drain_routed(cfg, st)
            except TripWire as tw:
                nxt = await _tripwire(cfg, st, tw.fill(tw.processor_id or "processor"), node)
            except StreamkitError as exc:
                if node in ("fail", "abort"):
                    raise
                st.error = exc
                nxt = "fail"
            if out:
                for chunk in out:
                    yield chunk
                out.clear()
            graph.check(node, nxt)
            node = nxt
    finally:
        await n.close_step(st)
