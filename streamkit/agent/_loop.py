"""The agent loop as data: the graph of one agent, built in one function from the loop table.

The nodes, their labels and their edges are the rows of ``streamkit._loop_nodes.LOOP`` (typed by
``LoopNode``); this adds the processors that run at each node. Every transition ``Run.events``
makes is checked against the edge table (``Graph.check``), so the graph ``agent.graph()`` shows
is exactly the graph that runs. Node logic lives in short functions in ``_nodes.py``
(``NODES``); how errors pick the next node is in ``_run.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._loop_nodes import EDGES, LOOP, LoopNode
from ..graph import Edge, Graph, Node
from ..processors._runner import llm_request_order
from ..processors._spec import ProcessorSpec
from ._nodes import NODES
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
    memory = ("memory",) if cfg and cfg.memory is not None else ()
    n = LoopNode
    processors: dict[LoopNode, tuple[str, ...]] = {
        n.START: memory,
        n.PROCESS_INPUT: _ids(ins, "process_input"),
        n.PROCESS_INPUT_STEP: _ids(ins, "process_input_step"),
        n.PREPARE_STEP: (cfg.prepare_step.id,) if cfg and cfg.prepare_step else (),
        n.PROCESS_LLM_REQUEST: tuple(s.id for s in llm_request_order(ins)),
        n.PROCESS_OUTPUT_STREAM: _ids(outs, "process_output_stream"),
        n.PROCESS_API_ERROR: _ids((*ins, *outs, *errs), "process_api_error"),
        n.PROCESS_LLM_RESPONSE: _ids(ins, "process_llm_response"),
        n.PROCESS_OUTPUT_STEP: _ids(outs, "process_output_step"),
        n.PROCESS_TOOL_RESULT: _ids(outs, "process_tool_result"),
        n.PROCESS_OUTPUT_RESULT: _ids(outs, "process_output_result"),
        n.FINISH: memory,
    }
    # Names as plain strings: what ``agent.graph()`` shows and compares is unchanged.
    nodes = [Node(node.value, spec.label, spec.kind, processors.get(node, ()), spec.group)
             for node, spec in LOOP.items()]
    edges = [Edge(src.value, to.node.value, to.label) for src, to in EDGES]

    graph = Graph(nodes, edges, title=title)
    return graph
