"""What only ``PostgresStore`` has, on the real server: processes sharing one thread, a connection
lost in the middle of a turn, the schema and its version table, the DSN from the environment.

The rules every store keeps run against PostgreSQL in ``tests/test_memory.py`` (parametrized).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from unittest import mock

import msgspec
import psycopg
import pytest

from streamkit import Agent, get_text
from streamkit.errors import InvalidArgument, MemoryStoreError, StreamkitError
from streamkit.memory import Memory, PostgresStore
from streamkit.messages import Message, message_encoder
from streamkit.testing import FunctionModel, text

T, U = "thread-1", "user-1"
PROCESSES, TURNS = 4, 15
#: @mastra/pg 1.27.1's memory tables (generateTableSQL over @mastra/core's TABLE_SCHEMAS):
#: (table, column) -> (information_schema data_type, is_nullable).
MASTRA_COLUMNS = {
    **{("mastra_threads", c): t for c, t in {
        "id": ("text", "NO"), "resourceId": ("text", "NO"), "title": ("text", "NO"),
        "metadata": ("jsonb", "YES"), "createdAt": ("timestamp without time zone", "NO"),
        "updatedAt": ("timestamp without time zone", "NO"),
        "createdAtZ": ("timestamp with time zone", "YES"),
        "updatedAtZ": ("timestamp with time zone", "YES")}.items()},
    **{("mastra_messages", c): t for c, t in {
        "id": ("text", "NO"), "thread_id": ("text", "NO"), "content": ("text", "NO"),
        "role": ("text", "NO"), "type": ("text", "NO"),
        "createdAt": ("timestamp without time zone", "NO"), "resourceId": ("text", "YES"),
        "createdAtZ": ("timestamp with time zone", "YES")}.items()},
    **{("mastra_resources", c): t for c, t in {
        "id": ("text", "NO"), "workingMemory": ("text", "YES"), "metadata": ("jsonb", "YES"),
        "createdAt": ("timestamp without time zone", "NO"),
        "updatedAt": ("timestamp without time zone", "NO"),
        "createdAtZ": ("timestamp with time zone", "YES"),
        "updatedAtZ": ("timestamp with time zone", "YES")}.items()},
}
#: The first PostgresStore's schema (version 1), as it created it.
V1_SCHEMA = (
    "CREATE SCHEMA {s}",
    "CREATE TABLE {s}.streamkit_schema_version (version integer NOT NULL, "
    "applied_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE {s}.streamkit_threads (seq bigint GENERATED ALWAYS AS IDENTITY, id text "
    "PRIMARY KEY, resource_id text NOT NULL, title text, metadata json, created_at timestamptz "
    "NOT NULL, updated_at timestamptz NOT NULL)",
    "CREATE TABLE {s}.streamkit_messages (seq bigint GENERATED ALWAYS AS IDENTITY, id text "
    "PRIMARY KEY, thread_id text NOT NULL REFERENCES {s}.streamkit_threads (id) ON DELETE "
    "CASCADE, resource_id text NOT NULL, role text NOT NULL, created_at timestamptz NOT NULL, "
    "body json NOT NULL)",
)


def echo(request: Any) -> Any:
    return text("re: " + request.prompt[-1]["content"])


async def _turns(dsn: str, schema: str, worker: int) -> None:
    async with Memory(PostgresStore(dsn, schema=schema, max_size=2), last_messages=4) as memory:
        agent = Agent(id="a", model=FunctionModel(echo), memory=memory)
        for turn in range(TURNS):
            await agent.generate(f"w{worker}-q{turn}", thread_id=T, resource_id=U)


def write_turns(dsn: str, schema: str, worker: int) -> None:
    """One process's share of the concurrent writers (a module-level function: spawn pickles
    it by name)."""
    asyncio.run(_turns(dsn, schema, worker))


@pytest.fixture
async def store(pg_dsn: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    made = PostgresStore(pg_dsn, schema=pg_schema)
    yield made
    await made.close()


def raw(pg_dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(pg_dsn, autocommit=True)


class TestProcesses:
    def test_several_processes_writing_one_thread_lose_nothing(self, pg_dsn: str,
                                                               pg_schema: str) -> None:
        # Spawned, not forked: each process starts clean and opens its own pool; they also
        # race to create the schema on first use.
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=write_turns, args=(pg_dsn, pg_schema, w))
                 for w in range(PROCESSES)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0] * PROCESSES

        async def read() -> list[Message]:
            async with Memory(PostgresStore(pg_dsn, schema=pg_schema)) as memory:
                return await memory.get_messages(T)

        stored = asyncio.run(read())
        texts = [get_text(m) for m in stored]
        want = [f"w{w}-q{t}" for w in range(PROCESSES) for t in range(TURNS)]
        assert Counter(texts) == Counter(want + [f"re: {q}" for q in want])
        assert len({m.id for m in stored}) == len(stored) == 2 * PROCESSES * TURNS
        position = {t: n for n, t in enumerate(texts)}
        for w in range(PROCESSES):  # each process's turns in its order, answer after question
            order = [position[f"w{w}-q{t}"] for t in range(TURNS)]
            assert order == sorted(order)
            assert all(position[q] < position[f"re: {q}"] for q in want)


class TestResources:
    async def test_a_resource_cannot_read_another_resources_thread(self, pg_dsn: str,
                                                                   pg_schema: str) -> None:
        # Two deployments' processes (two stores, two pools) on one database.
        async with Memory(PostgresStore(pg_dsn, schema=pg_schema)) as mine, \
                Memory(PostgresStore(pg_dsn, schema=pg_schema)) as theirs:
            await Agent(id="a", model=FunctionModel(echo), memory=mine).generate(
                "my card is 4111", thread_id=T, resource_id=U)
            model = FunctionModel(echo)
            with pytest.raises(MemoryStoreError, match="belongs to resource 'user-1'"):
                await Agent(id="a", model=model, memory=theirs).generate(
                    "show me", thread_id=T, resource_id="mallory")
            with pytest.raises(MemoryStoreError, match="belongs to resource"):
                await theirs.recall(T, "mallory")
            assert model.calls == 0
            assert await theirs.list_threads("mallory") == []
            assert [get_text(m) for m in await mine.get_messages(T)] == [
                "my card is 4111", "re: my card is 4111"]


class TestConnectionLoss:
    async def test_a_connection_killed_mid_turn_stores_nothing_and_raises(
            self, store: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
        first = Message.user("first", id="m-1")
        await store.save_messages(T, U, [first])
        before = await store.get_thread(T)
        # Another connection holds m-1's row: the turn below inserts m-new, bumps the
        # thread, then waits on m-1 — where we cut its connection.
        # (pg_stat_activity is read on a third connection: inside a transaction it is a
        # snapshot.)
        with raw(pg_dsn) as other, raw(pg_dsn) as watcher, other.transaction():
            other.execute(f'SELECT 1 FROM "{pg_schema}".mastra_messages WHERE id = %s '
                          f'FOR UPDATE', ("m-1",))
            edited = Message.user("edited", id="m-1",
                                  created_at=first.created_at + timedelta(seconds=1))
            turn = asyncio.create_task(store.save_messages(
                T, U, [Message.user("new", id="m-new"), edited]))
            blocked = None
            for _ in range(2000):  # bounded: the save reaches the lock within moments
                blocked = watcher.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE %s", (f'%"{pg_schema}".mastra_messages%',)).fetchone()
                if blocked is not None or turn.done():
                    break
                await asyncio.sleep(0.005)
            assert blocked is not None, "the save never waited on the row lock"
            watcher.execute("SELECT pg_terminate_backend(%s)", (blocked[0],))
            with pytest.raises(MemoryStoreError) as info:
                await asyncio.wait_for(turn, timeout=30)
        err = info.value
        assert err.thread_id == T and "save 2 message(s)" in str(err)
        assert "password" not in str(err)
        # nothing half-way: neither the new message, nor the edit, nor the thread's bump
        assert [(m.id, get_text(m)) for m in await store.get_messages(T)] == [("m-1", "first")]
        assert await store.get_thread(T) == before
        # the pool dropped the dead connection: the same turn is stored whole on retry
        await store.save_messages(T, U, [Message.user("new", id="m-new"), edited])
        assert [get_text(m) for m in await store.get_messages(T)] == ["edited", "new"]

    async def test_an_unreachable_server_is_a_memory_store_error(self) -> None:
        with socket.socket() as probe:  # a free port that nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        store = PostgresStore(f"postgresql://nobody:secret@127.0.0.1:{port}/none", timeout=1.0)
        with pytest.raises(MemoryStoreError, match="could not read the thread") as info:
            await store.get_thread(T)
        assert "secret" not in str(info.value)
        await store.close()


class TestSchema:
    async def test_schema_and_version_table_are_created_on_first_use(
            self, store: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
        with raw(pg_dsn) as conn:
            assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                (pg_schema,)).fetchone() is None
        assert await store.list_threads(U) == []
        with raw(pg_dsn) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (pg_schema,))}
            version = conn.execute(
                f'SELECT version FROM "{pg_schema}".streamkit_schema_version').fetchall()
            columns = {(r[0], r[1]): (r[2], r[3]) for r in conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable "
                "FROM information_schema.columns WHERE table_schema = %s", (pg_schema,))}
            indexes = {r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (pg_schema,))}
        assert tables == {"mastra_threads", "mastra_messages", "mastra_resources",
                          "streamkit_schema_version"}
        assert version == [(2,)]
        for (table, column), want in MASTRA_COLUMNS.items():
            assert columns[(table, column)] == want, (table, column)
        # what streamkit adds: the insertion order that breaks createdAt ties
        assert {k for k in columns if k[0].startswith("mastra_")} - set(MASTRA_COLUMNS) == {
            ("mastra_threads", "streamkit_seq"), ("mastra_messages", "streamkit_seq")}
        # Mastra's index names (schema-prefixed outside public; PostgreSQL cuts at 63 bytes)
        for table, column in (("threads", "resourceid"), ("messages", "thread_id")):
            assert f"{pg_schema}_mastra_{table}_{column}_createdat_idx"[:63] in indexes

    async def test_streamkits_own_tables_are_copied_once_and_kept(
            self, pg_dsn: str, pg_schema: str) -> None:
        # A schema written by the first PostgresStore (version 1, streamkit's own tables).
        old = Message.user("a\x00b", id="m-1", thread_id=T, resource_id=U)
        body = message_encoder.encode(old).decode()
        with raw(pg_dsn) as conn:
            for statement in V1_SCHEMA:
                conn.execute(statement.format(s=f'"{pg_schema}"'))
            conn.execute(f'INSERT INTO "{pg_schema}".streamkit_schema_version VALUES (1)')
            conn.execute(f'INSERT INTO "{pg_schema}".streamkit_threads (id, resource_id, title, '
                         f'metadata, created_at, updated_at) VALUES (%s, %s, NULL, %s, now(), '
                         f'now())', (T, U, '{"b": 1, "a": 2}'))
            conn.execute(f'INSERT INTO "{pg_schema}".streamkit_messages (id, thread_id, '
                         f'resource_id, role, created_at, body) VALUES (%s, %s, %s, %s, %s, %s)',
                         ("m-1", T, U, "user", old.created_at, body))
        for _ in range(2):  # the second opening finds version 2 and copies nothing
            async with Memory(PostgresStore(pg_dsn, schema=pg_schema)) as memory:
                [back] = await memory.recall(T, U)
                thread = await memory.get_thread(T)
        assert message_encoder.encode(back) == message_encoder.encode(old)
        assert thread is not None and (thread.resource_id, thread.title) == (U, None)
        assert thread.metadata == {"a": 2, "b": 1}
        with raw(pg_dsn) as conn:
            assert conn.execute(f'SELECT content FROM "{pg_schema}".mastra_messages'
                                ).fetchall() == [(msgspec.json.encode(old.content).decode(),)]
            assert conn.execute(f'SELECT count(*) FROM "{pg_schema}".streamkit_messages'
                                ).fetchone() == (1,)  # kept until dropped by hand
            assert conn.execute(f'SELECT version FROM "{pg_schema}".streamkit_schema_version '
                                f'ORDER BY version').fetchall() == [(1,), (2,)]

    async def test_reopening_a_set_up_schema_takes_no_lock_that_waits_for_readers(
            self, store: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
        # A Mastra server reading its messages holds ACCESS SHARE on the table; an ALTER TABLE
        # at every streamkit start would wait for it (and block everyone queued behind).
        await store.save_messages(T, U, [Message.user("hi", id="m-1")])
        with raw(pg_dsn) as other, other.transaction():
            other.execute(f'SELECT count(*) FROM "{pg_schema}".mastra_messages').fetchone()
            again = PostgresStore(pg_dsn, schema=pg_schema, timeout=2.0)
            try:
                assert [m.id for m in await again.get_messages(T)] == ["m-1"]
            finally:
                await again.close()

    async def test_a_table_recreated_without_streamkits_column_gets_it_back(
            self, store: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
        await store.get_thread(T)
        with raw(pg_dsn) as conn:
            conn.execute(f'ALTER TABLE "{pg_schema}".mastra_messages DROP COLUMN streamkit_seq')
        async with Memory(PostgresStore(pg_dsn, schema=pg_schema)) as memory:
            await memory.store.save_messages(T, U, [Message.user("a", id="a"),
                                                    Message.user("b", id="b")])
            assert [m.id for m in await memory.get_messages(T)] == ["a", "b"]

    async def test_a_row_that_is_not_mastras_v2_content_is_a_typed_error(
            self, store: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
        await store.save_messages(T, U, [Message.user("fine", id="m-1")])
        with raw(pg_dsn) as conn:  # a v1-era row: content is plain text, not v2 JSON
            conn.execute(f'INSERT INTO "{pg_schema}".mastra_messages (id, thread_id, content, '
                         f'role, type, "createdAt", "resourceId") VALUES '
                         f"('m-2', %s, 'hello', 'user', 'v1', now(), %s)", (T, U))
        with pytest.raises(MemoryStoreError, match=r"not Mastra's v2 message content.*"
                                                   r"expected content JSON"):
            await store.get_messages(T)

    async def test_a_newer_schema_is_refused(self, store: PostgresStore, pg_dsn: str,
                                             pg_schema: str) -> None:
        await store.get_thread(T)
        with raw(pg_dsn) as conn:
            conn.execute(f'INSERT INTO "{pg_schema}".streamkit_schema_version VALUES (99)')
        async with Memory(PostgresStore(pg_dsn, schema=pg_schema)) as memory:
            with pytest.raises(MemoryStoreError, match="schema version 99"):
                await memory.get_thread(T)

    async def test_schemas_keep_deployments_apart(self, pg_dsn: str, pg_schema: str) -> None:
        async with Memory(PostgresStore(pg_dsn, schema=pg_schema + "_a")) as a, \
                Memory(PostgresStore(pg_dsn, schema=pg_schema + "_b")) as b:
            try:
                await a.create_thread(T, resource_id=U)
                assert await b.get_thread(T) is None
                await b.create_thread(T, resource_id="someone-else")
                assert (await a.get_thread(T)).resource_id == U  # type: ignore[union-attr]
            finally:
                with raw(pg_dsn) as conn:
                    for suffix in ("_a", "_b"):
                        conn.execute(f'DROP SCHEMA IF EXISTS "{pg_schema}{suffix}" CASCADE')


class TestArguments:
    def test_the_dsn_comes_from_the_environment(self, pg_dsn: str) -> None:
        with mock.patch.dict(os.environ, {"STREAMKIT_PG_DSN": pg_dsn}):
            assert PostgresStore().dsn == pg_dsn
        with mock.patch.dict(os.environ, {}, clear=True):
            with pytest.raises(InvalidArgument, match="STREAMKIT_PG_DSN"):
                PostgresStore()

    @pytest.mark.parametrize("kwargs, match", [
        pytest.param({"schema": "drop table; --"}, "schema", id="schema-not-an-identifier"),
        pytest.param({"min_size": 0}, "min_size", id="empty-pool"),
        pytest.param({"min_size": 4, "max_size": 2}, "max_size", id="max-below-min"),
        pytest.param({"timeout": 0}, "timeout", id="no-timeout"),
    ])
    def test_bad_arguments_are_refused(self, kwargs: dict[str, Any], match: str) -> None:
        with pytest.raises(InvalidArgument, match=match):
            PostgresStore("postgresql://localhost/x", **kwargs)

    def test_a_libpq_without_pipeline_mode_is_refused_saying_what_to_install(self) -> None:
        from streamkit.memory import _postgres
        _postgres._driver.cache_clear()
        try:
            with mock.patch.object(psycopg.AsyncPipeline, "is_supported", return_value=False), \
                    pytest.raises(StreamkitError,
                                  match=r"libpq >= 14.*streamkit-agents\[postgres\]"):
                PostgresStore("postgresql://localhost/x")
        finally:
            _postgres._driver.cache_clear()

    def test_the_repr_hides_the_password(self) -> None:
        store = PostgresStore("postgresql://app:hunter2@db:5432/app", schema="bot")
        assert "hunter2" not in repr(store) and "bot" in repr(store)
