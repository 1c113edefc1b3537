"""Memory on a real store: recall, the persistence rules, threads, restart, concurrency, and a
locked or corrupted database failing the run instead of losing the turn.

Every test that takes ``memory`` or ``store`` runs twice: on a real SQLite file and on the real
PostgreSQL server (its own schema, dropped afterwards; skipped with the reason when the server
is not reachable) — one suite, so both stores keep the same rules. What only one store has (WAL,
busy timeouts, a corrupted file; pools, a lost connection) is tested against that store alone
(``tests/test_memory_postgres.py`` for PostgreSQL).
"""

from __future__ import annotations

import asyncio
import pickle
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import Agent, Override, StreamkitError, get_text, tool
from streamkit.chunks import TextDelta
from streamkit.errors import MemoryStoreError
from streamkit.memory import Memory, MessageStore, PostgresStore, SQLiteStore, Thread
from streamkit.memory._memory import storable_messages
from streamkit.messages import (
    DataPart,
    Message,
    StepStartPart,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    message_encoder,
)
from streamkit.testing import FunctionModel, ScriptedModel, text, tool_call

from .conftest import P, as_mode

T, U = "thread-1", "user-1"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


class Backend:
    """Where the parametrized suite's stores live: a SQLite file or a PostgreSQL schema.
    ``new()`` opens another store on the same data (a restart, a second process)."""

    def __init__(self, kind: str, db: Path, dsn: str | None = None,
                 schema: str | None = None) -> None:
        self.kind, self.db, self.dsn, self.schema = kind, db, dsn, schema

    def new(self) -> MessageStore:
        if self.kind == "sqlite":
            return SQLiteStore(self.db)
        return PostgresStore(self.dsn, schema=self.schema or "public")

    def bodies(self) -> list[str]:
        """Every stored message body, read past the store (raw SQL)."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.db) as raw:
                return [r[0] for r in raw.execute("SELECT body FROM streamkit_messages")]
        with psycopg.connect(self.dsn or "") as conn:  # Mastra's layout: role and content
            return [f"{r[0]} {r[1]}" for r in conn.execute(
                f'SELECT role, content FROM "{self.schema}".mastra_messages').fetchall()]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, db: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", db)
    return Backend("postgres", db, request.getfixturevalue("pg_dsn"),
                   request.getfixturevalue("pg_schema"))


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[MessageStore]:
    made = backend.new()
    yield made
    await made.close()


@pytest.fixture
async def memory(store: MessageStore) -> AsyncIterator[Memory]:
    mem = Memory(store=store, last_messages=10)
    yield mem
    await mem.close()


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, get_text(m)) for m in messages]


def part_types(messages: list[Message]) -> list[list[str]]:
    return [[p.type for p in m.content.parts] for m in messages]


def echo(request: Any) -> Any:
    """Answers every prompt with ``re: <last user text>``."""
    return text("re: " + request.prompt[-1]["content"])


async def stream_all(agent: Agent, prompt: Any, **kw: Any) -> tuple[list[Any], Any]:
    stream = agent.stream(prompt, **kw)
    chunks = [c async for c in stream]
    try:
        return chunks, await stream.result()
    except StreamkitError as exc:
        return chunks, exc


# ----------------------------------------------------------------------------------- recall


class TestRecall:
    async def test_history_enters_the_list_as_memory_before_process_input(
            self, memory: Memory, mode: str) -> None:
        seen: list[dict[str, Any]] = []

        def look(message_list: Any) -> None:
            seen.append({
                "remembered": texts(message_list.get.remembered.db()),
                "sources": {message_list.source_of(m)
                            for m in message_list.get.remembered.db()},
                "input": texts(message_list.get.input.db()),
            })

        agent = Agent(id="a", model=ScriptedModel([text("Hi Ada."), text("You are Ada.")]),
                      memory=memory, input_processors=[P("look", process_input=as_mode(look,
                                                                                       mode))])
        await agent.generate("I am Ada.", thread_id=T, resource_id=U)
        await agent.generate("Who am I?", thread_id=T, resource_id=U)
        assert seen[0] == {"remembered": [], "sources": set(), "input": [("user", "I am Ada.")]}
        assert seen[1] == {"remembered": [("user", "I am Ada."), ("assistant", "Hi Ada.")],
                           "sources": {"memory"}, "input": [("user", "Who am I?")]}

    async def test_the_second_prompt_contains_the_first_turn(self, memory: Memory) -> None:
        model = ScriptedModel([text("Hi Ada."), text("You are Ada.")])
        agent = Agent(id="a", instructions="Be brief.", model=model, memory=memory)
        await agent.generate("I am Ada.", thread_id=T, resource_id=U)
        result = await agent.generate("Who am I?", thread_id=T, resource_id=U)
        assert result.text == "You are Ada."
        assert model.requests[1].prompt == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "I am Ada."},
            {"role": "assistant", "content": "Hi Ada."},
            {"role": "user", "content": "Who am I?"},
        ]
        # memory messages are history, not this call's response
        assert texts(result.messages) == [("assistant", "You are Ada.")]

    async def test_a_tool_turn_is_recalled_with_its_result(self, memory: Memory) -> None:
        @tool
        def lookup(customer_id: str) -> dict[str, Any]:
            """Look up a customer."""
            return {"name": "Ada"}

        model = ScriptedModel([tool_call("lookup", {"customer_id": "C-1"}, id="c1"),
                               text("Ada."), text("Still Ada.")])
        agent = Agent(id="a", model=model, tools=[lookup], memory=memory)
        await agent.generate("Who is C-1?", thread_id=T, resource_id=U)
        stored = await memory.get_messages(T)
        assert part_types(stored) == [["text"], ["tool-invocation", "step-start", "text"]]
        call = stored[1].content.parts[0]
        assert isinstance(call, ToolInvocationPart)
        assert call.tool_invocation.result == {"name": "Ada"}
        await agent.generate("Again?", thread_id=T, resource_id=U)
        assert [m["role"] for m in model.requests[2].prompt] == \
            ["user", "assistant", "tool", "assistant", "user"]
        assert model.requests[2].prompt[2]["content"][0]["result"] == {"name": "Ada"}

    async def test_last_messages_bounds_what_is_recalled(self, store: MessageStore) -> None:
        async with Memory(store, last_messages=2) as memory:
            model = FunctionModel(echo)
            agent = Agent(id="a", model=model, memory=memory)
            for question in ("one", "two", "three"):
                await agent.generate(question, thread_id=T, resource_id=U)
            assert model.requests[2].prompt == [
                {"role": "user", "content": "two"}, {"role": "assistant", "content": "re: two"},
                {"role": "user", "content": "three"}]
            assert len(await memory.get_messages(T)) == 6

    async def test_last_messages_zero_recalls_nothing_but_still_saves(
            self, store: MessageStore) -> None:
        async with Memory(store, last_messages=0) as memory:
            model = FunctionModel(echo)
            agent = Agent(id="a", model=model, memory=memory)
            await agent.generate("one", thread_id=T, resource_id=U)
            await agent.generate("two", thread_id=T, resource_id=U)
            assert model.requests[1].prompt == [{"role": "user", "content": "two"}]
            assert texts(await memory.get_messages(T)) == [
                ("user", "one"), ("assistant", "re: one"), ("user", "two"),
                ("assistant", "re: two")]

    async def test_last_messages_zero_keeps_turns_in_order_within_one_millisecond(
            self, store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
        """Nothing recalled gives the run no time to stamp after: two turns stamped in the
        same millisecond (a fast model; the clock frozen here) are still stored in order."""
        import streamkit._message_model as message_model

        frozen = message_model.time.time_ns()
        monkeypatch.setattr(message_model.time, "time_ns", lambda: frozen)
        async with Memory(store, last_messages=0) as memory:
            agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
            for question in ("one", "two", "three"):
                await agent.generate(question, thread_id=T, resource_id=U)
            assert texts(await memory.get_messages(T)) == [
                ("user", "one"), ("assistant", "re: one"), ("user", "two"),
                ("assistant", "re: two"), ("user", "three"), ("assistant", "re: three")]

    async def test_without_thread_id_memory_is_not_used(self, memory: Memory) -> None:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        await agent.generate("hello")
        assert await memory.list_threads(U) == []


# ----------------------------------------------------------------------------- what is stored


class Shout:
    """Rewrites every text delta to upper case (the consumer only ever sees the rewrite)."""

    id = "shout"

    def process_output_stream(self, part: Any) -> Any:
        if part.type == "text-delta":
            return TextDelta(id=part.payload.id, text=part.payload.text.upper(),
                             run_id=part.run_id, from_=part.from_)
        return part


class TestWhatIsStored:
    async def test_what_a_stream_consumer_saw_is_what_is_stored(self, memory: Memory,
                                                                mode: str) -> None:
        def shout(part: Any) -> Any:
            return Shout().process_output_stream(part)

        agent = Agent(id="a", model=ScriptedModel([text("hello there world")]), memory=memory,
                      output_processors=[P("shout", process_output_stream=as_mode(shout, mode))])
        chunks, result = await stream_all(agent, "hi", thread_id=T, resource_id=U)
        seen = "".join(c.payload.text for c in chunks if c.type == "text-delta")
        assert seen == "HELLO THERE WORLD" == result.text
        assert texts(await memory.get_messages(T)) == [("user", "hi"),
                                                       ("assistant", "HELLO THERE WORLD")]

    async def test_what_remains_after_every_processor_is_stored(self, memory: Memory,
                                                                mode: str) -> None:
        def redact(messages: list[Message]) -> list[Message]:
            return [Message.user(get_text(m).replace("4111", "****"), id=m.id)
                    for m in messages]

        def drop_aside(message_list: Any) -> None:
            for m in message_list.get.response.db():
                m.content.parts = [p for p in m.content.parts
                                   if not (isinstance(p, TextPart) and "aside" in p.text)]

        agent = Agent(id="a", model=ScriptedModel([[text("Card noted."), text("aside")]]),
                      memory=memory,
                      input_processors=[P("redact", process_input=as_mode(redact, mode))],
                      output_processors=[P("drop", process_output_result=as_mode(drop_aside,
                                                                                 mode))])
        await agent.generate("My card is 4111", thread_id=T, resource_id=U)
        assert texts(await memory.get_messages(T)) == [("user", "My card is ****"),
                                                       ("assistant", "Card noted.")]

    @pytest.mark.parametrize("hook", [
        pytest.param("process_input", id="tripped-in-process_input"),
        pytest.param("process_output_stream", id="tripped-mid-stream"),
        pytest.param("process_output_result", id="tripped-in-process_output_result"),
    ])
    async def test_a_tripwire_turn_is_not_stored(self, memory: Memory, hook: str,
                                                 mode: str) -> None:
        def trip(abort: Any, **_: Any) -> None:
            abort("blocked")

        guard = P("guard", **{hook: as_mode(trip, mode)})
        lane = "input_processors" if hook == "process_input" else "output_processors"
        model = FunctionModel(echo)
        agent = Agent(id="a", model=model, memory=memory)
        await agent.generate("kept", thread_id=T, resource_id=U)
        result = await agent.generate("secret", thread_id=T, resource_id=U, **{lane: [guard]})
        assert result.tripwire is not None and result.tripwire.reason == "blocked"
        assert texts(await memory.get_messages(T)) == [("user", "kept"),
                                                       ("assistant", "re: kept")]
        await agent.generate("next", thread_id=T, resource_id=U)
        assert "secret" not in str(model.requests[-1].prompt)

    async def test_a_tripwire_on_the_first_turn_creates_no_thread(self, memory: Memory) -> None:
        guard = P("guard", process_input=lambda abort: abort("no"))
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory, input_processors=[guard])
        result = await agent.generate("hi", thread_id=T, resource_id=U)
        assert result.tripwire is not None
        assert await memory.get_thread(T) is None

    async def test_only_the_accepted_attempt_of_a_retried_step_is_stored(
            self, memory: Memory) -> None:
        def once(part: Any, abort: Any, retry_count: int) -> Any:
            if part.type == "text-delta" and "draft" in part.payload.text and not retry_count:
                abort("no drafts", retry=True)
            return part

        agent = Agent(id="a", model=ScriptedModel([text("draft answer"), text("final answer")]),
                      memory=memory, max_processor_retries=1,
                      output_processors=[P("once", process_output_stream=once)])
        result = await agent.generate("q", thread_id=T, resource_id=U)
        assert result.text == "final answer"
        stored = await memory.get_messages(T)
        assert texts(stored) == [("user", "q"), ("assistant", "final answer")]

    async def test_partial_calls_system_and_context_messages_are_never_stored(
            self, memory: Memory, backend: Backend, mode: str) -> None:
        def partial(call_id: str) -> ToolInvocationPart:
            return ToolInvocationPart(ToolInvocation(state="partial-call", tool_call_id=call_id,
                                                     tool_name="lookup", args={}))

        def meddle(message_list: Any) -> None:
            message_list.add_system("from a processor", tag="extra")
            message_list.add(Message.assistant([partial("p1")]), "response")  # merges
            message_list.add(Message.assistant([partial("p2")]), "response", merge=False)
            message_list.add("retrieved context", "context")

        agent = Agent(id="a", instructions="Be brief.", model=ScriptedModel([text("Done.")]),
                      memory=memory, output_processors=[
                          P("meddle", process_output_result=as_mode(meddle, mode))])
        result = await agent.generate("hi", thread_id=T, resource_id=U)
        # the live result keeps what the run produced; only the stored copy is filtered
        assert part_types(result.messages) == [["text", "tool-invocation"],
                                               ["tool-invocation"]]
        stored = await memory.get_messages(T)
        assert texts(stored) == [("user", "hi"), ("assistant", "Done.")]
        assert part_types(stored) == [["text"], ["text"]]
        bodies = " ".join(backend.bodies())
        assert "partial-call" not in bodies and "system" not in bodies
        assert "retrieved context" not in bodies

    async def test_non_transient_data_parts_are_stored_transient_ones_never(
            self, memory: Memory) -> None:
        @tool
        async def progress(writer: Any) -> str:
            """Reports progress."""
            writer.custom({"type": "data-progress", "data": {"pct": 50}, "id": "d1"})
            writer.custom({"type": "data-log", "data": "noise", "transient": True})
            return "done"

        agent = Agent(id="a", model=ScriptedModel([tool_call("progress", {}), text("ok")]),
                      tools=[progress], memory=memory)
        chunks, _ = await stream_all(agent, "go", thread_id=T, resource_id=U)
        assert {"data-progress", "data-log"} <= {c.type for c in chunks}
        stored = await memory.get_messages(T)
        data = [p for p in stored[1].content.parts if isinstance(p, DataPart)]
        assert [(p.type, p.data, p.id) for p in data] == [("data-progress", {"pct": 50}, "d1")]
        assert "data-log" not in message_encoder.encode(stored).decode()

    async def test_per_call_processor_lists_never_remove_memory(self, memory: Memory) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("one"), text("two"), text("three")]),
                      memory=memory, output_processors=[Shout()])
        await agent.generate("a", thread_id=T, resource_id=U, output_processors=[])
        await agent.generate("b", thread_id=T, resource_id=U,
                             output_processors=Override(remove=["shout"]))
        await agent.generate("c", thread_id=T, resource_id=U, input_processors=[],
                             output_processors=[], error_processors=[])
        assert texts(await memory.get_messages(T)) == [
            ("user", "a"), ("assistant", "one"), ("user", "b"), ("assistant", "two"),
            ("user", "c"), ("assistant", "three")]

    async def test_an_id_already_stored_is_updated_not_duplicated(self, memory: Memory) -> None:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        first = Message.user("first", id="m-1")
        await agent.generate(first, thread_id=T, resource_id=U)
        # created_at given: a message built in the same millisecond could sort before the
        # first answer in the live list, and the model would then not see it last
        edited = Message.user("edited", id="m-1",
                              created_at=first.created_at + timedelta(seconds=1))
        await agent.generate(edited, thread_id=T, resource_id=U)
        stored = await memory.get_messages(T)
        assert Counter(m.id for m in stored) == Counter({"m-1": 1, stored[1].id: 1,
                                                         stored[2].id: 1})
        # updated in place: new content, same place (its first created_at and sequence)
        assert texts(stored) == [("user", "edited"), ("assistant", "re: first"),
                                 ("assistant", "re: edited")]
        assert stored[0].created_at == first.created_at

    async def test_a_message_id_of_another_thread_is_refused_atomically(
            self, memory: Memory) -> None:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        await agent.generate(Message.user("first", id="m-1"), thread_id=T, resource_id=U)
        with pytest.raises(MemoryStoreError, match="m-1.*already stored in thread"):
            await agent.generate(Message.user("again", id="m-1"), thread_id="t2", resource_id=U)
        assert await memory.get_thread("t2") is None  # the thread insert was rolled back too
        assert texts(await memory.get_messages(T)) == [("user", "first"),
                                                       ("assistant", "re: first")]

    def test_storable_messages_filters_copies(self) -> None:
        at = datetime(2026, 1, 1, tzinfo=UTC)
        call = ToolInvocationPart.call("c1", "t")
        partial = ToolInvocationPart(ToolInvocation(state="partial-call", tool_call_id="c2",
                                                    tool_name="t"))
        kept = Message.assistant([TextPart("a"), StepStartPart(), partial], created_at=at)
        msgs = [Message.assistant([call], created_at=at + timedelta(seconds=2)),
                Message.system("s", created_at=at), kept,
                Message.assistant([StepStartPart(), partial], created_at=at),
                Message(role="signal", created_at=at, content=Message.user(
                    "ping", metadata={"transient": True}).content)]
        out = storable_messages(msgs, "t1", "u1")
        assert part_types(out) == [["text"], ["tool-invocation"]]
        assert {(m.thread_id, m.resource_id) for m in out} == {("t1", "u1")}
        assert part_types([kept]) == [["text", "step-start", "tool-invocation"]]


# ------------------------------------------------------------------------ threads, resources


class TestThreads:
    async def test_a_thread_is_created_on_first_use_with_its_resource(
            self, memory: Memory) -> None:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        before = datetime.now(UTC) - timedelta(seconds=1)
        await agent.generate("hi", thread_id=T, resource_id=U)
        thread = await memory.get_thread(T)
        assert thread is not None and (thread.id, thread.resource_id) == (T, U)
        assert before < thread.created_at <= thread.updated_at
        first = thread.updated_at
        await agent.generate("again", thread_id=T, resource_id=U)
        thread = await memory.get_thread(T)
        assert thread is not None and thread.updated_at >= first
        assert {(m.thread_id, m.resource_id) for m in await memory.get_messages(T)} == {(T, U)}

    async def test_a_thread_of_another_resource_is_refused_before_the_model_runs(
            self, memory: Memory) -> None:
        model = FunctionModel(echo)
        agent = Agent(id="a", model=model, memory=memory)
        await agent.generate("mine", thread_id=T, resource_id=U)
        with pytest.raises(MemoryStoreError, match="belongs to resource 'user-1', not 'mallory'"):
            await agent.generate("let me in", thread_id=T, resource_id="mallory")
        assert model.calls == 1
        assert len(await memory.get_messages(T)) == 2

    async def test_resource_id_may_be_omitted_only_for_an_existing_thread(
            self, memory: Memory) -> None:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        with pytest.raises(MemoryStoreError, match="pass resource_id"):
            await agent.generate("hi", thread_id=T)
        await memory.create_thread(T, resource_id=U)
        await agent.generate("hi", thread_id=T)
        assert {m.resource_id for m in await memory.get_messages(T)} == {U}

    async def test_create_get_list_read_and_delete(self, memory: Memory,
                                                   backend: Backend) -> None:
        t1 = await memory.create_thread("t1", resource_id=U, title="Orders",
                                        metadata={"channel": "email"})
        t2 = await memory.create_thread(resource_id=U)
        await memory.create_thread("other", resource_id="user-2")
        assert isinstance(t1, Thread) and len(t2.id) == 36
        assert await memory.get_thread("t1") == t1
        assert (t1.title, t1.metadata) == ("Orders", {"channel": "email"})
        assert [t.id for t in await memory.list_threads(U)] == [t2.id, "t1"]
        assert await memory.list_threads("nobody") == []
        with pytest.raises(MemoryStoreError, match="already exists"):
            await memory.create_thread("t1", resource_id=U)

        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        for q in ("a", "b"):
            await agent.generate(q, thread_id="t1", resource_id=U)
        assert texts(await memory.get_messages("t1", limit=2)) == [("user", "b"),
                                                                   ("assistant", "re: b")]
        assert await memory.get_messages("t1", limit=0) == []
        assert await memory.get_messages("nope") == []

        assert await memory.delete_thread("t1") is True
        assert await memory.delete_thread("t1") is False
        assert await memory.get_thread("t1") is None and await memory.get_messages("t1") == []
        assert backend.bodies() == []
        # the id is free again, for anyone
        await agent.generate("c", thread_id="t1", resource_id="user-2")
        assert texts(await memory.get_messages("t1")) == [("user", "c"), ("assistant", "re: c")]

    async def test_order_is_created_at_then_insertion(self, memory: Memory) -> None:
        at = datetime(2026, 1, 1, tzinfo=UTC)
        store = memory.store
        await store.save_messages(T, U, [Message.user("b", id="b", created_at=at),
                                         Message.user("c", id="c", created_at=at)])
        await store.save_messages(T, U, [
            Message.user("a", id="a", created_at=at - timedelta(microseconds=1)),
            Message.user("d", id="d", created_at=at)])
        assert [m.id for m in await memory.get_messages(T)] == ["a", "b", "c", "d"]
        assert [m.id for m in await memory.get_messages(T, limit=2)] == ["c", "d"]

    async def test_bad_arguments_are_refused(self, memory: Memory, db: Path) -> None:
        with pytest.raises(StreamkitError, match="last_messages"):
            Memory(SQLiteStore(db), last_messages=-1)
        with pytest.raises(StreamkitError, match="MessageStore"):
            Memory(store=object())  # type: ignore[arg-type]
        with pytest.raises(StreamkitError, match="busy_timeout"):
            SQLiteStore(db, busy_timeout=-1)
        with pytest.raises(StreamkitError, match="synchronous"):
            SQLiteStore(db, synchronous="SOMETIMES")
        with pytest.raises(StreamkitError, match="thread_id"):
            await memory.get_messages("")
        with pytest.raises(StreamkitError, match="resource_id"):
            await memory.create_thread("x", resource_id=None)  # type: ignore[arg-type]
        with pytest.raises(StreamkitError, match="limit"):
            await memory.get_messages(T, limit=-2)

    async def test_the_store_is_a_message_store(self, memory: Memory) -> None:
        assert isinstance(memory.store, MessageStore)
        assert isinstance(memory.store, (SQLiteStore, PostgresStore))

    async def test_sqlite_store_is_in_wal_mode(self, db: Path) -> None:
        store = SQLiteStore(db)
        async with Memory(store) as memory:
            await memory.get_thread(T)
            assert store.journal_mode == "wal"
        async with Memory() as in_memory:
            agent = Agent(id="a", model=FunctionModel(echo), memory=in_memory)
            await agent.generate("hi", thread_id=T, resource_id=U)
            assert len(await in_memory.get_messages(T)) == 2


class TestUpsertModel:
    """Any sequence of saves reads back as a dict would have it: each id once, at the place of
    its first save (first ``created_at``, then save order), with its last content."""

    @settings(max_examples=20, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(saves=st.lists(st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 2),
                                             st.text("xyz", max_size=3)), max_size=4),
                          min_size=1, max_size=4))
    def test_saves_read_back_like_a_dict(self, backend: Backend,
                                         saves: list[list[tuple[str, int, str]]]) -> None:
        at = datetime(2026, 1, 1, tzinfo=UTC)
        thread = f"t-{uuid.uuid4().hex[:12]}"  # one thread per example; ids global, so prefixed
        model: dict[str, list[Any]] = {}  # id -> [created_at, first save number, text]
        for n, batch in enumerate(saves):
            for k, (mid, second, body) in enumerate(batch):
                entry = model.setdefault(mid, [at + timedelta(seconds=second), (n, k), body])
                entry[2] = body

        async def run() -> list[Message]:
            store = backend.new()
            try:
                for batch in saves:
                    await store.save_messages(thread, U, [
                        Message.user(body or "-", id=f"{thread}-{mid}",
                                     created_at=at + timedelta(seconds=second))
                        for mid, second, body in batch])
                return await store.get_messages(thread)
            finally:
                await store.close()

        stored = asyncio.run(run())
        want = sorted(model.items(), key=lambda item: (item[1][0], item[1][1]))
        assert [(m.id, get_text(m), m.created_at) for m in stored] == [
            (f"{thread}-{mid}", body or "-", created) for mid, (created, _, body) in want]


# ------------------------------------------------------------------------- restart, concurrency


class TestRestart:
    async def test_a_new_memory_on_the_same_data_sees_the_history(self,
                                                                  backend: Backend) -> None:
        first = Memory(backend.new())
        await Agent(id="a", model=FunctionModel(echo), memory=first).generate(
            "remember me", thread_id=T, resource_id=U)
        before = message_encoder.encode(await first.get_messages(T))
        await first.close()

        async with Memory(backend.new()) as second:
            assert message_encoder.encode(await second.get_messages(T)) == before
            model = FunctionModel(echo)
            await Agent(id="a", model=model, memory=second).generate(
                "still there?", thread_id=T, resource_id=U)
            assert model.requests[0].prompt[:2] == [
                {"role": "user", "content": "remember me"},
                {"role": "assistant", "content": "re: remember me"}]
            assert [t.id for t in await second.list_threads(U)] == [T]

    async def test_a_closed_store_refuses_calls(self, backend: Backend) -> None:
        memory = Memory(backend.new())
        await memory.get_thread(T)
        await memory.close()
        await memory.close()
        with pytest.raises(MemoryStoreError, match="closed"):
            await memory.get_thread(T)


class TestConcurrency:
    async def test_200_concurrent_runs_on_different_threads(self, memory: Memory) -> None:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)

        async def turn(i: int) -> str:
            if i % 2:
                return (await agent.generate(f"q{i}", thread_id=f"t{i}", resource_id=U)).text
            return await agent.stream(f"q{i}", thread_id=f"t{i}", resource_id=U).text

        started = time.perf_counter()
        answers = await asyncio.gather(*[turn(i) for i in range(200)])
        elapsed = time.perf_counter() - started
        assert answers == [f"re: q{i}" for i in range(200)]
        for i in range(200):
            assert texts(await memory.get_messages(f"t{i}")) == [
                ("user", f"q{i}"), ("assistant", f"re: q{i}")]
        assert len(await memory.list_threads(U)) == 200
        print(f"200 concurrent runs on 200 threads: {elapsed * 1000:.0f} ms")

    async def test_200_concurrent_runs_on_one_thread_lose_and_duplicate_nothing(
            self, memory: Memory) -> None:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        started = time.perf_counter()
        await asyncio.gather(*[agent.generate(f"q{i}", thread_id=T, resource_id=U)
                               for i in range(200)])
        elapsed = time.perf_counter() - started
        stored = await memory.get_messages(T)
        assert len(stored) == 400 and len({m.id for m in stored}) == 400
        got = Counter(texts(stored))
        want = Counter([("user", f"q{i}") for i in range(200)]
                       + [("assistant", f"re: q{i}") for i in range(200)])
        assert got == want
        assert [m.created_at for m in stored] == sorted(m.created_at for m in stored)
        position = {get_text(m): n for n, m in enumerate(stored)}
        assert all(position[f"q{i}"] < position[f"re: q{i}"] for i in range(200))
        print(f"200 concurrent runs on one thread: {elapsed * 1000:.0f} ms")


# ------------------------------------------------------------------- a locked or broken database


def lock(db: Path) -> sqlite3.Connection:
    """Another connection holding the write lock (``BEGIN EXCLUSIVE``) until closed."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    return other


class TestFailures:
    async def test_a_locked_database_fails_generate_and_keeps_the_turn_whole(
            self, db: Path) -> None:
        async with Memory(SQLiteStore(db, busy_timeout=0.05)) as memory:
            agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
            await agent.generate("one", thread_id=T, resource_id=U)
            other = lock(db)
            try:
                with pytest.raises(MemoryStoreError) as info:
                    await agent.generate("two", thread_id=T, resource_id=U)
            finally:
                other.close()
            err = info.value
            assert "database is locked" in str(err) and repr(T) in str(err)
            assert (err.thread_id, err.sqlite_error) == (T, "SQLITE_BUSY")
            assert texts(await memory.get_messages(T)) == [("user", "one"),
                                                           ("assistant", "re: one")]
            # the lock is gone: the same turn can be sent again and is stored whole
            await agent.generate("two", thread_id=T, resource_id=U)
            assert len(await memory.get_messages(T)) == 4

    async def test_a_locked_database_ends_a_stream_with_an_error_chunk(self, db: Path) -> None:
        async with Memory(SQLiteStore(db, busy_timeout=0.05)) as memory:
            agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
            await memory.create_thread(T, resource_id=U)
            other = lock(db)
            try:
                chunks, outcome = await stream_all(agent, "two", thread_id=T, resource_id=U)
            finally:
                other.close()
            assert [c.type for c in chunks][-2:] == ["step-finish", "error"]
            assert "finish" not in [c.type for c in chunks]
            assert chunks[-1].payload.error["name"] == "MemoryStoreError"
            assert isinstance(outcome, MemoryStoreError)
            assert await memory.get_messages(T) == []

    async def test_a_corrupted_file_fails_the_run_before_the_model_is_called(
            self, db: Path) -> None:
        db.write_bytes(b"this is not a sqlite database " * 200)
        model = FunctionModel(echo)
        async with Memory(SQLiteStore(db)) as memory:
            agent = Agent(id="a", model=model, memory=memory)
            with pytest.raises(MemoryStoreError, match="file is not a database") as info:
                await agent.generate("hi", thread_id=T, resource_id=U)
            assert info.value.thread_id == T and info.value.path == str(db)
            # A stream ends with an error chunk; its result raises the same error.
            stream = agent.stream("hi", thread_id=T, resource_id=U)
            chunks = [c async for c in stream]
            assert [c.type for c in chunks] == ["error"]
            assert chunks[0].payload.error["name"] == "MemoryStoreError"
            with pytest.raises(MemoryStoreError, match="corrupted"):
                await stream.result()
            assert model.calls == 0

    async def test_a_path_that_cannot_be_opened_is_a_memory_store_error(
            self, tmp_path: Path) -> None:
        async with Memory(SQLiteStore(tmp_path)) as memory:  # a directory
            with pytest.raises(MemoryStoreError, match="unable to open database file"):
                await memory.recall(T, U)

    async def test_a_newer_schema_is_refused(self, db: Path) -> None:
        with sqlite3.connect(db) as raw:
            raw.execute("PRAGMA user_version = 99")
        async with Memory(SQLiteStore(db)) as memory:
            with pytest.raises(MemoryStoreError, match="schema version 99"):
                await memory.get_thread(T)

    def test_memory_store_error_pickles_with_its_attributes(self) -> None:
        err = MemoryStoreError("boom", thread_id=T, operation="save", path="x.db")
        back = pickle.loads(pickle.dumps(err))
        assert (str(back), back.thread_id, back.operation) == ("boom", T, "save")
