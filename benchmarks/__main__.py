"""``python -m benchmarks``: run the fixed set and print one table (progress on stderr).

Usage::

    python -m benchmarks                      # the full set (< 5 minutes on 2 cores)
    python -m benchmarks --quick              # every row on small inputs, a smoke run
    python -m benchmarks --json out.json      # also write the results as JSON
    python -m benchmarks --only runner agent  # some sections (or groups whose title matches)
    python -m benchmarks --compare a.json b.json   # two saved runs side by side
    python -m benchmarks --serve              # also the serving load test (benchmarks.serve_load)
    python -m benchmarks --only serve --serve # the serving load test alone
    python -m benchmarks --vs-mastra          # Mastra's own bench.mjs beside streamkit's mirror
    python -m benchmarks --only serve --serve --vs-mastra   # serving beside Mastra's real server
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from . import mastra, serve_load, serve_vs_mastra
from .harness import Result, run_groups
from .report import (
    check_targets,
    format_compare,
    format_table,
    format_targets,
    format_vs_mastra,
    load,
    machine,
    save,
    vs_mastra,
)
from .suite import SECTIONS, Sizes, build_suite

__all__ = ["main", "run"]


def run(sizes: Sizes, *, only: list[str] | None = None, progress: bool = True,
        stderr: IO[str] | None = None, mode: str = "full"
        ) -> tuple[list[Result], dict[str, Any]]:
    """Measure the fixed set at ``sizes``; the results and the run's description (machine, sizes,
    mode, duration) as ``save`` stores it."""
    groups = build_suite(sizes, only)
    started = time.monotonic()
    results = run_groups(groups, progress=progress, stream=stderr)
    info = {"mode": mode, "machine": machine(), "sizes": sizes.as_dict(),
            "duration_s": round(time.monotonic() - started, 1),
            "note": f"{mode} run · median of {sizes.repeat_micro} (wire, runner) / {sizes.repeat} "
                    f"(agent, requests, memory) interleaved runs · "
                    f"ratio = row time / baseline time, paired per run"}
    return results, info


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="streamkit chunk-throughput benchmarks: one table, ratios to baselines "
                    "measured in the same run.")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small inputs, 3 runs per row")
    size.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="PATH", help="write the results to PATH as JSON")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help=f"sections ({', '.join(SECTIONS)}) or parts of group titles")
    parser.add_argument("--repeat", type=int, metavar="N", help="timed runs per row")
    parser.add_argument("--no-long-memory", action="store_true",
                        help="skip tracing the memory of the 1M-chunk agent.stream row (~20 s)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--serve", action="store_true",
                        help="also run the serving load test: 200 SSE streams x 1,000 chunks "
                             "through the app on uvicorn, beside the same without HTTP (~15 s)")
    parser.add_argument("--before-python", metavar="PY",
                        help="with --serve --vs-mastra: also serve with another environment's "
                             "streamkit (e.g. main's venv) for before/after ratios")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="compare two --json files instead of running")
    parser.add_argument("--vs-mastra", action="store_true",
                        help="run Mastra's own benchmark (Node 22, installed once in a scratch "
                             "directory) and streamkit's mirror of it, and print the ratios "
                             "(alone: only the mirror section; with --only: those too)")
    parser.add_argument("--mastra-dir", type=Path, default=mastra.DEFAULT_DIR, metavar="DIR",
                        help="the Mastra bench folder (bench.mjs, package.json, "
                             "node22/package.json); default: benchmarks/mastra-node")
    return parser


def _run_mastra(args: argparse.Namespace, sizes: Sizes, err: IO[str]
                ) -> tuple[list[dict[str, Any]], str]:
    """bench.mjs's rows (empty, with the reason printed, when it cannot run)."""
    prepared = mastra.prepare(args.mastra_dir, log=err)
    if isinstance(prepared, str):
        return [], f"Mastra rows skipped: {prepared}"
    err.write("running Mastra's bench.mjs (Node 22)...\n")
    rows = mastra.run_bench(prepared, only="floor,a,b,c,d0,d", ns=[sizes.mastra_n],
                            reps=sizes.repeat, seq_requests=sizes.requests,
                            conc_requests=sizes.concurrency, log=err)
    if isinstance(rows, str):
        return [], f"Mastra rows skipped: {rows}"
    versions = {f"@mastra/core {r['mastra_core']} · Node {r['node']}" for r in rows}
    return rows, ", ".join(sorted(versions))


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None,
         stderr: IO[str] | None = None) -> int:
    out = stdout or sys.stdout
    args = _parser().parse_args(argv)
    if args.compare:
        (a, _), (b, _) = load(args.compare[0]), load(args.compare[1])
        names = [Path(name).stem for name in args.compare]
        print(format_compare(a, b, names[0], names[1]), file=out)
        return 0
    mode = "quick" if args.quick else "tiny" if args.tiny else "full"
    sizes = Sizes.quick() if args.quick else Sizes.tiny() if args.tiny else Sizes.full()
    if args.repeat:
        sizes = sizes.with_repeat(args.repeat)
    if args.no_long_memory:
        sizes = sizes.without_long_memory()
    serve_rows: list[dict[str, Any]] = []
    if args.serve:
        streams, chunks = (200, 1000) if mode == "full" else (20, 100)
        serve_rows = serve_load.run(streams, chunks)
        print(serve_load.format_table(serve_rows) + "\n", file=out)
        if args.vs_mastra:  # the serving rows beside Mastra's real server (issue 28)
            served = serve_vs_mastra.run(rounds=1 if mode != "full" else 3,
                                         quick=mode != "full", before=args.before_python,
                                         stack=True, log=stderr or sys.stderr)
            print(serve_vs_mastra.format_table(served) + "\n", file=out)
        if args.only == ["serve"]:
            return 0
    only = args.only
    mastra_rows: list[dict[str, Any]] = []
    mastra_note = ""
    if args.vs_mastra:
        only = [*(only or []), "mastra"]
        mastra_rows, mastra_note = _run_mastra(args, sizes, stderr or sys.stderr)
    results, info = run(sizes, only=only, progress=not args.no_progress, stderr=stderr,
                        mode=mode)
    if serve_rows:
        info["serve"] = serve_rows
    print(format_table(results, info), file=out)
    checked = check_targets(results)
    if args.vs_mastra:
        if mastra_rows:
            pairs, goals = vs_mastra(mastra_rows, results)
            print("\n" + format_vs_mastra(pairs, mastra_note), file=out)
            checked += goals
            info["mastra"] = mastra_rows
        else:
            print("\n" + mastra_note, file=out)
    targets = format_targets(checked, mode=mode)
    if targets:
        print("\n" + targets, file=out)
    print(f"\n{len(results)} rows in {info['duration_s']:.0f} s", file=out)
    if args.json:
        save(args.json, results, info)
        print(f"results written to {args.json}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
