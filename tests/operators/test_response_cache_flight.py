"""ResponseCache's single flight: concurrent copies of one new prompt make one model call — in one
process with every backend, across processes through RedisCache's lease — a holder that fails,
is cancelled or is killed leaves the others to finish within the bound, and a Redis that is gone
or hung fails open.

The model's calls are counted in Redis (shared by the processes). Redis tests are skipped with
the reason when Redis is not reachable.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from streamkit import Agent
from streamkit.errors import APICallError
from streamkit.testing import FunctionModel, text
from streamkit_operators import InMemoryCache, RedisCache, ResponseCache, SQLiteCache

PROCESSES, COPIES = 4, 10
SLOW = 0.2
PROMPT = "Summarise our refund policy in one line."
ANSWER = "Refunds within 30 days."


def _agent(cache: Any, model: Any, **options: Any) -> Agent:
    return Agent(id="faq", model=model,
                 input_processors=[ResponseCache(cache, ttl=600, scope=None, **options)])


def _counting_model(url: str, counter: str, delay: float) -> FunctionModel:
    client: Any = aioredis.Redis.from_url(url)

    async def answer(request: Any) -> Any:
        await client.incr(counter)
        await asyncio.sleep(delay)
        return text(ANSWER)
    return FunctionModel(answer)


async def _copies(url: str, prefix: str, n: int, lease: float, wait: float) -> list[str]:
    cache = RedisCache(url, prefix=prefix)
    agent = _agent(cache, _counting_model(url, prefix + "calls", SLOW), lease=lease, wait=wait)
    results = await asyncio.wait_for(
        asyncio.gather(*[agent.generate(PROMPT) for _ in range(n)]), wait + 30)
    await cache.aclose()
    return [r.text for r in results]


def copies(url: str, prefix: str, barrier: Any, lease: float, wait: float) -> None:
    barrier.wait(timeout=120)
    assert asyncio.run(_copies(url, prefix, COPIES, lease, wait)) == [ANSWER] * COPIES


def _calls(url: str, prefix: str) -> int:
    raw: Any = redis.Redis.from_url(url)
    try:
        return int(raw.get(prefix + "calls") or 0)
    finally:
        raw.close()


def _run_processes(target: Any, args: tuple[Any, ...]) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    procs = [ctx.Process(target=target, args=(*args[:2], barrier, *args[2:]))
             for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * PROCESSES


async def test_forty_copies_over_four_processes_make_one_model_call(
        redis_url: str, redis_prefix: str) -> None:
    """Before single flight every copy missed and called the model: 40 calls."""
    _run_processes(copies, (redis_url, redis_prefix, 30.0, 60.0))
    assert _calls(redis_url, redis_prefix) == 1
    cache = RedisCache(redis_url, prefix=redis_prefix)
    assert len([k for k in await cache.keys() if k != "calls"]) == 1  # the answer alone
    assert not [k async for k in cache.redis.scan_iter(match=redis_prefix + "lease:*")]
    await cache.aclose()


# ---------------------------------------------------------------------- one process, all kinds


@pytest.fixture(params=["memory", "sqlite", "redis"])
def cache(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryCache()
    elif request.param == "sqlite":
        c = SQLiteCache(tmp_path / "cache.db")
        yield c
        c.close()
    else:
        yield RedisCache(request.getfixturevalue("redis_url"),
                         prefix=request.getfixturevalue("redis_prefix"))


class Counting:
    """A slow model counting its calls; ``fail_first`` makes the first call an API error."""

    def __init__(self, *, fail_first: bool = False, delay: float = 0.05) -> None:
        self.calls = 0
        self.fail_first = fail_first
        self.delay = delay
        self.started = asyncio.Event()

    async def __call__(self, request: Any) -> Any:
        self.calls += 1
        self.started.set()
        await asyncio.sleep(self.delay)
        if self.fail_first and self.calls == 1:
            raise APICallError("upstream down", status_code=503, is_retryable=False)
        return text(ANSWER)


async def test_concurrent_copies_in_one_process_make_one_call(cache: Any) -> None:
    model = Counting()
    agent = _agent(cache, FunctionModel(model), lease=5.0, wait=10.0)
    results = await asyncio.gather(*[agent.generate(PROMPT) for _ in range(20)])
    assert model.calls == 1 and {r.text for r in results} == {ANSWER}
    assert sum(r.steps[0].from_cache for r in results) == 19


async def test_a_holder_that_fails_leaves_the_call_to_a_waiter(cache: Any) -> None:
    model = Counting(fail_first=True)
    agent = _agent(cache, FunctionModel(model), lease=5.0, wait=10.0)
    results = await asyncio.gather(*[agent.generate(PROMPT) for _ in range(10)],
                                   return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(failed) == 1 and isinstance(failed[0], APICallError)
    assert model.calls == 2  # the failed one, then one waiter took over for the rest
    assert {r.text for r in results if not isinstance(r, BaseException)} == {ANSWER}


async def test_a_cancelled_holder_leaves_the_call_to_a_waiter(cache: Any) -> None:
    model = Counting(delay=0.3)
    agent = _agent(cache, FunctionModel(model), lease=5.0, wait=10.0)
    holder = asyncio.create_task(agent.generate(PROMPT))
    await asyncio.wait_for(model.started.wait(), 10)
    waiters = [asyncio.create_task(agent.generate(PROMPT)) for _ in range(5)]
    await asyncio.sleep(0.05)  # the waiters are waiting for the holder
    holder.cancel()
    results = await asyncio.wait_for(asyncio.gather(*waiters), 10)
    assert {r.text for r in results} == {ANSWER} and model.calls == 2


async def test_without_single_flight_every_copy_calls_the_model() -> None:
    model = Counting()
    agent = _agent(InMemoryCache(), FunctionModel(model), lease=None)
    await asyncio.gather(*[agent.generate(PROMPT) for _ in range(5)])
    assert model.calls == 5


# ------------------------------------------------------------------- a holder that was killed


async def _hold_then_die(url: str, prefix: str) -> None:
    client: Any = aioredis.Redis.from_url(url)

    async def die(request: Any) -> Any:
        await client.incr(prefix + "calls")
        os._exit(0)  # killed mid-call, holding the lease
    await _agent(RedisCache(url, prefix=prefix), FunctionModel(die), lease=1.0).generate(PROMPT)


def hold_then_die(url: str, prefix: str) -> None:
    asyncio.run(_hold_then_die(url, prefix))


def late_copies(url: str, prefix: str, barrier: Any) -> None:
    barrier.wait(timeout=120)
    assert asyncio.run(_copies(url, prefix, 5, 1.0, 10.0)) == [ANSWER] * 5


async def test_a_killed_lease_holder_leaves_the_others_to_finish(
        redis_url: str, redis_prefix: str) -> None:
    proc = multiprocessing.get_context("spawn").Process(target=hold_then_die,
                                                        args=(redis_url, redis_prefix))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 0 and _calls(redis_url, redis_prefix) == 1
    # 4 processes x 5 copies; each bounds its wait at 10 s, and its whole run at 40 s
    _run_processes(late_copies, (redis_url, redis_prefix))
    assert _calls(redis_url, redis_prefix) == 2  # the dead call, then one for everyone


# ------------------------------------------------------------ a server that is gone or hung


async def test_a_hung_server_fails_open(hung_port: int) -> None:
    client: Any = aioredis.Redis(host="127.0.0.1", port=hung_port, socket_timeout=0.3,
                                 socket_connect_timeout=0.3, retry=Retry(NoBackoff(), 0))
    model = Counting()
    agent = _agent(RedisCache(client), FunctionModel(model), lease=5.0, wait=2.0)
    results = await asyncio.wait_for(asyncio.gather(*[agent.generate(PROMPT)
                                                      for _ in range(3)]), 20)
    assert {r.text for r in results} == {ANSWER} and model.calls >= 1
    await client.aclose()


async def test_a_server_that_is_gone_fails_open_at_once() -> None:
    """The lease cannot be taken: the caller calls the model at once, not after ``wait``."""
    with socket.socket() as probe:  # bound then closed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    cache = RedisCache(f"redis://127.0.0.1:{port}/0")
    model = Counting()
    agent = _agent(cache, FunctionModel(model))  # the defaults: lease 30 s, wait 60 s
    result = await asyncio.wait_for(agent.generate(PROMPT, resource_id="u"), 20)
    assert result.text == ANSWER and model.calls == 1
    await cache.aclose()
