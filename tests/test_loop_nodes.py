"""The loop's nodes are a type and one table (``streamkit._loop_nodes``): the graph an agent shows
and runs is derived from the table, the node functions are checked against it at import, and a
mistyped node or an edge the table does not have is a mypy error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit import Agent, _loop_nodes
from streamkit._loop_nodes import (
    EDGES,
    HOOK_OF_NODE,
    IN_STEP,
    LOOP,
    MODEL_NODES,
    LoopNode,
    check_node_functions,
)
from streamkit.agent._nodes import NODES
from streamkit.errors import GraphError
from streamkit.testing import ScriptedModel

from .conftest import REPO

GRAPH = Agent(id="g", model=ScriptedModel([])).graph()


def test_the_graph_is_the_table() -> None:
    g = GRAPH
    assert [n.name for n in g.nodes] == [n.value for n in LOOP]
    assert all(type(n.name) is str for n in g.nodes)  # shown and compared as plain strings
    assert [(e.src, e.dst, e.label) for e in g.edges] == [
        (src.value, to.node.value, to.label) for src, to in EDGES]


def test_the_module_constants_are_the_members() -> None:
    # What the loop's hot code reads instead of LoopNode.X (slow on CPython 3.11).
    assert all(getattr(_loop_nodes, n.name) is n for n in LoopNode)


def test_node_names_compare_as_strings() -> None:
    name: str = "model"  # as code outside the package holds it
    assert LoopNode.MODEL == name and f"{LoopNode.PROCESS_INPUT}" == "process_input"
    assert "process_input" in {LoopNode.PROCESS_INPUT}


def test_the_derived_sets() -> None:
    assert MODEL_NODES == {"model", "process_output_stream", "collect"}
    assert LoopNode.RETRY not in IN_STEP and LoopNode.PROCESS_INPUT not in IN_STEP
    assert HOOK_OF_NODE[LoopNode.PREPARE_STEP] == "process_input_step"
    assert HOOK_OF_NODE[LoopNode.TOOLS] == "process_output_stream"
    assert HOOK_OF_NODE[LoopNode.RETRY] == "retry"  # a node with no hook: its own name
    for node in IN_STEP:  # every in-step node can be retried, tripped or failed
        assert {LoopNode.RETRY, LoopNode.TRIPWIRE, LoopNode.FAIL} <= \
            {to.node for src, to in EDGES if src is node}


@given(st.sampled_from(list(LoopNode)), st.sampled_from(list(LoopNode)))
def test_a_transition_is_allowed_exactly_when_the_table_has_the_edge(
        src: LoopNode, dst: LoopNode) -> None:
    g = GRAPH
    if (src, dst) in {(s, to.node) for s, to in EDGES}:
        g.check(src, dst)
    else:
        with pytest.raises(GraphError, match="no edge"):
            g.check(src, dst)


def test_the_node_functions_pass_the_import_check() -> None:
    check_node_functions(NODES)  # what importing agent/_nodes did


def test_a_function_annotated_with_an_edge_the_table_lacks_is_refused() -> None:
    async def collect(run: object) -> Literal[LoopNode.PROCESS_LLM_RESPONSE, LoopNode.TOOLS]:
        return LoopNode.TOOLS

    with pytest.raises(GraphError, match="'collect' is annotated to go to "
                                         r"\['process_llm_response', 'tools'\]"):
        check_node_functions({**NODES, LoopNode.COLLECT: collect})


def test_a_function_missing_an_edge_of_its_row_is_refused() -> None:
    async def step_finish(run: object) -> Literal[LoopNode.PROCESS_OUTPUT_RESULT]:
        return LoopNode.PROCESS_OUTPUT_RESULT

    with pytest.raises(GraphError, match="'step_finish'"):
        check_node_functions({**NODES, LoopNode.STEP_FINISH: step_finish})


def test_a_node_without_a_function_is_refused() -> None:
    partial: dict[LoopNode, Callable[..., object]] = {
        k: v for k, v in NODES.items() if k is not LoopNode.RETRY}
    with pytest.raises(GraphError, match=r"without a function: \['retry'\]"):
        check_node_functions(partial)


MISUSE = '''
from typing import Literal
from streamkit._loop_nodes import LoopNode

async def collect(run: object) -> Literal[LoopNode.PROCESS_LLM_RESPONSE]:
    return LoopNode.TOOLS

async def model(run: object) -> Literal[LoopNode.PROCESS_OUTPUT_STREAM]:
    return LoopNode.PROCESS_OUPUT_STREAM

async def named(run: object) -> Literal[LoopNode.FINISH]:
    return "finish"
'''


def test_mypy_refuses_a_mistyped_node_and_an_edge_not_annotated(tmp_path: Path) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    program = tmp_path / "nodes_misuse.py"
    program.write_text(MISUSE)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nshow_error_codes = True\n")
    stdout, stderr, status = mypy_api.run(
        ["--config-file", str(config), "--no-error-summary", "--hide-error-context",
         "--cache-dir", str(REPO / ".mypy_cache" / "user-programs"), str(program)])
    assert status == 1 and not stderr, stdout + stderr
    lines = {int(line.split(":")[1]): line for line in stdout.splitlines() if ": error:" in line}
    assert "[return-value]" in lines[6]  # an edge its annotation does not name
    assert "[attr-defined]" in lines[9]  # a misspelled node
    assert "[return-value]" in lines[12]  # a plain string is not a node
