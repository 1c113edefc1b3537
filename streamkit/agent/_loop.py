"""The agent loop as data: the node table and edge table, built in one function.

Every transition ``Run.events`` makes is checked against the edge table (``Graph.check``), so
the graph ``agent.graph()`` shows is exactly the graph that runs. Node logic lives in short
functions in ``_nodes.py`` (``NODES``); how errors pick the next node is in ``_run.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import GraphError
from ..graph import END, START, Edge, Graph, Node
from ..processors._runner import llm_request_order
from ..processors._spec import ProcessorSpec
from ._nodes import NODES
from ._run import IN_STEP
from ._state import RunConfig

__all__ = ["build_graph", "NODES"]

def _ids(specs: Iterable[ProcessorSpec], hook: str) -> tuple[str, ...]:
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
             tuple(s.id for s in llm_request_order(ins)), step),
        Node("model", "model call", "model", (), step),
        Node("process_output_stream", "process_output_stream (fused, per chunk)", "hook",
             _ids(outs, "process_output_stream"), step),
        Node("collect", "collect the step (usage, text, tool calls)", "control", (), step),
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
        Node("tripwire", "tripwire chunk", "control"),
        Node("fail", "error chunk", "control"),
        Node(END, "end", "control"),
    ]
    e = Edge
    edges = [
        e(START, "process_input"), e(START, "fail", "error"),
        e("process_input", "process_input_step"), e("process_input", "tripwire", "tripwire"),
        e("process_input", "fail", "error"),
        e("process_input_step", "prepare_step"),
        e("prepare_step", "process_llm_request"),
        e("process_llm_request", "model"),
        e("process_llm_request", "process_output_stream", "cached response"),
        e("model", "process_output_stream"), e("model", "process_api_error", "API error"),
        e("process_output_stream", "collect"),
        e("process_output_stream", "process_api_error", "API error"),
        e("collect", "process_llm_response"),
        e("collect", "process_api_error", "no finish"),
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
        e("process_output_result", "tripwire", "tripwire"),
        e("process_output_result", "fail", "error"),
        e("finish", END), e("finish", "fail", "error"), e("tripwire", END), e("fail", END),
    ]
    for node in sorted(IN_STEP):
        edges.append(e(node, "retry", "tripwire(retry)"))
        edges.append(e(node, "tripwire", "tripwire"))
        edges.append(e(node, "fail", "error"))


    graph = Graph(nodes, edges, title=title)
    missing = {node.name for node in nodes} - set(NODES) - {END}
    if missing:  # pragma: no cover - a node in the table with no function is a streamkit bug
        raise GraphError(f"loop nodes without a function: {sorted(missing)}")
    return graph
