"""Tables: chunk lists (``ChunkTable``), traces (``TraceView``), a result's steps, whole results.

Each renders as HTML for Jupyter and as an aligned plain-text table everywhere else. What does
not belong here: SVG charts (``_charts``) and the graph drawing (``_graph``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .. import ops
from ..processors._base import flatten_processors
from ..processors._spec import register
from ._charts import trace_timeline_svg
from ._html import (
    STYLE,
    HtmlBlock,
    Printer,
    attr,
    badge,
    esc,
    fmt_ms,
    fmt_value,
    short,
    table_html,
    text_table,
)

if TYPE_CHECKING:
    from .._tool_records import StepToolCall, StepToolResult
    from ..processors._runtime import TraceRecord


# What the result views read off an ``AgentResult`` and its steps, by attribute. The agent's
# results render themselves through display (``_repr_html_``, ``show()``: an import inside the
# method), so display names the shapes it reads rather than importing the agent's classes, which
# would close a circle of imports (even under ``TYPE_CHECKING``). Read-only properties, so the
# agent's dataclass fields match them.


class _Usage(Protocol):
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def total_tokens(self) -> int: ...


class TripwireView(Protocol):
    """What ``tripwire_html`` reads: ``streamkit.agent.TripwireInfo``."""

    @property
    def reason(self) -> str: ...
    @property
    def retry(self) -> bool: ...
    @property
    def metadata(self) -> object: ...
    @property
    def processor_id(self) -> str | None: ...
    @property
    def hook(self) -> str | None: ...


class StepView(Protocol):
    """What the steps table reads: ``streamkit.agent.StepResult``."""

    @property
    def step_number(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def tool_calls(self) -> Sequence[StepToolCall]: ...
    @property
    def tool_results(self) -> Sequence[StepToolResult]: ...
    @property
    def finish_reason(self) -> str: ...
    @property
    def usage(self) -> _Usage: ...
    @property
    def tripwire(self) -> TripwireView | None: ...
    @property
    def retry_count(self) -> int: ...
    @property
    def from_cache(self) -> bool: ...


class ResultView(Protocol):
    """What ``result_html``/``result_text`` read: ``streamkit.agent.AgentResult``."""

    @property
    def text(self) -> str: ...
    @property
    def usage(self) -> _Usage: ...
    @property
    def finish_reason(self) -> str: ...
    @property
    def steps(self) -> Sequence[StepView]: ...
    @property
    def tripwire(self) -> TripwireView | None: ...
    @property
    def object(self) -> object: ...
    @property
    def run_id(self) -> str: ...
    @property
    def trace(self) -> Sequence[TraceRecord]: ...
    @property
    def error(self) -> BaseException | None: ...


__all__ = ["ChunkTable", "TraceView", "chunk_row", "chunks_html", "trace_html", "steps_html",
           "result_html", "result_text", "collect", "show_processors"]

_CHUNK_HEADERS = ("#", "type", "text / data", "tool / processor", "id", "t (ms)")
_TRACE_HEADERS = ("processor", "hook", "step", "calls", "dropped", "ms", "first call ms",
                  "outcome", "detail")


def _kind(chunk_type: str) -> str:
    """The colour family of a chunk type."""
    if chunk_type.startswith("data-"):
        return "data"
    if chunk_type in ("tripwire", "error", "abort", "tool-error"):
        return "tripwire" if chunk_type == "tripwire" else "error"
    if chunk_type.startswith("text"):
        return "text"
    if chunk_type.startswith("reasoning"):
        return "reasoning"
    if chunk_type.startswith("tool"):
        return "tool"
    return "step"


def chunk_row(chunk: object) -> dict[str, str]:
    """The display cells of one chunk: ``type``, ``text``, ``tool``, ``id`` (plain strings)."""
    ctype = str(getattr(chunk, "type", type(chunk).__name__))
    payload = attr(chunk, "payload")
    text, tool, ident = "", "", ""
    if ctype.startswith("data-"):
        text = fmt_value(attr(chunk, "data"))
        ident = fmt_value(attr(chunk, "id"))
        if attr(chunk, "transient"):
            tool = "transient"
    elif payload is not None:
        tool = fmt_value(attr(payload, "tool_name"))
        ident = fmt_value(attr(payload, "tool_call_id") or attr(payload, "id"))
        if ctype == "tripwire":
            text = fmt_value(attr(payload, "reason"))
            tool = fmt_value(attr(payload, "processor_id"))
            if attr(payload, "retry"):
                text += "  (retry)"
        elif ctype in ("step-finish", "finish"):
            step = attr(payload, "step_result")
            output = attr(payload, "output")
            usage = attr(output, "usage") if output is not None else None
            total = attr(usage, "total_tokens") if usage is not None else None
            reason = fmt_value(attr(step, "reason")) if step is not None else ""
            text = reason + (f" · {total} tokens" if total is not None else "")
        else:
            for name in ("text", "args_text_delta", "args", "result", "error", "output",
                         "title", "url", "mime_type", "reason"):
                value = attr(payload, name)
                if value is not None:
                    text = fmt_value(value)
                    break
    elif attr(chunk, "object") is not None:
        text = fmt_value(attr(chunk, "object"))
    return {"type": ctype, "text": text, "tool": tool, "id": ident}


class ChunkTable(list[Any]):  # Any: users index it and read payloads, as they did
    """A list of chunks that shows itself as a table (type, text, tool, id, arrival time).

    It is a plain ``list`` otherwise: index it, iterate it, compare it. ``times`` holds each
    chunk's arrival in seconds since the first ``collect`` step, when known.

    Example:
        >>> table = await display.collect(agent.stream("hi"))   # shows a table in Jupyter
        >>> table.text
        'Hello world'
    """

    def __init__(self, chunks: Iterable[object] = (), *, times: Sequence[float] | None = None,
                 title: str | None = None) -> None:
        super().__init__(chunks)
        self.times: list[float] | None = list(times) if times is not None else None
        self.title = title

    @property
    def text(self) -> str:
        """The text of the ``text-delta`` chunks, joined."""
        return "".join(c.payload.text for c in self if getattr(c, "type", "") == "text-delta")

    @property
    def types(self) -> list[str]:
        """The ``type`` of every chunk, in order."""
        return [str(getattr(c, "type", "?")) for c in self]

    def rows(self) -> list[dict[str, str]]:
        """One dict of display cells per chunk (``#``, ``type``, ``text``, ``tool``, ``id``,
        ``t_ms``)."""
        out = []
        for i, chunk in enumerate(self):
            row = {"#": str(i), **chunk_row(chunk)}
            row["t_ms"] = fmt_ms(self.times[i], 2) if self.times and i < len(self.times) else ""
            out.append(row)
        return out

    def to_text(self) -> str:
        """An aligned plain-text table."""
        rows = [[r["#"], r["type"], r["text"], r["tool"], r["id"], r["t_ms"]]
                for r in self.rows()]
        head = f"{self.title}\n" if self.title else ""
        return head + text_table(_CHUNK_HEADERS, rows)

    def _repr_html_(self) -> str:
        return chunks_html(self, times=self.times, title=self.title)

    def _repr_pretty_(self, printer: Printer, cycle: bool) -> None:
        printer.text("ChunkTable([...])" if cycle else self.to_text())


def chunks_html(chunks: Sequence[object], *, times: Sequence[float] | None = None,
                title: str | None = None, max_rows: int = 400) -> str:
    """An HTML table of ``chunks`` (with an arrival-time column when ``times`` is given).

    Past ``max_rows`` chunks, the middle of the table is elided (head and tail are shown)."""
    table = chunks if isinstance(chunks, ChunkTable) and times is None \
        else ChunkTable(chunks, times=times if times is not None
                        else getattr(chunks, "times", None))
    all_rows = table.rows()
    tail = min(50, max_rows // 4)
    hidden = len(all_rows) - max_rows if len(all_rows) > max_rows else 0
    shown = all_rows[: max_rows - tail] + all_rows[len(all_rows) - tail:] if hidden else all_rows
    rows, classes = [], []
    for r in shown:
        if hidden and r is all_rows[len(all_rows) - tail]:
            rows.append(["", f'<span class="sk-muted">… {hidden} chunk(s) not shown …</span>',
                         "", "", "", ""])
            classes.append("")
        kind = _kind(r["type"])
        text = f"<code>{esc(short(r['text']))}</code>" if r["text"] else ""
        rows.append([r["#"], badge(r["type"], kind), text, esc(r["tool"]), esc(short(r["id"], 40)),
                     r["t_ms"]])
        classes.append("sk-row-tripwire" if kind == "tripwire" else
                       "sk-row-error" if kind == "error" else "")
    caption = f'<div class="sk-muted">{esc(title)}</div>' if title else ""
    summary = f'<div class="sk-muted">{len(table)} chunk(s)</div>'
    return (f'<div class="sk-box sk-chunks">{STYLE}{caption}'
            f"{table_html(_CHUNK_HEADERS, rows, classes, numeric=(0, 5))}{summary}</div>")


async def collect(source: object, pipeline: object = None, *, limit: int | None = None
                  ) -> ChunkTable:
    """Consume a chunk source into a ``ChunkTable``, recording when each chunk arrived.

    Args:
        source: an ``AgentStream``, an ``ops.apply(...)`` stream, any async iterable, a list, or
            a reactivex ``Observable`` of chunks.
        pipeline: when given, ``ops.apply(source, pipeline)`` is what is collected.
        limit: stop (and close the source) after this many chunks.
    """
    if pipeline is not None:
        source = ops.apply(source, pipeline)
    elif not hasattr(source, "__aiter__"):
        source = ops.apply(source, [])
    chunks: list[object] = []
    times: list[float] = []
    start = time.perf_counter()
    iterator = source.__aiter__()
    try:
        async for chunk in iterator:
            chunks.append(chunk)
            times.append(time.perf_counter() - start)
            if limit is not None and len(chunks) >= limit:
                break
    finally:
        closer = getattr(iterator, "aclose", None)
        if limit is not None and closer is not None:
            await closer()
    return ChunkTable(chunks, times=times)


# ----------------------------------------------------------------------------- processors

_PROC_HEADERS = ("#", "id", "class", "hooks", "flags")


def show_processors(processors: object) -> HtmlBlock:
    """Processors (a list, a ``Pipeline`` or one) as a table: id, class, each hook with the
    parameters it asks for (``async`` marked), and flags (data parts, multi-emit, flush,
    on_violation). Registration validates them, so a misspelled hook raises here too.

    Example:
        >>> display.show_processors(ops.drop(is_reasoning) | Redactor())
    """
    rows: list[list[str]] = []
    for i, p in enumerate(flatten_processors(processors)):
        spec = register(p)
        hooks = [f"{'async ' if h.is_async else ''}{name}({', '.join(h.params)}"
                 f"{'**' if h.wants_all else ''})" for name, h in spec.hooks.items()]
        flags = [name for name, on in (("data parts", spec.process_data_parts),
                                       ("multi-emit", spec.multi_emit),
                                       ("flush", spec.flush is not None),
                                       ("on_violation", spec.on_violation is not None)) if on]
        rows.append([str(i), spec.id, type(p).__name__, "\n".join(hooks), ", ".join(flags)])
    html_rows = [[esc(r[0]), f"<code>{esc(r[1])}</code>", esc(r[2]),
                  "<br/>".join(f"<code>{esc(h)}</code>" for h in r[3].splitlines()), esc(r[4])]
                 for r in rows]
    html = (f'<div class="sk-box sk-processors">{STYLE}'
            f"{table_html(_PROC_HEADERS, html_rows, numeric=(0,))}</div>")
    text = text_table(_PROC_HEADERS, [[*r[:3], r[3].replace(chr(10), "; "), r[4]]
                                      for r in rows], max_width=90)
    return HtmlBlock(html, text)


# ----------------------------------------------------------------------------- traces


def _trace_cells(r: TraceRecord) -> list[str]:
    return [str(r.processor_id), str(r.hook), "" if r.step is None else str(r.step),
            str(r.calls), str(r.dropped), fmt_ms(r.duration), fmt_ms(r.first_call),
            str(r.outcome), str(r.detail or "")]


def trace_html(trace: Sequence[TraceRecord]) -> str:
    """An HTML table of ``TraceRecord``s: processor, hook, step, calls, dropped, time, outcome."""
    rows, classes = [], []
    for r in trace:
        cells = [esc(c) for c in _trace_cells(r)]
        outcome = str(r.outcome)
        kind = {"tripwire": "tripwire", "error": "error", "retry": "warn",
                "dropped": "warn", "changed": "warn"}.get(outcome, "ok")
        cells[7] = badge(outcome, kind)
        cells[0] = f"<code>{cells[0]}</code>"
        rows.append(cells)
        classes.append({"tripwire": "sk-row-tripwire", "error": "sk-row-error",
                        "retry": "sk-row-retry"}.get(outcome, ""))
    if not rows:
        return '<div class="sk-muted">no processor ran (empty trace)</div>'
    return table_html(_TRACE_HEADERS, rows, classes, numeric=(2, 3, 4, 5, 6))


def trace_text(trace: Sequence[TraceRecord]) -> str:
    """The trace as an aligned plain-text table."""
    return text_table(_TRACE_HEADERS, [_trace_cells(r) for r in trace])


class TraceView(list["TraceRecord"]):
    """A list of ``TraceRecord``s that shows itself as a timeline and a table.

    Example:
        >>> display.show_trace(result.trace)    # in Jupyter: SVG timeline + table
    """

    def to_text(self) -> str:
        return trace_text(self)

    def _repr_html_(self) -> str:
        return (f'<div class="sk-box sk-trace">{STYLE}{trace_timeline_svg(self)}'
                f"{trace_html(self)}</div>")

    def _repr_pretty_(self, printer: Printer, cycle: bool) -> None:
        printer.text("TraceView([...])" if cycle else self.to_text())


# ----------------------------------------------------------------------------- results


_STEP_HEADERS = ("step", "attempt", "finish", "text", "tool calls", "tool results", "tokens",
                 "tripwire")


def _step_cells(s: StepView) -> list[str]:
    calls = ", ".join(f"{c.tool_name}({fmt_value(c.args)})" for c in s.tool_calls)
    results = ", ".join(f"{r.tool_name} → {'✗ ' if r.is_error else ''}"
                        f"{fmt_value(r.result)}" for r in s.tool_results)
    u = s.usage
    tokens = f"{u.input_tokens}/{u.output_tokens}/{u.total_tokens}"
    trip = ""
    if s.tripwire is not None:
        trip = f"{s.tripwire.processor_id or '?'}: {s.tripwire.reason}"
    attempt = str(s.retry_count + 1) + (" (cached)" if s.from_cache else "")
    return [str(s.step_number), attempt, str(s.finish_reason), s.text, calls, results, tokens,
            trip]


def steps_html(steps: Sequence[StepView]) -> str:
    """An HTML table of a result's steps (rejected attempts highlighted)."""
    rows, classes = [], []
    for s in steps:
        cells = [esc(short(c)) for c in _step_cells(s)]
        cells[3] = f"<code>{cells[3]}</code>" if cells[3] else ""
        cells[2] = badge(str(s.finish_reason), "warn" if s.finish_reason == "retry" else
                         "error" if s.finish_reason == "error" else "step")
        rows.append(cells)
        classes.append("sk-row-tripwire" if s.tripwire is not None and not s.tripwire.retry
                       else "sk-row-retry" if s.finish_reason == "retry" else "")
    if not rows:
        return '<div class="sk-muted">no steps</div>'
    return table_html(_STEP_HEADERS, rows, classes, numeric=(0, 1))


def tripwire_html(info: TripwireView) -> str:
    """The red box that marks a tripwire: processor, hook, reason, metadata."""
    where = f" in <code>{esc(info.hook)}</code>" if getattr(info, "hook", None) else ""
    meta = getattr(info, "metadata", None)
    meta_html = (f'<div class="sk-muted">metadata: <code>{esc(short(fmt_value(meta), 300))}'
                 f"</code></div>") if meta not in (None, {}) else ""
    retry = " (asked for a retry)" if getattr(info, "retry", False) else ""
    return (f'<div class="sk-tripwire"><b>⛔ Tripwire</b> by processor '
            f"<code>{esc(info.processor_id or '?')}</code>{where}{retry}<br/>"
            f"<b>reason:</b> {esc(info.reason)}{meta_html}</div>")


def result_html(result: ResultView) -> str:
    """An ``AgentResult``: summary, tripwire/error box, answer, steps, processor timeline, trace."""
    u = result.usage
    kind = "tripwire" if result.tripwire is not None else \
        "error" if result.error is not None else "ok"
    summary = (f'<div>{badge(result.finish_reason, kind)} · {len(result.steps)} step(s) · '
               f"tokens in/out/total {u.input_tokens}/{u.output_tokens}/{u.total_tokens}"
               f' · <span class="sk-muted">run {esc(result.run_id)}</span></div>')
    parts = [summary]
    if result.tripwire is not None:
        parts.append(tripwire_html(result.tripwire))
    if result.error is not None:
        parts.append(f'<div class="sk-error"><b>Error</b> {esc(type(result.error).__name__)}: '
                     f"{esc(result.error)}</div>")
    answer = esc(result.text) if result.text else '<span class="sk-muted">(no text)</span>'
    parts.append(f'<div class="sk-answer">{answer}</div>')
    if result.object is not None:
        parts.append(f'<h4 class="sk-h">Object</h4><pre>{esc(fmt_value(result.object))}</pre>')
    parts.append(f'<h4 class="sk-h">Steps</h4>{steps_html(result.steps)}')
    if result.trace:
        parts.append(f'<h4 class="sk-h">Processor timeline</h4>'
                     f"{trace_timeline_svg(result.trace)}")
        parts.append(f'<h4 class="sk-h">Trace</h4>{trace_html(result.trace)}')
    return f'<div class="sk-box sk-result">{STYLE}{"".join(parts)}</div>'


def result_text(result: ResultView) -> str:
    """An ``AgentResult`` as plain text: summary, tripwire, answer, steps and trace tables."""
    u = result.usage
    lines = [f"AgentResult: {result.finish_reason} · {len(result.steps)} step(s) · tokens "
             f"{u.input_tokens}/{u.output_tokens}/{u.total_tokens} · run {result.run_id}"]
    if result.tripwire is not None:
        t = result.tripwire
        lines.append(f"TRIPWIRE by {t.processor_id or '?'}"
                     f"{' in ' + t.hook if t.hook else ''}: {t.reason}")
    if result.error is not None:
        lines.append(f"ERROR {type(result.error).__name__}: {result.error}")
    lines.append(f"text: {result.text!r}")
    if result.steps:
        lines += ["", text_table(_STEP_HEADERS, [_step_cells(s) for s in result.steps])]
    if result.trace:
        lines += ["", trace_text(result.trace)]
    return "\n".join(lines)
