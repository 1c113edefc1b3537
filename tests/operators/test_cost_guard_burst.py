"""CostGuard's shared budget under load, on the real Redis: a burst from several processes is held
to the budget, a cancelled request gives its reservation back, a reservation whose process was
killed expires, and a server that is gone or hung fails the check closed.

Skipped with the reason when Redis is not reachable.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from streamkit import Agent
from streamkit.errors import StreamkitError
from streamkit.testing import FunctionModel, ScriptedModel, api_error, text
from streamkit_operators import CostGuard, InMemoryUsageStore, RedisUsageStore, SQLiteUsageStore

PROCESSES, PER_PROCESS, ADMITS = 4, 50, 100
SLOW = 0.2  # seconds per model call: every request of the burst is in flight together
QUESTION = "How much is left on my plan this month?"
ANSWER = "Plenty."


def _model(url: str, counter: str, delay: float) -> FunctionModel:
    """A slow model that counts its calls in Redis (the count every process shares)."""
    client: Any = aioredis.Redis.from_url(url)

    async def answer(request: Any) -> Any:
        await client.incr(counter)
        await asyncio.sleep(delay)
        return text(ANSWER)
    return FunctionModel(answer)


def _guard(store: Any, budget: int, output: int, **options: Any) -> CostGuard:
    return CostGuard(max_tokens=budget, window="24h", store=store, output_tokens=output,
                     name="burst", **options)


async def _burst(url: str, prefix: str, budget: int, output: int) -> None:
    store = RedisUsageStore(url, prefix=prefix)
    agent = Agent(id="b", model=_model(url, prefix + "calls", SLOW),
                  input_processors=[_guard(store, budget, output)])
    await asyncio.gather(*[agent.generate(QUESTION, resource_id="customer-1")
                           for _ in range(PER_PROCESS)])
    await store.aclose()


def burst(url: str, prefix: str, budget: int, output: int, barrier: Any) -> None:
    barrier.wait(timeout=120)  # every process is loaded: the requests start together
    asyncio.run(_burst(url, prefix, budget, output))


async def _sizes() -> tuple[int, int]:
    """What one request costs: its input and output tokens as the guard counts them."""
    model = FunctionModel(lambda request: text(ANSWER))
    guard = CostGuard(max_tokens=10**9, store=InMemoryUsageStore())
    result = await Agent(id="b", model=model, input_processors=[guard]).generate(
        QUESTION, resource_id="x")
    return result.usage.input_tokens, result.usage.output_tokens


async def test_a_burst_from_four_processes_is_held_to_the_budget(
        redis_url: str, redis_prefix: str) -> None:
    """200 concurrent requests against a budget that admits exactly 100 one after another:
    100 are admitted (the old read-then-record admitted all 200 with a slow model)."""
    inputs, outputs = await _sizes()
    budget = ADMITS * (inputs + outputs)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    procs = [ctx.Process(target=burst, args=(redis_url, redis_prefix, budget, outputs, barrier))
             for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    raw: Any = redis.Redis.from_url(redis_url)
    calls = int(raw.get(redis_prefix + "calls"))
    raw.close()
    store = RedisUsageStore(redis_url, prefix=redis_prefix)
    spent, _ = await store.total("burst:customer-1")
    assert (calls, spent) == (ADMITS, budget)
    assert await store.held("burst:customer-1") == 0  # every reservation settled
    await store.aclose()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryUsageStore()
    elif request.param == "sqlite":
        s = SQLiteUsageStore(tmp_path / "usage.db")
        yield s
        s.close()
    else:
        yield RedisUsageStore(request.getfixturevalue("redis_url"),
                              prefix=request.getfixturevalue("redis_prefix"))


async def _held(store: Any, ledger: str) -> int:
    out = store.held(ledger)
    return int(await out if asyncio.iscoroutine(out) else out)


async def _until(predicate: Any, seconds: float = 10.0) -> None:
    """Wait (bounded) until ``await predicate()`` is true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not await predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_a_burst_in_one_process_is_held_to_the_budget(store: Any) -> None:
    """The same reservation with every backend, 40 concurrent requests for 10 admits."""
    inputs, outputs = await _sizes()
    budget = 10 * (inputs + outputs)
    calls = 0

    async def answer(request: Any) -> Any:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return text(ANSWER)
    agent = Agent(id="b", model=FunctionModel(answer),
                  input_processors=[_guard(store, budget, outputs)])
    results = await asyncio.gather(*[agent.generate(QUESTION, resource_id="c")
                                     for _ in range(40)])
    assert calls == 10 and sum(r.tripwire is None for r in results) == 10
    assert await _held(store, "burst:c") == 0


async def test_an_estimate_below_the_real_usage_overruns_by_at_most_the_difference(
        store: Any) -> None:
    """Reserving the prompt alone (``output_tokens=0``, no ``max_tokens`` setting): the calls
    in flight can each overrun by their output — the documented slack — and no more."""
    inputs, outputs = await _sizes()
    budget = 10 * (inputs + outputs)
    calls = 0

    async def answer(request: Any) -> Any:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return text(ANSWER)
    agent = Agent(id="b", model=FunctionModel(answer),
                  input_processors=[_guard(store, budget, 0)])
    await asyncio.gather(*[agent.generate(QUESTION, resource_id="c") for _ in range(40)])
    spent = calls * (inputs + outputs)
    assert 10 <= calls <= budget // inputs
    assert spent <= budget + calls * outputs


async def test_a_cancelled_request_gives_its_reservation_back(store: Any) -> None:
    started = asyncio.Event()

    async def answer(request: Any) -> Any:
        started.set()
        await asyncio.sleep(60)  # cancelled long before
        return text(ANSWER)
    inputs, outputs = await _sizes()
    guard = _guard(store, inputs + outputs, outputs)  # room for exactly one call
    agent = Agent(id="b", model=FunctionModel(answer), input_processors=[guard])
    task = asyncio.create_task(agent.generate(QUESTION, resource_id="c"))
    await asyncio.wait_for(started.wait(), 10)
    assert await _held(store, "burst:c") == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _until(lambda: _until_zero(store, "burst:c"))
    # the budget is whole again: the next call is admitted
    agent = Agent(id="b", model=FunctionModel(lambda r: text(ANSWER)), input_processors=[guard])
    assert (await agent.generate(QUESTION, resource_id="c")).tripwire is None


async def _until_zero(store: Any, ledger: str) -> bool:
    return await _held(store, ledger) == 0


async def test_a_failed_call_gives_its_reservation_back(store: Any) -> None:
    inputs, outputs = await _sizes()
    guard = _guard(store, inputs + outputs, outputs)
    model = ScriptedModel([api_error(503, "upstream down", is_retryable=False)])
    failing = Agent(id="b", model=model, input_processors=[guard])
    with pytest.raises(StreamkitError):
        await failing.generate(QUESTION, resource_id="c")
    assert await _held(store, "burst:c") == 0
    agent = Agent(id="b", model=FunctionModel(lambda r: text(ANSWER)), input_processors=[guard])
    assert (await agent.generate(QUESTION, resource_id="c")).tripwire is None


# ------------------------------------------------------------------- a holder that was killed


async def _hold_then_die(url: str, prefix: str, budget: int, output: int) -> None:
    def die(request: Any) -> Any:
        os._exit(0)  # killed mid-call: no settle, no release, no task callback
    store = RedisUsageStore(url, prefix=prefix)
    agent = Agent(id="b", model=FunctionModel(die),
                  input_processors=[_guard(store, budget, output, reservation_ttl=1.0)])
    await agent.generate(QUESTION, resource_id="c")


def hold_then_die(url: str, prefix: str, budget: int, output: int) -> None:
    asyncio.run(_hold_then_die(url, prefix, budget, output))


async def test_a_killed_holders_reservation_expires(redis_url: str, redis_prefix: str) -> None:
    inputs, outputs = await _sizes()
    budget = inputs + outputs  # room for exactly one call
    proc = multiprocessing.get_context("spawn").Process(
        target=hold_then_die, args=(redis_url, redis_prefix, budget, outputs))
    proc.start()
    proc.join(timeout=120)
    store = RedisUsageStore(redis_url, prefix=redis_prefix)
    assert proc.exitcode == 0 and await store.held("burst:c") == 1
    model = FunctionModel(lambda r: text(ANSWER))
    agent = Agent(id="b", model=model, input_processors=[_guard(store, budget, outputs)])
    refused = await agent.generate(QUESTION, resource_id="c")  # the dead call still holds it
    if refused.tripwire is None:  # the TTL (1 s) already ran out while the process exited
        assert await store.held("burst:c") == 0
    else:
        async def admitted() -> bool:
            return (await agent.generate(QUESTION, resource_id="c")).tripwire is None
        await _until(admitted, 10)  # Redis expired the hold by its own clock
    await store.aclose()


# ------------------------------------------------------------ a server that is gone or hung


async def test_a_hung_server_fails_the_budget_closed(hung_port: int) -> None:
    client: Any = aioredis.Redis(host="127.0.0.1", port=hung_port, socket_timeout=0.3,
                                 socket_connect_timeout=0.3, retry=Retry(NoBackoff(), 0))
    model = FunctionModel(lambda r: text("never"))
    agent = Agent(id="b", model=model,
                  input_processors=[CostGuard(max_tokens=10**6, store=RedisUsageStore(client))])
    with pytest.raises(StreamkitError, match="could not reserve budget"):
        await asyncio.wait_for(agent.generate(QUESTION, resource_id="c"), 10)
    await client.aclose()


class ReadThenRecord:
    """A store with only ``add``/``total`` (the protocol before reservations)."""

    def __init__(self) -> None:
        self.inner = InMemoryUsageStore()

    def add(self, key: str, tokens: int, cost: float, at: float) -> None:
        self.inner.add(key, tokens, cost, at)

    def total(self, key: str, since: float | None) -> tuple[int, float]:
        return self.inner.total(key, since)


async def test_a_store_without_reservations_is_overrun_by_the_same_burst() -> None:
    """Why reservations: read before the call and recorded after it, every request in flight
    passes the check (the guard still works with such a store, as documented)."""
    inputs, outputs = await _sizes()
    calls = 0

    async def answer(request: Any) -> Any:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return text(ANSWER)
    store = ReadThenRecord()
    agent = Agent(id="b", model=FunctionModel(answer),
                  input_processors=[_guard(store, 10 * (inputs + outputs), outputs)])
    await asyncio.gather(*[agent.generate(QUESTION, resource_id="c") for _ in range(40)])
    assert calls == 40
    # and sequentially it stops at the budget
    calls = 0
    for _ in range(15):
        await agent.generate(QUESTION, resource_id="d")
    assert calls == 10
