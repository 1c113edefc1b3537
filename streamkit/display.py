"""Rich display for Jupyter: graphs, chunk lists, traces and results as HTML, no heavy deps."""

from __future__ import annotations

import html
from typing import Any

__all__ = ["graph_html", "result_html", "stream_html", "trace_html", "chunks_html"]


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def graph_html(graph: Any) -> str:
    """The graph as an HTML block: the Mermaid source in a ``<pre class="mermaid">`` plus the
    plain-text rendering as a fallback."""
    return (f'<div class="streamkit-graph"><pre class="mermaid">{_esc(graph.to_mermaid())}</pre>'
            f"<details><summary>text</summary><pre>{_esc(graph.to_text())}</pre></details></div>")


def trace_html(trace: list[Any]) -> str:
    rows = "".join(
        f"<tr><td>{_esc(r.processor_id)}</td><td>{_esc(r.hook)}</td><td>{_esc(r.step)}</td>"
        f"<td>{r.calls}</td><td>{r.dropped}</td><td>{r.duration * 1e3:.3f}</td>"
        f"<td>{_esc(r.outcome)}</td><td>{_esc(r.detail or '')}</td></tr>" for r in trace)
    return ("<table><thead><tr><th>processor</th><th>hook</th><th>step</th><th>calls</th>"
            "<th>dropped</th><th>ms</th><th>outcome</th><th>detail</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def chunks_html(chunks: list[Any]) -> str:
    rows = []
    for c in chunks:
        payload = getattr(c, "payload", None)
        text = getattr(payload, "text", None) if payload is not None else None
        tool = getattr(payload, "tool_name", None) if payload is not None else None
        rows.append(f"<tr><td>{_esc(c.type)}</td><td>{_esc(text or '')}</td>"
                    f"<td>{_esc(tool or '')}</td></tr>")
    return ("<table><thead><tr><th>type</th><th>text</th><th>tool</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def result_html(result: Any) -> str:
    trip = ""
    if result.tripwire is not None:
        trip = (f"<p><b>tripwire</b> by {_esc(result.tripwire.processor_id)}: "
                f"{_esc(result.tripwire.reason)}</p>")
    return (f"<div><p><b>{_esc(result.finish_reason)}</b> · {result.usage.total_tokens} tokens · "
            f"{len(result.steps)} step(s)</p>{trip}<pre>{_esc(result.text)}</pre>"
            f"{trace_html(result.trace)}</div>")


def stream_html(stream: Any) -> str:
    return f"<pre>{_esc(repr(stream))}</pre>"
