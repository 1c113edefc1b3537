"""A small, generic pipeline graph: named nodes, labelled edges, validation and rendering.

The agent loop is one of these (``agent.graph()``): its node table and edge table are built in
one function and validated here, and the run walks it — every transition the run makes is checked
against the edge table. This module knows nothing of agents, models or HTTP.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import GraphError

__all__ = ["Node", "Edge", "Graph", "START", "END"]

START = "start"
END = "end"


@dataclass(frozen=True, slots=True)
class Node:
    """A graph node.

    Attributes:
        name: unique id (``"process_input_step"``).
        label: what it does, for display.
        kind: ``"hook"`` (runs processors), ``"model"``, ``"tools"``, ``"io"`` or ``"control"``.
        processors: ids of the processors that run at this node (for display).
        group: an optional cluster name (``"step"`` for the nodes of one loop iteration).
    """

    name: str
    label: str = ""
    kind: str = "control"
    processors: tuple[str, ...] = ()
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    """A transition ``src → dst``, taken when ``label`` (a condition, for display) holds."""

    src: str
    dst: str
    label: str = ""


@dataclass(slots=True)
class Graph:
    """Nodes and edges, validated on construction.

    Raises:
        GraphError: duplicate node names, an edge naming an unknown node, no ``start``/``end``
            node, or a node that cannot be reached from ``start``.
    """

    nodes: list[Node]
    edges: list[Edge]
    title: str = "pipeline"
    _succ: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    #: The names of the nodes that have processors: a run skips the others' hook machinery
    #: (argument dicts, message views) without asking each node's table row.
    busy: frozenset[str] = field(default=frozenset(), init=False, repr=False)
    #: Every ``(src, dst)`` edge: a run tests each transition against it without a call.
    edge_set: frozenset[tuple[str, str]] = field(default=frozenset(), init=False, repr=False)

    def __post_init__(self) -> None:
        names = [n.name for n in self.nodes]
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise GraphError(f"graph {self.title!r}: node {name!r} is defined twice")
            seen.add(name)
        for required in (START, END):
            if required not in seen:
                raise GraphError(f"graph {self.title!r} has no {required!r} node")
        succ: dict[str, list[str]] = {n: [] for n in names}
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in seen:
                    raise GraphError(f"graph {self.title!r}: edge {e.src!r} → {e.dst!r} names "
                                     f"unknown node {end!r}; nodes: {', '.join(names)}")
            succ[e.src].append(e.dst)
        reached = {START}
        frontier = [START]
        while frontier:
            for nxt in succ[frontier.pop()]:
                if nxt not in reached:
                    reached.add(nxt)
                    frontier.append(nxt)
        unreachable = [n for n in names if n not in reached]
        if unreachable:
            raise GraphError(f"graph {self.title!r}: node(s) {unreachable} cannot be reached "
                             f"from {START!r}")
        self._succ = {k: tuple(v) for k, v in succ.items()}
        self.edge_set = frozenset((e.src, e.dst) for e in self.edges)
        self.busy = frozenset(n.name for n in self.nodes if n.processors)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"graph {self.title!r} has no node {name!r}")

    def successors(self, name: str) -> tuple[str, ...]:
        return self._succ[name]

    def check(self, src: str, dst: str) -> None:
        """Raise ``GraphError`` unless ``src → dst`` is an edge (the run calls this on every
        transition, so the graph shown is the graph run)."""
        if dst not in self._succ.get(src, ()):
            raise GraphError(f"graph {self.title!r}: no edge {src!r} → {dst!r}; "
                             f"{src!r} leads to {list(self._succ.get(src, ()))}")

    # ------------------------------------------------------------------ rendering

    def to_text(self) -> str:
        """Plain-text rendering: one line per node with its processors, then its edges."""
        lines = [f"{self.title}"]
        for n in self.nodes:
            procs = f"  [{', '.join(n.processors)}]" if n.processors else ""
            lines.append(f"  ({n.name}) {n.label}{procs}")
            for e in self.edges:
                if e.src == n.name:
                    cond = f"  if {e.label}" if e.label else ""
                    lines.append(f"      -> {e.dst}{cond}")
        return "\n".join(lines)

    def to_mermaid(self) -> str:
        """Mermaid ``flowchart`` source (renders in GitHub, JupyterLab ≥ 4.1 Markdown,
        mermaid.live)."""
        def nid(name: str) -> str:
            return name.replace("-", "_")

        shapes = {"model": ('[["', '"]]'), "tools": ('[/"', '"/]'), "io": ('(["', '"])'),
                  "control": ('(("', '"))'), "hook": ('["', '"]')}
        lines = ["flowchart TD"]
        groups: dict[str | None, list[Node]] = {}
        for n in self.nodes:
            groups.setdefault(n.group, []).append(n)
        for group, members in groups.items():
            indent = "    "
            if group:
                lines.append(f"    subgraph {nid(group)}[\"{group}\"]")
                indent = "        "
            for n in members:
                left, right = shapes.get(n.kind, shapes["hook"])
                label = n.label or n.name
                if n.processors:
                    label += "<br/><small>" + ", ".join(n.processors) + "</small>"
                label = label.replace('"', "'")
                lines.append(f"{indent}{nid(n.name)}{left}{label}{right}")
            if group:
                lines.append("    end")
        for e in self.edges:
            arrow = f"-->|{e.label.replace('|', '/')}|" if e.label else "-->"
            lines.append(f"    {nid(e.src)} {arrow} {nid(e.dst)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_markdown_(self) -> str:
        return f"```mermaid\n{self.to_mermaid()}\n```"

    def _repr_html_(self) -> str:
        # display sits above the runtime (it imports ops and processors); the graph reaches up
        # to it only when Jupyter asks for HTML, so importing the graph never loads display.
        from .display import graph_html

        return graph_html(self)

    def _repr_mimebundle_(self, include: Iterable[str] | None = None,
                          exclude: Iterable[str] | None = None) -> dict[str, str]:
        return {"text/plain": self.to_text(), "text/html": self._repr_html_(),
                "text/markdown": self._repr_markdown_()}


def escape(text: str) -> str:
    return html.escape(text, quote=True)
