"""Where ``CostGuard`` keeps its ledgers on one machine: ``InMemoryUsageStore`` (the default) and
``SQLiteUsageStore``. ``RedisUsageStore`` (``_redis``) keeps the same ledger in Redis.

What belongs here: the ledger — running totals per time bucket and the reservations of calls in
flight — and its atomic check-and-reserve. What does not: what a call costs and which limits
apply (``_cost_guard``).

The ledger protocol, the same for all three stores (``ledger`` is ``"<guard name>:<scope key>"``,
see ``CostGuard``):

* ``reserve(ledger, hold, tokens, cost, *, at, since, bucket, ttl, max_tokens, max_cost,
  force)`` — in one atomic step: drop expired reservations and buckets older than the window,
  add up the window's spend and the live reservations, and when that plus ``tokens``/``cost``
  stays within ``max_tokens``/``max_cost`` (``None``: no limit; ``force``: reserve anyway,
  for ``strategy="warn"``) record a reservation ``hold`` that expires after ``ttl`` seconds.
  Returns ``(admitted, used_tokens, used_cost)``, ``used`` being spend plus reservations
  before this one.
* ``settle(ledger, hold, tokens, cost, *, at, bucket, keep)`` — the call's real usage replaces
  its reservation (``hold=None``: nothing was reserved).
* ``release(ledger, hold)`` — the call did not happen or failed: the reservation goes.
* ``add(ledger, tokens, cost, at)`` and ``total(ledger, since)`` — record and read spend
  directly (tools, reports; ``total`` leaves reservations out).

Spend is kept as running totals per bucket of ``bucket`` seconds (``None``: one bucket for all
time), so a check costs O(buckets in the window + calls in flight), whatever the number of calls
made. A bucket counts while any part of it is inside the window: spend leaves the window up to
one bucket late, never early (the budget errs on the strict side).
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["InMemoryUsageStore", "SQLiteUsageStore", "bucket_of", "oldest_bucket"]


def bucket_of(at: float, bucket: float | None) -> int:
    """The start (epoch seconds) of the bucket holding time ``at``; 0 for a single bucket."""
    return 0 if bucket is None else int(math.floor(at / bucket) * bucket)


def oldest_bucket(since: float | None, bucket: float | None) -> float | None:
    """Buckets starting at or before this time lie wholly before ``since``; ``None``: all
    count."""
    if since is None or bucket is None:
        return None
    return since - bucket


def _within(used: float, add: float, limit: float | None) -> bool:
    return limit is None or used + add <= limit


@dataclass(slots=True)
class _Ledger:
    tokens: dict[int, int] = field(default_factory=dict)
    cost: dict[int, float] = field(default_factory=dict)
    holds: dict[str, tuple[int, float, float]] = field(default_factory=dict)


class InMemoryUsageStore:
    """Ledgers in this process, under a lock: ``reserve`` is atomic between the threads and
    tasks of one process (see the module docstring for the protocol).

    Args:
        clock: the time reservations expire by (``time.monotonic``); tests inject one.

    Example:
        >>> store = InMemoryUsageStore()
        >>> store.add("cost-guard:user-1", 120, 0.0002, at=1000.0)
        >>> store.total("cost-guard:user-1", since=900.0)
        (120, 0.0002)
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._ledgers: dict[str, _Ledger] = {}
        self._lock = threading.Lock()
        self.clock = clock

    def _sum(self, led: _Ledger, since: float | None, bucket: float | None) -> tuple[int, float]:
        lo = oldest_bucket(since, bucket)
        if lo is not None:
            for b in [b for b in led.tokens if b <= lo]:
                del led.tokens[b]
                led.cost.pop(b, None)
        return sum(led.tokens.values()), sum(led.cost.values())

    def reserve(self, ledger: str, hold: str, tokens: int, cost: float, *, at: float,
                since: float | None, bucket: float | None, ttl: float,
                max_tokens: float | None, max_cost: float | None,
                force: bool = False) -> tuple[bool, int, float]:
        """Check the budget and reserve ``tokens``/``cost`` for a call, atomically."""
        now = self.clock()
        with self._lock:
            led = self._ledgers.setdefault(ledger, _Ledger())
            for h in [h for h, (_, _, exp) in led.holds.items() if exp <= now]:
                del led.holds[h]
            spent_t, spent_c = self._sum(led, since, bucket)
            used_t = spent_t + sum(h[0] for h in led.holds.values())
            used_c = spent_c + sum(h[1] for h in led.holds.values())
            ok = force or (_within(used_t, tokens, max_tokens)
                           and _within(used_c, cost, max_cost))
            if ok:
                led.holds[hold] = (tokens, cost, now + ttl)
        return ok, used_t, used_c

    def settle(self, ledger: str, hold: str | None, tokens: int, cost: float, *, at: float,
               bucket: float | None = 1.0, keep: float | None = None) -> None:
        """Record a call's real usage in the bucket of ``at``, replacing its reservation."""
        b = bucket_of(at, bucket)
        with self._lock:
            led = self._ledgers.setdefault(ledger, _Ledger())
            if hold is not None:
                led.holds.pop(hold, None)
            led.tokens[b] = led.tokens.get(b, 0) + int(tokens)
            led.cost[b] = led.cost.get(b, 0.0) + float(cost)

    def release(self, ledger: str, hold: str) -> None:
        """Drop a reservation (no error when it is gone already)."""
        with self._lock:
            led = self._ledgers.get(ledger)
            if led is not None:
                led.holds.pop(hold, None)

    def add(self, ledger: str, tokens: int, cost: float, at: float) -> None:
        """Record ``tokens`` and ``cost`` at time ``at`` (epoch seconds), to the second."""
        self.settle(ledger, None, tokens, cost, at=at)

    def total(self, ledger: str, since: float | None = None, *,
              bucket: float | None = 1.0) -> tuple[int, float]:
        """``(tokens, cost)`` spent in buckets reaching past ``since`` (reservations left out)."""
        lo = oldest_bucket(since, bucket)
        with self._lock:
            led = self._ledgers.get(ledger)
            if led is None:
                return 0, 0.0
            keys = [b for b in led.tokens if lo is None or b > lo]
            return sum(led.tokens[b] for b in keys), sum(led.cost.get(b, 0.0) for b in keys)

    def held(self, ledger: str) -> int:
        """How many reservations ``ledger`` holds (expired ones included until the next
        check)."""
        with self._lock:
            led = self._ledgers.get(ledger)
            return 0 if led is None else len(led.holds)


class SQLiteUsageStore:
    """Ledgers in a SQLite file (stdlib ``sqlite3``): shared by the processes of one machine and
    kept across restarts. ``reserve`` runs in one ``BEGIN IMMEDIATE`` transaction, which holds
    the database's write lock: checks from any number of processes are serialised.

    Tables: ``cost_guard_buckets (ledger, bucket, tokens, cost)`` and ``cost_guard_holds
    (ledger, hold, tokens, cost, expires_at)``; reservations expire by the wall clock
    (``time.time``), which the processes of one machine share. The per-call table of earlier
    versions (``cost_guard_usage``, keyed by scope without a guard name) is not read: a guard
    upgraded in place starts its window afresh.

    Args:
        path: the database file (created when missing), or ``":memory:"``.
        timeout: seconds to wait for another connection's lock.
        clock: the time reservations expire by (``time.time``); tests inject one.

    Example:
        >>> guard = CostGuard(max_tokens=200_000, store=SQLiteUsageStore("usage.db"))
    """

    def __init__(self, path: str | Path, *, timeout: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self.clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
        if self.path != ":memory:":
            # WAL with synchronous=NORMAL: a check is a write transaction (the reservation),
            # and NORMAL spares it an fsync; a power cut may lose the last calls' records,
            # never corrupt the ledger.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS cost_guard_buckets (ledger TEXT NOT NULL, "
                         "bucket INTEGER NOT NULL, tokens INTEGER NOT NULL, cost REAL NOT NULL, "
                         "PRIMARY KEY (ledger, bucket))")
        self._db.execute("CREATE TABLE IF NOT EXISTS cost_guard_holds (ledger TEXT NOT NULL, "
                         "hold TEXT NOT NULL, tokens INTEGER NOT NULL, cost REAL NOT NULL, "
                         "expires_at REAL NOT NULL, PRIMARY KEY (ledger, hold))")

    def _sum(self, ledger: str, lo: float | None) -> tuple[int, float]:
        row = self._db.execute(
            "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) FROM cost_guard_buckets "
            "WHERE ledger = ? AND bucket > ?",
            (ledger, float("-inf") if lo is None else lo)).fetchone()
        return int(row[0]), float(row[1])

    def reserve(self, ledger: str, hold: str, tokens: int, cost: float, *, at: float,
                since: float | None, bucket: float | None, ttl: float,
                max_tokens: float | None, max_cost: float | None,
                force: bool = False) -> tuple[bool, int, float]:
        """Check the budget and reserve ``tokens``/``cost`` for a call, atomically."""
        now = self.clock()
        lo = oldest_bucket(since, bucket)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                db = self._db
                db.execute("DELETE FROM cost_guard_holds WHERE ledger = ? AND expires_at <= ?",
                           (ledger, now))
                if lo is not None:
                    db.execute("DELETE FROM cost_guard_buckets WHERE ledger = ? AND bucket <= ?",
                               (ledger, lo))
                spent_t, spent_c = self._sum(ledger, lo)
                held = db.execute("SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) "
                                  "FROM cost_guard_holds WHERE ledger = ?", (ledger,)).fetchone()
                used_t, used_c = spent_t + int(held[0]), spent_c + float(held[1])
                ok = force or (_within(used_t, tokens, max_tokens)
                               and _within(used_c, cost, max_cost))
                if ok:
                    db.execute("INSERT OR REPLACE INTO cost_guard_holds VALUES (?, ?, ?, ?, ?)",
                               (ledger, hold, int(tokens), float(cost), now + ttl))
                db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return ok, used_t, used_c

    def settle(self, ledger: str, hold: str | None, tokens: int, cost: float, *, at: float,
               bucket: float | None = 1.0, keep: float | None = None) -> None:
        """Record a call's real usage in the bucket of ``at``, replacing its reservation."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if hold is not None:
                    self._db.execute("DELETE FROM cost_guard_holds WHERE ledger = ? AND hold = ?",
                                     (ledger, hold))
                self._db.execute(
                    "INSERT INTO cost_guard_buckets VALUES (?, ?, ?, ?) ON CONFLICT (ledger, "
                    "bucket) DO UPDATE SET tokens = tokens + excluded.tokens, "
                    "cost = cost + excluded.cost",
                    (ledger, bucket_of(at, bucket), int(tokens), float(cost)))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def release(self, ledger: str, hold: str) -> None:
        """Drop a reservation (no error when it is gone already)."""
        with self._lock:
            self._db.execute("DELETE FROM cost_guard_holds WHERE ledger = ? AND hold = ?",
                             (ledger, hold))

    def add(self, ledger: str, tokens: int, cost: float, at: float) -> None:
        """Record ``tokens`` and ``cost`` at time ``at`` (epoch seconds), to the second."""
        self.settle(ledger, None, tokens, cost, at=at)

    def total(self, ledger: str, since: float | None = None, *,
              bucket: float | None = 1.0) -> tuple[int, float]:
        """``(tokens, cost)`` spent in buckets reaching past ``since`` (reservations left out)."""
        with self._lock:
            return self._sum(ledger, oldest_bucket(since, bucket))

    def held(self, ledger: str) -> int:
        """How many reservations ``ledger`` holds (expired ones included until the next
        check)."""
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM cost_guard_holds WHERE ledger = ?",
                                   (ledger,)).fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
