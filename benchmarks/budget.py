"""The cost of one ``CostGuard`` budget check with a large ledger, before and after issue 30, side
by side in one run: in memory, in SQLite, and in Redis (when one answers).

Usage::

    python -m benchmarks.budget                      # 100,000 records, 15 checks per case
    python -m benchmarks.budget --records 10000 --repeat 5 --json out.json

A scope holds ``--records`` calls spread over the last 7 days (the default window), and each
case is one check:

* **before** — the code before issue 30, kept here as the baseline: the store summed every
  record of the window per check (``InMemoryUsageStore.total`` over a list, ``SQLiteUsageStore``
  ``SUM`` over an index range, ``RedisUsageStore`` a Lua script summing a sorted set).
* **after** — today's ``reserve``: the atomic check-and-reserve over the 64 running totals of
  the window and the reservations in flight (one per earlier check of the run: they are not
  released, as calls in flight would not be), the same records settled into buckets.

Both sides are one round trip (Redis) or one statement/transaction (SQLite) per check; the
record of a call after it (``add`` before, ``settle`` now) is one more on either side.

Cases run interleaved (repetition *r* starts at case *r* mod *n*); the median is reported, and
the ratio before/after of the same store. Redis is ``STREAMKIT_REDIS_URL`` (default
``redis://127.0.0.1:6379/0``); its rows are skipped, with the reason, when it does not answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from streamkit_operators import InMemoryUsageStore, RedisUsageStore, SQLiteUsageStore

WINDOW = 7 * 86400.0
BUCKET = 9450  # CostGuard's bucket for a 7-day window: ceil(604800 / 64)
NOW = 2_000_000_000.0
REDIS_URL = os.environ.get("STREAMKIT_REDIS_URL", "redis://127.0.0.1:6379/0")

# The Redis check before issue 30 (``_redis._TOTAL``): sum every record of the window.
OLD_REDIS_TOTAL = """
local tokens, cost = 0, 0
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local _, _, t, c = string.find(member, '|([^|]*)|([^|]*)$')
  tokens = tokens + tonumber(t)
  cost = cost + tonumber(c)
end
return {tostring(tokens), string.format('%.17g', cost)}
"""


def _records(n: int) -> list[tuple[float, int, float]]:
    step = WINDOW / n
    return [(NOW - WINDOW + i * step, 100 + i % 50, 0.0001) for i in range(n)]


class OldMemory:
    """``InMemoryUsageStore`` before issue 30: a list per scope, summed per check."""

    def __init__(self, records: list[tuple[float, int, float]]) -> None:
        self.rows = {"s": list(records)}

    def total(self, key: str, since: float) -> tuple[int, float]:
        rows = [r for r in self.rows.get(key, ()) if r[0] >= since]
        return sum(r[1] for r in rows), sum(r[2] for r in rows)


def _old_sqlite(path: Path, records: list[tuple[float, int, float]]) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE cost_guard_usage (scope_key TEXT NOT NULL, at REAL NOT NULL, "
               "tokens INTEGER NOT NULL, cost REAL NOT NULL)")
    db.execute("CREATE INDEX cost_guard_usage_scope ON cost_guard_usage (scope_key, at)")
    db.execute("BEGIN")
    db.executemany("INSERT INTO cost_guard_usage VALUES ('s', ?, ?, ?)", records)
    db.execute("COMMIT")
    return db


def _per_bucket(records: list[tuple[float, int, float]]) -> dict[int, tuple[int, float]]:
    """The records as the settles of their calls leave them: one running total per bucket."""
    out: dict[int, tuple[int, float]] = {}
    for at, t, c in records:
        b = int(at // BUCKET * BUCKET)
        pt, pc = out.get(b, (0, 0.0))
        out[b] = (pt + t, pc + c)
    return out


def _settle_all(store: Any, records: list[tuple[float, int, float]]) -> None:
    for b, (tokens, cost) in _per_bucket(records).items():
        store.settle("g:s", None, tokens, cost, at=float(b), bucket=BUCKET)


def _check(store: Any) -> Callable[[], Any]:
    def run() -> Any:
        return store.reserve("g:s", secrets.token_hex(8), 500, 0.001, at=NOW,
                             since=NOW - WINDOW, bucket=BUCKET, ttl=600, max_tokens=10**12,
                             max_cost=None)[1]
    return run


async def _redis_cases(records: list[tuple[float, int, float]]
                       ) -> tuple[dict[str, Callable[[], Awaitable[Any]]], Callable[[], Any]]:
    import redis.asyncio as aioredis

    client: Any = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    await client.ping()
    prefix = f"streamkit_bench_{os.getpid()}_{secrets.token_hex(3)}:"
    old_key = prefix + "old:s"
    for i in range(0, len(records), 5000):
        await client.zadd(old_key, {f"{secrets.token_hex(8)}|{t}|{c!r}": at
                                    for at, t, c in records[i:i + 5000]})
    old_total = client.register_script(OLD_REDIS_TOTAL)
    store = RedisUsageStore(client, prefix=prefix + "new:")
    for b, (t, c) in _per_bucket(records).items():
        await store.settle("g:s", None, t, c, at=float(b), bucket=BUCKET)

    async def before() -> Any:
        return int((await old_total(keys=[old_key], args=[repr(NOW - WINDOW)]))[0])

    async def after() -> Any:
        out = await store.reserve("g:s", secrets.token_hex(8), 500, 0.001, at=NOW,
                                  since=NOW - WINDOW, bucket=BUCKET, ttl=600,
                                  max_tokens=10**12, max_cost=None)
        return out[1]

    async def cleanup() -> None:
        async for k in client.scan_iter(match=prefix + "*", count=500):
            await client.delete(k)
        await client.aclose()
    async def ping() -> Any:
        await client.ping()
        return len(records) and sum(r[1] for r in records)  # no count: the round trip alone
    return {"redis · before (sum every record)": before,
            "redis · after (reserve over buckets)": after,
            "redis · one round trip (PING)": ping}, cleanup


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def run(records_n: int, repeat: int) -> list[dict[str, Any]]:
    """Measure every case; one row per case."""
    records = _records(records_n)
    expected = sum(r[1] for r in records)
    with tempfile.TemporaryDirectory() as tmp:
        old_db = _old_sqlite(Path(tmp) / "old.db", records)
        new_sqlite = SQLiteUsageStore(Path(tmp) / "new.db")
        _settle_all(new_sqlite, records)
        new_memory = InMemoryUsageStore()
        _settle_all(new_memory, records)
        old_memory = OldMemory(records)

        def old_sql() -> Any:
            return old_db.execute("SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) "
                                  "FROM cost_guard_usage WHERE scope_key = ? AND at >= ?",
                                  ("s", NOW - WINDOW)).fetchone()[0]

        sync_cases: dict[str, Callable[[], Any]] = {
            "memory · before (sum every record)": lambda: old_memory.total("s", NOW - WINDOW)[0],
            "memory · after (reserve over buckets)": _check(new_memory),
            "sqlite · before (SUM over the index)": old_sql,
            "sqlite · after (reserve over buckets)": _check(new_sqlite),
        }
        rows = _measure(sync_cases, repeat, expected)
        old_db.close()
        new_sqlite.close()
    try:
        rows += asyncio.run(_measure_redis(records, repeat, expected))
    except Exception as exc:  # noqa: BLE001 - a missing server skips its rows, said why
        print(f"redis rows skipped: {type(exc).__name__}: {exc}")
    return rows


def _measure(cases: dict[str, Callable[[], Any]], repeat: int,
             expected: int) -> list[dict[str, Any]]:
    names = list(cases)
    times: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm-up, and every case must see every record
        got = cases[name]()
        if got != expected:
            raise AssertionError(f"{name}: counted {got} tokens, expected {expected}")
    for r in range(repeat):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            start = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - start)
    return [{"case": n, "ms": round(_median_ms(times[n]), 4)} for n in names]


async def _measure_redis(records: list[tuple[float, int, float]], repeat: int,
                         expected: int) -> list[dict[str, Any]]:
    cases, cleanup = await _redis_cases(records)
    try:
        names = list(cases)
        times: dict[str, list[float]] = {n: [] for n in names}
        for name in names:
            got = await cases[name]()
            if got != expected:
                raise AssertionError(f"{name}: counted {got} tokens, expected {expected}")
        for r in range(repeat):
            for i in range(len(names)):
                name = names[(r + i) % len(names)]
                start = time.perf_counter()
                await cases[name]()
                times[name].append(time.perf_counter() - start)
        return [{"case": n, "ms": round(_median_ms(times[n]), 4)} for n in names]
    finally:
        await cleanup()


def table(rows: list[dict[str, Any]], records: int) -> str:
    lines = [f"budget check with {records:,} records in the window (median ms per check)",
             f"{'case':42} {'ms':>10} {'before/after':>13}"]
    before: dict[str, float] = {}
    for row in rows:
        store, _, side = row["case"].partition(" · ")
        ratio = ""
        if side.startswith("before"):
            before[store] = row["ms"]
        elif side.startswith("after") and store in before and row["ms"] > 0:
            ratio = f"{before[store] / row['ms']:.1f}x"
        lines.append(f"{row['case']:42} {row['ms']:>10.4f} {ratio:>13}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = run(args.records, args.repeat)
    print(table(rows, args.records))
    if args.json:
        args.json.write_text(json.dumps({"records": args.records, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
