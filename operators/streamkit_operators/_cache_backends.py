"""The in-process ``ResponseCache`` backends: ``InMemoryCache`` (the default) and ``SQLiteCache``.

What belongs here: where cache entries live on one machine — values as JSON text, TTLs, eviction.
What does not: what is cached and under which key (``_response_cache``), and the backend
shared between machines (``RedisCache`` in ``_redis``). Any object with ``get(key)``,
``set(key, value, ttl)`` and ``delete(key)`` — sync or async — works as a backend; one that also
has async ``acquire_lease(key, ttl) -> token | None`` and ``release_lease(key, token)`` gets
``ResponseCache``'s single flight across processes (``RedisCache`` does). These two have none:
their single flight is the per-key future ``ResponseCache`` keeps in the process.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamkit.errors import InvalidArgument

__all__ = ["InMemoryCache", "SQLiteCache"]


class InMemoryCache:
    """A process-local cache with TTLs and least-recently-used eviction.

    Values are stored as JSON text, so a caller can never change a stored entry by mutating
    what it got back.

    Args:
        max_entries: entries kept before the least recently used is evicted (``None``: no
            bound).
        clock: seconds since the epoch (``time.time``); tests inject one.

    Example:
        >>> cache = InMemoryCache(max_entries=100)
        >>> cache.set("k", {"chunks": []}, ttl=60)
        >>> cache.get("k")
        {'chunks': []}
    """

    def __init__(self, *, max_entries: int | None = 1024,
                 clock: Callable[[], float] = time.time) -> None:
        if max_entries is not None and max_entries < 1:
            raise InvalidArgument(f"max_entries must be >= 1 or None, got {max_entries}")
        self.max_entries = max_entries
        self.clock = clock
        self._data: OrderedDict[str, tuple[float | None, str]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str) -> Any | None:
        """The value under ``key``, or ``None`` when absent or expired."""
        with self._lock:
            item = self._data.get(key)
            if item is None:
                return None
            expires, text = item
            if expires is not None and self.clock() >= expires:
                del self._data[key]
                return None
            self._data.move_to_end(key)
        return json.loads(text)

    def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store ``value`` (JSON-able) under ``key`` for ``ttl`` seconds (``None``: forever)."""
        text = json.dumps(value, separators=(",", ":"))
        with self._lock:
            self._data[key] = (None if ttl is None else self.clock() + ttl, text)
            self._data.move_to_end(key)
            while self.max_entries is not None and len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when absent)."""
        with self._lock:
            self._data.pop(key, None)

    def keys(self) -> list[str]:
        """The keys held (expired ones included until read), least recently used first."""
        with self._lock:
            return list(self._data)

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._data.clear()


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SQLiteCache:
    """A cache in a SQLite file (stdlib ``sqlite3``): shared by processes, kept across restarts.

    One table ``(key TEXT PRIMARY KEY, value TEXT, expires_at REAL, created_at REAL)``; WAL mode
    so readers do not wait for a writer; expired rows are deleted when read and by
    ``purge_expired()``. Calls are short local transactions, made inline (a read is tens of
    microseconds).

    Args:
        path: the database file (created when missing); ``":memory:"`` works for tests.
        table: table name (an identifier).
        clock: seconds since the epoch (``time.time``); tests inject one.
        timeout: seconds to wait for a lock held by another connection.

    Example:
        >>> cache = SQLiteCache("cache.db")
        >>> agent = Agent(id="a", model=model, input_processors=[ResponseCache(cache)])
    """

    def __init__(self, path: str | Path, *, table: str = "response_cache",
                 clock: Callable[[], float] = time.time, timeout: float = 5.0) -> None:
        if not _IDENT.match(table):
            raise InvalidArgument(f"table must be an SQL identifier (letters, digits, _), "
                                  f"got {table!r}")
        self.path = str(path)
        self.table = table
        self.clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, "
                         f"value TEXT NOT NULL, expires_at REAL, created_at REAL NOT NULL)")

    def __len__(self) -> int:
        with self._lock:
            row = self._db.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()
        return int(row[0])

    def get(self, key: str) -> Any | None:
        """The value under ``key``, or ``None`` when absent or expired."""
        with self._lock:
            row = self._db.execute(f"SELECT value, expires_at FROM {self.table} WHERE key = ?",
                                   (key,)).fetchone()
            if row is None:
                return None
            if row[1] is not None and self.clock() >= row[1]:
                self._db.execute(f"DELETE FROM {self.table} WHERE key = ?", (key,))
                return None
        return json.loads(row[0])

    def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store ``value`` (JSON-able) under ``key`` for ``ttl`` seconds (``None``: forever)."""
        now = self.clock()
        text = json.dumps(value, separators=(",", ":"))
        with self._lock:
            self._db.execute(f"INSERT OR REPLACE INTO {self.table} (key, value, expires_at, "
                             f"created_at) VALUES (?, ?, ?, ?)",
                             (key, text, None if ttl is None else now + ttl, now))

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when absent)."""
        with self._lock:
            self._db.execute(f"DELETE FROM {self.table} WHERE key = ?", (key,))

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._db.execute(f"DELETE FROM {self.table}")

    def keys(self) -> list[str]:
        """The keys held (expired ones included until read or purged)."""
        with self._lock:
            rows = self._db.execute(f"SELECT key FROM {self.table} ORDER BY created_at")
            return [row[0] for row in rows.fetchall()]

    def purge_expired(self) -> int:
        """Delete expired rows; returns how many."""
        with self._lock:
            cur = self._db.execute(f"DELETE FROM {self.table} WHERE expires_at IS NOT NULL "
                                   f"AND expires_at <= ?", (self.clock(),))
        return int(cur.rowcount)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
