"""SVG charts: the processor timeline of a run's trace, and a small bar chart.

What does not belong here: tables (``_tables``) and the graph drawing (``_graph``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidArgument
from ._html import esc, fmt_ms

if TYPE_CHECKING:
    from ..processors._runtime import TraceRecord

__all__ = ["trace_timeline_svg", "bar_chart_svg", "HOOK_ORDER"]

#: The order hooks run in within one step (the trace lists stream hooks at the end of a step,
#: when their counters are read; the timeline puts them back where they ran).
HOOK_ORDER = ("process_input", "process_input_step", "process_llm_request", "process_api_error",
              "process_output_stream", "process_llm_response", "process_output_step",
              "process_tool_result", "process_output_result")

_ONCE_PER_ATTEMPT = frozenset(("process_input_step", "process_llm_request",
                               "process_output_stream", "process_llm_response",
                               "process_output_step"))

_HOOK_COLOURS = {
    "process_input": "#8d6e63", "process_input_step": "#5c6bc0",
    "process_llm_request": "#26a69a", "process_api_error": "#ef6c00",
    "process_output_stream": "#1e88e5", "process_llm_response": "#7cb342",
    "process_output_step": "#8e24aa", "process_tool_result": "#00897b",
    "process_output_result": "#6d4c41",
}
_FONT = 'font-family="ui-monospace,SFMono-Regular,Menlo,Consolas,monospace"'


def _bands(trace: Sequence[TraceRecord]) -> list[tuple[str, list[TraceRecord]]]:
    """Split the trace into bands: ``input``, ``step 0``, ``step 1 · retry 1``, …, ``output``.

    A new band starts when the step changes, or when a hook that runs once per attempt repeats
    for the same processor inside a step — that is a retried attempt of the same step
    (``process_tool_result`` runs once per tool and ``process_api_error`` once per failed call,
    so they do not count)."""
    bands: list[tuple[str, list[TraceRecord]]] = []
    seen: set[tuple[str, str]] = set()
    current: object = object()  # no step yet: unequal to every step, None included
    attempts: dict[int, int] = {}
    any_step = False
    for r in trace:
        key = (r.processor_id, r.hook)
        if r.step != current or (key in seen and r.hook in _ONCE_PER_ATTEMPT):
            if r.step is None:
                name = "output" if any_step else "input"
            else:
                any_step = True
                n = attempts.get(r.step, 0)
                attempts[r.step] = n + 1
                name = f"step {r.step}" + (f" · retry {n}" if n else "")
            bands.append((name, []))
            seen = set()
            current = r.step
        seen.add(key)
        bands[-1][1].append(r)
    rank = {h: i for i, h in enumerate(HOOK_ORDER)}
    return [(name, sorted(rs, key=lambda r: rank.get(r.hook, len(rank)))) for name, rs in bands]


def trace_timeline_svg(trace: Sequence[TraceRecord], *, width: float = 640.0) -> str:
    """Which processor did what on which step, and for how long, as an SVG timeline.

    One row per processor; one band per step (and per retried attempt). Inside a band, hooks
    are laid out in the order they run; message hooks of different processors run one after
    another, while stream hooks run fused (chunk by chunk, interleaved), so their bars start
    together. Bar length is time spent inside the hook; the x axis is processor time only (model
    and tool time are not in the trace). Tripwires are outlined in red with a ✕.
    """
    if not trace:
        return '<div class="sk-muted">empty trace</div>'
    procs: list[str] = []
    for r in trace:
        if r.processor_id not in procs:
            procs.append(r.processor_id)
    bands = _bands(trace)
    total = sum(r.duration for r in trace) or 1e-9
    scale = width / total
    min_w, row_h, top = 3.0, 22.0, 34.0
    label_w = max(len(p) for p in procs) * 6.7 + 18
    x = label_w
    bars: list[str] = []
    band_marks: list[str] = []
    for b, (name, records) in enumerate(bands):
        band_x = x
        cursor = x
        stream_start: float | None = None
        stream_end = x
        for r in records:
            w = max(r.duration * scale, min_w)
            if r.hook == "process_output_stream":
                if stream_start is None:
                    stream_start = cursor
                start = stream_start
                stream_end = max(stream_end, start + w)
                end = start + w
            else:
                if stream_start is not None:          # the stream phase is over
                    cursor = max(cursor, stream_end)
                    stream_start = None
                start, end = cursor, cursor + w
                cursor = end
            bars.append(_bar(r, start, w, top + procs.index(r.processor_id) * row_h, row_h))
        x = max(cursor, stream_end) + 10
        spent = sum(r.duration for r in records)
        shade = "#f4f6f9" if b % 2 == 0 else "#ffffff"
        band_marks.append(
            f'<g class="sk-band"><rect x="{band_x - 4:.1f}" y="{top - 22:.1f}" '
            f'width="{x - band_x - 2:.1f}" height="{len(procs) * row_h + 24:.1f}" fill="{shade}" '
            f'stroke="#d5dbe3"/><text x="{band_x:.1f}" y="{top - 9:.1f}" font-size="10" '
            f'fill="#445">{esc(name)}</text><title>{esc(name)}: {fmt_ms(spent)} ms in '
            f"processors</title></g>")
    height = top + len(procs) * row_h + 40
    labels = [f'<text x="{label_w - 8:.1f}" y="{top + i * row_h + 15:.1f}" font-size="11" '
              f'text-anchor="end" fill="#222">{esc(p)}</text>' for i, p in enumerate(procs)]
    used = [h for h in HOOK_ORDER if any(r.hook == h for r in trace)]
    legend, lx = [], label_w
    for h in used:
        legend.append(f'<rect x="{lx:.1f}" y="{height - 22:.1f}" width="10" height="10" '
                      f'fill="{_HOOK_COLOURS[h]}"/><text x="{lx + 14:.1f}" y="{height - 13:.1f}" '
                      f'font-size="10" fill="#444">{esc(h.removeprefix("process_"))}</text>')
        lx += 24 + len(h.removeprefix("process_")) * 6.1
    total_w = max(x, lx) + 10
    caption = (f'<text x="{total_w - 8:.1f}" y="{height - 13:.1f}" font-size="10" fill="#666" '
               f'text-anchor="end">processor time {fmt_ms(sum(r.duration for r in trace))} '
               f"ms</text>") if lx + 220 < total_w else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="sk-timeline" width="{total_w:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {total_w:.0f} {height:.0f}" '
            f'style="max-width:100%;height:auto" {_FONT}>'
            f'<rect width="{total_w:.0f}" height="{height:.0f}" fill="#fff" rx="6"/>'
            f'{"".join(band_marks)}{"".join(labels)}{"".join(bars)}{"".join(legend)}{caption}'
            f"</svg>")


def _bar(r: TraceRecord, x: float, w: float, y: float, row_h: float) -> str:
    colour = _HOOK_COLOURS.get(r.hook, "#777")
    tripped = r.outcome == "tripwire"
    failed = r.outcome == "error"
    stroke = ' stroke="#c62828" stroke-width="2.5"' if tripped else \
        ' stroke="#000" stroke-width="2"' if failed else ""
    tip = (f"{r.processor_id} · {r.hook} · step {'-' if r.step is None else r.step}\n"
           f"{fmt_ms(r.duration)} ms · {r.calls} call(s)"
           + (f" · {r.dropped} dropped" if r.dropped else "")
           + (f" · first call {fmt_ms(r.first_call)} ms" if r.first_call is not None else "")
           + f"\noutcome: {r.outcome}" + (f" — {r.detail}" if r.detail else ""))
    out = [f'<g class="sk-bar" data-processor="{esc(r.processor_id)}" data-hook="{esc(r.hook)}" '
           f'data-outcome="{esc(r.outcome)}"><title>{esc(tip)}</title>'
           f'<rect x="{x:.1f}" y="{y + 4:.1f}" width="{w:.1f}" height="{row_h - 8:.1f}" rx="2" '
           f'fill="{colour}"{stroke}/>']
    if tripped or failed:
        mark = "✕" if tripped else "!"
        out.append(f'<text x="{x + w + 3:.1f}" y="{y + 15:.1f}" font-size="12" font-weight="bold" '
                   f'fill="{"#c62828" if tripped else "#000"}">{mark}</text>')
    elif r.dropped:
        out.append(f'<text x="{x + w + 2:.1f}" y="{y + 15:.1f}" font-size="9" fill="#8a5a00">'
                   f"−{r.dropped}</text>")
    out.append("</g>")
    return "".join(out)


def bar_chart_svg(labels: Sequence[str], values: Sequence[float], *, title: str = "",
                  unit: str = "", width: float = 560.0, fmt: str = "{:,.0f}") -> str:
    """A horizontal bar chart: one labelled bar per value, its value printed at the end.

    Example:
        >>> display.bar_chart(["0", "4", "16"], [1.2e6, 8e5, 3e5], unit="chunks/s")
    """
    if len(labels) != len(values):
        raise InvalidArgument(f"bar chart: {len(labels)} labels but {len(values)} values; "
                              f"give one value per label")
    top = 30.0 if title else 10.0
    row_h = 24.0
    label_w = max([len(str(s)) for s in labels] + [1]) * 6.7 + 16
    peak = max([float(v) for v in values] + [1e-12])
    value_w = max(len(fmt.format(v) + " " + unit) for v in values) * 6.4 + 10 if values else 0
    plot_w = width - label_w - value_w
    height = top + len(values) * row_h + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="sk-bars" width="{width:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
           f'style="max-width:100%;height:auto" {_FONT}>'
           f'<rect width="{width:.0f}" height="{height:.0f}" fill="#fff" rx="6"/>']
    if title:
        out.append(f'<text x="10" y="19" font-size="12" font-weight="bold" fill="#222">'
                   f"{esc(title)}</text>")
    for i, (label, value) in enumerate(zip(labels, values)):
        y = top + i * row_h
        w = max(plot_w * float(value) / peak, 1.0)
        text = fmt.format(value) + (f" {unit}" if unit else "")
        out.append(f'<g class="sk-bar-row"><title>{esc(label)}: {esc(text)}</title>'
                   f'<text x="{label_w - 8:.1f}" y="{y + 16:.1f}" font-size="11" '
                   f'text-anchor="end" fill="#222">{esc(label)}</text>'
                   f'<rect x="{label_w:.1f}" y="{y + 4:.1f}" width="{w:.1f}" '
                   f'height="{row_h - 8:.1f}" rx="2" fill="#1e88e5"/>'
                   f'<text x="{label_w + w + 5:.1f}" y="{y + 16:.1f}" font-size="10" '
                   f'fill="#333">{esc(text)}</text></g>')
    out.append("</svg>")
    return "".join(out)
