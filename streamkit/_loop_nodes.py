"""The agent loop's nodes as a type (``LoopNode``) and the one table that describes them (``LOOP``).

Each row of ``LOOP`` says everything the rest of the code needs to know about a node: how the
graph shows it (label, kind, group), which hook a ``TripWire`` raised there came from, whether it
runs inside a step (a ``TripWire(retry=True)`` can re-run the step) or reads the model (an
``APICallError`` goes to ``process_api_error``), and where it may go next. The graph's edge table
(``EDGES``) and the sets the run routes errors by (``IN_STEP``, ``MODEL_NODES``,
``HOOK_OF_NODE``) are derived from it here, once, so they cannot drift apart.

Where a node may go is checked twice before anything runs: a name that is not a member is a mypy
error (and an ``AttributeError`` at import), and ``streamkit.agent._nodes`` compares the return
annotation of every node function (``Literal[LoopNode.COLLECT]``) with its row's edges at import.

This module sits low (it imports only ``streamkit.errors``) so that the agent, its run events
and the tracing can all name nodes without importing one another. ``LoopNode`` is a
``StrEnum``: a member equals its name as a string (``LoopNode.MODEL == "model"``), so
``agent.graph()``, its renderings and code that compares node names as strings keep working.

What does not belong here: the node functions (``agent/_nodes``), the graph's processors per node
(``agent/_loop.build_graph``), the generic ``Graph`` (``graph``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, get_args, get_origin, get_type_hints

from .errors import GraphError

__all__ = ["LoopNode", "NodeSpec", "To", "LOOP", "EDGES", "IN_STEP", "MODEL_NODES",
           "HOOK_OF_NODE", "check_node_functions"]


class LoopNode(StrEnum):
    """A node of the agent loop; its value is the name ``agent.graph()`` shows."""

    START = "start"
    PROCESS_INPUT = "process_input"
    PROCESS_INPUT_STEP = "process_input_step"
    PREPARE_STEP = "prepare_step"
    PROCESS_LLM_REQUEST = "process_llm_request"
    MODEL = "model"
    PROCESS_OUTPUT_STREAM = "process_output_stream"
    COLLECT = "collect"
    PROCESS_API_ERROR = "process_api_error"
    PROCESS_LLM_RESPONSE = "process_llm_response"
    PROCESS_OUTPUT_STEP = "process_output_step"
    TOOLS = "tools"
    PROCESS_TOOL_RESULT = "process_tool_result"
    STEP_FINISH = "step_finish"
    RETRY = "retry"
    PROCESS_OUTPUT_RESULT = "process_output_result"
    FINISH = "finish"
    TRIPWIRE = "tripwire"
    FAIL = "fail"
    END = "end"


# Each member as a module constant, for the loop's hot code (``from .. import _loop_nodes as
# node``; ``return node.COLLECT``): on Python 3.11 a member read through its class goes through
# the slot wrapper of ``EnumType.__getattr__`` (~4x a plain attribute read), and a short request
# reads nodes ~40 times (~2 % of its instructions). ``Final`` keeps each one's ``Literal`` type
# for mypy; ``_check`` holds them to the members.
START: Final = LoopNode.START
PROCESS_INPUT: Final = LoopNode.PROCESS_INPUT
PROCESS_INPUT_STEP: Final = LoopNode.PROCESS_INPUT_STEP
PREPARE_STEP: Final = LoopNode.PREPARE_STEP
PROCESS_LLM_REQUEST: Final = LoopNode.PROCESS_LLM_REQUEST
MODEL: Final = LoopNode.MODEL
PROCESS_OUTPUT_STREAM: Final = LoopNode.PROCESS_OUTPUT_STREAM
COLLECT: Final = LoopNode.COLLECT
PROCESS_API_ERROR: Final = LoopNode.PROCESS_API_ERROR
PROCESS_LLM_RESPONSE: Final = LoopNode.PROCESS_LLM_RESPONSE
PROCESS_OUTPUT_STEP: Final = LoopNode.PROCESS_OUTPUT_STEP
TOOLS: Final = LoopNode.TOOLS
PROCESS_TOOL_RESULT: Final = LoopNode.PROCESS_TOOL_RESULT
STEP_FINISH: Final = LoopNode.STEP_FINISH
RETRY: Final = LoopNode.RETRY
PROCESS_OUTPUT_RESULT: Final = LoopNode.PROCESS_OUTPUT_RESULT
FINISH: Final = LoopNode.FINISH
TRIPWIRE: Final = LoopNode.TRIPWIRE
FAIL: Final = LoopNode.FAIL
END: Final = LoopNode.END


@dataclass(frozen=True, slots=True)
class To:
    """An edge out of a node: to ``node`` when ``label`` (a condition, for display) holds.
    ``routed`` edges are taken by the run's error routing (``Run.events``), not returned by the
    node's function."""

    node: LoopNode
    label: str = ""
    routed: bool = False


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One row of the loop table.

    Attributes:
        label: what the node does, for display.
        kind: how it is drawn: ``hook``, ``model``, ``tools``, ``io`` or ``control``.
        to: the edges out of the node, in display order (the in-step error edges are added).
        hook: the hook a ``TripWire`` raised in the node is reported as coming from (``None``:
            the node's own name). Stream hooks also see the chunks that ``model``, ``collect``,
            ``tools``, ``step_finish`` and ``finish`` route through the chain.
        in_step: the node runs inside a step: a ``TripWire(retry=True)`` can re-run the step,
            and it has edges to ``retry``, ``tripwire`` and ``fail``.
        reads_model: the model is called or read here: an ``APICallError`` goes to
            ``process_api_error``.
        group: the display cluster (``"step"``: the nodes of one loop iteration).
    """

    label: str
    kind: Literal["hook", "model", "tools", "io", "control"]
    to: tuple[To, ...] = ()
    hook: str | None = None
    in_step: bool = False
    reads_model: bool = False
    group: str | None = None


_N = LoopNode
_STREAM_HOOK = "process_output_stream"


def _step(label: str, kind: Literal["hook", "model", "tools", "io", "control"],
          *to: To, hook: str | None = None, reads_model: bool = False) -> NodeSpec:
    """A node inside a step."""
    return NodeSpec(label, kind, to, hook, in_step=True, reads_model=reads_model, group="step")


#: The loop, one row per node, in display order.
LOOP: Mapping[LoopNode, NodeSpec] = {
    _N.START: NodeSpec("build MessageList (instructions, memory, input)", "io",
                       (To(_N.PROCESS_INPUT), To(_N.FAIL, "error", routed=True))),
    _N.PROCESS_INPUT: NodeSpec("process_input (once)", "hook", (
        To(_N.PROCESS_INPUT_STEP), To(_N.TRIPWIRE, "tripwire", routed=True),
        To(_N.FAIL, "error", routed=True)), hook="process_input"),
    _N.PROCESS_INPUT_STEP: _step("process_input_step", "hook", To(_N.PREPARE_STEP),
                                 hook="process_input_step"),
    _N.PREPARE_STEP: _step("prepare_step", "hook", To(_N.PROCESS_LLM_REQUEST),
                           hook="process_input_step"),
    _N.PROCESS_LLM_REQUEST: _step(
        "process_llm_request (prompt, cache replay)", "hook", To(_N.MODEL),
        To(_N.PROCESS_OUTPUT_STREAM, "cached response"), hook="process_llm_request"),
    _N.MODEL: _step("model call", "model", To(_N.PROCESS_OUTPUT_STREAM),
                    To(_N.PROCESS_API_ERROR, "API error", routed=True), hook=_STREAM_HOOK,
                    reads_model=True),
    _N.PROCESS_OUTPUT_STREAM: _step(
        "process_output_stream (fused, per chunk)", "hook", To(_N.COLLECT),
        To(_N.PROCESS_API_ERROR, "API error", routed=True), hook=_STREAM_HOOK,
        reads_model=True),
    _N.COLLECT: _step("collect the step (usage, text, tool calls)", "control",
                      To(_N.PROCESS_LLM_RESPONSE),
                      To(_N.PROCESS_API_ERROR, "no finish", routed=True), hook=_STREAM_HOOK,
                      reads_model=True),
    _N.PROCESS_API_ERROR: _step("process_api_error", "hook",
                                To(_N.PROCESS_LLM_REQUEST, "retry"), To(_N.FAIL, "not recovered"),
                                hook="process_api_error"),
    _N.PROCESS_LLM_RESPONSE: _step("process_llm_response", "hook", To(_N.PROCESS_OUTPUT_STEP),
                                   hook="process_llm_response"),
    _N.PROCESS_OUTPUT_STEP: _step("process_output_step", "hook", To(_N.TOOLS, "tool calls"),
                                  To(_N.STEP_FINISH, "no tool calls"),
                                  hook="process_output_step"),
    _N.TOOLS: _step("execute tools (concurrently)", "tools", To(_N.PROCESS_TOOL_RESULT),
                    hook=_STREAM_HOOK),
    _N.PROCESS_TOOL_RESULT: _step("process_tool_result (per tool)", "hook",
                                  To(_N.STEP_FINISH), hook="process_tool_result"),
    _N.STEP_FINISH: _step("step-finish", "control",
                          To(_N.PROCESS_INPUT_STEP, "tools ran, steps left"),
                          To(_N.PROCESS_OUTPUT_RESULT, "done"), hook=_STREAM_HOOK),
    # In the step's cluster, but not "in step": it starts the next attempt.
    _N.RETRY: NodeSpec("roll back step, feed reason back", "control",
                       (To(_N.PROCESS_INPUT_STEP),), group="step"),
    _N.PROCESS_OUTPUT_RESULT: NodeSpec("process_output_result (once)", "hook", (
        To(_N.FINISH), To(_N.TRIPWIRE, "tripwire", routed=True),
        To(_N.FAIL, "error", routed=True)), hook="process_output_result"),
    _N.FINISH: NodeSpec("save to memory, finish chunk", "io",
                        (To(_N.END), To(_N.FAIL, "error", routed=True)), hook=_STREAM_HOOK),
    _N.TRIPWIRE: NodeSpec("tripwire chunk", "control", (To(_N.END),)),
    _N.FAIL: NodeSpec("error chunk", "control", (To(_N.END),)),
    _N.END: NodeSpec("end", "control"),
}

#: Nodes that run inside a step: a TripWire with ``retry=True`` from here can re-run the step.
IN_STEP: frozenset[LoopNode] = frozenset(n for n, spec in LOOP.items() if spec.in_step)

#: Nodes where the model is called or read: an ``APICallError`` there goes to the error
#: processors (``process_api_error``).
MODEL_NODES: frozenset[LoopNode] = frozenset(n for n, spec in LOOP.items() if spec.reads_model)

#: The hook a TripWire raised in a node came from.
HOOK_OF_NODE: Mapping[LoopNode, str] = {
    n: spec.hook if spec.hook is not None else n.value for n, spec in LOOP.items()}

#: Every edge ``(source, To)``: each row's own, then the error edges of the in-step nodes.
EDGES: tuple[tuple[LoopNode, To], ...] = (
    *((n, to) for n, spec in LOOP.items() for to in spec.to),
    *((n, to) for n in sorted(IN_STEP) for to in (
        To(_N.RETRY, "tripwire(retry)", routed=True), To(_N.TRIPWIRE, "tripwire", routed=True),
        To(_N.FAIL, "error", routed=True))),
)


def _returned(hint: object) -> set[LoopNode]:
    """The ``LoopNode`` members named in ``Literal[...]`` anywhere inside ``hint``."""
    if get_origin(hint) is Literal:
        return {arg for arg in get_args(hint) if isinstance(arg, LoopNode)}
    return {node for arg in get_args(hint) for node in _returned(arg)}


def check_node_functions(functions: Mapping[LoopNode, Callable[..., object]]) -> None:
    """Check the node functions against ``LOOP``: one per node but ``end``, each annotated to
    return exactly the nodes its row's (not ``routed``) edges go to.

    Raises:
        GraphError: a node without a function, or a function whose return annotation and row
            disagree (a streamkit bug, found when ``agent/_nodes`` is imported).
    """
    missing = sorted(n.value for n in LOOP if n not in functions and n is not LoopNode.END)
    if missing:
        raise GraphError(f"streamkit bug: loop nodes without a function: {missing}")
    for node, fn in functions.items():
        declared = _returned(get_type_hints(fn).get("return"))
        edges = {to.node for to in LOOP[node].to if not to.routed}
        if declared != edges:
            raise GraphError(
                f"streamkit bug: node {node.value!r} is annotated to go to "
                f"{sorted(n.value for n in declared)} but its edges in the loop table are "
                f"{sorted(n.value for n in edges)}")


def _check() -> None:
    """The table covers every node once and ``end`` leads nowhere (run at import)."""
    missing = [n.value for n in LoopNode if n not in LOOP]
    if missing or len(LOOP) != len(LoopNode):  # pragma: no cover - a streamkit bug
        raise GraphError(f"streamkit bug: the loop table has no row for {missing}")
    if LOOP[_N.END].to:  # pragma: no cover - a streamkit bug
        raise GraphError("streamkit bug: the loop table gives 'end' an edge")
    unlike = [n.name for n in LoopNode if globals().get(n.name) is not n]
    if unlike:  # pragma: no cover - a streamkit bug
        raise GraphError(f"streamkit bug: module constants unlike their members: {unlike}")


_check()
