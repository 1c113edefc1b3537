"""The ledger protocol over many operation sequences (Hypothesis): a reservation is admitted only
when spend plus reservations plus it stay within the limit, settles and releases keep the totals
exact, expired reservations and buckets past the window stop counting — the same in memory and
in SQLite — and the guard's estimate reads the step's output bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit import Agent
from streamkit.testing import ScriptedModel, text
from streamkit_operators import CostGuard, InMemoryUsageStore, SQLiteUsageStore

LIMIT = 100

ops = st.lists(st.one_of(
    st.tuples(st.just("reserve"), st.integers(0, 60)),
    st.tuples(st.just("settle"), st.integers(0, 60)),   # real usage of the oldest hold
    st.tuples(st.just("release"), st.just(0)),
    st.tuples(st.just("tick"), st.integers(1, 30)),     # time passes (holds live 50 s)
), max_size=40)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _play(store: Any, clock: Clock, steps: list[tuple[str, int]]) -> list[Any]:
    """Run ``steps`` on ``store`` beside a reference model; return what the store answered."""
    holds: list[tuple[str, int, float]] = []   # id, tokens, expires
    spent: list[tuple[float, int]] = []         # at, tokens
    seen: list[Any] = []
    window, bucket = 120.0, 10
    for i, (op, n) in enumerate(steps):
        now = clock.now
        live = [h for h in holds if h[2] > now]
        if op == "reserve":
            since = now - window
            in_window = sum(t for at, t in spent if at // bucket * bucket > since - bucket)
            used = in_window + sum(h[1] for h in live)
            ok, got_used, _ = store.reserve("g:s", f"h{i}", n, 0.0, at=now, since=since,
                                            bucket=bucket, ttl=50.0, max_tokens=LIMIT,
                                            max_cost=None)
            assert (ok, got_used) == (used + n <= LIMIT, used)
            if ok:
                assert used + n <= LIMIT  # the invariant: admitted means within the budget
                holds.append((f"h{i}", n, now + 50.0))
            seen.append((ok, got_used))
        elif op == "settle" and holds:
            hold = holds.pop(0)
            store.settle("g:s", hold[0], n, 0.0, at=now, bucket=bucket)
            spent.append((now, n))
        elif op == "release" and holds:
            store.release("g:s", holds.pop(0)[0])
        elif op == "tick":
            clock.now += n
    return seen


@settings(max_examples=60, deadline=None)
@given(steps=ops)
def test_memory_and_sqlite_ledgers_agree_with_the_model(tmp_path_factory: Any,
                                                        steps: list[tuple[str, int]]) -> None:
    path = Path(tmp_path_factory.mktemp("ledger")) / "usage.db"
    mem_clock, sql_clock = Clock(), Clock()
    memory = InMemoryUsageStore(clock=mem_clock)
    sqlite = SQLiteUsageStore(path, clock=sql_clock)
    try:
        assert _play(memory, mem_clock, steps) == _play(sqlite, sql_clock, steps)
    finally:
        sqlite.close()


async def test_the_estimate_reserves_the_steps_output_bound() -> None:
    """With ``max_tokens`` set on the step, a call is reserved at its prompt plus that bound."""
    model = ScriptedModel([text("ok"), text("ok")])
    probe = CostGuard(max_tokens=10**6, output_tokens=0)
    first = await Agent(id="c", model=ScriptedModel([text("ok")]),
                        input_processors=[probe]).generate("hello", resource_id="u")
    prompt = first.usage.input_tokens
    # room for the prompt and 50 output tokens, not for a bound of 500
    guard = CostGuard(max_tokens=prompt + 50)
    agent = Agent(id="c", model=model, input_processors=[guard])
    refused = await agent.generate("hello", resource_id="u",
                                   model_settings={"max_tokens": 500})
    assert refused.tripwire is not None and model.calls == 0
    assert refused.tripwire.metadata["usage"]["tokens"] == prompt + 500
    admitted = await agent.generate("hello", resource_id="u2", model_settings={"max_tokens": 50})
    assert admitted.tripwire is None and model.calls == 1
