"""MkDocs hook: tables generated from the code, so the reference cannot drift from it.

A page writes a marker comment and gets the table in its place at build time:

* ``<!-- streamkit:chunk-table -->`` — every chunk class of ``streamkit.chunks.Chunk``: wire
  type, class, payload class and its fields (attribute, wire key, type, required or not).
* ``<!-- streamkit:hook-table -->`` — every hook, the lanes it runs in and the arguments it can
  ask for (``streamkit.processors._spec.HOOK_PARAMS``, ``streamkit.agent._agent.LANE_HOOKS``).
* ``<!-- streamkit:routing-table -->`` — the routing table (``streamkit.agent._routing.ROUTES``).

``tests/test_docs.py`` builds the site with ``mkdocs build --strict`` and checks the tables.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec
from msgspec import UnsetType

from streamkit.agent._agent import LANE_HOOKS
from streamkit.agent._routing import ROUTES
from streamkit.chunks import Chunk, DataChunk
from streamkit.processors._spec import FLUSH_METHOD, FLUSH_PARAMS, HOOK_PARAMS, HOOKS

MARKERS = ("chunk-table", "hook-table", "routing-table")
_COMMON = ("state", "abort", "retry_count", "request_context", "tracing_context")


def type_name(tp: Any) -> str:
    """A short, readable spelling of a field annotation (``UNSET`` alternatives left out)."""
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        names = [type_name(a) for a in get_args(tp) if a is not UnsetType]
        return " or ".join(names)  # a "|" would end the Markdown table cell
    if tp is Any:
        return "Any"
    if tp is type(None):
        return "None"
    args = get_args(tp)
    origin = get_origin(tp)
    if origin is not None and args:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(map(type_name, args))}]"
    return getattr(tp, "__name__", str(tp))


def _fields(cls: Any) -> str:
    rows = []
    for f in msgspec.structs.fields(cls):
        if f.name == "extra":
            continue
        wire = f" (`{f.encode_name}`)" if f.encode_name != f.name else ""
        need = "" if f.required else "?"
        rows.append(f"`{f.name}{need}`{wire}: {type_name(f.type)}")
    return "<br>".join(rows) or "—"


def chunk_table() -> str:
    lines = ["| `type` | class | payload | payload fields (`?` optional; wire key when it "
             "differs) |", "|---|---|---|---|"]
    for cls in get_args(Chunk):
        if cls is DataChunk:
            lines.append("| `data-*` | `DataChunk` | (none: no envelope) | "
                         f"{_fields(DataChunk)} |")
            continue
        payload = getattr(cls, "_payload_cls", None)
        if payload is None:  # object / object-result carry their value at top level
            top = [f for f in msgspec.structs.fields(cls)
                   if f.name not in ("run_id", "from_", "metadata")]
            fields = "<br>".join(f"`{f.name}?`: {type_name(f.type)} (top level)" for f in top)
            lines.append(f"| `{cls.type}` | `{cls.__name__}` | (none) | {fields} |")
            continue
        lines.append(f"| `{cls.type}` | `{cls.__name__}` | `{payload.__name__}` | "
                     f"{_fields(payload)} |")
    return "\n".join(lines)


def hook_table() -> str:
    lines = ["| hook | lanes | arguments it can ask for (besides the common ones) |",
             "|---|---|---|"]
    for hook in HOOKS:
        lanes = ", ".join(f"`{lane}`" for lane, hooks in LANE_HOOKS.items() if hook in hooks)
        own = sorted(HOOK_PARAMS[hook] - set(_COMMON))
        lines.append(f"| `{hook}` | {lanes} | {', '.join(f'`{p}`' for p in own)} |")
    flush = sorted(FLUSH_PARAMS - set(_COMMON))
    lines.append(f"| `{FLUSH_METHOD}` (not a hook) | with `process_output_stream` | "
                 f"{', '.join(f'`{p}`' for p in flush)} |")
    lines.append("")
    lines.append("Every hook can also ask for " + ", ".join(f"`{p}`" for p in _COMMON) + ".")
    return "\n".join(lines)


def routing_table() -> str:
    lines = ["| origin | through the output processors' `process_output_stream` | "
             "yielded live, before the chunk being processed |", "|---|---|---|"]
    for origin, route in ROUTES.items():
        lines.append(f"| `{origin.name}` ({origin.value}) | {'yes' if route.processors else 'no'}"
                     f" | {'yes' if route.live else 'no'} |")
    return "\n".join(lines)


TABLES = {"chunk-table": chunk_table, "hook-table": hook_table, "routing-table": routing_table}


def on_page_markdown(markdown: str, **_: Any) -> str:
    for name, build in TABLES.items():
        marker = f"<!-- streamkit:{name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, build())
    return markdown
