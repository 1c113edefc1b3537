"""Rich display for Jupyter: graphs, chunk lists, traces, results and live streams.

Everything renders to HTML (``_repr_html_``) with inline SVG drawn here — no graphviz, no
JavaScript, no plotting library — and to plain text wherever HTML is not shown.

* ``graph_html(graph)`` / ``graph_svg(graph)``: the agent loop (``agent.graph()``) drawn with
  a small layered layout, plus its Mermaid source and text form as fallbacks.
* ``ChunkTable`` / ``show_chunks(chunks)`` / ``await collect(source)``: chunks as a table
  (type, text, tool, id, arrival time).
* ``show_trace(trace)``, ``trace_html``, ``trace_timeline_svg``: a run's ``trace`` as a table
  and as a timeline of which processor did what on which step.
* ``result_html(result)`` / ``result_text(result)``: an ``AgentResult`` with its steps.
* ``await live(agent.stream(...))``: text as it arrives, updated in place; tripwires in red,
  retried steps withdrawn.
* ``show_processors(pipeline)``: processors with their hooks (sync/async, parameters) and flags.
* ``bar_chart(labels, values)``: a small SVG bar chart (used by the throughput notebook).

Example::

    from streamkit import display
    agent.graph()                                   # drawn by Graph._repr_html_
    result = await display.live(agent.stream("hi"))
    display.show_trace(result.trace)

What does not belong here: anything the runtime needs. ``streamkit`` never imports this module
except lazily from a ``_repr_html_``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ._charts import bar_chart_svg, trace_timeline_svg
from ._graph import GraphView, graph_svg
from ._html import STYLE, HtmlBlock, esc
from ._live import DisplayHandle, live
from ._tables import (
    ChunkTable,
    TraceView,
    chunks_html,
    collect,
    result_html,
    result_text,
    show_processors,
    steps_html,
    trace_html,
    trace_text,
)

if TYPE_CHECKING:
    from ..processors._runtime import TraceRecord

__all__ = [
    "graph_html", "graph_svg",
    "show_processors",
    "ChunkTable", "show_chunks", "collect", "chunks_html",
    "TraceView", "show_trace", "trace_html", "trace_text", "trace_timeline_svg",
    "steps_html", "result_html", "result_text",
    "live", "DisplayHandle",
    "bar_chart", "bar_chart_svg", "HtmlBlock",
]


def graph_html(graph: GraphView) -> str:
    """The graph drawn as inline SVG, with its Mermaid source and text form in ``<details>``.

    The SVG lays the default path out top to bottom, routes back-edges on the left and the
    edges into side nodes (retry, abort, fail…) along one bus per destination on the right; nodes
    are styled by kind and list the processors that run there."""
    try:
        svg = graph_svg(graph)
    except Exception as exc:  # noqa: BLE001 - a drawing bug must never hide the graph itself
        svg = f'<div class="sk-error">could not draw the graph: {esc(exc)}</div>'
    return (f'<div class="sk-box sk-graph-box">{STYLE}{svg}'
            f"<details><summary>Mermaid source</summary>"
            f'<pre class="mermaid-source">{esc(graph.to_mermaid())}</pre></details>'
            f"<details><summary>text</summary><pre>{esc(graph.to_text())}</pre></details></div>")


def show_chunks(chunks: Iterable[object], *, times: Sequence[float] | None = None,
                title: str | None = None) -> ChunkTable:
    """``chunks`` as a ``ChunkTable`` (a list that displays as a table)."""
    if isinstance(chunks, ChunkTable) and times is None and title is None:
        return chunks
    table = ChunkTable(chunks, times=times, title=title)
    if times is None and isinstance(chunks, ChunkTable):
        table.times = chunks.times
    return table


def show_trace(trace: Iterable[TraceRecord]) -> TraceView:
    """A run's trace (``result.trace``) as a ``TraceView``: SVG timeline plus table."""
    return trace if isinstance(trace, TraceView) else TraceView(trace)


def bar_chart(labels: Sequence[object], values: Sequence[float], *, title: str = "",
              unit: str = "", fmt: str = "{:,.0f}") -> HtmlBlock:
    """A horizontal SVG bar chart, displayable in Jupyter (plain-text bars elsewhere).

    Example:
        >>> display.bar_chart(["0", "4", "16"], [1.2e6, 8e5, 3e5], unit="chunks/s")
    """
    names = [str(x) for x in labels]
    svg = bar_chart_svg(names, values, title=title, unit=unit, fmt=fmt)
    peak = max([float(v) for v in values] + [1e-12])
    width = max([len(n) for n in names] + [1])
    text = "\n".join([title] * bool(title) + [
        f"{n.rjust(width)} | {'█' * max(1, round(30 * float(v) / peak))} {fmt.format(v)} {unit}"
        for n, v in zip(names, values)])
    return HtmlBlock(f'<div class="sk-box">{svg}</div>', text)


def stream_html(stream: object) -> str:
    """An ``AgentStream`` as a note on how to watch it (or that it has been consumed)."""
    if getattr(stream, "_done", False):
        state = ("consumed — <code>await stream.result()</code> gives the "
                 "<code>AgentResult</code>")
    else:
        started = getattr(stream, "_gen", None) is not None
        state = ("in progress" if started else "not consumed yet") + (
            " — <code>await stream.show()</code> (or <code>await display.live(stream)</code>) "
            "to watch it live, <code>await display.collect(stream)</code> for a chunk table, "
            "or <code>async for chunk in stream</code>")
    return (f'<div class="sk-box">{STYLE}<span class="sk-badge sk-b-step">AgentStream</span> '
            f'<span class="sk-muted">{state}.</span></div>')
