"""A ``Graph`` drawn as inline SVG by a small layered layout of our own (no graphviz, no JS).

The layout, in four steps:

1. **Main path.** A depth-first walk from ``start`` marks back-edges (edges into a node still on
   the walk's stack). Over the remaining DAG the main path is the longest ``start → end`` path
   where an unlabelled edge counts 1 and a labelled one (a condition) slightly less than 0 — the
   path the run takes when every default transition is followed. Its nodes form one column,
   top to bottom.
2. **Side nodes.** Every other node goes into a column on the right, at the mean height of the
   main nodes it is connected to (pushed down so none overlap).
3. **Edges.** Consecutive main nodes are joined by a straight arrow. Other main → main edges
   (skips and back-edges, e.g. ``step_finish → process_input_step``) are routed on the left,
   each in its own lane. Every edge touching a side node is routed through a vertical *bus* on
   the right, one bus per destination, so thirty ``→ tripwire`` edges read as one rail with
   junction dots rather than thirty crossing lines.
4. **Nodes** are styled by kind (``hook``, ``model``, ``tools``, ``io``, ``control``) and list
   the processors that run there as chips; a hook with no processors is drawn dashed.

What does not belong here: tables and charts (``_tables``, ``_charts``), HTML page assembly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from ._html import esc

# What the drawing reads off ``streamkit.graph``'s ``Graph``, ``Node`` and ``Edge``, by
# attribute: a graph renders itself through display (``_repr_html_``: an import inside the
# method), so display names the shapes it reads instead of importing the classes, which would
# close a circle of imports (even under ``TYPE_CHECKING``). Read-only properties, which the
# frozen dataclasses match.


class NodeView(Protocol):
    """A graph node as drawn (``streamkit.graph.Node``)."""

    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def processors(self) -> tuple[str, ...]: ...
    @property
    def group(self) -> str | None: ...


class EdgeView(Protocol):
    """A transition as drawn (``streamkit.graph.Edge``)."""

    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def label(self) -> str: ...


class GraphView(Protocol):
    """A loop graph as drawn (``streamkit.graph.Graph``)."""

    @property
    def nodes(self) -> Sequence[NodeView]: ...
    @property
    def edges(self) -> Sequence[EdgeView]: ...
    @property
    def title(self) -> str: ...
    def to_text(self) -> str: ...
    def to_mermaid(self) -> str: ...

#: A port on a box's side: an edge leaving or entering it (``("out"|"in", edge index)``), or the
#: bus into a side node (``("bus", node name)``).
PortKey: TypeAlias = "tuple[str, int] | tuple[str, str]"

__all__ = ["graph_svg"]

_CHAR = 0.61          # monospace glyph width, in em
_TITLE, _LABEL, _CHIP, _EDGE = 12.0, 10.5, 10.0, 10.0
_GAP = 40             # vertical gap between main nodes (room for an edge label)
_LANE = 14            # distance between two lanes
_MARGIN = 14

_KINDS: dict[str, tuple[str, str, str]] = {   # kind -> (fill, stroke, tag)
    "hook": ("#e8f1fb", "#3f73b5", "HOOK"),
    "model": ("#f0e7fb", "#6f45a8", "MODEL"),
    "tools": ("#e5f5e9", "#2f7d43", "TOOLS"),
    "io": ("#fff3dc", "#b7791f", "I/O"),
    "control": ("#f1f1f1", "#7a7a7a", "CONTROL"),
}
_PALETTE = ("#3f73b5", "#2f7d43", "#8e44ad", "#00838f", "#ad1457", "#5d6d7e")


def _tw(text: str, size: float) -> float:
    """Estimated width of ``text`` in a monospace font of ``size`` px."""
    return len(text) * size * _CHAR


def _fit(text: str, width: float, size: float) -> str:
    room = max(int(width / (size * _CHAR)), 2)
    return text if len(text) <= room else text[: room - 1] + "…"


def _edge_colour(label: str, fallback: int) -> str:
    low = label.lower()
    if "retry" in low:
        return "#d68000"
    if "tripwire" in low:
        return "#c62828"
    if "error" in low or "not recovered" in low:
        return "#6d4c41"
    return _PALETTE[fallback % len(_PALETTE)]


@dataclass
class _Box:
    node: NodeView
    is_main: bool
    w: float = 0.0
    h: float = 0.0
    x: float = 0.0
    y: float = 0.0
    chip_rows: list[list[str]] = field(default_factory=list)
    ports: dict[str, list[PortKey]] = field(default_factory=lambda: {"left": [], "right": []})

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    def port(self, side: str, key: PortKey) -> tuple[float, float]:
        keys = self.ports[side]
        i = keys.index(key)
        y = self.y + self.h * (i + 1) / (len(keys) + 1)
        return (self.x if side == "left" else self.x + self.w), y


def _measure(box: _Box, width: float) -> None:
    """Wrap the processor chips into rows and set the box height."""
    box.w = width
    rows: list[list[str]] = []
    used = width
    for pid in box.node.processors:
        chip = _tw(pid, _CHIP) + 10
        if rows and used + chip + 4 <= width - 16:
            rows[-1].append(pid)
            used += chip + 4
        else:
            rows.append([pid])
            used = chip
    box.chip_rows = rows
    has_label = bool(box.node.label) and box.node.label != box.node.name
    box.h = 10 + 15 + (14 if has_label else 0) + len(rows) * 19 + 6


def _back_edges(graph: GraphView) -> set[int]:
    """Indexes of the edges that close a cycle in a depth-first walk from ``start``."""
    out: dict[str, list[int]] = {n.name: [] for n in graph.nodes}
    for i, e in enumerate(graph.edges):
        out[e.src].append(i)
    back: set[int] = set()
    state: dict[str, int] = {}          # 1 on the stack, 2 done
    root = "start"
    stack: list[tuple[str, int]] = [(root, 0)]
    state[root] = 1
    while stack:
        name, k = stack[-1]
        if k < len(out[name]):
            stack[-1] = (name, k + 1)
            i = out[name][k]
            dst = graph.edges[i].dst
            if state.get(dst) == 1:
                back.add(i)
            elif dst not in state:
                state[dst] = 1
                stack.append((dst, 0))
        else:
            state[name] = 2
            stack.pop()
    return back


def _main_path(graph: GraphView, back: set[int]) -> list[str]:
    """The longest start → end path over forward edges (unlabelled edges weigh 1, labelled ones
    -0.01, so defaults win and a detour through a condition never does)."""
    names = [n.name for n in graph.nodes]
    fwd: dict[str, list[tuple[str, float]]] = {n: [] for n in names}
    indegree = dict.fromkeys(names, 0)
    for i, e in enumerate(graph.edges):
        if i not in back:
            fwd[e.src].append((e.dst, 1.0 if not e.label else -0.01))
            indegree[e.dst] += 1
    topo: list[str] = []
    ready = [n for n in names if indegree[n] == 0]
    while ready:                       # Kahn: the forward edges form a DAG
        name = ready.pop()
        topo.append(name)
        for dst, _ in fwd[name]:
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    best = dict.fromkeys(names, float("-inf"))
    best["end"] = 0.0
    choice: dict[str, str] = {}
    for name in reversed(topo):
        for dst, weight in fwd[name]:       # strict > keeps the first edge on ties
            if best[dst] != float("-inf") and weight + best[dst] > best[name] \
                    and name != "end":
                best[name], choice[name] = weight + best[dst], dst
    path = ["start"]
    while path[-1] in choice and path[-1] != "end":
        path.append(choice[path[-1]])
    return path


@dataclass
class _Bus:
    dst: str
    edges: list[int]
    colour: str = ""
    label: str = ""
    x: float = 0.0


@dataclass
class _Layout:
    """Where everything goes: boxes, which edge is drawn how, lanes, and the canvas size."""

    boxes: dict[str, _Box]
    main: list[_Box]
    path_edges: list[int]
    left: list[int]
    lane_x: dict[int, float]
    buses: list[_Bus]
    width: float = 0.0
    bottom: float = 0.0


def _pack_left_lanes(graph: GraphView, left: list[int], row: dict[str, int]) -> dict[int, int]:
    """Lane index per left edge: shortest spans nearest the column, packed like intervals."""
    lanes: list[list[tuple[int, int]]] = []
    lane_of: dict[int, int] = {}
    for i in sorted(left, key=lambda i: abs(row[graph.edges[i].src] - row[graph.edges[i].dst])):
        e = graph.edges[i]
        span = (min(row[e.src], row[e.dst]), max(row[e.src], row[e.dst]))
        for k, used in enumerate(lanes):
            if all(span[1] < a or span[0] > b for a, b in used):
                used.append(span)
                lane_of[i] = k
                break
        else:
            lanes.append([span])
            lane_of[i] = len(lanes) - 1
    return lane_of


def _make_buses(graph: GraphView, right: list[int]) -> list[_Bus]:
    """One bus per destination of the right-hand edges, labelled with their distinct labels."""
    buses: dict[str, _Bus] = {}
    for i in right:
        dst = graph.edges[i].dst
        buses.setdefault(dst, _Bus(dst, [])).edges.append(i)
    for n, bus in enumerate(buses.values()):
        labels: list[str] = []
        for i in bus.edges:
            lab = graph.edges[i].label
            if lab and lab not in labels:
                labels.append(lab)
        bus.label = " / ".join(labels)
        bus.colour = _edge_colour(bus.label, n)
    return list(buses.values())


def _layout(graph: GraphView) -> _Layout:
    """Run the four steps of the module docstring."""
    path = _main_path(graph, _back_edges(graph))
    on_path = set(path)
    boxes = {n.name: _Box(n, n.name in on_path) for n in graph.nodes}
    main = [boxes[name] for name in path]
    side = [b for b in boxes.values() if not b.is_main]

    def text_width(b: _Box) -> float:
        label = b.node.label if b.node.label != b.node.name else ""
        return max(_tw(b.node.name, _TITLE) + 60, _tw(label, _LABEL) + 20)

    main_w = min(max([200.0, *(text_width(b) for b in main)]), 420.0)
    side_w = min(max([160.0, *(text_width(b) for b in side)]), 320.0) if side else 0.0
    for b in main:
        _measure(b, main_w)
    for b in side:
        _measure(b, side_w)

    # edges: the path, left (other main → main), right (anything touching a side node)
    path_edges: list[int] = []
    for k in range(len(path) - 1):
        path_edges.append(next(i for i, e in enumerate(graph.edges)
                               if e.src == path[k] and e.dst == path[k + 1]))
    taken = set(path_edges)
    left = [i for i, e in enumerate(graph.edges) if i not in taken
            and boxes[e.src].is_main and boxes[e.dst].is_main]
    right = [i for i in range(len(graph.edges)) if i not in taken and i not in set(left)]
    lane_of = _pack_left_lanes(graph, left, {name: k for k, name in enumerate(path)})
    lanes = max(lane_of.values(), default=-1) + 1
    buses = _make_buses(graph, right)

    # ports: a stub per left edge end, per right edge source, and one per arriving bus
    for i in left:
        boxes[graph.edges[i].src].ports["left"].append(("out", i))
        boxes[graph.edges[i].dst].ports["left"].append(("in", i))
    for bus in buses:
        for i in bus.edges:
            src = boxes[graph.edges[i].src]
            src.ports["right" if src.is_main else "left"].append(("out", i))
        dst = boxes[bus.dst]
        dst.ports["right" if dst.is_main else "left"].append(("bus", bus.dst))
    for b in boxes.values():          # tall enough to keep its ports apart
        b.h = max(b.h, 9.0 * (max(len(b.ports["left"]), len(b.ports["right"])) + 1))

    # the main column, top to bottom
    x0 = _MARGIN + lanes * _LANE + (12 if lanes else 0) + 8
    y: float = _MARGIN + 6
    for b in main:
        b.x, b.y = x0, y
        y += b.h + _GAP
    main_bottom = y - _GAP

    # the side column: at the mean height of connected main nodes, without overlaps
    wanted: dict[str, float] = {}
    for b in side:
        ys = [boxes[o].cy for e in graph.edges for o in (e.src, e.dst)
              if b.node.name in (e.src, e.dst) and o != b.node.name and boxes[o].is_main]
        wanted[b.node.name] = sum(ys) / len(ys) if ys else main_bottom
    buses.sort(key=lambda bus: (not boxes[bus.dst].is_main,
                                boxes[bus.dst].y if boxes[bus.dst].is_main else wanted[bus.dst]))
    for b in boxes.values():          # ports on a side follow the lane order
        for side_name in ("left", "right"):
            b.ports[side_name].sort(key=lambda key: _port_rank(key, buses))
    lanes_x0 = x0 + main_w + 22
    for k, bus in enumerate(buses):
        bus.x = lanes_x0 + k * _LANE
    side_x = lanes_x0 + len(buses) * _LANE + 16
    floor: float = _MARGIN + 6
    for b in sorted(side, key=lambda b: wanted[b.node.name]):
        b.x = side_x
        b.y = max(wanted[b.node.name] - b.h / 2, floor)
        floor = b.y + b.h + 18

    width = (side_x + side_w if side else x0 + main_w + len(buses) * _LANE + 30) + _MARGIN
    return _Layout(boxes=boxes, main=main, path_edges=path_edges, left=left,
                   lane_x={i: x0 - 12 - k * _LANE for i, k in lane_of.items()}, buses=buses,
                   width=max(width, _MARGIN * 2 + _legend_width()),
                   bottom=max([main_bottom, *(b.y + b.h for b in side)]))


def _port_rank(key: PortKey, buses: list[_Bus]) -> tuple[int, int]:
    """Order of the ports on one side of a box: by the lane their edge runs in."""
    _, ref = key
    if isinstance(ref, str):  # ("bus", node name): the only key naming a node
        return (next(k for k, bus in enumerate(buses) if bus.dst == ref), 0)
    for k, bus in enumerate(buses):
        if ref in bus.edges:
            return (k, 1)
    return (0, ref)


def graph_svg(graph: GraphView) -> str:
    """``graph`` as a standalone ``<svg>`` element (see the module docstring for the layout).

    Every node is a ``<g data-node=...>``, every edge a ``<g data-src=... data-dst=...>`` and
    every processor chip a ``<g data-processor=...>``, each with a ``<title>`` tooltip.
    """
    lay = _layout(graph)
    boxes, edges = lay.boxes, graph.edges
    parts: list[str] = []
    parts += _groups(lay.main)
    parts += [_path_edge(boxes[edges[i].src], boxes[edges[i].dst], edges[i].label)
              for i in lay.path_edges]
    parts += [_left_edge(edges[i], i, boxes, lay.lane_x[i]) for i in lay.left]
    parts += [_bus(bus, graph, boxes) for bus in lay.buses]
    parts += [_node(b) for b in boxes.values()]
    parts.append(_legend(_MARGIN, lay.bottom + 18))
    width, height = lay.width, lay.bottom + 46
    title = esc(graph.title)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="sk-graph" role="img" '
            f'aria-label="{title}" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" style="max-width:100%;height:auto" '
            f'font-family="ui-monospace,SFMono-Regular,Menlo,Consolas,monospace">'
            f"<title>{title}</title>"
            f'<rect x="0" y="0" width="{width:.0f}" height="{height:.0f}" rx="8" fill="#fff"/>'
            f'{"".join(parts)}</svg>')


# ----------------------------------------------------------------------------- drawing


def _arrow(x: float, y: float, direction: str, colour: str) -> str:
    """A filled arrowhead whose tip is at (x, y), pointing ``down``, ``left`` or ``right``."""
    if direction == "down":
        pts = f"{x:.1f},{y:.1f} {x - 4:.1f},{y - 8:.1f} {x + 4:.1f},{y - 8:.1f}"
    elif direction == "left":
        pts = f"{x:.1f},{y:.1f} {x + 8:.1f},{y - 4:.1f} {x + 8:.1f},{y + 4:.1f}"
    else:
        pts = f"{x:.1f},{y:.1f} {x - 8:.1f},{y - 4:.1f} {x - 8:.1f},{y + 4:.1f}"
    return f'<polygon points="{pts}" fill="{colour}"/>'


def _halo_text(x: float, y: float, text: str, colour: str, *, anchor: str = "start",
               rotate: bool = False, size: float = _EDGE) -> str:
    """An edge label on a white plate (so the lines it sits on do not run through it)."""
    w = _tw(text, size) + 4
    left = x - w / 2 if anchor == "middle" else x - 2
    transform = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (f'<g class="sk-label"{transform}><rect x="{left:.1f}" y="{y - size * 0.85:.1f}" '
            f'width="{w:.1f}" height="{size * 1.15:.1f}" rx="2" fill="#fff" '
            f'fill-opacity="0.92"/><text x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
            f'fill="{colour}" text-anchor="{anchor}">{esc(text)}</text></g>')


def _path_edge(a: _Box, b: _Box, label: str) -> str:
    x, y1, y2 = a.cx, a.y + a.h, b.y
    colour = "#555"
    out = [f'<g class="sk-edge" data-src="{esc(a.node.name)}" data-dst="{esc(b.node.name)}">'
           f"<title>{esc(a.node.name)} → {esc(b.node.name)}"
           f"{(': ' + esc(label)) if label else ''}</title>"
           f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2 - 1:.1f}" stroke="{colour}" '
           f'stroke-width="1.6"/>{_arrow(x, y2, "down", colour)}']
    if label:
        out.append(_halo_text(x + 7, (y1 + y2) / 2 + 3, label, "#333"))
    out.append("</g>")
    return "".join(out)


def _left_edge(e: EdgeView, i: int, boxes: dict[str, _Box], lane: float) -> str:
    a, b = boxes[e.src], boxes[e.dst]
    sx, sy = a.port("left", ("out", i))
    tx, ty = b.port("left", ("in", i))
    colour = "#5d6d7e"
    pts = f"{sx:.1f},{sy:.1f} {lane:.1f},{sy:.1f} {lane:.1f},{ty:.1f} {tx - 8:.1f},{ty:.1f}"
    out = [f'<g class="sk-edge" data-src="{esc(e.src)}" data-dst="{esc(e.dst)}">'
           f"<title>{esc(e.src)} → {esc(e.dst)}{(': ' + esc(e.label)) if e.label else ''}"
           f"</title>"
           f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.4"/>'
           f"{_arrow(tx, ty, 'right', colour)}"]
    if e.label:
        out.append(_halo_text(lane + 3, (sy + ty) / 2, e.label, colour, anchor="middle",
                              rotate=True))
    out.append("</g>")
    return "".join(out)


def _bus(bus: _Bus, graph: GraphView, boxes: dict[str, _Box]) -> str:
    dst = boxes[bus.dst]
    side = "right" if dst.is_main else "left"
    tx, ty = dst.port(side, ("bus", bus.dst))
    c = bus.colour
    out = [f'<g class="sk-edge sk-bus" data-dst="{esc(bus.dst)}">']
    ys = [ty]

    def dot(y: float) -> str:        # junctions only where several edges merge
        return (f'<circle cx="{bus.x:.1f}" cy="{y:.1f}" r="2.6" fill="{c}"/>'
                if len(bus.edges) > 1 else "")

    for i in bus.edges:
        e = graph.edges[i]
        src = boxes[e.src]
        sx, sy = src.port("right" if src.is_main else "left", ("out", i))
        ys.append(sy)
        out.append(f'<g data-src="{esc(e.src)}" data-dst="{esc(e.dst)}"><title>{esc(e.src)} → '
                   f"{esc(e.dst)}{(': ' + esc(e.label)) if e.label else ''}</title>"
                   f'<line x1="{sx:.1f}" y1="{sy:.1f}" x2="{bus.x:.1f}" y2="{sy:.1f}" '
                   f'stroke="{c}" stroke-width="1.3"/>{dot(sy)}</g>')
    top, low = min(ys), max(ys)
    out.append(f'<line x1="{bus.x:.1f}" y1="{top:.1f}" x2="{bus.x:.1f}" y2="{low:.1f}" '
               f'stroke="{c}" stroke-width="1.6"/>')
    end = tx + 8 if tx < bus.x else tx - 8
    out.append(f'<line x1="{bus.x:.1f}" y1="{ty:.1f}" x2="{end:.1f}" y2="{ty:.1f}" '
               f'stroke="{c}" stroke-width="1.6"/>')
    out.append(_arrow(tx, ty, "left" if tx < bus.x else "right", c))
    if bus.label:
        # centre the label in the longest stretch of the bus without a junction
        marks = sorted(set(ys))
        gaps = [(marks[k + 1] - marks[k], marks[k]) for k in range(len(marks) - 1)]
        mid = (max(gaps)[1] + max(gaps)[0] / 2) if gaps else ty - 30
        out.append(_halo_text(bus.x + 3.5, mid, bus.label, c, anchor="middle", rotate=True))
    out.append("</g>")
    return "".join(out)


def _node(b: _Box) -> str:
    n = b.node
    fill, stroke, tag = _KINDS.get(n.kind, _KINDS["hook"])
    empty_hook = n.kind == "hook" and not n.processors
    dash = ' stroke-dasharray="5 3"' if empty_hook else ""
    rx = min(b.h / 2, 18) if n.kind == "io" else 6
    procs = ", ".join(n.processors) or "none"
    out = [f'<g class="sk-node sk-kind-{esc(n.kind)}" data-node="{esc(n.name)}">'
           f"<title>{esc(n.name)} ({esc(n.kind)})\n{esc(n.label)}\nprocessors: {esc(procs)}"
           f"</title>"
           f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="{rx:.1f}" '
           f'fill="{fill}" stroke="{stroke}" stroke-width="{1.2 if empty_hook else 1.6}"{dash}/>']
    if n.kind == "model":
        out.append(f'<rect x="{b.x + 3:.1f}" y="{b.y + 3:.1f}" width="{b.w - 6:.1f}" '
                   f'height="{b.h - 6:.1f}" rx="4" fill="none" stroke="{stroke}" '
                   f'stroke-width="0.8"/>')
    ink = "#777" if empty_hook else "#1a1a1a"
    y = b.y + 19
    out.append(f'<text x="{b.x + 10:.1f}" y="{y:.1f}" font-size="{_TITLE}" font-weight="bold" '
               f'fill="{ink}">{esc(_fit(n.name, b.w - 60, _TITLE))}</text>')
    out.append(f'<text x="{b.x + b.w - 8:.1f}" y="{b.y + 12:.1f}" font-size="8" '
               f'text-anchor="end" fill="{stroke}" letter-spacing="0.5">{tag}</text>')
    if n.label and n.label != n.name:
        y += 14
        out.append(f'<text x="{b.x + 10:.1f}" y="{y:.1f}" font-size="{_LABEL}" fill="#555">'
                   f"{esc(_fit(n.label, b.w - 16, _LABEL))}</text>")
    y += 7
    for chips in b.chip_rows:
        x = b.x + 10
        for pid in chips:
            label = _fit(pid, b.w - 30, _CHIP)
            w = _tw(label, _CHIP) + 10
            out.append(f'<g class="sk-proc" data-processor="{esc(pid)}">'
                       f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="15" rx="7.5" '
                       f'fill="#fff" stroke="{stroke}" stroke-width="0.9"/>'
                       f'<text x="{x + 5:.1f}" y="{y + 11:.1f}" font-size="{_CHIP}" '
                       f'fill="#1a1a1a">{esc(label)}</text></g>')
            x += w + 4
        y += 19
    out.append("</g>")
    return "".join(out)


def _groups(main: list[_Box]) -> list[str]:
    """A dashed frame around the main-column nodes of each ``group``."""
    spans: dict[str, tuple[float, float]] = {}
    for b in main:
        g = b.node.group
        if g:
            top, low = spans.get(g, (b.y, b.y + b.h))
            spans[g] = (min(top, b.y), max(low, b.y + b.h))
    if not main:
        return []
    x, w = main[0].x - 8, main[0].w + 16
    out = []
    for g, (top, low) in spans.items():
        out.append(f'<g class="sk-group" data-group="{esc(g)}">'
                   f'<rect x="{x:.1f}" y="{top - 16:.1f}" width="{w:.1f}" '
                   f'height="{low - top + 26:.1f}" rx="10" fill="#f7f9fc" stroke="#9aa7b8" '
                   f'stroke-dasharray="6 4"/>'
                   f'<text x="{x + w - 8:.1f}" y="{top - 5:.1f}" font-size="10" fill="#6b7a8f" '
                   f'text-anchor="end" font-style="italic">{esc(g)}</text>'
                   f"</g>")
    return out


def _legend_width() -> float:
    return sum(38 + _tw(kind, 10) for kind in _KINDS) + 18 + _tw("hook, no processors", 10)


def _legend(x: float, y: float) -> str:
    out = ['<g class="sk-legend">']
    for kind, (fill, stroke, _tag) in _KINDS.items():
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="14" height="11" rx="3" '
                   f'fill="{fill}" stroke="{stroke}"/>'
                   f'<text x="{x + 18:.1f}" y="{y:.1f}" font-size="10" fill="#444">{kind}</text>')
        x += 26 + _tw(kind, 10) + 12
    out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="14" height="11" rx="3" fill="#fff" '
               f'stroke="#3f73b5" stroke-dasharray="3 2"/>'
               f'<text x="{x + 18:.1f}" y="{y:.1f}" font-size="10" fill="#444">'
               f"hook, no processors</text></g>")
    return "".join(out)
