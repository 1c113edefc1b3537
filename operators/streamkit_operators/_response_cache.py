"""``ResponseCache``: answer a repeated model call from a cache instead of the provider.

Mastra's ``ResponseCache`` (``mastra-reference.md`` §5.4): ``process_llm_request`` looks the
call up and, on a hit, returns ``{"response": chunks}`` so the agent replays them instead of
calling the model; ``process_llm_response`` stores a live step's chunks. Two backends ship here:
``InMemoryCache`` (per process, LRU-bounded, the default) and ``SQLiteCache`` (stdlib
``sqlite3``, shared by processes on one machine, survives restarts); ``RedisCache``
(``_redis``) shares one cache between machines. Any object with ``get(key)``, ``set(key, value,
ttl)`` and ``delete(key)`` — sync or async — works as a backend.

Decisions:

* The key is a SHA-256 of a canonical JSON of the prompt exactly as the model would receive it,
  the model (``provider:model_id``), the tool schemas, ``tool_choice`` and ``model_settings`` —
  everything that changes the answer — namespaced and, by default, scoped to the resource.
* What is stored is the step's chunks as the consumer received them, without the loop's
  framing (``step-start``), transient or processor-made ``data-*`` chunks, or envelopes; a step
  whose chunks hold an ``error``, ``tripwire`` or ``abort`` is never stored, and a failed model
  call never reaches ``process_llm_response``. A replayed step reports zero token usage (nothing
  was billed) and ``step.from_cache``; it goes through the output processors again.
* When a processor rejects a stored answer and the step is retried, the entry written for that
  step in this request is deleted, so the rejected answer is not served again.
* Backend failures (unreadable entry, locked database) are logged and treated as a miss; the
  run never fails because of the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamkit import MessageList, Processor
from streamkit.chunks import coerce_chunk
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.wire import to_builtins

from ._aio import call_maybe_async

__all__ = ["ResponseCache", "InMemoryCache", "SQLiteCache", "CONTEXT_KEY"]

log = logging.getLogger("streamkit_operators")

#: The ``request_context`` key for per-call options (see ``ResponseCache.context``).
CONTEXT_KEY = "streamkit__response_cache"

_SKIP_TYPES = frozenset(("start", "step-start", "step-finish", "finish", "response-metadata"))
_FAIL_TYPES = frozenset(("error", "tripwire", "abort"))
_UNSET: Any = object()


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


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


def _canonical(value: Any) -> str:
    """Stable JSON: sorted keys, no whitespace, non-JSON values by ``repr``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=repr)


def _tool_schema(tool: Any) -> dict[str, Any]:
    spec = getattr(tool, "spec", tool)
    if isinstance(spec, dict):
        return spec
    return {"name": getattr(spec, "name", getattr(tool, "id", None)),
            "description": getattr(spec, "description", None),
            "parameters": getattr(spec, "parameters", getattr(tool, "input_schema", None))}


# --------------------------------------------------------------------------------------------
# The processor
# --------------------------------------------------------------------------------------------


class ResponseCache(Processor):
    """Replays a cached answer for a model call seen before, and caches live answers.

    Put it in ``input_processors`` (its hooks are ``process_llm_request`` and
    ``process_llm_response``).

    Args:
        cache: the backend (default: a new ``InMemoryCache()``).
        key: a fixed key, or ``fn(inputs) -> str`` over ``{"prompt", "model", "tools",
            "tool_choice", "model_settings", "step_number", "scope", "request_context"}``;
            default: a hash of those that change the answer. A key function that raises (or
            returns an empty key) turns caching off for that call.
        ttl: seconds an entry lives (default 300; ``None``: until evicted).
        scope: whose entries these are — ``"resource"`` (default: the request's ``resource_id``),
            ``"thread"``, ``None`` (shared by everyone), any other string (that literal scope),
            or ``fn(request_context) -> str | None``.
        bust: skip the lookup but still store the fresh answer (refresh).
        namespace: first part of every key (Mastra's ``agentId``), so agents do not share.
        id: processor id (default ``"response-cache"``).

    Per call, ``request_context=ResponseCache.context(key=..., scope=..., bust=True)`` overrides
    ``key``, ``scope`` and ``bust``.

    Example:
        >>> cache = ResponseCache(SQLiteCache("responses.db"), ttl=3600)
        >>> agent = Agent(id="faq", model="openai/gpt-4o-mini", input_processors=[cache])
        >>> await agent.generate("What are your opening hours?")   # calls the model
        >>> await agent.generate("What are your opening hours?")   # replayed, no model call
    """

    id = "response-cache"
    name = "Response Cache"

    def __init__(self, cache: Any = None, *, key: str | Callable[[dict[str, Any]], str] | None
                 = None, ttl: float | None = 300, scope: Any = "resource", bust: bool = False,
                 namespace: str = "streamkit-response-cache", id: str | None = None) -> None:
        super().__init__(id)
        cache = InMemoryCache() if cache is None else cache
        for method in ("get", "set", "delete"):
            if not callable(getattr(cache, method, None)):
                raise InvalidType(f"cache must have get/set/delete methods; "
                                  f"{type(cache).__name__} has no {method}()")
        if ttl is not None and ttl <= 0:
            raise InvalidArgument(f"ttl must be > 0 seconds or None, got {ttl}")
        self.cache = cache
        self.key = key
        self.ttl = ttl
        self.scope = scope
        self.bust = bust
        self.namespace = namespace

    # -- per-call options ---------------------------------------------------------------------

    @staticmethod
    def context(*, key: str | Callable[[dict[str, Any]], str] | None = None,
                scope: Any = _UNSET, bust: bool | None = None) -> dict[str, Any]:
        """A ``request_context`` holding per-call overrides.

        Example:
            >>> await agent.generate("q", request_context=ResponseCache.context(bust=True))
        """
        return ResponseCache.apply_context({}, key=key, scope=scope, bust=bust)

    @staticmethod
    def apply_context(request_context: dict[str, Any], *,
                      key: str | Callable[[dict[str, Any]], str] | None = None,
                      scope: Any = _UNSET, bust: bool | None = None) -> dict[str, Any]:
        """Add per-call overrides to an existing ``request_context`` (returned, changed in
        place)."""
        options: dict[str, Any] = {}
        if key is not None:
            options["key"] = key
        if scope is not _UNSET:
            options["scope"] = scope
        if bust is not None:
            options["bust"] = bust
        request_context[CONTEXT_KEY] = options
        return request_context

    # -- keys ---------------------------------------------------------------------------------

    def _scope_value(self, scope: Any, message_list: MessageList | None,
                     request_context: Any) -> str | None:
        if scope is None:
            return None
        if callable(scope):
            value = scope(request_context)
            return None if value is None else str(value)
        if scope == "resource":
            return getattr(message_list, "resource_id", None)
        if scope == "thread":
            return getattr(message_list, "thread_id", None)
        return str(scope)

    def make_key(self, inputs: dict[str, Any], key: Any = None) -> str:
        """The cache key for one call's ``inputs`` (see the class docstring).

        Format: ``<namespace>[:<8 hex of sha256(scope)>]:<32 hex of sha256(canonical inputs)>``.
        """
        key = self.key if key is None else key
        scope = inputs.get("scope")
        prefix = self.namespace
        if scope is not None:
            prefix += ":" + hashlib.sha256(str(scope).encode()).hexdigest()[:8]
        if key is not None:
            custom = key(inputs) if callable(key) else key
            if not isinstance(custom, str):
                raise InvalidType(f"the cache key (key=) must be a non-empty str, got "
                                  f"{type(custom).__name__} {custom!r}")
            if not custom:
                raise InvalidArgument("the cache key (key=) must be a non-empty str, got ''")
            return f"{prefix}:{custom}"
        material = {k: inputs.get(k) for k in ("prompt", "model", "tools", "tool_choice",
                                                "model_settings", "scope")}
        digest = hashlib.sha256(_canonical(material).encode()).hexdigest()[:32]
        return f"{prefix}:{digest}"

    # -- hooks --------------------------------------------------------------------------------

    async def process_llm_request(self, prompt: list[dict[str, Any]], model: Any, tools: Any,
                                  tool_choice: Any, model_settings: dict[str, Any],
                                  request_context: Any, message_list: MessageList,
                                  state: dict[str, Any], step_number: int, retry_count: int
                                  ) -> dict[str, Any] | None:
        state.pop("pending", None)
        written: dict[int, str] = state.setdefault("written", {})
        if retry_count and step_number in written:
            # A processor rejected the answer this request stored for this step.
            await self._safe(self.cache.delete, written.pop(step_number))
        overrides = request_context.get(CONTEXT_KEY) if isinstance(request_context, dict) \
            else None
        overrides = overrides if isinstance(overrides, dict) else {}
        try:
            scope = self._scope_value(overrides.get("scope", self.scope), message_list,
                                      request_context)
            tool_list = list(tools.values()) if isinstance(tools, dict) else list(tools or ())
            inputs = {
                "prompt": prompt,
                "model": f"{getattr(model, 'provider', '?')}:{getattr(model, 'model_id', model)}",
                "tools": sorted((_tool_schema(t) for t in tool_list),
                                key=lambda t: str(t.get("name"))),
                "tool_choice": tool_choice, "model_settings": model_settings,
                "step_number": step_number, "scope": scope, "request_context": request_context,
            }
            key = self.make_key(inputs, overrides.get("key"))
        except Exception:  # noqa: BLE001 - no key, no caching; never fail the run
            log.exception("response-cache: could not build a key; not caching this call")
            return None
        state["pending"] = key
        if overrides.get("bust", self.bust):
            state["busted"] = state.get("busted", 0) + 1
            return None
        entry = await self._safe(self.cache.get, key)
        chunks = None if entry is _FAILED else self._chunks_of(entry)
        if not chunks:
            # unreadable: drop it so the fresh answer replaces it
            if entry is not None and entry is not _FAILED:
                await self._safe(self.cache.delete, key)
            state["misses"] = state.get("misses", 0) + 1
            return None
        state.pop("pending", None)
        state["hits"] = state.get("hits", 0) + 1
        return {"response": chunks}

    async def process_llm_response(self, chunks: list[Any], from_cache: bool,
                                   state: dict[str, Any], step_number: int) -> None:
        key = state.pop("pending", None)
        if from_cache or key is None:
            return None
        stored: list[dict[str, Any]] = []
        has_tool_calls = False
        for chunk in chunks:
            kind = chunk.type
            if kind in _FAIL_TYPES:
                return None  # never cache a failed or tripped step
            if kind in _SKIP_TYPES or kind.startswith("data-"):
                continue
            data = to_builtins(chunk)
            data.pop("runId", None)
            data.pop("from", None)
            stored.append(data)
            has_tool_calls = has_tool_calls or kind == "tool-call"
        if not stored:
            return None
        stored.append({"type": "finish", "payload": {
            "stepResult": {"reason": "tool-calls" if has_tool_calls else "stop"},
            "output": {"usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}}}})
        entry = {"chunks": stored, "createdAt": time.time()}
        if await self._safe(self.cache.set, key, entry, self.ttl) is not _FAILED:
            state.setdefault("written", {})[step_number] = key
            state["writes"] = state.get("writes", 0) + 1
        return None

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _chunks_of(entry: Any) -> list[Any] | None:
        """The entry's chunks decoded (fresh objects every time), or ``None`` when the entry
        is missing, empty or unreadable."""
        if not isinstance(entry, dict) or not isinstance(entry.get("chunks"), list):
            return None
        try:
            chunks = [coerce_chunk(c) for c in entry["chunks"]]
        except Exception as exc:  # noqa: BLE001 - a stale entry is a miss, not a failure
            log.warning("response-cache: unreadable entry ignored: %s", exc)
            return None
        return chunks or None

    async def _safe(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await call_maybe_async(fn, *args)
        except Exception:  # noqa: BLE001 - documented: backend failures are a miss
            log.exception("response-cache: backend %s() failed; ignored",
                          getattr(fn, "__name__", "call"))
            return _FAILED


_FAILED: Any = object()
