"""ResponseCache: hit, miss, bust, TTL, scope, failures never cached — on both backends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent, APICallError, Processor, tool
from streamkit.chunks import ErrorChunk, TextDelta, TripwireChunk
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.testing import ScriptedModel, api_error, text, tool_call
from streamkit_operators import InMemoryCache, ResponseCache, SQLiteCache


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[Clock], Any]:
    """A factory of the backend under test; SQLite uses a real file in ``tmp_path``."""
    if request.param == "memory":
        return lambda clock: InMemoryCache(clock=clock)
    return lambda clock: SQLiteCache(tmp_path / "cache.db", clock=clock)


@tool
def lookup(q: str) -> str:
    """Look up."""
    calls.append(q)
    return f"found {q}"


calls: list[str] = []


async def run(agent: Agent, prompt: str = "What are your hours?", **kw: Any
              ) -> tuple[list[Any], Any]:
    kw.setdefault("resource_id", "customer-1")  # a run without one is not cached by default
    stream = agent.stream(prompt, **kw)
    chunks = [c async for c in stream]
    return chunks, await stream.result()


def texts(chunks: list[Any]) -> list[str]:
    return [c.payload.text for c in chunks if c.type == "text-delta"]


async def test_miss_then_hit_replays_without_the_model(backend: Any) -> None:
    cache = ResponseCache(backend(Clock()))
    model = ScriptedModel([text("Nine to five.")])
    agent = Agent(id="faq", model=model, input_processors=[cache])
    live_chunks, live = await run(agent)
    cached_chunks, cached = await run(agent)
    assert model.calls == 1
    assert cached.text == live.text == "Nine to five."
    assert texts(cached_chunks) == texts(live_chunks) == ["Nine", " to", " five."]
    assert [c.type for c in cached_chunks] == [c.type for c in live_chunks]
    assert cached.steps[0].from_cache and not live.steps[0].from_cache
    assert cached.usage.total_tokens == 0 < live.usage.total_tokens  # nothing billed
    assert {c.run_id for c in cached_chunks} == {cached.run_id}
    assert live.states["response-cache"]["misses"] == 1
    assert cached.states["response-cache"]["hits"] == 1


async def test_what_is_stored(backend: Any) -> None:
    store = backend(Clock())
    agent = Agent(id="faq", model=ScriptedModel([text("Hi.")]), input_processors=[
        ResponseCache(store, scope=None, namespace="ns")])
    await run(agent)
    rows = _entries(store)
    assert len(rows) == 1
    (key, entry), = rows
    assert key.startswith("ns:") and len(key.split(":")[-1]) == 32
    assert [c["type"] for c in entry["chunks"]] == ["text-start", "text-delta", "text-end",
                                                     "finish"]
    assert all("runId" not in c and "from" not in c for c in entry["chunks"])


def _entries(store: Any) -> list[tuple[str, Any]]:
    return [(key, store.get(key)) for key in store.keys()]


@pytest.mark.parametrize("change", [
    pytest.param({"prompt": "Different question?"}, id="prompt"),
    pytest.param({"model_settings": {"temperature": 0.9}}, id="settings"),
    pytest.param({"model": "other"}, id="model"),
    pytest.param({"tool_choice": "none"}, id="tool-choice"),
    pytest.param({"provider_options": {"openai": {"reasoningEffort": "high"}}},
                 id="provider-options"),
    pytest.param({"structured_output": {"type": "object", "properties": {}}},
                 id="structured-output"),
])
async def test_anything_that_changes_the_answer_changes_the_key(backend: Any,
                                                                change: dict[str, Any]) -> None:
    model = ScriptedModel([text('{"n": 1}'), text('{"n": 2}')])  # JSON: structured output
    agent = Agent(id="faq", model=model, tools=[lookup],
                  input_processors=[ResponseCache(backend(Clock()))])
    await run(agent)
    options = dict(change)
    prompt = options.pop("prompt", "What are your hours?")
    if options.get("model") == "other":
        options["model"] = ScriptedModel([text("other model")], model_id="other")
    _, result = await run(agent, prompt, **options)
    assert not result.steps[0].from_cache


async def test_the_tool_schemas_are_part_of_the_key(backend: Any) -> None:
    @tool
    def other(q: str) -> str:
        """Another tool."""
        return q

    store = backend(Clock())
    model = ScriptedModel([text("first"), text("second")])
    await run(Agent(id="faq", model=model, tools=[lookup],
                    input_processors=[ResponseCache(store)]))
    _, result = await run(Agent(id="faq", model=model, tools=[lookup, other],
                                input_processors=[ResponseCache(store)]))
    assert result.text == "second" and not result.steps[0].from_cache


async def test_ttl_with_an_injected_clock(backend: Any) -> None:
    clock = Clock()
    model = ScriptedModel([text("old"), text("new")])
    agent = Agent(id="faq", model=model,
                  input_processors=[ResponseCache(backend(clock), ttl=60)])
    await run(agent)
    clock.now += 59
    assert (await run(agent))[1].text == "old"
    clock.now += 2
    assert (await run(agent))[1].text == "new" and model.calls == 2


async def test_bust_skips_the_read_and_refreshes_the_entry(backend: Any) -> None:
    model = ScriptedModel([text("old"), text("fresh"), text("fresher")])
    store = backend(Clock())
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(store)])
    await run(agent)
    _, busted = await run(agent, request_context=ResponseCache.context(bust=True))
    assert busted.text == "fresh" and busted.states["response-cache"]["busted"] == 1
    assert (await run(agent))[1].text == "fresh"  # the bust wrote the new answer
    always = Agent(id="faq", model=model, input_processors=[ResponseCache(store, bust=True)])
    assert (await run(always))[1].text == "fresher" and model.calls == 3


async def test_scope(backend: Any) -> None:
    store = backend(Clock())
    model = ScriptedModel([text("for u1"), text("for u2"), text("shared")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(store)])
    await run(agent, resource_id="u1")
    assert (await run(agent, resource_id="u2"))[1].text == "for u2"
    assert (await run(agent, resource_id="u1"))[1].text == "for u1"
    shared = Agent(id="faq", model=model, input_processors=[ResponseCache(store, scope=None)])
    assert (await run(shared, resource_id="u3"))[1].text == "shared"
    assert (await run(shared, resource_id="u4"))[1].text == "shared"
    assert model.calls == 3
    # a per-call scope value: its own entries, whatever the resource
    model.steps.append(text("for tenant-1"))
    ctx = ResponseCache.context(scope="tenant-1")
    assert (await run(agent, request_context=ctx, resource_id="u8"))[1].text == "for tenant-1"
    assert (await run(agent, request_context=ctx, resource_id="u9"))[1].text == "for tenant-1"
    assert model.calls == 4


async def test_api_errors_are_never_cached(backend: Any) -> None:
    model = ScriptedModel([api_error(500, "down"), text("recovered")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(backend(Clock()))])
    with pytest.raises(APICallError):
        await agent.generate("What are your hours?")
    assert (await run(agent))[1].text == "recovered" and model.calls == 2


async def test_tripwired_steps_are_never_cached(backend: Any) -> None:
    class NoFive(Processor):
        id = "no-five"

        def process_output_stream(self, part: Any, abort: Any) -> Any:
            if part.type == "text-delta" and "five" in part.payload.text:
                abort("no fives")
            return part

    store = backend(Clock())
    model = ScriptedModel([text("Nine to five."), text("Nine to six.")])
    guarded = Agent(id="faq", model=model, input_processors=[ResponseCache(store)],
                    output_processors=[NoFive()])
    assert (await run(guarded))[1].tripwire is not None
    assert _entries(store) == []
    assert (await run(guarded))[1].text == "Nine to six." and model.calls == 2


async def test_an_answer_rejected_after_caching_is_deleted_on_retry(backend: Any) -> None:
    class RejectFirst(Processor):
        id = "reject-first"

        def process_output_step(self, text: str, abort: Any, retry_count: int) -> None:
            if text == "bad answer" and retry_count == 0:
                abort("try again", retry=True)

    store = backend(Clock())
    model = ScriptedModel([text("bad answer"), text("good answer"), text("fresh")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(store)],
                  output_processors=[RejectFirst()], max_processor_retries=1)
    assert (await run(agent))[1].text == "good answer"
    # the rejected answer was removed; only the accepted (retried prompt) one is kept
    assert len(_entries(store)) == 1
    _, again = await run(agent)
    assert again.text == "fresh" and model.calls == 3


async def test_tool_steps_replay_and_tools_run_again(backend: Any) -> None:
    calls.clear()
    model = ScriptedModel([tool_call("lookup", {"q": "hours"}), text("9-5")])
    agent = Agent(id="faq", model=model, tools=[lookup],
                  input_processors=[ResponseCache(backend(Clock()))])
    await run(agent)
    chunks, result = await run(agent)
    assert model.calls == 2 and result.text == "9-5"
    assert [s.from_cache for s in result.steps] == [True, True]
    assert calls == ["hours", "hours"]
    assert result.steps[0].finish_reason == "tool-calls"


async def test_sqlite_entries_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first = Agent(id="faq", model=ScriptedModel([text("persisted")]),
                  input_processors=[ResponseCache(SQLiteCache(path))])
    await run(first)
    model = ScriptedModel([])
    second = Agent(id="faq", model=model, input_processors=[ResponseCache(SQLiteCache(path))])
    assert (await run(second))[1].text == "persisted" and model.calls == 0


class Broken:
    def get(self, key: str) -> Any:
        raise OSError("disk on fire")

    def set(self, key: str, value: Any, ttl: float | None) -> None:
        raise OSError("disk on fire")

    def delete(self, key: str) -> None:
        raise OSError("disk on fire")


class AsyncBackend:
    """An async backend (like a Redis client) wrapping an in-memory one."""

    def __init__(self) -> None:
        self.inner = InMemoryCache()

    async def get(self, key: str) -> Any:
        await asyncio.sleep(0)
        return self.inner.get(key)

    async def set(self, key: str, value: Any, ttl: float | None) -> None:
        await asyncio.sleep(0)
        self.inner.set(key, value, ttl)

    async def delete(self, key: str) -> None:
        self.inner.delete(key)


async def test_backend_failures_are_misses_never_errors() -> None:
    model = ScriptedModel([text("a"), text("b")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(Broken())])
    assert (await run(agent))[1].text == "a" and (await run(agent))[1].text == "b"


async def test_async_backends_work() -> None:
    model = ScriptedModel([text("a")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(AsyncBackend())])
    await run(agent)
    assert (await run(agent))[1].text == "a" and model.calls == 1


async def test_custom_keys_and_unreadable_entries(backend: Any) -> None:
    store = backend(Clock())
    model = ScriptedModel([text("one"), text("two")])
    by_user = ResponseCache(store, key=lambda inputs: inputs["prompt"][-1]["content"][:4])
    agent = Agent(id="faq", model=model, input_processors=[by_user])
    await run(agent, "What are your hours?")
    assert (await run(agent, "What else?"))[1].text == "one"  # same custom key "What"
    store.set(_entries(store)[0][0], {"chunks": [{"type": "no-such-chunk"}]}, None)
    assert (await run(agent, "What now?"))[1].text == "two"  # unreadable: miss, replaced
    failing = ResponseCache(store, key=lambda inputs: 1 / 0)
    agent = Agent(id="faq", model=ScriptedModel([text("x")]), input_processors=[failing])
    assert (await run(agent))[1].text == "x"  # a broken key function disables caching


@pytest.mark.parametrize("bad", [
    pytest.param(ErrorChunk(error={"message": "boom"}, run_id="r", from_="AGENT"), id="error"),
    pytest.param(TripwireChunk(reason="no", retry=False, run_id="r", from_="AGENT"),
                 id="tripwire"),
])
async def test_steps_holding_error_or_tripwire_chunks_are_not_written(bad: Any) -> None:
    store = InMemoryCache()
    cache = ResponseCache(store)
    ok = TextDelta(id="t", text="hi", run_id="r", from_="AGENT")
    state: dict[str, Any] = {"pending": "k1"}
    await cache.process_llm_response(chunks=[ok, bad], from_cache=False, state=state,
                                     step_number=0)
    state = {"pending": "k2"}
    await cache.process_llm_response(chunks=[ok], from_cache=True, state=state, step_number=0)
    assert store.keys() == []
    state = {"pending": "k3"}
    await cache.process_llm_response(chunks=[ok], from_cache=False, state=state, step_number=0)
    assert store.keys() == ["k3"] and state["written"] == {0: "k3"}


def test_in_memory_cache_is_bounded_and_isolated() -> None:
    cache = InMemoryCache(max_entries=2)
    cache.set("a", {"v": [1]})
    cache.set("b", {"v": 2})
    assert cache.get("a") == {"v": [1]}  # touch a: b is now the oldest
    cache.set("c", {"v": 3})
    assert cache.get("b") is None and len(cache) == 2
    got = cache.get("a")
    got["v"].append(99)
    assert cache.get("a") == {"v": [1]}  # callers cannot change stored entries


def test_sqlite_cache_purges_expired_rows(tmp_path: Path) -> None:
    clock = Clock()
    cache = SQLiteCache(tmp_path / "c.db", clock=clock)
    cache.set("short", 1, ttl=10)
    cache.set("forever", 2, ttl=None)
    clock.now += 11
    assert cache.purge_expired() == 1 and len(cache) == 1 and cache.get("forever") == 2
    cache.clear()
    assert len(cache) == 0
    cache.close()
    with pytest.raises(InvalidArgument, match="identifier"):
        SQLiteCache(tmp_path / "c.db", table="x; DROP TABLE y")


def test_options_are_checked() -> None:
    with pytest.raises(InvalidType, match="get/set/delete"):
        ResponseCache(object())
    with pytest.raises(InvalidArgument, match="ttl"):
        ResponseCache(ttl=0)
