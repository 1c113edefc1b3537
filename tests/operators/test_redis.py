"""Redis backends on the real server: a ``ResponseCache`` answer and a ``CostGuard`` budget shared
between processes, TTLs kept by Redis, concurrent writers losing nothing, and a server that is
gone failing loudly (budgets) or as a miss (cache).

Each test has its own key prefix, deleted afterwards; skipped with the reason when Redis is not
reachable.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
from typing import Any

import pytest
import redis

from streamkit import Agent
from streamkit.errors import InvalidArgument, InvalidType, StreamkitError
from streamkit.testing import ScriptedModel, text
from streamkit_operators import (
    CostGuard,
    InMemoryCache,
    InMemoryUsageStore,
    RedisCache,
    RedisUsageStore,
    ResponseCache,
)

WRITERS, ADDS = 4, 40


async def _answer_once(url: str, prefix: str) -> str:
    cache = RedisCache(url, prefix=prefix)
    agent = Agent(id="faq", model=ScriptedModel([text("from process A")]),
                  input_processors=[ResponseCache(cache, ttl=600, scope=None)])
    result = await agent.generate("What are your opening hours?")
    await cache.aclose()
    return result.text


def answer_once(url: str, prefix: str) -> None:
    assert asyncio.run(_answer_once(url, prefix)) == "from process A"


async def _spend(url: str, prefix: str) -> None:
    store = RedisUsageStore(url, prefix=prefix)
    guard = CostGuard(max_tokens=1_000_000, store=store)
    agent = Agent(id="c", model=ScriptedModel([text("word " * 40)]), input_processors=[guard])
    result = await agent.generate("spend", resource_id="customer-1")
    assert result.tripwire is None
    await store.aclose()


def spend(url: str, prefix: str) -> None:
    asyncio.run(_spend(url, prefix))


async def _add_many(url: str, prefix: str, worker: int) -> None:
    store = RedisUsageStore(url, prefix=prefix)
    await asyncio.gather(*[store.add("shared", 1 + worker, 0.25, 1000.0 + i)
                           for i in range(ADDS)])
    await store.aclose()


def add_many(url: str, prefix: str, worker: int) -> None:
    asyncio.run(_add_many(url, prefix, worker))


def run_in_processes(target: Any, *args_list: tuple[Any, ...]) -> None:
    """Run ``target(*args)`` for each args in its own spawned process; all must succeed."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * len(procs)


# ---------------------------------------------------------------------------------- the cache


@pytest.fixture(params=["in-process", "redis"])
def cache(request: pytest.FixtureRequest) -> Any:
    """The default backend (sync methods) and the Redis one (async methods)."""
    if request.param == "in-process":
        return InMemoryCache()
    return RedisCache(request.getfixturevalue("redis_url"),
                      prefix=request.getfixturevalue("redis_prefix"))


class TestRedisCache:
    async def test_a_repeated_call_is_answered_from_the_backend(self, cache: Any) -> None:
        model = ScriptedModel([text("hours: 9-5")])
        agent = Agent(id="faq", model=model, input_processors=[ResponseCache(cache, ttl=60)])
        first = await agent.generate("Opening hours?", resource_id="u1")
        again = await agent.generate("Opening hours?", resource_id="u1")
        assert (first.text, again.text, model.calls) == ("hours: 9-5", "hours: 9-5", 1)
        assert again.steps[0].from_cache and again.usage.total_tokens == 0

    async def test_another_process_gets_the_answer_without_calling_the_model(
            self, redis_url: str, redis_prefix: str) -> None:
        run_in_processes(answer_once, (redis_url, redis_prefix))
        cache = RedisCache(redis_url, prefix=redis_prefix)
        model = ScriptedModel([text("never called")])
        agent = Agent(id="faq", model=model,
                      input_processors=[ResponseCache(cache, ttl=600, scope=None)])
        result = await agent.generate("What are your opening hours?")
        assert result.text == "from process A" and model.calls == 0
        await cache.aclose()

    async def test_entries_carry_their_ttl_in_redis(self, redis_url: str,
                                                    redis_prefix: str) -> None:
        cache = RedisCache(redis_url, prefix=redis_prefix)
        await cache.set("short", {"v": 1}, ttl=30)
        await cache.set("forever", {"v": 2})
        left = await cache.ttl("short")
        assert left is not None and 0 < left <= 30
        assert await cache.ttl("forever") is None
        assert await cache.keys() == ["forever", "short"]
        # Redis expires it: a key past its expiry is gone for every reader
        await cache.redis.pexpire(redis_prefix + "short", 1)
        for _ in range(400):  # bounded: Redis expires a key 1 ms after PEXPIRE 1
            if await cache.get("short") is None:
                break
            await asyncio.sleep(0.005)
        assert await cache.get("short") is None and await cache.get("forever") == {"v": 2}
        await cache.clear()
        assert await cache.keys() == []
        await cache.aclose()

    async def test_a_server_that_is_gone_is_a_miss_not_a_failed_run(self) -> None:
        cache = RedisCache(f"redis://127.0.0.1:{_free_port()}/0")
        model = ScriptedModel([text("live"), text("live again")])
        agent = Agent(id="faq", model=model, input_processors=[ResponseCache(cache)])
        assert (await agent.generate("q")).text == "live"
        assert (await agent.generate("q")).text == "live again" and model.calls == 2
        await cache.aclose()


# --------------------------------------------------------------------------------- the budget


class TestRedisUsageStore:
    async def test_a_budget_spent_in_another_process_stops_this_one(
            self, redis_url: str, redis_prefix: str) -> None:
        run_in_processes(spend, (redis_url, redis_prefix))
        store = RedisUsageStore(redis_url, prefix=redis_prefix)
        spent, _ = await store.total("cost-guard:customer-1")
        assert spent > 40
        model = ScriptedModel([text("never called")])
        agent = Agent(id="c", model=model,
                      input_processors=[CostGuard(max_tokens=spent, store=store)])
        result = await agent.generate("more", resource_id="customer-1")
        assert result.tripwire is not None and model.calls == 0
        assert result.tripwire.metadata["usage"]["tokens"] > spent
        other = await agent.generate("more", resource_id="customer-2")  # another scope
        assert other.tripwire is None
        await store.aclose()

    async def test_concurrent_writers_in_several_processes_lose_nothing(
            self, redis_url: str, redis_prefix: str) -> None:
        run_in_processes(add_many, *[(redis_url, redis_prefix, w) for w in range(WRITERS)])
        store = RedisUsageStore(redis_url, prefix=redis_prefix)
        tokens, cost = await store.total("shared")
        assert tokens == ADDS * sum(1 + w for w in range(WRITERS))
        assert cost == pytest.approx(WRITERS * ADDS * 0.25)
        assert await store.total("shared", since=1000.0 + ADDS - 1) == (
            sum(1 + w for w in range(WRITERS)), pytest.approx(WRITERS * 0.25))
        await store.aclose()

    @pytest.mark.parametrize("store_kind", ["in-process", "redis"])
    async def test_the_window_counts_only_recent_records(
            self, store_kind: str, request: pytest.FixtureRequest) -> None:
        store: Any = InMemoryUsageStore() if store_kind == "in-process" else RedisUsageStore(
            request.getfixturevalue("redis_url"),
            prefix=request.getfixturevalue("redis_prefix"))
        for at, tokens in ((100.0, 1), (200.0, 10), (300.0, 100)):
            out = store.add("s", tokens, tokens / 100, at)
            if asyncio.iscoroutine(out):
                await out
        total = store.total("s", 200.0)
        got = await total if asyncio.iscoroutine(total) else total
        assert got == (110, pytest.approx(1.1))

    async def test_buckets_past_the_window_are_dropped_and_the_ledger_expires(
            self, redis_url: str, redis_prefix: str) -> None:
        store = RedisUsageStore(redis_url, prefix=redis_prefix)
        await store.settle("g:s", None, 5, 0.5, at=1000.0, bucket=60, keep=3660)
        await store.settle("g:s", None, 7, 0.25, at=1000.0 + 7200, bucket=60, keep=3660)
        # a check an hour-window later: the first bucket is out, and dropped by the check
        ok, tokens, cost = await store.reserve("g:s", "h1", 3, 0.0, at=8200.0,
                                               since=8200.0 - 3600, bucket=60, ttl=30,
                                               max_tokens=10, max_cost=None)
        assert (ok, tokens, cost) == (True, 7, 0.25)
        raw: Any = redis.Redis.from_url(redis_url)
        base = f"{redis_prefix}{{g:s}}:"
        assert raw.hlen(base + "t") == 1 and raw.hlen(base + "h") == 1
        assert 0 < raw.pttl(base + "t") <= 3_660_000 and 0 < raw.pttl(base + "h") <= 3_660_000
        # 7 spent + 3 held + 1 more is over 10: refused, and nothing is held for it
        assert (await store.reserve("g:s", "h2", 1, 0.0, at=8200.0, since=4600.0, bucket=60,
                                    ttl=30, max_tokens=10, max_cost=None))[0] is False
        assert await store.held("g:s") == 1
        await store.settle("g:s", "h1", 2, 0.0, at=8201.0, bucket=60)  # real usage: 2, not 3
        assert await store.held("g:s") == 0
        assert await store.total("g:s", 4600.0, bucket=60) == (9, 0.25)
        raw.close()
        await store.aclose()

    async def test_a_server_that_is_gone_fails_the_budget_check_loudly(self) -> None:
        store = RedisUsageStore(f"redis://127.0.0.1:{_free_port()}/0")
        with pytest.raises(StreamkitError, match="could not read usage for 'u1'"):
            await store.total("u1")
        with pytest.raises(StreamkitError, match="could not record usage"):
            await store.add("u1", 1, 0.0, 1.0)
        await store.aclose()


# ---------------------------------------------------------------------------------- arguments


def _free_port() -> int:
    with socket.socket() as probe:  # bound then closed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("make, error, match", [
    pytest.param(lambda: RedisCache("localhost:6379"), InvalidArgument, "redis://",
                 id="url-without-scheme"),
    pytest.param(lambda: RedisCache(42), InvalidType, "Redis URL", id="not-a-client"),
    pytest.param(lambda: RedisCache("redis://x", prefix=""), InvalidArgument, "prefix",
                 id="empty-prefix"),
    pytest.param(lambda: RedisUsageStore("redis://x", retention=0), InvalidArgument,
                 "retention", id="zero-retention"),
])
def test_bad_arguments_are_refused(make: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make()
