"""Serving over HTTP beside the real Mastra 1.71.0 server (issue 28): ``python -m benchmarks
--serve --vs-mastra``, or ``python -m benchmarks.serve_vs_mastra`` alone.

Sides (each serves agent ``demo``: reasoning + N text deltas, one tool, memory configured):

* ``mastra``: ``mastra-server/server.mjs`` (``@mastra/deployer``'s ``createNodeServer``, the
  Hono app ``mastra dev`` runs, plus ``@mastra/ai-sdk``'s ``chatRoute``) on Node 22, both
  installed once with npm in a scratch directory (``STREAMKIT_BENCH_CACHE``, default
  ``~/.cache/streamkit-bench``; Node 22 comes from ``benchmarks.mastra``).
* ``sk``: ``python -m streamkit serve benchmarks.serve_agent:agent`` of this tree.
* ``sk-2w``: the same with ``--workers 2`` (the 3-delta scenarios).
* ``sk-h11`` (with ``--stack``): the same app and guards on uvicorn's h11 protocol and
  asyncio's loop instead of httptools and uvloop (the 3-delta scenarios).
* ``sk-before`` (with ``--before-python PY``): the same command under another environment's
  streamkit (e.g. main's venv), run from a scratch directory so this tree is not imported.

The load client (``sse_client.py``, a fresh process per measurement) runs closed-loop on
keep-alive connections, reads every response to its end and checks it (200, ``[DONE]``, the
text-delta count). Each round measures every scenario on every side in turn, the first side
rotating per round; the ratios are paired per round (same minute), then the median is taken.
Server CPU per request is the server process's utime+stime over the measured requests (for
``sk-2w``, the parent's and its workers'); "server cores" and "client cores" are the CPU
seconds per wall second of the server (all its processes) and of the load client. Loopback
only; fixed request counts, time caps.

Everything that can be missing (``npm``, the registry, Node 22) makes the run print why and
skip the Mastra side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from . import mastra

__all__ = ["SCENARIOS", "run", "format_table", "main"]

HERE = Path(__file__).resolve().parent
SERVER_DIR = HERE / "mastra-server"
_SERVER_FILES = ("server.mjs", "package.json", "package-lock.json")


@dataclass(frozen=True)
class Scenario:
    name: str
    deltas: int
    route: str  # "mastra" (POST /api/agents/demo/stream) or "chat" (POST /chat/demo)
    clients: int
    requests: int
    cap_s: float


# Requests per measurement: enough for ~1 s of streamkit (300 sequential requests were ~0.13 s,
# where one scheduler hiccup moved a round by 25 %); Mastra's side stops at the time cap first.
SCENARIOS = [
    Scenario("1 client, stream route", 3, "mastra", 1, 2000, 6.0),
    Scenario("1 client, chat route", 3, "chat", 1, 2000, 6.0),
    Scenario("50 clients, stream route", 3, "mastra", 50, 5000, 8.0),
    Scenario("50 clients, chat route", 3, "chat", 50, 5000, 8.0),
    Scenario("200 clients x 200 deltas, chat route", 200, "chat", 200, 1500, 10.0),
]
QUICK = [Scenario(s.name, s.deltas, s.route, s.clients, max(20, s.requests // 10), 3.0)
         for s in SCENARIOS]


# ------------------------------------------------------------------------------ Mastra's server


def prepare_mastra(log: IO[str]) -> tuple[Path, Path] | str:
    """(node, server.mjs) installed in the scratch directory, or why not."""
    node = mastra.prepare(log=log)
    if isinstance(node, str):
        return node
    digest = hashlib.sha256(b"".join((SERVER_DIR / f).read_bytes()
                                     for f in _SERVER_FILES)).hexdigest()[:12]
    workdir = mastra._cache_root() / f"mastra-server-{digest}"
    if not (workdir / ".installed").is_file():
        workdir.mkdir(parents=True, exist_ok=True)
        for f in _SERVER_FILES:
            shutil.copyfile(SERVER_DIR / f, workdir / f)
        log.write(f"installing Mastra's server in {workdir} (once)\n")
        reason = mastra._npm(["ci"], workdir, log)
        if reason:
            return reason
        (workdir / ".installed").write_text("ok\n")
    return node.node, workdir / "server.mjs"


# ------------------------------------------------------------------------------ servers


@dataclass
class Side:
    name: str
    cmd: list[str]
    cwd: str | None
    env: dict[str, str]
    cpu: bool = True  # whether the process's own CPU is the server's
    children: bool = False  # add its children's CPU (the workers of --workers N)
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sides(deltas: int, mastra_server: tuple[Path, Path] | None, before: str | None,
           scratch: Path, workers: bool, stack: bool = False) -> list[Side]:
    env = dict(os.environ, SK_DELTAS=str(deltas), MASTRA_TELEMETRY_DISABLED="1",
               PYTHONPATH=str(HERE.parent))
    sides = []
    if mastra_server is not None:
        node, script = mastra_server
        sides.append(Side("mastra", [str(node), str(script), "--deltas", str(deltas)],
                          str(script.parent), env))
    serve = ["-m", "streamkit", "serve", "benchmarks.serve_agent:agent"]
    if before:
        # Its own copy of the agent module, run from a scratch directory: this tree's
        # streamkit must not shadow the other environment's.
        (scratch / "benchmarks").mkdir(exist_ok=True)
        (scratch / "benchmarks" / "__init__.py").write_text("")
        shutil.copyfile(HERE / "serve_agent.py", scratch / "benchmarks" / "serve_agent.py")
        sides.append(Side("sk-before", [before, *serve], str(scratch),
                          dict(env, PYTHONPATH=str(scratch))))
    sides.append(Side("sk", [sys.executable, *serve], str(HERE.parent), env))
    if stack:
        # The stack choice, measured: everything as ``sk`` but uvicorn's h11 protocol (with
        # the same guards) on asyncio's loop instead of httptools on uvloop.
        sides.append(Side("sk-h11", [sys.executable, "-m", "benchmarks.serve_vs_mastra",
                                     "--role", "server", "--http", "h11"],
                          str(HERE.parent), env))
    if workers:
        sides.append(Side("sk-2w", [sys.executable, *serve, "--workers", "2"],
                          str(HERE.parent),
                          dict(env, SK_MEMORY=str(scratch / "workers.sqlite3")),
                          children=True))
    return sides


def _start(sides: list[Side], log_dir: Path) -> None:
    for side in sides:
        side.port = _free_port()
        log = (log_dir / f"{side.name}-{side.port}.log").open("wb")
        side.proc = subprocess.Popen([*side.cmd, "--port", str(side.port)], cwd=side.cwd,
                                     env=side.env, stdout=log, stderr=subprocess.STDOUT)
    for side in sides:
        deadline = time.monotonic() + 120
        while True:
            assert side.proc is not None
            if side.proc.poll() is not None:
                raise RuntimeError(f"the {side.name} server exited; see {log_dir}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{side.port}/api/agents",
                                            timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {side.name} server did not answer in 120 s")
            time.sleep(0.3)  # polling a starting server


def _stop(sides: list[Side]) -> None:
    for side in sides:
        if side.proc is not None and side.proc.poll() is None:
            side.proc.terminate()
    for side in sides:
        if side.proc is not None:
            try:
                side.proc.wait(20)
            except subprocess.TimeoutExpired:
                side.proc.kill()
                side.proc.wait(20)


def _client(side: Side, s: Scenario, *, requests: int | None = None) -> dict[str, Any]:
    assert side.proc is not None
    cmd = [sys.executable, str(HERE / "sse_client.py"), "--port", str(side.port),
           "--route", s.route, "-c", str(s.clients), "-n", str(requests or s.requests),
           "--warmup", str(30 if s.clients == 1 else s.clients),
           "--expect-deltas", str(s.deltas), "--max-seconds", str(s.cap_s), "--timeout", "60"]
    if side.cpu:
        cmd += ["--server-pid", str(side.proc.pid)]
        if side.children:
            cmd.append("--server-children")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=s.cap_s + 240)
    if done.returncode != 0:
        return {"client_error": done.stderr[-1500:]}
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


# ------------------------------------------------------------------------------ the run


def run(*, rounds: int = 3, quick: bool = False, before: str | None = None,
        stack: bool = False, log: IO[str] = sys.stderr) -> dict[str, Any]:
    """Every scenario on every side, interleaved over ``rounds``; the raw rows and why the
    Mastra side is missing (``skipped``), if it is."""
    scenarios = QUICK if quick else SCENARIOS
    prepared = prepare_mastra(log)
    skipped = prepared if isinstance(prepared, str) else None
    if skipped:
        log.write(f"Mastra side skipped: {skipped}\n")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sk-serve-bench-") as tmp:
        scratch = Path(tmp)
        for deltas in sorted({s.deltas for s in scenarios}):
            group = [s for s in scenarios if s.deltas == deltas]
            sides = _sides(deltas, None if skipped else prepared,  # type: ignore[arg-type]
                           before, scratch, workers=deltas == 3, stack=stack and deltas == 3)
            _start(sides, scratch)
            try:
                for side in sides:  # untimed warm-up
                    for s in group:
                        _client(side, s, requests=min(s.requests, 200))
                for rnd in range(rounds):
                    order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
                    for s in group:
                        for side in order:
                            row = _client(side, s)
                            row.update({"scenario": s.name, "side": side.name, "round": rnd,
                                        "deltas": s.deltas, "clients": s.clients,
                                        "loadavg": round(os.getloadavg()[0], 2)})
                            rows.append(row)
                            log.write(f"[r{rnd}] {s.name:38} {side.name:9} "
                                      f"rps={row.get('rps')} err={row.get('errors')} "
                                      f"first={row.get('first_text_ms', {}).get('p50')} "
                                      f"cpu/req={row.get('server', {}).get('cpu_ms_per_req')}"
                                      f"\n")
                            log.flush()
            finally:
                _stop(sides)
    return {"rows": rows, "skipped": skipped, "rounds": rounds,
            "loadavg_end": os.getloadavg()[0]}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per scenario and side: medians over rounds, and per-round paired ratios to Mastra and to
    ``sk-before``."""
    rows = [r for r in result["rows"] if "client_error" not in r]
    out = []
    for s in dict.fromkeys(r["scenario"] for r in rows):
        of = [r for r in rows if r["scenario"] == s]
        by_round: dict[int, dict[str, dict[str, Any]]] = {}
        for r in of:
            by_round.setdefault(r["round"], {})[r["side"]] = r
        for side in dict.fromkeys(r["side"] for r in of):
            mine = [r for r in of if r["side"] == side]
            entry: dict[str, Any] = {
                "scenario": s, "side": side,
                "rps": _median([r["rps"] for r in mine]),
                "text_deltas_per_s": _median([r["text_deltas_per_s"] for r in mine]),
                "first_text_p50_ms": _median([r["first_text_ms"]["p50"] for r in mine]),
                "first_text_p99_ms": _median([r["first_text_ms"]["p99"] for r in mine]),
                "cpu_ms_per_req": _median([r["server"]["cpu_ms_per_req"] for r in mine
                                           if "server" in r]),
                "peak_rss_mib": _median([r["server"]["peak_rss_mib"] for r in mine
                                         if "server" in r and side != "sk-2w"]),
                "server_cores": _median([r["server"]["cpu_util"] for r in mine
                                         if "server" in r]),
                "client_cores": _median([r["client_cpu_util"] for r in mine
                                         if "client_cpu_util" in r]),
                "errors": sum(r["errors"] for r in mine)}
            for base in ("mastra", "sk-before", "sk"):
                ratios = [rs[side]["rps"] / rs[base]["rps"] for rs in by_round.values()
                          if side in rs and base in rs and rs[base]["rps"]]
                entry[f"x_{base}"] = _median(ratios)
            out.append(entry)
    return out


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def format_table(result: dict[str, Any]) -> str:
    head = ["scenario", "side", "req/s", "deltas/s", "1st text p50 ms", "p99 ms",
            "CPU ms/req", "server cores", "client cores", "peak RSS MiB", "x Mastra",
            "x before", "x sk"]
    table = [head]
    for e in summarize(result):
        table.append([e["scenario"], e["side"], _fmt(e["rps"]),
                      _fmt(e["text_deltas_per_s"], 0), _fmt(e["first_text_p50_ms"], 2),
                      _fmt(e["first_text_p99_ms"], 2), _fmt(e["cpu_ms_per_req"], 3),
                      _fmt(e["server_cores"], 2), _fmt(e["client_cores"], 2),
                      _fmt(e["peak_rss_mib"]), _fmt(e["x_mastra"], 2),
                      _fmt(e["x_sk-before"], 2),
                      _fmt(e["x_sk"], 2) if e["side"] != "sk" else "-"])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths))) for row in table]
    note = (f"median of {result['rounds']} interleaved rounds; x = paired per-round ratio of "
            f"req/s; load average at the end {result['loadavg_end']:.1f}")
    if result["skipped"]:
        note += f"\nMastra side skipped: {result['skipped']}"
    return "\n".join(["Serving over HTTP (keep-alive clients), beside Mastra 1.71.0's server",
                      *lines, note])


def _serve_role(http: str, port: int) -> None:
    """One server as ``python -m streamkit serve`` runs it, on the protocol ``http`` and
    asyncio's loop (the ``sk-h11`` side)."""
    import asyncio

    import uvicorn

    from streamkit.serve import create_app, uvicorn_config
    from streamkit.serve._cli import _bind
    from streamkit.serve._connections import SERVER_PROTOCOLS

    from .serve_agent import agent

    sock = _bind("127.0.0.1", port)
    config = uvicorn_config(create_app(agent), log_level="warning", lifespan="off",
                            http=SERVER_PROTOCOLS[http], loop="asyncio")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_vs_mastra",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of the requests")
    parser.add_argument("--before-python", metavar="PY",
                        help="also serve with another environment's streamkit (e.g. main's)")
    parser.add_argument("--stack", action="store_true",
                        help="also the sk-h11 side (h11 on asyncio's loop): the stack choice")
    parser.add_argument("--json", metavar="PATH", help="also write the raw rows as JSON")
    parser.add_argument("--role", choices=["server"], help=argparse.SUPPRESS)
    parser.add_argument("--http", default="h11", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "server":
        _serve_role(args.http, args.port)
        return 0
    result = run(rounds=args.rounds, quick=args.quick, before=args.before_python,
                 stack=args.stack)
    print(format_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
