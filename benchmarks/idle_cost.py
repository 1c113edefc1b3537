"""What one served request costs when the CPU goes idle between requests: the same request in
process, back to back and with the thread asleep between requests.

Usage::

    python -m benchmarks.idle_cost                   # 2,000 requests per case
    python -m benchmarks.idle_cost --requests 500 --json out.json

Why (issue 28): one sequential keep-alive client leaves the server idle while it reads each
answer and sends the next request, and on this project's 2-core virtual machines a process
that wakes from idle runs the same Python far slower for a while (cold caches and branch
predictors, a halted virtual CPU brought back by the host). ``serve_vs_mastra`` sees it as
server CPU per request at one client about twice the figure at 50 clients, for the same
code. This puts a number on it with no HTTP, no client and no second process: the request is
the one ``benchmarks.instructions`` counts (``create_app`` of ``benchmarks.serve_agent``,
called as uvicorn calls it, with no socket), on uvloop when it is installed.

Cases, interleaved (each round runs every case once, in turn):

* **back to back** — requests one after the other: the CPU never idles.
* **idle X ms** — the thread sleeps X ms (``time.sleep``: the loop and the CPU are idle)
  after each request.
* **N per wake** — N requests back to back, then 0.5 ms asleep.

CPU per request is the process's user + system time (``getrusage``) over the case's requests,
the sleeps' own cost included (a system call each, ~µs). The median over ``--rounds`` is shown,
and each case's cost over back to back in the same round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CASES", "run", "format_table", "main"]

_BODY = b'{"messages":[{"role":"user","content":"hello"}]}'
_PATH = "/api/agents/demo/stream"


@dataclass(frozen=True)
class Case:
    name: str
    idle_s: float  # asleep after each group of ``per_wake`` requests
    per_wake: int = 1


CASES = [
    Case("back to back", 0.0),
    Case("idle 0.2 ms", 0.0002),
    Case("idle 1 ms", 0.001),
    Case("2 per wake (0.5 ms)", 0.0005, 2),
    Case("8 per wake (0.5 ms)", 0.0005, 8),
]


def _request(app: Any) -> Callable[[], Awaitable[None]]:
    """One POST of the stream route, called as uvicorn calls the app (no socket)."""
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
               (b"content-length", str(len(_BODY)).encode())]

    async def one() -> None:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": _PATH,
                 "raw_path": _PATH.encode(), "query_string": b"", "root_path": "",
                 "headers": headers, "client": ("127.0.0.1", 5000),
                 "server": ("127.0.0.1", 8000), "state": {}}
        done = asyncio.get_running_loop().create_future()
        pending = [{"type": "http.request", "body": _BODY, "more_body": False}]
        status: list[int] = []

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop()
            await done
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif not message.get("more_body") and not done.done():
                done.set_result(None)

        await app(scope, receive, send)
        if status != [200]:
            raise RuntimeError(f"the served request answered {status}")

    return one


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _measure(requests: int, rounds: int) -> list[dict[str, Any]]:
    from streamkit.serve import create_app

    from .serve_agent import agent

    one = _request(create_app(agent))
    for _ in range(max(50, requests // 10)):  # warm-up: caches, lazy imports, the id pool
        await one()
    per_round: dict[str, list[float]] = {c.name: [] for c in CASES}
    ratios: dict[str, list[float]] = {c.name: [] for c in CASES}
    for rnd in range(rounds):
        order = CASES[rnd % len(CASES):] + CASES[:rnd % len(CASES)]
        this_round: dict[str, float] = {}
        for case in order:
            start = _cpu_s()
            for i in range(requests):
                await one()
                if case.idle_s and i % case.per_wake == case.per_wake - 1:
                    time.sleep(case.idle_s)  # the thread (and so the CPU) idles: the point
            this_round[case.name] = (_cpu_s() - start) / requests * 1e3
        base = this_round[CASES[0].name]
        for name, ms in this_round.items():
            per_round[name].append(ms)
            ratios[name].append(ms / base if base else 0.0)
    return [{"case": c.name, "idle_ms": c.idle_s * 1e3, "per_wake": c.per_wake,
             "cpu_ms_per_request": statistics.median(per_round[c.name]),
             "x_back_to_back": statistics.median(ratios[c.name]),
             "rounds": rounds, "requests": requests} for c in CASES]


def run(*, requests: int = 2000, rounds: int = 3) -> list[dict[str, Any]]:
    """Every case, interleaved over ``rounds``; one row per case (medians)."""
    try:
        import uvloop
    except ImportError:  # the serve extra's loop; asyncio's otherwise
        return asyncio.run(_measure(requests, rounds))
    return uvloop.run(_measure(requests, rounds))


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'case':<22} {'CPU ms/request':>15} {'x back to back':>15}"]
    for row in rows:
        lines.append(f"{row['case']:<22} {row['cpu_ms_per_request']:>15.3f} "
                     f"{row['x_back_to_back']:>15.2f}")
    rounds = rows[0]["rounds"] if rows else 0
    lines.append(f"median of {rounds} interleaved rounds; CPU = user + system time of this "
                 f"process, the request in process (no HTTP)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per case")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = run(requests=args.requests, rounds=args.rounds)
    print(format_table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
