"""Printing and storing results: the table, the target verdicts, JSON files and run comparison.

What belongs here: ``machine()`` (what the numbers were measured on), ``format_table``,
``check_targets`` (the issue's targets, judged from one run's results), ``save``/``load`` and
``format_compare`` for two saved runs. What does not: measuring anything.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .harness import Result
from .rows_wire import LONG_LINES

__all__ = ["machine", "format_table", "Target", "check_targets", "format_targets", "save",
           "load", "format_compare", "SCHEMA", "vs_mastra", "format_vs_mastra"]

SCHEMA = "streamkit-bench/1"
_ROOT = Path(__file__).resolve().parents[1]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict[str, Any]:
    """CPU model, CPU count, Python, OS and the streamkit version/commit measured."""
    import streamkit

    return {"cpu": _cpu_model(), "cpus": os.cpu_count(),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "os": f"{platform.system()} {platform.machine()}",
            "streamkit": getattr(streamkit, "__version__", "?"), "commit": _commit()}


# --------------------------------------------------------------------------- formatting


def _bytes(n: float | None) -> str:
    if n is None:
        return "—"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _us(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:,.0f}"


def _mem(r: Result) -> str:
    text = _bytes(r.peak_bytes)
    per = r.bytes_per_request
    return f"{text} ({_bytes(per)}/req)" if per is not None else text


_COLS = (("row", 46, "<"), ("chunks/s", 12, ">"), ("µs/chunk", 9, ">"), ("req/s", 8, ">"),
         ("×base", 7, ">"), ("baseline", 30, "<"), ("peak mem", 22, "<"))


def _line(values: Sequence[str]) -> str:
    parts = [f"{v:{align}{width}}" for v, (_, width, align) in zip(values, _COLS)]
    return "  ".join(parts).rstrip()


def format_table(results: Sequence[Result], info: dict[str, Any] | None = None,
                 title: str = "streamkit benchmarks") -> str:
    """One table: a heading per group, one line per row."""
    lines = [title]
    if info:
        m = info.get("machine", {})
        lines.append(f"machine: {m.get('cpu', '?')} · {m.get('cpus', '?')} CPUs · "
                     f"{m.get('python', '?')} · {m.get('os', '?')} · streamkit "
                     f"{m.get('streamkit', '?')}{' @ ' + m['commit'] if m.get('commit') else ''}")
        if info.get("note"):
            lines.append(info["note"])
    lines.append("")
    lines.append(_line([c[0] for c in _COLS]))
    group = None
    for r in results:
        if r.group != group:
            group = r.group
            sizes = {x.chunks for x in results if x.group == group}
            size = f" ({sizes.pop():,} chunks/run)" if len(sizes) == 1 else ""
            lines.append(f"{group}{size}")
        rps = r.requests_per_s
        lines.append(_line([
            f"  {r.name}"[:46], f"{r.chunks_per_s:,.0f}", _us(r.us_per_chunk),
            f"{rps:,.0f}" if rps is not None else "",
            f"{r.ratio:.2f}×" if r.ratio is not None else "base",
            (r.baseline or "")[:30], _mem(r)]))
    chunks_of = {(r.group, r.name): r.chunks for r in results}
    flat = [r for r in results if "early_us" in r.metrics and r.baseline
            and chunks_of.get((r.group, r.baseline), r.chunks) < r.chunks]
    if flat:
        lines.append("")
        lines.append("inside one long stream: µs/chunk over an early → a late sixth of it; "
                     "once per stream: ms to the first chunk, ms of closing work after the text")
        for r in flat:
            m = r.metrics
            lines.append(f"  {r.name:<44} {m['early_us']:7.3f} → {m['late_us']:7.3f}   first "
                         f"{m.get('first_ms', 0):7.1f} ms   tail {m.get('tail_ms', 0):7.1f} ms")
    return "\n".join(lines)


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class Target:
    """One target of the issue, judged on one row: ``measured`` against ``limit``."""

    name: str
    row: str
    measured: float
    limit: float
    unit: str
    met: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "row": self.row, "measured": self.measured,
                "limit": self.limit, "unit": self.unit, "met": self.met}


def _find(results: Sequence[Result], group: str, name: str) -> Result | None:
    return next((r for r in results if r.group == group and r.name == name), None)


def check_targets(results: Sequence[Result]) -> list[Target]:
    """The issue's targets, for whichever of their rows this run measured.

    * standalone runner, sync: ``StreamChain.push loop`` and ``ops.apply`` ≤ 1.3× their hand
      baseline, and faster than ``reactivex`` (time ratio < 1);
    * wire encode: streamkit ≤ 1.2× raw msgspec; stdlib json ≥ 4× streamkit's time;
    * agent.stream with 3 transforms ≥ 500k chunks/s;
    * per-chunk cost flat with stream length: long row ≤ 1.2× its short twin;
    * SSE parsing linear in line length: the parser's ratio to the floor of building the
      line's ``str`` at the largest size ≤ 1.5× its ratio at the smallest (a quadratic parser's
      ratio grows with the line).
    * tracing: opentelemetry installed but unconfigured ≤ 1.1× absent; tracing on ≤ 1.1× off.
    """
    out: list[Target] = []
    groups = sorted({r.group for r in results}, key=[r.group for r in results].index)
    for g in groups:
        if g.startswith("chunks · building"):
            for r in results:
                if r.group == g and r.name.startswith("TextDelta(") and r.ratio is not None:
                    out.append(Target("building a chunk ≤ 2× plain msgspec Structs", r.name,
                                      r.ratio, 2.0, "×", r.ratio <= 2.0))
        elif g.startswith("mastra mirror · agent.stream"):
            for r in results:
                if r.group == g and r.name.startswith("c:transform"):
                    out.append(Target("mirror c: 3 transforms ≈ 1 µs/chunk (30× Mastra's ~30)",
                                      r.name, r.us_per_chunk, 1.0, "µs/chunk",
                                      r.us_per_chunk <= 1.0))
        if g == "runner · 3 transforms · sync":
            r = _find(results, g, "ops.apply into a list")
            if r is not None and r.ratio is not None:
                out.append(Target("ops.apply 3 transforms ≤ 1.3× for loop, same fns",
                                  f"{g} / {r.name}", r.ratio, 1.3, "×", r.ratio <= 1.3))
        if g.startswith("runner") and g.endswith("· sync"):
            for name in ("StreamChain.push loop", "ops.apply"):
                r = _find(results, g, name)
                if r is not None and r.ratio is not None:
                    out.append(Target("runner sync ≤ 1.3× hand loop", f"{g} / {name}", r.ratio,
                                      1.3, "×", r.ratio <= 1.3))
                rx = _find(results, g, "reactivex")
                if r is not None and rx is not None:
                    ratio = r.seconds / rx.seconds
                    out.append(Target("runner sync faster than reactivex", f"{g} / {name}",
                                      ratio, 1.0, "× reactivex time", ratio < 1.0))
        elif g == LONG_LINES:
            # Linear: the parser's cost relative to the floor does not grow with the line.
            rows = [r for r in results if r.group == g and r.ratio is not None]
            if len(rows) >= 2:
                growth = rows[-1].ratio / rows[0].ratio  # type: ignore[operator]
                out.append(Target("SSE parsing linear (ratio to floor flat)",
                                  f"{rows[-1].name} vs {rows[0].name}", growth, 1.5, "×",
                                  growth <= 1.5))
        elif g.startswith("wire"):
            sk = _find(results, g, "encode streamkit")
            if sk is not None and sk.ratio is not None:
                out.append(Target("wire encode ≤ 1.2× raw msgspec", f"{g} / encode streamkit",
                                  sk.ratio, 1.2, "×", sk.ratio <= 1.2))
            js = _find(results, g, "encode stdlib json")
            if js is not None and js.ratio is not None:
                out.append(Target("wire encode ≥ 4× faster than json",
                                  f"{g} / encode stdlib json", js.ratio, 4.0, "× faster",
                                  js.ratio >= 4.0))
        elif g.startswith("tracing"):
            for r in results:
                if r.group != g or r.ratio is None:
                    continue
                if r.name.startswith("otel installed, unconfigured"):
                    out.append(Target("otel unconfigured ≤ 1.1× absent", r.name, r.ratio, 1.1,
                                      "×", r.ratio <= 1.1))
                elif r.name.startswith("tracing on ·") and "content" not in r.name:
                    out.append(Target("tracing on ≤ 1.1× off", r.name, r.ratio, 1.1, "×",
                                      r.ratio <= 1.1))
        elif g.startswith("agent.stream"):
            for r in results:
                if r.group != g:
                    continue
                if r.name.startswith("agent · 3 transforms ·") and "trace off" not in r.name:
                    out.append(Target("agent.stream 3 transforms ≥ 500k chunks/s", r.name,
                                      r.chunks_per_s, 500_000, "chunks/s",
                                      r.chunks_per_s >= 500_000))
                base = _find(results, g, r.baseline) if r.baseline else None
                if base is not None and r.ratio is not None and r.chunks > base.chunks:
                    out.append(Target("per-chunk cost flat (long ≤ 1.2× short)", r.name,
                                      r.ratio, 1.2, "×", r.ratio <= 1.2))
    return out


def vs_mastra(mastra: Sequence[dict[str, Any]], results: Sequence[Result]
              ) -> tuple[list[tuple[str, float, float, float, str]], list[Target]]:
    """Pair bench.mjs's rows with the mirror's (``benchmarks.rows_mastra``): per pair (label,
    Mastra value, streamkit value, ratio = how many times faster streamkit is, unit), and the
    issue's goals: c, d0 sequential and d0 concurrent ≥ 30×."""
    rows: list[tuple[str, float, float, float, str]] = []
    targets: list[Target] = []
    by_name = {r.name: r for r in results if r.group.startswith("mastra mirror")}
    for m in mastra:
        scenario, api, n, k = m["scenario"], m["api"], m["N"], m["K"]
        key = scenario.split(":")[0]
        # (bench.mjs's second floor row, N = 100, belongs to its request scenarios.)
        if api in ("stream", "model.doStream") and m["per_chunk_us"] and n != 100:
            name = {"floor": f"floor · model stream · N={n:,}", "a": f"{scenario} · N={n:,}",
                    "b": f"{scenario} · K={k} · N={n:,}",
                    "c": f"{scenario} · 3 processors · N={n:,}"}.get(key)
            r = by_name.get(name or "")
            if r is None:
                continue
            ratio = m["per_chunk_us"] / r.us_per_chunk
            rows.append((name or "", m["per_chunk_us"], r.us_per_chunk, ratio, "µs/chunk"))
            if key == "c":
                targets.append(Target("c: agent.stream 3 transforms ≥ 30× Mastra", name or "",
                                      ratio, 30.0, "× Mastra", ratio >= 30.0))
        elif api in ("stream-sequential", "stream-concurrent"):
            mode = "sequential" if api == "stream-sequential" else None
            r = next((x for x in by_name.values() if x.name.startswith(scenario + " · ")
                      and (x.name.endswith("sequential") if mode else
                           x.name.endswith("concurrent"))), None)
            if r is None or not r.requests_per_s:
                continue
            ratio = r.requests_per_s / m["requests_per_s"]
            rows.append((r.name, m["requests_per_s"], r.requests_per_s, ratio, "req/s"))
            if key == "d0":
                targets.append(Target("d0: 100-chunk requests ≥ 30× Mastra", r.name, ratio, 30.0,
                                      "× Mastra", ratio >= 30.0))
    return rows, targets


def format_vs_mastra(rows: Sequence[tuple[str, float, float, float, str]],
                     versions: str = "") -> str:
    lines = [f"streamkit vs Mastra {versions}".rstrip() + " · measured in this run · "
             "ratio = how many times faster streamkit is",
             f"  {'scenario':<46} {'Mastra':>10} {'streamkit':>10}  {'unit':<9} {'ratio':>8}"]
    for name, mv, sv, ratio, unit in rows:
        lines.append(f"  {name:<46} {_us(mv):>10} {_us(sv):>10}  {unit:<9} {ratio:>7.1f}×")
    return "\n".join(lines)


def format_targets(targets: Sequence[Target], *, mode: str = "full") -> str:
    """The targets block. Only a ``full`` run is judged: quick and tiny runs use inputs too small
    for the targets' numbers to mean anything, so their lines carry no met/MISSED mark."""
    if not targets:
        return ""
    judged = mode == "full"
    lines = ["targets:" if judged else
             f"targets (not judged: a {mode} run's inputs are too small to compare with the "
             f"targets; `python -m benchmarks` judges them):"]
    for t in targets:
        value = f"{t.measured:,.0f}" if t.unit == "chunks/s" else f"{t.measured:.2f}"
        mark = ("met" if t.met else "MISSED") if judged else "-"
        lines.append(f"  [{mark:>6}] {t.name:<42} {value:>9} {t.unit:<16} {t.row}")
    if judged:
        met = sum(t.met for t in targets)
        lines.append(f"  {met}/{len(targets)} met")
    return "\n".join(lines)


# --------------------------------------------------------------------------- files


def save(path: str | Path, results: Sequence[Result], info: dict[str, Any]) -> None:
    """Write one run as JSON (``SCHEMA``): machine, sizes, every row and the target verdicts."""
    doc = {"schema": SCHEMA,
           "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           **info, "results": [r.to_dict() for r in results],
           "targets": [t.to_dict() for t in check_targets(results)]}
    Path(path).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def load(path: str | Path) -> tuple[list[Result], dict[str, Any]]:
    """Read a file ``save`` wrote: the results and the rest of the document."""
    doc = json.loads(Path(path).read_text())
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a streamkit benchmark file (schema {doc.get('schema')!r})")
    results = [Result.from_dict(r) for r in doc["results"]]
    return results, {k: v for k, v in doc.items() if k != "results"}


def format_compare(a: Sequence[Result], b: Sequence[Result], a_name: str = "A",
                   b_name: str = "B") -> str:
    """Rows present in both runs: µs/chunk in each, the change, and each run's ratio."""
    index = {(r.group, r.name): r for r in b}
    lines = [f"{'row':<58} {a_name[:12]:>12} {b_name[:12]:>12} {'change':>8}  ratio A → B",
             f"{'':<58} {'µs/chunk':>12} {'µs/chunk':>12}"]
    group = None
    for ra in a:
        rb = index.get((ra.group, ra.name))
        if rb is None:
            continue
        if ra.group != group:
            group = ra.group
            lines.append(group)
        change = (rb.us_per_chunk / ra.us_per_chunk - 1) * 100 if ra.us_per_chunk else 0.0
        ratios = ""
        if ra.ratio is not None and rb.ratio is not None:
            ratios = f"{ra.ratio:.2f}× → {rb.ratio:.2f}×"
        lines.append(f"  {ra.name[:56]:<56} {_us(ra.us_per_chunk):>12} {_us(rb.us_per_chunk):>12} "
                     f"{change:+7.1f}%  {ratios}")
    missing = len(a) - sum((r.group, r.name) in index for r in a)
    if missing:
        lines.append(f"({missing} row(s) of {a_name} not in {b_name})")
    return "\n".join(lines)
