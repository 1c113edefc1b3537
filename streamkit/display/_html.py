"""Shared pieces of the HTML renderings: escaping, value formatting, the style sheet, tables.

What belongs here: small, dependency-free helpers every rendering uses. What does not: knowledge
of any particular object (graphs, chunks, traces live in their own modules).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Protocol

import msgspec

__all__ = ["HtmlBlock", "esc", "short", "fmt_value", "fmt_ms", "STYLE", "table_html", "text_table",
           "badge", "is_unset", "attr"]

#: Every HTML block carries this style sheet (scoped by ``sk-`` class names) so it renders the
#: same in JupyterLab, classic Notebook, VS Code and exported HTML; colours set both foreground
#: and background so dark themes stay readable.
STYLE = """<style>
.sk-box{font-family:var(--jp-content-font-family,system-ui,sans-serif);font-size:13px;
  max-width:100%;overflow-x:auto}
.sk-box table.sk-table{border-collapse:collapse;margin:4px 0 10px 0;font-size:12px}
.sk-box .sk-table th{text-align:left;padding:3px 8px;border-bottom:2px solid #999;
  font-weight:600;white-space:nowrap}
.sk-box .sk-table td{padding:2px 8px;border-bottom:1px solid #ddd;vertical-align:top}
.sk-box .sk-table td.sk-num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.sk-box .sk-table code,.sk-box pre{font-family:var(--jp-code-font-family,monospace);
  white-space:pre-wrap;word-break:break-word}
.sk-box .sk-table tr.sk-row-tripwire td{background:#fde8e8;color:#7a1010}
.sk-box .sk-table tr.sk-row-error td{background:#f6e3e3;color:#5a0d0d}
.sk-box .sk-table tr.sk-row-retry td{background:#fff4dd;color:#6b4a00}
.sk-box .sk-badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;
  font-family:var(--jp-code-font-family,monospace);background:#e8e8e8;color:#222;
  white-space:nowrap}
.sk-box .sk-b-text{background:#e3f0ff;color:#0b3d75}
.sk-box .sk-b-reasoning{background:#efe6fa;color:#4b2a7b}
.sk-box .sk-b-tool{background:#e2f4e6;color:#1d5a2c}
.sk-box .sk-b-step{background:#ececec;color:#333}
.sk-box .sk-b-data{background:#fff0d6;color:#6b4500}
.sk-box .sk-b-tripwire,.sk-box .sk-b-error{background:#c62828;color:#fff}
.sk-box .sk-b-ok{background:#dff3e4;color:#1d5a2c}
.sk-box .sk-b-warn{background:#fff0d6;color:#6b4500}
.sk-box .sk-tripwire{border:2px solid #c62828;background:#fdecec;color:#7a1010;
  border-radius:6px;padding:6px 10px;margin:6px 0}
.sk-box .sk-error{border:2px solid #5a0d0d;background:#f6e3e3;color:#5a0d0d;
  border-radius:6px;padding:6px 10px;margin:6px 0}
.sk-box .sk-retry{border-left:4px solid #e0a000;background:#fff8e6;color:#6b4a00;
  padding:3px 8px;margin:4px 0;font-size:12px}
.sk-box .sk-answer{border:1px solid #ccc;border-radius:6px;padding:6px 10px;margin:6px 0;
  white-space:pre-wrap;background:#fbfbfb;color:#111}
.sk-box .sk-muted{color:#777;font-size:12px}
.sk-box del.sk-withdrawn{color:#999;text-decoration:line-through}
.sk-box .sk-tool{font-family:var(--jp-code-font-family,monospace);font-size:12px;
  background:#eef7f0;color:#1d5a2c;border-radius:4px;padding:1px 6px;margin:2px 0;
  display:inline-block}
.sk-box h4.sk-h{margin:10px 0 2px 0;font-size:13px}
.sk-box details>summary{cursor:pointer;color:#555;font-size:12px}
</style>"""


class Printer(Protocol):
    """What ``_repr_pretty_`` uses of IPython's pretty printer."""

    def text(self, obj: str) -> None: ...


class HtmlBlock:
    """A ready-made HTML block with a plain-text fallback (what display helpers return)."""

    __slots__ = ("html", "text")

    def __init__(self, html: str, text: str = "") -> None:
        self.html = html
        self.text = text

    def _repr_html_(self) -> str:
        return self.html

    def _repr_pretty_(self, printer: Printer, cycle: bool) -> None:
        printer.text(self.text or "<HTML block>")

    def __repr__(self) -> str:
        return self.text or "<HTML block>"


def esc(value: object) -> str:
    """``value`` as text, HTML-escaped (quotes too, so it is safe inside attributes)."""
    return html.escape(str(value), quote=True)


def is_unset(value: object) -> bool:
    """True for msgspec's ``UNSET`` (an absent field), without importing msgspec eagerly."""
    return type(value).__name__ == "UnsetType"


def attr(obj: object, name: str) -> object:
    """``obj.name``, or ``None`` when it is missing or ``UNSET``."""
    value = getattr(obj, name, None)
    return None if value is None or is_unset(value) else value


def _jsonable(value: object) -> object:
    try:
        return msgspec.to_builtins(value)
    except Exception:  # noqa: BLE001 - anything msgspec cannot convert is shown by repr
        return repr(value)


def fmt_value(value: object) -> str:
    """A compact one-line form: strings as they are, everything else as JSON (or ``repr``)."""
    if value is None or is_unset(value):
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False, separators=(", ", ": "),
                          default=repr)
    except (TypeError, ValueError):
        return repr(value)


def short(text: str, limit: int = 160) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fmt_ms(seconds: float | None, digits: int = 3) -> str:
    """Seconds as milliseconds (``'0.012'``); ``''`` for ``None``."""
    return "" if seconds is None else f"{seconds * 1e3:.{digits}f}"


def badge(text: str, kind: str = "") -> str:
    """A small coloured label; ``kind`` picks the colour (``text``, ``tool``, ``tripwire``...)."""
    cls = f" sk-b-{kind}" if kind else ""
    return f'<span class="sk-badge{cls}">{esc(text)}</span>'


def table_html(headers: Sequence[str], rows: Iterable[Sequence[str]],
               row_classes: Iterable[str] | None = None,
               numeric: Iterable[int] = ()) -> str:
    """An HTML table. Cells must already be HTML (escape them with ``esc``)."""
    nums = set(numeric)
    classes = list(row_classes) if row_classes is not None else None
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = "".join(f'<td class="sk-num">{c}</td>' if j in nums else f"<td>{c}</td>"
                        for j, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return (f'<table class="sk-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def text_table(headers: Sequence[str], rows: Iterable[Sequence[str]], *,
               max_width: int = 48) -> str:
    """A plain-text table with aligned columns (cells cut to ``max_width``)."""
    cut = [[short(str(c).replace("\n", "⏎"), max_width) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cut:
        for j, cell in enumerate(row):
            widths[j] = max(widths[j], len(cell))
    line = "  ".join(h.ljust(widths[j]) for j, h in enumerate(headers)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    out = [line, rule]
    out += ["  ".join(c.ljust(widths[j]) for j, c in enumerate(row)).rstrip() for row in cut]
    return "\n".join(out)
