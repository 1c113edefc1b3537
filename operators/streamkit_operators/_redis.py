"""Redis backends for state that processes must share: ``RedisCache`` (for ``ResponseCache``) and
``RedisUsageStore`` (for ``CostGuard``).

What belongs here: the two backends, their keys, TTLs and Lua scripts. What does not: what is
cached or counted (``_response_cache``, ``_cost_guard``); the in-process backends, which stay
the defaults.

Why Redis: an agent behind a load balancer runs in many processes on many machines. A cache
that each process keeps for itself is hit 1/N as often; a budget that each process counts for
itself lets a customer spend N times the limit. These backends keep both in one Redis, with
the server doing the work that must not race:

* ``RedisCache.set`` is one ``SET key value PX ttl``: value and expiry land together, and Redis
  expires the entry on every process at once (no clock of ours involved).
* ``RedisUsageStore`` keeps each scope's calls in a sorted set scored by time. ``add`` is one
  Lua script — drop records older than ``retention``, add the record, renew the key's expiry —
  so concurrent writers from any number of processes never lose a record and the set never
  outgrows the window; ``total`` sums the window server-side (one round trip, one consistent
  view). Each record's member is unique (a random id), so two calls with equal figures at the
  same instant are two records.
* What stays two steps is ``CostGuard``'s: it reads the total before a model call and records
  the call after it (the tokens are known only then), as with every store. Requests of one
  scope that start at the same moment can each pass the check; the overshoot is at most one
  call per request in flight, and the next check sees all of them.

Both use redis-py's asyncio client (the ``redis`` extra:
``pip install 'streamkit-operators[redis]'``), made on first use in the event loop that first
uses the backend: make one per process (per loop). A Redis error in ``ResponseCache`` is a miss
(logged, as for every cache backend); in ``CostGuard`` it is a ``StreamkitError`` naming the
server and the operation — a budget that cannot be read is not silently skipped.
"""

from __future__ import annotations

import functools
import json
import secrets
from typing import Any

from streamkit.errors import InvalidArgument, InvalidType, StreamkitError


@functools.cache
def _redis() -> tuple[Any, type[Exception]]:
    """redis-py's asyncio client class and its error base, imported when the first backend is
    made (the optional ``redis`` extra, and a fifth of a second to import)."""
    try:
        import redis.asyncio as aioredis
        from redis.exceptions import RedisError
    except ImportError as exc:
        raise StreamkitError(f"the Redis backends need redis-py: pip install "
                             f"'streamkit-operators[redis]' ({exc})") from exc
    return aioredis.Redis, RedisError

__all__ = ["RedisCache", "RedisUsageStore"]

# KEYS[1] = the scope's sorted set; ARGV = at, member, retention seconds ("" = keep all)
_ADD = """
local retention = ARGV[3]
if retention ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (tonumber(ARGV[1]) - tonumber(retention)))
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if retention ~= '' then
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(retention) * 1000))
end
return 1
"""

# KEYS[1] = the scope's sorted set; ARGV[1] = since ("-inf" for all). Members are
# "<id>|<tokens>|<cost>"; the sum is returned as strings (Lua numbers would be truncated).
_TOTAL = """
local tokens, cost = 0, 0
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local _, _, t, c = string.find(member, '|([^|]*)|([^|]*)$')
  tokens = tokens + tonumber(t)
  cost = cost + tonumber(c)
end
return {tostring(tokens), string.format('%.17g', cost)}
"""


def _client(url_or_client: Any, what: str) -> Any:
    redis_class, _ = _redis()
    if isinstance(url_or_client, str):
        if not url_or_client.startswith(("redis://", "rediss://", "unix://")):
            raise InvalidArgument(f"{what} takes a redis://, rediss:// or unix:// URL or a "
                                  f"redis.asyncio.Redis client, got {url_or_client!r}")
        return None  # made on first use, in the loop that uses it
    if not isinstance(url_or_client, redis_class):
        raise InvalidType(f"{what} takes a Redis URL or a redis.asyncio.Redis client, got "
                          f"{type(url_or_client).__name__}")
    return url_or_client


def _check_prefix(prefix: Any) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise InvalidArgument(f"prefix must be a non-empty str (it keeps deployments apart), "
                              f"got {prefix!r}")
    return prefix


class _RedisBackend:
    """The connection both backends share: a URL or a client, opened lazily."""

    def __init__(self, url_or_client: Any, prefix: str, what: str) -> None:
        self._client = _client(url_or_client, what)
        self.url = url_or_client if isinstance(url_or_client, str) else None
        self.prefix = _check_prefix(prefix)
        self._owned = self._client is None

    @property
    def redis(self) -> Any:
        if self._client is None:
            self._client = _redis()[0].from_url(self.url or "", socket_timeout=5.0,
                                                socket_connect_timeout=5.0)
        return self._client

    def _where(self) -> str:
        return self.url or repr(self._client)

    async def aclose(self) -> None:
        """Close the connection pool (when this backend made it from a URL)."""
        client, self._client = self._client, None
        if client is not None and self._owned:
            await client.aclose()


class RedisCache(_RedisBackend):
    """A ``ResponseCache`` backend in Redis: shared by every process, entries expire server-side.

    Args:
        url_or_client: ``"redis://host:6379/0"`` or a ``redis.asyncio.Redis``.
        prefix: put before every key (keeps deployments, and test runs, apart).

    Example:
        >>> cache = ResponseCache(RedisCache("redis://cache:6379/0"), ttl=3600)
        >>> agent = Agent(id="faq", model="openai/gpt-4o-mini", input_processors=[cache])
    """

    def __init__(self, url_or_client: Any, *, prefix: str = "streamkit:cache:") -> None:
        super().__init__(url_or_client, prefix, "RedisCache")

    async def get(self, key: str) -> Any | None:
        """The value under ``key``, or ``None`` when absent or expired."""
        raw = await self.redis.get(self.prefix + key)
        return None if raw is None else json.loads(raw)

    async def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store ``value`` (JSON-able) for ``ttl`` seconds (``None``: until deleted), in one
        ``SET ... PX``."""
        text = json.dumps(value, separators=(",", ":"))
        if ttl is None:
            await self.redis.set(self.prefix + key, text)
        else:
            if ttl <= 0:
                raise InvalidArgument(f"ttl must be > 0 seconds or None, got {ttl}")
            await self.redis.set(self.prefix + key, text, px=max(1, round(ttl * 1000)))

    async def delete(self, key: str) -> None:
        """Remove ``key`` (no error when absent)."""
        await self.redis.delete(self.prefix + key)

    async def ttl(self, key: str) -> float | None:
        """Seconds ``key`` has left; ``None`` when it has no expiry or does not exist."""
        left = await self.redis.pttl(self.prefix + key)
        return None if left < 0 else left / 1000

    async def keys(self) -> list[str]:
        """The keys held under this prefix (without it)."""
        found = [k.decode()[len(self.prefix):] async for k in
                 self.redis.scan_iter(match=self.prefix + "*", count=500)]
        return sorted(found)

    async def clear(self) -> None:
        """Remove every entry under this prefix."""
        async for k in self.redis.scan_iter(match=self.prefix + "*", count=500):
            await self.redis.delete(k)


class RedisUsageStore(_RedisBackend):
    """A ``CostGuard`` usage store in Redis: every process adds to, and reads, one ledger.

    Args:
        url_or_client: ``"redis://host:6379/0"`` or a ``redis.asyncio.Redis``.
        prefix: put before every scope key.
        retention: seconds records are kept (default 400 days: longer than ``CostGuard``'s
            longest window, ``"365d"``); ``None`` keeps them forever. Older records are dropped
            when the scope is next written, and an idle scope's key expires after it.

    Raises:
        StreamkitError: from ``add``/``total`` when Redis fails (the message names it).

    Example:
        >>> guard = CostGuard(max_cost=5.0, pricing=Price(0.15, 0.60), window="24h",
        ...                   store=RedisUsageStore("redis://cache:6379/0"))
    """

    def __init__(self, url_or_client: Any, *, prefix: str = "streamkit:usage:",
                 retention: float | None = 400 * 86400.0) -> None:
        super().__init__(url_or_client, prefix, "RedisUsageStore")
        if retention is not None and (isinstance(retention, bool)
                                      or not isinstance(retention, (int, float))
                                      or retention <= 0):
            raise InvalidArgument(f"retention must be seconds > 0 or None, got {retention!r}")
        self.retention = retention
        self._add: Any = None
        self._total: Any = None

    def _fail(self, what: str, scope_key: str, exc: Exception) -> StreamkitError:
        return StreamkitError(f"cost-guard usage store at {self._where()}: could not {what} "
                              f"for scope {scope_key!r}: {type(exc).__name__}: {exc}",
                              scope_key=scope_key, operation=what)

    async def add(self, scope_key: str, tokens: int, cost: float, at: float) -> None:
        """Record ``tokens`` and ``cost`` for ``scope_key`` at time ``at`` (epoch seconds)."""
        if self._add is None:
            self._add = self.redis.register_script(_ADD)
        member = f"{secrets.token_hex(8)}|{int(tokens)}|{float(cost)!r}"
        retention = "" if self.retention is None else repr(float(self.retention))
        try:
            await self._add(keys=[self.prefix + scope_key], args=[repr(float(at)), member,
                                                                  retention])
        except (_redis()[1], OSError) as exc:
            raise self._fail("record usage", scope_key, exc) from exc

    async def total(self, scope_key: str, since: float | None = None) -> tuple[int, float]:
        """``(tokens, cost)`` recorded for ``scope_key`` at or after ``since``."""
        if self._total is None:
            self._total = self.redis.register_script(_TOTAL)
        try:
            tokens, cost = await self._total(
                keys=[self.prefix + scope_key],
                args=["-inf" if since is None else repr(float(since))])
        except (_redis()[1], OSError) as exc:
            raise self._fail("read usage", scope_key, exc) from exc
        return int(tokens), float(cost)
