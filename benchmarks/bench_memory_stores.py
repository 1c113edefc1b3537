"""Memory stores: round trips and latency of one turn's save and recall, PostgresStore vs
SQLiteStore (and, with ``--before REV``, the PostgresStore of an earlier commit), in one run.

Run it with ``python -m benchmarks.bench_memory_stores [--before REV] [--turns N] [--rounds R]``
(PostgreSQL from ``STREAMKIT_PG_DSN``, default ``postgresql://postgres@127.0.0.1:5432/test``).

What one turn does to memory (what ``Agent`` does): **recall** — ``Memory.recall(thread,
resource)`` with ``last_messages=20`` on a thread that already holds 40 messages; **save** —
``store.save_messages(thread, resource, [user, assistant])``, two new messages (the turn).

* **Round trips**: the store's one pooled connection goes through a counting TCP proxy on
  127.0.0.1; a round trip is a reply from the server after the client sent something (the
  client waited). Counted over 20 turns after a warm-up (the pool open and schema set-up are
  not counted), per operation.
  (Counted at the proxy: a pipelined transaction whose bytes left the client in two writes,
  with an answer in between, counts twice; the client waited once.)
* **Latency**: median and p95 of each operation over ``--turns`` turns, on a direct connection
  (no proxy), each contender in its own process; ``--rounds`` rounds, the contenders in a
  rotated order each round, so a noisy neighbour slows them alike. The ratio is the median
  per-round ratio of medians to SQLiteStore's (a file in WAL mode, ``synchronous=NORMAL``).

Each PostgresStore also runs with ``synchronous_commit=off`` (in the DSN's ``options``): a
commit then does not wait for the WAL flush (an fsync, milliseconds on this machine's disk), so
what remains is the store's own cost and its round trips.

``--before REV`` extracts ``streamkit/`` of commit ``REV`` (``git archive``) into a temporary
directory and runs that store as ``PostgresStore (REV)``; the worker imports ``streamkit`` from
there (``PYTHONPATH`` before the installed one).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import secrets
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

DSN = os.environ.get("STREAMKIT_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
HISTORY, RECALL, COUNTED = 40, 20, 20
REPO = Path(__file__).resolve().parents[1]
#: A commit that does not wait for the WAL flush (PostgreSQL's nearest to SQLite's
#: ``synchronous=NORMAL``): what is left of a save is its round trips.
NO_FSYNC = "synchronous_commit=off"


class CountingProxy:
    """A TCP proxy to PostgreSQL on its own thread that counts round trips: server replies
    that follow client bytes."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.round_trips = 0
        self._client_spoke = False
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop).result(10)
        self.port: int = self.server.sockets[0].getsockname()[1]

    async def _serve(self, client_r: asyncio.StreamReader,
                     client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self.upstream)
        await asyncio.gather(self._pump(client_r, server_w, True),
                             self._pump(server_r, client_w, False))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    from_client: bool) -> None:
        try:
            while data := await reader.read(65536):
                if from_client:
                    self._client_spoke = True
                elif self._client_spoke:
                    self._client_spoke = False
                    self.round_trips += 1
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    def take(self) -> int:
        """Round trips so far, and start again from 0."""
        count, self.round_trips = self.round_trips, 0
        return count

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def _make_store(kind: str, dsn: str, schema: str, path: str) -> Any:
    from streamkit.memory import PostgresStore, SQLiteStore
    if kind == "sqlite":
        return SQLiteStore(path)
    return PostgresStore(dsn, schema=schema, min_size=1, max_size=1)


def _turn(n: int) -> list[Any]:
    from streamkit.messages import Message
    return [Message.user(f"question {n}: where is my order?"),
            Message.assistant(f"answer {n}: it ships today, tracking number TRK-{n:06d}.")]


async def _measure(kind: str, turns: int, dsn: str, path: str) -> dict[str, Any]:
    from streamkit.memory import Memory
    schema = f"bench_mem_{secrets.token_hex(4)}"
    thread, resource = "bench-thread", "bench-user"
    result: dict[str, Any] = {"streamkit": __import__("streamkit").__file__}
    try:
        if kind != "sqlite":
            from psycopg.conninfo import conninfo_to_dict, make_conninfo
            info = conninfo_to_dict(dsn)
            proxy = CountingProxy(str(info.get("host", "127.0.0.1")),
                                  int(str(info.get("port", 5432))))
            info.update(host="127.0.0.1", port=str(proxy.port), sslmode="disable")
            memory = Memory(_make_store(kind, make_conninfo("", **info), schema, path),
                            last_messages=RECALL)
            try:
                for n in range(HISTORY // 2):  # warm-up: pool, schema, a 40-message thread
                    await memory.store.save_messages(thread, resource, _turn(n))
                await memory.recall(thread, resource)
                proxy.take()
                for _ in range(COUNTED):
                    await memory.recall(thread, resource)
                result["recall_round_trips"] = proxy.take() / COUNTED
                for n in range(COUNTED):
                    await memory.store.save_messages(thread, resource, _turn(1000 + n))
                result["save_round_trips"] = proxy.take() / COUNTED
            finally:
                await memory.close()
                proxy.close()
            thread = "bench-thread-direct"
        memory = Memory(_make_store(kind, dsn, schema, path), last_messages=RECALL)
        try:
            for n in range(HISTORY // 2):
                await memory.store.save_messages(thread, resource, _turn(n))
            saves, recalls = [], []
            for n in range(turns):
                started = time.perf_counter()
                history = await memory.recall(thread, resource)
                recalls.append(time.perf_counter() - started)
                if len(history) != RECALL:
                    raise RuntimeError(f"{kind}: recalled {len(history)} messages, not {RECALL}")
                batch = _turn(2000 + n)
                started = time.perf_counter()
                await memory.store.save_messages(thread, resource, batch)
                saves.append(time.perf_counter() - started)
            result["save_s"], result["recall_s"] = saves, recalls
        finally:
            await memory.close()
    finally:
        if kind != "sqlite":
            import psycopg
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return result


def _extract(rev: str, into: Path) -> None:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "streamkit"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def _worker(kind: str, turns: int, dsn: str, tree: str | None) -> dict[str, Any]:
    if kind == "pg-":
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        kind, dsn = "pg", make_conninfo(dsn, options=f"-c {NO_FSYNC}")
        assert "options" in conninfo_to_dict(dsn)
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]) if sys.argv[1] "
             "else None; from benchmarks.bench_memory_stores import _main_worker; "
             "_main_worker(sys.argv[2:])", tree or "", kind, str(turns), dsn,
             str(Path(tmp) / "memory.sqlite3")],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {kind} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _main_worker(argv: list[str]) -> None:
    kind, turns, dsn, path = argv[0], int(argv[1]), argv[2], argv[3]
    print(json.dumps(asyncio.run(_measure(kind, turns, dsn, path))))


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", help="also measure the PostgresStore of this git commit")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        contenders: list[tuple[str, str, str | None]] = [
            ("SQLiteStore", "sqlite", None), ("PostgresStore", "pg", None),
            (f"PostgresStore, {NO_FSYNC}", "pg-", None)]
        if args.before:
            _extract(args.before, Path(tmp))
            contenders += [(f"PostgresStore ({args.before})", "pg", tmp),
                           (f"PostgresStore ({args.before}), {NO_FSYNC}", "pg-", tmp)]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in contenders}
        for r in range(args.rounds):
            for i in range(len(contenders)):
                name, kind, tree = contenders[(r + i) % len(contenders)]
                print(f"round {r + 1}/{args.rounds}: {name}", file=sys.stderr)
                runs[name].append(_worker(kind, args.turns, args.dsn, tree))
    base = runs["SQLiteStore"]
    print(f"\n{args.turns} turns x {args.rounds} rounds; recall = last {RECALL} of a "
          f"{HISTORY}+ message thread; save = 2 new messages\n")
    print("| store | round trips: recall / save | recall p50 / p95 | save p50 / p95 "
          "| recall, save vs SQLite (p50) |")
    print("|---|---|---|---|---|")
    for name, results in runs.items():
        saves = [s for res in results for s in res["save_s"]]
        recalls = [s for res in results for s in res["recall_s"]]
        ratios = [(statistics.median(res["recall_s"]) / statistics.median(b["recall_s"]),
                   statistics.median(res["save_s"]) / statistics.median(b["save_s"]))
                  for res, b in zip(results, base, strict=True)]
        trips = ("— (in-process)" if "recall_round_trips" not in results[0] else
                 f"{results[0]['recall_round_trips']:g} / {results[0]['save_round_trips']:g}")
        print(f"| {name} | {trips} | {_ms(recalls, .5):.2f} / {_ms(recalls, .95):.2f} ms "
              f"| {_ms(saves, .5):.2f} / {_ms(saves, .95):.2f} ms "
              f"| {statistics.median(r[0] for r in ratios):.1f}x, "
              f"{statistics.median(r[1] for r in ratios):.1f}x |")


if __name__ == "__main__":
    main()
