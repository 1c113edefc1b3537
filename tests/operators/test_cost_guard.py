"""CostGuard: token and cost budgets per run and per scope, stores, windows, warn and abort."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent, Violation, tool
from streamkit.errors import InvalidArgument
from streamkit.testing import ScriptedModel, reasoning, text, tool_call
from streamkit_operators import (
    CostGuard,
    InMemoryUsageStore,
    Price,
    ResponseCache,
    SQLiteUsageStore,
)

from ..conftest import as_mode


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "a long tool result " * 20


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def agent(guard: CostGuard, *steps: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(steps) or [text("fine")])
    return Agent(id="c", model=model, tools=[lookup], input_processors=[guard]), model


async def test_recorded_tokens_equal_the_reported_usage() -> None:
    store = InMemoryUsageStore()
    guard = CostGuard(max_tokens=100_000, store=store)
    a, _ = agent(guard, tool_call("lookup", {"q": "x"}), [reasoning("hmm"), text("done")])
    result = await a.generate("hi", resource_id="u1")
    assert store.total("cost-guard:u1") == (result.usage.total_tokens, 0.0)
    assert result.states["cost-guard"]["run_tokens"] == result.usage.total_tokens
    assert await guard.spent("u1") == (result.usage.total_tokens, 0.0)
    assert store.held("cost-guard:u1") == 0  # every reservation was settled


async def test_per_run_budget_stops_before_the_next_call() -> None:
    guard = CostGuard(max_tokens=150, scope="run")
    a, model = agent(guard, tool_call("lookup", {"q": "x"}), text("never reached"))
    result = await a.generate("hi", resource_id="u1")
    assert model.calls == 1  # the second call would have gone over: it never happened
    tw = result.tripwire
    assert tw.processor_id == "cost-guard" and not tw.retry
    assert tw.reason.startswith("Budget exceeded: ") and tw.reason.endswith("of 150 tokens (run)")
    meta = tw.metadata
    assert meta["threshold"] == "hard" and meta["scope"] == "run" and "scopeKey" not in meta
    assert meta["maxTokens"] == 150 and meta["usage"]["tokens"] > 150
    assert meta["usage"]["costUnit"] == "usd"


async def test_budget_across_requests_per_resource() -> None:
    clock = Clock()
    guard = CostGuard(max_tokens=80, window="1h", clock=clock)
    a, model = agent(guard, text("first answer"), text("other user"), text("after the window"))
    first = await a.generate("hello there", resource_id="u1")
    assert first.tripwire is None and first.usage.total_tokens > 40
    second = await a.generate("hello again", resource_id="u1")
    assert second.tripwire is not None and second.tripwire.metadata["scopeKey"] == "u1"
    assert (await a.generate("hi", resource_id="u2")).tripwire is None
    clock.now += 3600 + 3600 / 64 + 1  # the window (and the bucket) moved past u1's spend
    assert (await a.generate("hello again", resource_id="u1")).tripwire is None
    assert model.calls == 3


async def test_sqlite_store_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "usage.db"
    a, _ = agent(CostGuard(max_tokens=60, store=SQLiteUsageStore(path)), text("a" * 50))
    assert (await a.generate("first", thread_id="t", resource_id="u")).tripwire is None
    # a new process: new guard, new connection, same file
    store = SQLiteUsageStore(path)
    a, model = agent(CostGuard(max_tokens=60, store=store), text("b"))
    result = await a.generate("second", thread_id="t", resource_id="u")
    assert result.tripwire is not None and model.calls == 0
    assert store.total("cost-guard:u")[0] > 0 and store.total("cost-guard:nobody") == (0, 0.0)
    store.close()


async def test_thread_scope_and_custom_scope() -> None:
    store = InMemoryUsageStore()
    a, _ = agent(CostGuard(max_tokens=10_000, scope="thread", store=store), text("x"))
    await a.generate("hi", thread_id="t-1", resource_id="u")
    assert store.total("cost-guard:t-1")[0] > 0 and store.total("cost-guard:u") == (0, 0.0)
    guard = CostGuard(max_tokens=10_000, scope=lambda rc: rc.get("org"), store=store)
    a, _ = agent(guard, text("x"))
    await a.generate("hi", request_context={"org": "acme"})
    assert store.total("cost-guard:acme")[0] > 0


@pytest.mark.parametrize("pricing", [
    pytest.param(Price(1_000.0, 2_000.0), id="one-price"),
    pytest.param({"scripted-model": Price(1_000.0, 2_000.0), "*": Price(0, 0)}, id="by-model"),
    pytest.param(lambda model_id, i, o: (i * 1_000.0 + o * 2_000.0) / 1e6, id="function"),
])
async def test_cost_budget(pricing: Any) -> None:
    store = InMemoryUsageStore()
    guard = CostGuard(max_cost=0.05, pricing=pricing, store=store, include_breakdown=True)
    a, model = agent(guard, text("answer"), text("never"))
    first = await a.generate("hi", resource_id="u")
    tokens, cost = store.total("cost-guard:u")
    assert first.tripwire is None and tokens == first.usage.total_tokens
    expected = (first.usage.input_tokens * 1_000 + first.usage.output_tokens * 2_000) / 1e6
    assert cost == pytest.approx(expected) and cost > 0.02
    second = await a.generate("hi again", resource_id="u")
    meta = second.tripwire.metadata
    assert second.tripwire.reason.startswith("Budget exceeded: $")
    assert meta["maxCost"] == 0.05 and meta["usage"]["estimatedCost"] > 0.05
    assert meta["breakdown"]["prior"]["cost"] == pytest.approx(cost)
    assert meta["breakdown"]["next_call"]["tokens"] > 0 and model.calls == 1


async def test_dynamic_limits_from_the_request_context() -> None:
    guard = CostGuard(max_tokens=lambda rc: rc.get("budget"), scope="run")
    a, model = agent(guard, text("ok"), text("ok"))
    assert (await a.generate("hi", request_context={"budget": 5})).tripwire is not None
    # no (or an invalid) limit for this call: the check is skipped
    assert (await a.generate("hi", request_context={"budget": "lots"})).tripwire is None
    assert (await a.generate("hi", request_context={"budget": 10_000})).tripwire is None
    assert model.calls == 2


async def test_warn_strategy_lets_the_call_run_and_reports_once(mode: str) -> None:
    seen: list[Violation] = []
    guard = CostGuard(max_tokens=10, scope="run", strategy="warn",
                      on_violation=as_mode(seen.append, mode))
    a, model = agent(guard, tool_call("lookup", {"q": "x"}), text("done"))
    result = await a.generate("hi")
    assert result.tripwire is None and model.calls == 2
    assert len(seen) == 1 and seen[0].detail["threshold"] == "hard"
    assert seen[0].processor_id == "cost-guard" and "tokens" in seen[0].message


async def test_soft_threshold_warns_once_then_the_hard_limit_aborts(mode: str) -> None:
    seen: list[Violation] = []
    guard = CostGuard(max_tokens=200, scope="run", warn_at_percent=25,
                      on_violation=as_mode(seen.append, mode))
    a, model = agent(guard, tool_call("lookup", {"q": "x"}), tool_call("lookup", {"q": "y"}),
                     text("done"))
    result = await a.generate("hi")
    soft = [v for v in seen if v.detail.get("threshold") == "soft"]
    hard = [v for v in seen if v.detail.get("threshold") == "hard"]
    assert len(soft) == 1 and soft[0].message.startswith("25% of the tokens budget used")
    # the abort reaches on_violation through the runtime, once
    assert len(hard) == 1 and result.tripwire is not None and model.calls < 3


async def test_block_is_mastras_name_for_abort() -> None:
    a, model = agent(CostGuard(max_tokens=1, scope="run", strategy="block"))
    assert (await a.generate("hi")).tripwire is not None and model.calls == 0


async def test_cached_steps_cost_nothing() -> None:
    store = InMemoryUsageStore()
    cache = ResponseCache(scope=None)
    guard = CostGuard(max_tokens=100_000, store=store)
    model = ScriptedModel([text("cached answer")])
    a = Agent(id="c", model=model, input_processors=[cache, guard])
    first = await a.generate("same question", resource_id="u")
    second = await a.generate("same question", resource_id="u")
    assert second.text == "cached answer" and second.steps[0].from_cache and model.calls == 1
    assert second.usage.total_tokens == 0
    assert store.total("cost-guard:u")[0] == first.usage.total_tokens


def test_options_are_checked() -> None:
    with pytest.raises(InvalidArgument, match="max_tokens"):
        CostGuard()
    with pytest.raises(InvalidArgument, match="pricing"):
        CostGuard(max_cost=1.0)
    with pytest.raises(InvalidArgument, match="scope"):
        CostGuard(max_tokens=1, scope="user")
    with pytest.raises(InvalidArgument, match="window"):
        CostGuard(max_tokens=1, window="2w")
    with pytest.raises(InvalidArgument, match="strategy"):
        CostGuard(max_tokens=1, strategy="deny")
    with pytest.raises(InvalidArgument, match="warn_at_percent"):
        CostGuard(max_tokens=1, warn_at_percent=150)
    with pytest.raises(InvalidArgument, match="name"):
        CostGuard(max_tokens=1, name="a:b")
    with pytest.raises(InvalidArgument, match="name"):
        CostGuard(max_tokens=1, id="tenant:budget")  # the default name is the id
    with pytest.raises(InvalidArgument, match="reservation_ttl"):
        CostGuard(max_tokens=1, reservation_ttl=0)
    with pytest.raises(InvalidArgument, match="output_tokens"):
        CostGuard(max_tokens=1, output_tokens=-1)
    with pytest.raises(InvalidArgument, match="lease"):
        ResponseCache(lease=0)
    with pytest.raises(InvalidArgument, match="wait"):
        ResponseCache(wait=-1.0)
    assert Price(0.15, 0.60).cost(1_000_000, 1_000_000) == pytest.approx(0.75)


async def test_guards_with_different_names_keep_different_ledgers() -> None:
    store = InMemoryUsageStore()
    support = CostGuard(max_tokens=10_000, store=store, name="support")
    sales = CostGuard(max_tokens=10_000, store=store, id="sales-budget")
    for guard in (support, sales):
        a, _ = agent(guard, text("x"))
        await a.generate("hi", resource_id="u")
    assert support.ledger("u") == "support:u" and support.name == "support"
    assert sales.ledger("u") == "sales-budget:u" and sales.name == "Cost Guard"
    assert store.total("support:u")[0] > 0 and store.total("sales-budget:u")[0] > 0
    assert store.total("cost-guard:u") == (0, 0.0)
