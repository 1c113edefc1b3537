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
* ``RedisCache.acquire_lease`` is one ``SET lease:key token NX PX ttl``: of all the processes
  that miss on a new prompt at once, one gets the lease and calls the model; the others wait for
  its answer (``ResponseCache``'s single flight). ``release_lease`` deletes it only while it is
  still the caller's (a Lua compare-and-delete); a lease whose holder died expires on its own.
* ``RedisUsageStore`` keeps each guard's ledger per scope as running totals per time bucket plus
  the reservations of calls in flight. ``reserve`` is one Lua script — drop expired
  reservations and buckets past the window, add up the rest, and reserve the call's estimate
  only when the total stays within the limits — so a burst from any number of processes cannot
  pass the check together; ``settle`` replaces a reservation with the real usage, also in one
  script. A check reads O(buckets + calls in flight) fields, never every call ever made.
  Reservations expire by the server's clock (``TIME``).

Both use redis-py's asyncio client (the ``redis`` extra:
``pip install 'streamkit-operators[redis]'``), made on first use in the event loop that first
uses the backend: make one per process (per loop). A client made from a URL has a 5 s socket
timeout and no retries (a Lua script retried after a timeout could apply twice); a client you
pass keeps its own settings. A Redis error in ``ResponseCache`` is a miss (logged, as for every
cache backend); in ``CostGuard`` it is a ``StreamkitError`` naming the server and the operation —
a budget that cannot be read is not silently skipped.
"""

from __future__ import annotations

import functools
import json
import math
import secrets
from collections.abc import Callable
from typing import Any

from streamkit.errors import InvalidArgument, InvalidType, StreamkitError
from streamkit.validate import optional_seconds

from ._usage_stores import bucket_of


@functools.cache
def _redis() -> tuple[Any, type[Exception], Callable[[], Any]]:
    """redis-py's asyncio client class, its error base and a no-retry policy factory, imported
    when the first backend is made (the optional ``redis`` extra, and a fifth of a second to
    import)."""
    try:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import RedisError
    except ImportError as exc:
        raise StreamkitError(f"the Redis backends need redis-py: pip install "
                             f"'streamkit-operators[redis]' ({exc})") from exc
    return aioredis.Redis, RedisError, lambda: Retry(NoBackoff(), 0)

__all__ = ["RedisCache", "RedisUsageStore"]

#: Where a cache key's lease lives, after the prefix (``ResponseCache``'s single flight).
_LEASE = "lease:"

# KEYS[1] = a lease; ARGV[1] = the holder's token: delete it only while it is still theirs.
_UNLEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# The ledger of one guard and scope is three hashes: KEYS[1] bucket start -> tokens, KEYS[2]
# bucket start -> cost, KEYS[3] reservation id -> "tokens|cost|expires (server ms)".
# Numbers go back as '%.17g' strings (Lua's tostring rounds to 14 digits).
_EXPIRE = """
local function expire(keep, ttl)
  if keep ~= '' then
    redis.call('PEXPIRE', KEYS[1], keep)
    redis.call('PEXPIRE', KEYS[2], keep)
  end
  if redis.call('EXISTS', KEYS[3]) == 1 then
    if keep == '' then redis.call('PERSIST', KEYS[3])
    else redis.call('PEXPIRE', KEYS[3], math.max(tonumber(keep), ttl)) end
  end
end
"""

# ARGV: hold, tokens, cost, since|'', bucket|'', ttl ms, max tokens|'', max cost|'', force,
# keep ms|''. Reservations expire by the server's clock (TIME): no process's clock decides.
_RESERVE = _EXPIRE + """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held_t, held_c = 0, 0
local holds = redis.call('HGETALL', KEYS[3])
for i = 1, #holds, 2 do
  local _, _, ht, hc, exp = string.find(holds[i + 1], '^([^|]*)|([^|]*)|([^|]*)$')
  if tonumber(exp) <= now then
    redis.call('HDEL', KEYS[3], holds[i])
  else
    held_t = held_t + tonumber(ht)
    held_c = held_c + tonumber(hc)
  end
end
local lo = nil
if ARGV[4] ~= '' and ARGV[5] ~= '' then lo = tonumber(ARGV[4]) - tonumber(ARGV[5]) end
local function sum(key)
  local total = 0
  local rows = redis.call('HGETALL', key)
  for i = 1, #rows, 2 do
    if lo ~= nil and tonumber(rows[i]) <= lo then
      redis.call('HDEL', key, rows[i])
    else
      total = total + tonumber(rows[i + 1])
    end
  end
  return total
end
local used_t = sum(KEYS[1]) + held_t
local used_c = sum(KEYS[2]) + held_c
local ok = ARGV[9] == '1' or (
  (ARGV[7] == '' or used_t + tonumber(ARGV[2]) <= tonumber(ARGV[7])) and
  (ARGV[8] == '' or used_c + tonumber(ARGV[3]) <= tonumber(ARGV[8])))
if ok then
  local ttl = tonumber(ARGV[6])
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. '|' .. ARGV[3] .. '|' .. (now + ttl))
  expire(ARGV[10], ttl)
end
return {ok and 1 or 0, string.format('%.17g', used_t), string.format('%.17g', used_c)}
"""

# ARGV: hold|'', tokens, cost, bucket start, keep ms|''
_SETTLE = _EXPIRE + """
if ARGV[1] ~= '' then redis.call('HDEL', KEYS[3], ARGV[1]) end
redis.call('HINCRBY', KEYS[1], ARGV[4], ARGV[2])
redis.call('HINCRBYFLOAT', KEYS[2], ARGV[4], ARGV[3])
expire(ARGV[5], 0)
return 1
"""

# ARGV: since|'', bucket|''
_TOTAL = """
local lo = nil
if ARGV[1] ~= '' and ARGV[2] ~= '' then lo = tonumber(ARGV[1]) - tonumber(ARGV[2]) end
local function sum(key)
  local total = 0
  local rows = redis.call('HGETALL', key)
  for i = 1, #rows, 2 do
    if lo == nil or tonumber(rows[i]) > lo then total = total + tonumber(rows[i + 1]) end
  end
  return total
end
return {string.format('%.17g', sum(KEYS[1])), string.format('%.17g', sum(KEYS[2]))}
"""


def _client(url_or_client: Any, what: str) -> Any:
    redis_class = _redis()[0]
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
            # No retries: a script retried after a timeout may run twice (a usage record
            # counted twice), and a hung server must cost one timeout, not four with backoff.
            self._client = _redis()[0].from_url(self.url or "", socket_timeout=5.0,
                                                socket_connect_timeout=5.0,
                                                retry=_redis()[2]())
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

    Besides ``get``/``set``/``delete`` it has ``acquire_lease``/``release_lease``, which give
    ``ResponseCache`` one model call per new prompt across every process (single flight): the
    first caller ``SET``s ``<prefix>lease:<key>`` ``NX PX`` and calls the model, the others wait
    for its answer (see ``ResponseCache``).

    Args:
        url_or_client: ``"redis://host:6379/0"`` or a ``redis.asyncio.Redis``.
        prefix: put before every key (keeps deployments, and test runs, apart).

    Example:
        >>> cache = ResponseCache(RedisCache("redis://cache:6379/0"), ttl=3600)
        >>> agent = Agent(id="faq", model="openai/gpt-4o-mini", input_processors=[cache])
    """

    def __init__(self, url_or_client: Any, *, prefix: str = "streamkit:cache:") -> None:
        super().__init__(url_or_client, prefix, "RedisCache")
        self._unlease: Any = None

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
        """The keys held under this prefix (without it; leases left out)."""
        found = [k.decode()[len(self.prefix):] async for k in
                 self.redis.scan_iter(match=self.prefix + "*", count=500)]
        return sorted(k for k in found if not k.startswith(_LEASE))

    async def acquire_lease(self, key: str, ttl: float) -> str | None:
        """Claim the right to compute ``key``'s value for ``ttl`` seconds, in one ``SET NX PX``:
        a token when this caller got it, ``None`` when another holds it. Redis expires the
        claim, so one whose holder died frees itself."""
        token = secrets.token_hex(8)
        got = await self.redis.set(self.prefix + _LEASE + key, token, nx=True,
                                   px=max(1, round(ttl * 1000)))
        return token if got else None

    async def release_lease(self, key: str, token: str) -> None:
        """Give a claim back — only when it is still this ``token``'s (it may have expired and
        been taken by another caller since)."""
        if self._unlease is None:
            self._unlease = self.redis.register_script(_UNLEASE)
        await self._unlease(keys=[self.prefix + _LEASE + key], args=[token])

    async def clear(self) -> None:
        """Remove every entry under this prefix."""
        async for k in self.redis.scan_iter(match=self.prefix + "*", count=500):
            await self.redis.delete(k)


class RedisUsageStore(_RedisBackend):
    """A ``CostGuard`` ledger in Redis: every process checks, reserves and records in one.

    Implements the ledger protocol of ``_usage_stores`` (``reserve``, ``settle``, ``release``,
    ``add``, ``total``) with one Lua script per operation, so a check-and-reserve is atomic
    across every process and machine. A ledger is three hashes under ``<prefix>{<ledger>}:``
    (``t``/``c``: tokens and dollars per time bucket, ``h``: reservations in flight; the braces
    keep them in one Redis Cluster slot). Reservations expire by the Redis server's clock, so
    one whose process died stops counting after its TTL on every machine at once.

    Args:
        url_or_client: ``"redis://host:6379/0"`` or a ``redis.asyncio.Redis``.
        prefix: put before every ledger key.
        retention: for a guard without a window (``window=None``), seconds an idle ledger is
            kept (default 400 days); ``None`` keeps it forever. A guard with a window keeps its
            ledger for the window (and a bucket) after its last write.

    Raises:
        StreamkitError: from every operation when Redis fails or does not answer within the
            socket timeout (the message names the server, the operation and the ledger):
            ``CostGuard`` fails closed.

    Example:
        >>> guard = CostGuard(max_cost=5.0, pricing=Price(0.15, 0.60), window="24h",
        ...                   store=RedisUsageStore("redis://cache:6379/0"))
    """

    def __init__(self, url_or_client: Any, *, prefix: str = "streamkit:usage:",
                 retention: float | None = 400 * 86400.0) -> None:
        super().__init__(url_or_client, prefix, "RedisUsageStore")
        optional_seconds(retention, "retention")
        self.retention = retention
        self._scripts: dict[str, Any] = {}

    def _keys(self, ledger: str) -> list[str]:
        base = f"{self.prefix}{{{ledger}}}:"
        return [base + "t", base + "c", base + "h"]

    def _keep(self, keep: float | None) -> str:
        keep = self.retention if keep is None else keep
        return "" if keep is None else str(max(1, math.ceil(keep * 1000)))

    async def _run(self, name: str, source: str, what: str, ledger: str,
                   args: list[str]) -> Any:
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = self.redis.register_script(source)
        try:
            return await script(keys=self._keys(ledger), args=args)
        except (_redis()[1], OSError) as exc:
            raise StreamkitError(f"cost-guard usage store at {self._where()}: could not {what} "
                                 f"for {ledger!r}: {type(exc).__name__}: {exc}",
                                 scope_key=ledger, operation=what) from exc

    async def reserve(self, ledger: str, hold: str, tokens: int, cost: float, *, at: float,
                      since: float | None, bucket: float | None, ttl: float,
                      max_tokens: float | None, max_cost: float | None,
                      force: bool = False) -> tuple[bool, int, float]:
        """Check the budget and reserve ``tokens``/``cost`` for a call, in one script."""
        out = await self._run("reserve", _RESERVE, "reserve budget", ledger, [
            hold, str(int(tokens)), _num(cost), "" if since is None else _num(since),
            "" if bucket is None else _num(bucket), str(max(1, math.ceil(ttl * 1000))),
            "" if max_tokens is None else _num(max_tokens),
            "" if max_cost is None else _num(max_cost), "1" if force else "0",
            self._keep(None if since is None or bucket is None else at - since + bucket)])
        return bool(int(out[0])), int(float(out[1])), float(out[2])

    async def settle(self, ledger: str, hold: str | None, tokens: int, cost: float, *,
                     at: float, bucket: float | None = 1.0, keep: float | None = None) -> None:
        """Record a call's real usage in the bucket of ``at``, replacing its reservation."""
        await self._run("settle", _SETTLE, "record usage", ledger, [
            hold or "", str(int(tokens)), _num(cost), str(bucket_of(at, bucket)),
            self._keep(keep)])

    async def release(self, ledger: str, hold: str) -> None:
        """Drop a reservation (no error when it is gone already)."""
        try:
            await self.redis.hdel(self._keys(ledger)[2], hold)
        except (_redis()[1], OSError) as exc:
            raise StreamkitError(f"cost-guard usage store at {self._where()}: could not "
                                 f"release a reservation for {ledger!r}: "
                                 f"{type(exc).__name__}: {exc}", scope_key=ledger,
                                 operation="release") from exc

    async def add(self, ledger: str, tokens: int, cost: float, at: float) -> None:
        """Record ``tokens`` and ``cost`` at time ``at`` (epoch seconds), to the second."""
        await self.settle(ledger, None, tokens, cost, at=at)

    async def total(self, ledger: str, since: float | None = None, *,
                    bucket: float | None = 1.0) -> tuple[int, float]:
        """``(tokens, cost)`` spent in buckets reaching past ``since`` (reservations left
        out)."""
        out = await self._run("total", _TOTAL, "read usage", ledger, [
            "" if since is None else _num(since), "" if bucket is None else _num(bucket)])
        return int(float(out[0])), float(out[1])

    async def held(self, ledger: str) -> int:
        """How many reservations ``ledger`` holds (expired ones included until the next
        check)."""
        return int(await self.redis.hlen(self._keys(ledger)[2]))


def _num(value: float) -> str:
    """A number as Lua's ``tonumber`` and Redis's ``HINCRBYFLOAT`` read it back exactly."""
    return repr(float(value)) if not float(value).is_integer() else str(int(value))
