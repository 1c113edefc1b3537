"""``PostgresStore``: the ``MessageStore`` on PostgreSQL, in Mastra's tables (psycopg 3, async).

What belongs here: the store's methods, the pool and the schema set-up, the text PostgreSQL
cannot hold, and the mapping of every psycopg error to ``MemoryStoreError``. What does not: the
tables and the SQL (``_pg_tables``: ``@mastra/pg``'s memory tables, what streamkit adds to them,
where the layouts differ, the one-time copy of streamkit's own earlier tables), how one call is
kept within its time, in one round trip, off a dead connection (``_pg_call``), which messages
are worth storing (``streamkit.memory._memory``), the protocol (``_store``), SQLite
(``_sqlite``).

The tables are the ones ``@mastra/pg`` (1.27) creates for its memory (``mastra_threads``,
``mastra_messages``, ``mastra_resources``), so a Mastra server (TypeScript) and streamkit
(Python) on one database and schema share one memory: a thread started in one is continued in
the other, both ways (``tests/test_memory_mastra_pg.py`` runs a real Mastra server to prove it).

**Round trips** (the cost on a network): every call is one transaction sent in **one round
trip** (``_pg_call.transact_pipelined``: ``BEGIN``, the server-side timeouts, the statements
and ``COMMIT`` pipelined). ``recall`` (``read_thread``) is one query (the thread and its last
messages, a ``LATERAL`` join); ``save_messages`` is one statement: a CTE that creates or bumps
the thread (``INSERT ... ON CONFLICT DO UPDATE ... WHERE "resourceId" = ...``, which also locks
its row: saves to one thread are serialised, different threads run in parallel), then upserts
the messages from ``unnest(...)`` arrays. Its checks cost nothing extra: a thread of another
resource updates nothing and the CTE writes nothing; a message id stored in another thread
sets that row's ``thread_id`` to NULL, which ``NOT NULL`` refuses, so the whole statement (and
with it the transaction) fails, and only then does one more query find which id it was. A
turn costs 2 round trips (13 in the first version: recall in two transactions, save in seven
statements).

The price of one round trip: a save whose connection is lost (or cut by ``timeout``, or by a
cancelled caller) after it was sent may or may not have been committed — the server may have
received all of it — and its ``MemoryStoreError`` says so. Saves are upserts by message id, so
saving the same turn again is safe.

**Pool sizing.** Each store (each process) opens at most ``max_size`` connections (default
10). PostgreSQL's default ``max_connections`` is 100, with a few reserved for superusers: 10
processes × 10 connections already reaches it. Size it as ``processes × max_size + what
else uses the server < max_connections``: e.g. 8 workers with ``max_size=4`` (32), or put a
pooler such as PgBouncer in front and keep the per-process pools small. A call takes
one connection for one round trip, so a few connections serve many concurrent turns; a call
that finds all of them busy waits (within ``timeout``) for one.

The rules are ``SQLiteStore``'s (the contract in ``_store``); how they are kept here:

* **One transaction per call**, on a connection from the pool. A lost connection
  (``pg_terminate_backend``, a restart, the network) mid-transaction rolls it back on the
  server; the pool drops the broken connection and the next call gets a fresh one.
* Everything lives in ``schema`` (created on first use with the tables, under an advisory lock
  so processes starting together do not race), which keeps deployments — and test runs —
  apart. A newer schema version is refused.
* The pool belongs to the event loop that first used the store (psycopg_pool's workers are
  tasks of that loop): make one store per loop (per process, per test).

Bounded time: ``timeout`` (default 10 s) bounds a whole call — opening the pool, waiting for a
pooled connection, every statement — on the client side (a hung server never says so) and, set
from it per transaction, on the server side (``lock_timeout``, ``statement_timeout``); a
pooled connection the server closed while it was idle is swapped for another. How, and why:
``_pg_call``. New connections get libpq's ``connect_timeout`` (``timeout`` rounded up, at least
2 s) and ``application_name`` ``streamkit:<schema>`` (what ``pg_stat_activity`` shows), unless
the DSN sets them.

Decisions:

* **Text PostgreSQL cannot hold** is refused before anything is sent, with
  ``MemoryStoreError``: a NUL (``"\\x00"``) in an id, a resource id, a title or thread
  metadata (``text`` and ``jsonb`` have no NUL), a lone surrogate anywhere (no UTF-8 form;
  SQLite refuses it too). A NUL inside a message is fine: ``content`` is JSON text, where it
  is the escape ``\\u0000``, and reads back as written.
* **System schemas** (``information_schema``, ``pg_catalog``, ``pg_toast``, anything starting
  ``pg_``, in any case) are refused at construction: PostgreSQL reserves them, and tables of ours
  among its catalogs would be one ``DROP`` away from a broken database. So is a DSN libpq
  cannot parse (it used to fail at the first call, as a lost connection).

Example:
    >>> store = PostgresStore("postgresql://app@db/app", schema="support_bot")
    >>> memory = Memory(store=store, last_messages=20)
    >>> await memory.close()
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import msgspec

from streamkit.errors import (
    InvalidArgument,
    InvalidType,
    MemoryStoreError,
    MessageError,
    StreamkitError,
)
from streamkit.messages import Message
from streamkit.validate import int_at_least, optional_int_at_least, seconds

from ._pg_call import Call, Statement, retrieve, transact, transact_pipelined
from ._pg_tables import (
    FROM_V1,
    QUERIES,
    SCHEMA,
    SCHEMA_VERSION,
    V1_INSERT,
    V1_MESSAGES,
    content_encode,
    index_name,
    message_of,
    thread_of,
    v1_body,
)
from ._store import Thread, from_micros, now_micros, to_micros

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore", "SCHEMA_VERSION", "DSN_ENV"]

#: The environment variable read when no DSN is given.
DSN_ENV = "STREAMKIT_PG_DSN"

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_T = TypeVar("_T")
_json_encode = msgspec.json.Encoder().encode

class _Driver(NamedTuple):
    Error: type[Exception]
    PoolTimeout: type[Exception]
    SQL: Any
    Identifier: Any
    Json: Any
    AsyncConnectionPool: Any
    conninfo_to_dict: Callable[[str], Mapping[str, object]]


@functools.cache
def _driver() -> _Driver:
    """psycopg and psycopg_pool, imported when the first ``PostgresStore`` is made: they take a
    noticeable part of a second to import, and ``import streamkit`` should not pay for a store
    it may never use (and they are the optional ``postgres`` extra)."""
    try:
        import psycopg
        from psycopg import sql
        from psycopg.types.json import Json
        from psycopg_pool import AsyncConnectionPool, PoolTimeout
    except ImportError as exc:
        raise StreamkitError(f"PostgresStore needs psycopg 3 and psycopg_pool: pip install "
                             f"'streamkit-agents[postgres]' ({exc})") from exc
    if not psycopg.AsyncPipeline.is_supported():  # every call is one pipelined round trip
        raise StreamkitError(f"PostgresStore needs psycopg's pipeline mode, which needs libpq "
                             f">= 14; this psycopg uses libpq {psycopg.pq.version()} "
                             f"({psycopg.pq.__impl__}): pip install 'streamkit-agents[postgres]' "
                             f"(psycopg[binary] bundles a recent libpq)")
    return _Driver(psycopg.Error, PoolTimeout, sql.SQL,
                   sql.Identifier, Json, AsyncConnectionPool,
                   psycopg.conninfo.conninfo_to_dict)  # psycopg imports its conninfo


def _nul_in(value: object) -> str | None:
    """The first str (key or value) holding a NUL in a JSON-able structure, or ``None``."""
    if isinstance(value, str):
        return value if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if (found := _nul_in(key) or _nul_in(item)) is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for item in value:
            if (found := _nul_in(item)) is not None:
                return found
    return None


def _bad_text(value: object) -> str | None:
    """What makes ``value`` text PostgreSQL cannot hold, and what is expected; ``None`` if it
    is fine (or not a str: the driver judges other types)."""
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        return (f"contains a NUL character (\\x00) at position {value.index(chr(0))}, which "
                f"PostgreSQL text cannot hold; expected text without NUL characters")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            return (f"contains a lone surrogate {value[exc.start]!r} at position {exc.start}, "
                    f"which is not Unicode text (it has no UTF-8 form); expected valid Unicode "
                    f"text")
    return None


def _redacted(dsn: str) -> str:
    """The DSN without its password, to name the database in messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", re.sub(r"password=\S+", "password=***",
                                                             dsn))


class PostgresStore:
    """A ``MessageStore`` in PostgreSQL, in ``@mastra/pg``'s tables: shared by every process
    that uses the same DSN and schema, and by a Mastra server on them.

    Args:
        dsn: a libpq connection string or URL (``postgresql://user@host:5432/db``); ``None``
            reads ``STREAMKIT_PG_DSN``.
        schema: the PostgreSQL schema holding the tables (created on first use); one per
            deployment, or per test run.
        min_size: connections the pool keeps open.
        max_size: connections it opens at most (concurrent calls beyond wait for one). Per
            process: N processes open up to N × ``max_size``, which must stay under the
            server's ``max_connections`` (PostgreSQL's default is 100, so 10 processes with
            the default 10 already reach it). A call holds a connection for one round trip,
            so a few per process go a long way (or put a pooler such as PgBouncer in front).
        timeout: seconds one call may take in all — connecting, waiting for a pooled
            connection, every statement — before it fails with ``MemoryStoreError`` (the
            connection it used is closed, nothing of it is committed). PostgreSQL's
            ``lock_timeout``/``statement_timeout`` are set from it for every transaction.

    Attributes:
        application_name: what ``pg_stat_activity`` shows for the store's connections (the
            DSN's, or ``streamkit:<schema>``).

    Raises:
        InvalidArgument: no DSN (argument or ``STREAMKIT_PG_DSN``), a DSN libpq cannot parse,
            a schema that is not an identifier or is a system schema (``information_schema``,
            ``pg_*``), a bad pool size or timeout.
        StreamkitError: psycopg or psycopg_pool is not installed (``pip install
            'streamkit-agents[postgres]'``).
        MemoryStoreError: from any method when PostgreSQL fails or the call ran out of
            ``timeout``, or given text PostgreSQL cannot hold (a NUL, a lone surrogate); the
            message names the database, the thread, the operation and what was wrong,
            ``sqlstate`` holds PostgreSQL's code (``"55P03"`` past ``lock_timeout``; ``None``
            for a lost connection or the client-side timeout), the psycopg error is the
            ``__cause__``.

    Example:
        >>> store = PostgresStore("postgresql://postgres@127.0.0.1/test", schema="bot")
        >>> await store.get_thread("t1") is None
        True
        >>> await store.close()
    """

    def __init__(self, dsn: str | None = None, *, schema: str = "public", min_size: int = 1,
                 max_size: int = 10, timeout: float = 10.0) -> None:
        if dsn is None:
            dsn = os.environ.get(DSN_ENV)
            if not dsn:
                raise InvalidArgument(f"PostgresStore needs a DSN: pass one (e.g. "
                                      f"'postgresql://user@host/db') or set {DSN_ENV}")
        if not isinstance(dsn, str) or not dsn.strip():
            raise InvalidType(f"PostgresStore dsn must be a non-empty str, got {dsn!r}")
        if not isinstance(schema, str) or not _IDENT.match(schema):
            raise InvalidArgument(f"schema must be an SQL identifier (letters, digits, _; at "
                                  f"most 63), got {schema!r}")
        if schema.lower() == "information_schema" or schema.lower().startswith("pg_"):
            raise InvalidArgument(f"schema {schema!r} is a PostgreSQL system schema "
                                  f"(information_schema, pg_catalog, pg_toast and every pg_* "
                                  f"are PostgreSQL's own); expected a schema of your own, e.g. "
                                  f"'streamkit' or one per deployment")
        for name, size in (("min_size", min_size), ("max_size", max_size)):
            int_at_least(size, name, 1)
        if max_size < min_size:
            raise InvalidArgument(f"max_size ({max_size}) must be >= min_size ({min_size})")
        seconds(timeout, "timeout")
        self._db = db = _driver()
        try:
            params = db.conninfo_to_dict(dsn)
        except db.Error:
            raise InvalidArgument(f"PostgresStore dsn {_redacted(dsn)!r} is not a libpq "
                                  f"connection string or URL; expected e.g. "
                                  f"'postgresql://user@host:5432/db'") from None
        self.dsn = dsn
        self.schema = schema
        self.timeout = float(timeout)
        self.where = f"postgresql {_redacted(dsn)} (schema {schema})"
        self.application_name = str(params.get("application_name") or f"streamkit:{schema}")
        # Only what the DSN leaves unset: a DSN's own connect_timeout or name wins.
        self._connect: dict[str, object] = {
            "autocommit": True, "application_name": self.application_name[:63],
            "connect_timeout": params.get("connect_timeout") or max(2, math.ceil(timeout))}
        self._sizes = (min_size, max_size)
        self._pool: AsyncConnectionPool | None = None
        self._opening: asyncio.Lock | None = None
        self._closed = False
        self._q = {name: db.SQL(text).format(schema=db.Identifier(schema))
                   for name, text in QUERIES.items()}

    def __repr__(self) -> str:
        return f"PostgresStore({_redacted(self.dsn)!r}, schema={self.schema!r})"

    # ------------------------------------------------------------------ the pool

    def _error(self, what: str, thread_id: str | None, detail: str,
               sqlstate: str | None = None) -> MemoryStoreError:
        return MemoryStoreError(f"memory store {self.where}: could not {what} (thread "
                                f"{thread_id!r}): {detail}", thread_id=thread_id,
                                operation=what, path=self.where, sqlstate=sqlstate)

    def _refuse(self, what: str, thread_id: str | None,
                *texts: tuple[str, object]) -> None:
        """``MemoryStoreError`` for the first ``(name, value)`` PostgreSQL cannot hold."""
        for name, value in texts:
            if (problem := _bad_text(value)) is not None:
                raise self._error(what, thread_id, f"the {name} {value!r} {problem}; nothing "
                                                   f"was written")

    async def _get_pool(self, call: Call) -> AsyncConnectionPool:
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        try:
            async with asyncio.timeout_at(call.at):  # another call is opening it
                await self._opening.acquire()
        except TimeoutError:
            call.expired = True
            raise
        try:
            if self._pool is None:
                pool = self._db.AsyncConnectionPool(
                    self.dsn, min_size=self._sizes[0], max_size=self._sizes[1],
                    timeout=self.timeout, open=False, kwargs=self._connect,
                    name=f"streamkit-{self.schema}")
                try:
                    await pool.open(wait=True, timeout=max(call.left(), 0.001))
                    await transact(pool, call, self._migrate, self._sizes[1], self._db.Error)
                except BaseException:
                    await pool.close(timeout=1.0)
                    raise
                self._pool = pool
            return self._pool
        finally:
            self._opening.release()

    async def _migrate(self, conn: psycopg.AsyncConnection[TupleRow]) -> None:
        # Processes opening a new schema together: one creates it, the others wait here.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                           (f"streamkit-schema:{self.schema}",))
        names = {"schema": self._db.Identifier(self.schema),
                 "threads_index": self._db.Identifier(index_name(self.schema, "threads")),
                 "messages_index": self._db.Identifier(index_name(self.schema, "messages"))}
        cur = await conn.execute(
            "SELECT to_regclass(format('%%I.streamkit_schema_version', %s::text))",
            (self.schema,))
        row = await cur.fetchone()
        version = None
        if row is not None and row[0] is not None:
            cur = await conn.execute(self._q["version"])
            found = await cur.fetchone()
            version = None if found is None else found[0]
            if version is not None and version > SCHEMA_VERSION:
                raise self._error("open the store", None,
                                  f"schema version {version} is newer than {SCHEMA_VERSION}, "
                                  f"the version this streamkit writes; open it with the "
                                  f"streamkit that created it")
        if version == SCHEMA_VERSION:
            # Set up already: skip the DDL, whose ALTER TABLE would take an ACCESS EXCLUSIVE
            # lock on Mastra's tables at every start (queueing behind, and then blocking,
            # the other side's traffic) — unless Mastra recreated a table without our column.
            cur = await conn.execute(self._q["ready"], (self.schema, self.schema))
            found = await cur.fetchone()
            if found is not None and found[0] == 2:
                return
        for statement in SCHEMA:
            await conn.execute(self._db.SQL(statement).format(**names))
        if version == SCHEMA_VERSION:
            return
        if version == 1:  # streamkit's own tables: copied once into Mastra's
            for statement in FROM_V1:
                await conn.execute(self._db.SQL(statement).format(**names))
            await self._copy_v1_messages(conn, names)
        elif version is not None:
            raise self._error("open the store", None,
                              f"schema version {version} is not one this streamkit knows "
                              f"(1 or {SCHEMA_VERSION})")
        await conn.execute(self._q["set_version"], (SCHEMA_VERSION,))

    async def _copy_v1_messages(self, conn: psycopg.AsyncConnection[TupleRow],
                                names: dict[str, object]) -> None:
        """Every version-1 message into ``mastra_messages``, 1,000 at a time (a server-side
        cursor: the table may be larger than memory)."""
        insert = self._db.SQL(V1_INSERT).format(**names)
        async with conn.cursor(name="streamkit_v1_messages") as cur:
            await cur.execute(self._db.SQL(V1_MESSAGES).format(**names))
            while rows := await cur.fetchmany(1000):
                bodies = [v1_body(row[5]) for row in rows]
                await conn.execute(insert, (
                    [r[0] for r in rows], [r[1] for r in rows],
                    [bytes(b.content).decode() for b in bodies], [r[3] for r in rows],
                    [b.type or "v2" for b in bodies], [r[4] for r in rows],
                    [r[2] for r in rows]))

    async def _run(self, what: str, thread_id: str | None, statements: Sequence[Statement],
                   *, writes: bool = False) -> list[list[Any]]:
        """``statements`` in one transaction and one round trip, all of it within
        ``timeout``; each one's rows. The one place psycopg errors are mapped (``writes``:
        a lost connection may have left the call committed, and the error says so).

        The work runs in its own task so that a caller's cancellation reaches it as a cut
        connection (``Call.abandon``), never as a ``CancelledError`` inside psycopg."""
        if self._closed:
            raise self._error(what, thread_id, "the store is closed")
        call = Call(self.timeout)
        work = asyncio.ensure_future(self._call(call, statements))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if not call.abandon():
                work.cancel()
            work.add_done_callback(retrieve)  # it ends at once; its error is not news
            raise
        except MemoryStoreError:
            raise
        except self._db.Error as exc:
            raise self._failure(what, thread_id, exc, call, writes) from exc
        except OSError as exc:  # TimeoutError included
            raise self._failure(what, thread_id, exc, call, writes) from exc

    async def _call(self, call: Call, statements: Sequence[Statement]) -> list[list[object]]:
        return await transact_pipelined(await self._get_pool(call), call, statements,
                                        self._sizes[1], self._db.Error)

    def _failure(self, what: str, thread_id: str | None, exc: BaseException,
                 call: Call, writes: bool) -> MemoryStoreError:
        sqlstate = getattr(exc, "sqlstate", None)
        detail = str(exc).strip() or type(exc).__name__
        budget = f"timeout={self.timeout:g}s"
        if sqlstate == "55P03":
            detail += (f" (a lock another session holds was not released within lock_timeout, "
                       f"which this store sets from {budget}; nothing of this call was "
                       f"committed)")
        elif sqlstate == "57014" and "statement timeout" in detail:
            detail += (f" (past statement_timeout, which this store sets from {budget}; "
                       f"nothing of this call was committed)")
        elif sqlstate is None:
            shared = ("connecting, waiting for a pooled connection and every statement of a "
                      "call share that time")
            if isinstance(exc, self._db.PoolTimeout):
                detail = (f"no connection to PostgreSQL within {budget}: the server could not "
                          f"be reached or did not answer, or all {self._sizes[1]} pooled "
                          f"connections stayed busy ({shared})")
            elif call.expired:  # psycopg's "server closed the connection" was our cut
                detail = (f"PostgreSQL did not answer within {budget}, so the connection was "
                          f"closed ({shared})")
            else:
                detail += " (the connection to PostgreSQL was lost or could not be made)"
            detail += ("; it was lost after the whole transaction, COMMIT included, was "
                       "sent, so PostgreSQL may or may not have stored this call (saving it "
                       "again is safe: messages are upserted by id)"
                       if call.committing and writes else
                       "; nothing of this call was committed")
        return self._error(what, thread_id, detail, sqlstate)

    # ------------------------------------------------------------------ the protocol

    def _statement(self, name: str, *params: object) -> Statement:
        return Statement(self._q[name], params)

    async def create_thread(self, thread: Thread) -> Thread:
        """Insert ``thread`` (a ``None`` title is stored as Mastra's ``''``).

        Raises:
            MemoryStoreError: a thread with that id exists, the metadata holds a NUL or is not
                JSON, or PostgreSQL failed.

        Example:
            >>> await store.create_thread(Thread("t1", "u1", None, now, now))
        """
        if not isinstance(thread, Thread):
            raise InvalidType(f"create_thread() takes a Thread, got {type(thread).__name__}")
        what = "create the thread"
        self._refuse(what, thread.id, ("thread id", thread.id),
                     ("resource id", thread.resource_id), ("title", thread.title))
        if thread.metadata is not None:
            try:  # what json.dumps in the driver would let through and PostgreSQL refuse
                _json_encode(thread.metadata)
            except (TypeError, ValueError, RecursionError, OverflowError) as exc:
                raise self._error(what, thread.id, f"the metadata cannot be stored as JSON "
                                                   f"({type(exc).__name__}: {exc}); expected "
                                                   f"JSON-able values of valid Unicode text; "
                                                   f"nothing was written") from exc
            if (holder := _nul_in(thread.metadata)) is not None:
                raise self._error(what, thread.id, f"the metadata text {holder!r} contains a "
                                                   f"NUL character (\\x00), which jsonb (the "
                                                   f"type of Mastra's metadata column) cannot "
                                                   f"hold; expected text without NUL "
                                                   f"characters; nothing was written")
        meta = None if thread.metadata is None else self._db.Json(thread.metadata)
        [[(created, owner)]] = await self._run(what, thread.id, [self._statement(
            "create_thread", thread.id, thread.resource_id, thread.title or "", meta,
            thread.created_at, thread.updated_at, thread.id)], writes=True)
        if not created:
            raise self._error(what, thread.id, f"thread {thread.id!r} already exists "
                                               f"(resource {owner!r})")
        return thread

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None`` when there is none with that id."""
        self._refuse("read the thread", thread_id, ("thread id", thread_id))
        [rows] = await self._run("read the thread", thread_id,
                                 [self._statement("get_thread", thread_id)])
        return thread_of(rows[0]) if rows else None

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """The threads of ``resource_id``, newest ``createdAt`` first (then newest
        inserted)."""
        what = f"list the threads of resource {resource_id!r}"
        self._refuse(what, None, ("resource id", resource_id))
        [rows] = await self._run(what, None, [self._statement("list_threads", resource_id)])
        return [thread_of(row) for row in rows]

    async def save_messages(self, thread_id: str, resource_id: str | None,
                            messages: Sequence[Message]) -> Thread:
        """Create the thread when missing (or bump its ``updatedAt``) and upsert ``messages``,
        in one transaction and one round trip.

        Raises:
            MemoryStoreError: the thread belongs to another resource, is missing and
                ``resource_id`` is ``None``, a message id is stored in another thread, or
                PostgreSQL failed (then nothing was written).

        Example:
            >>> thread = await store.save_messages("t1", "u1", [Message.user("hi")])
        """
        # One row per id, at the place and with the created_at of its first occurrence and the
        # content of its last: what upserting the list one by one does (SQLiteStore), and one
        # statement cannot touch a row twice.
        what = f"save {len(messages)} message(s)"
        self._refuse(what, thread_id, ("thread id", thread_id), ("resource id", resource_id))
        rows: dict[str, tuple[str, datetime, str, str]] = {}
        for m in messages:
            self._refuse(what, thread_id, ("message id", m.id))
            first = rows.get(m.id)
            created = first[1] if first else from_micros(to_micros(m.created_at))
            try:
                content = content_encode(m.content).decode()
            except (TypeError, ValueError, RecursionError, OverflowError) as exc:
                raise self._error(what, thread_id, f"message {m.id!r} cannot be stored as JSON "
                                                   f"({type(exc).__name__}: {exc}); expected "
                                                   f"JSON-able parts of valid Unicode text; "
                                                   f"nothing was written") from exc
            kind = m.type if isinstance(m.type, str) else "v2"
            rows[m.id] = (m.role, created, content, kind)
        values = list(rows.values())
        now = from_micros(now_micros())
        query = "save" if resource_id is not None else "save_existing"
        try:
            [[row]] = await self._run(what, thread_id, [self._statement(
                query, thread_id, resource_id, now, list(rows), [v[0] for v in values],
                [v[1] for v in values], [v[2] for v in values], [v[3] for v in values],
                thread_id)], writes=True)
        except MemoryStoreError as exc:
            if getattr(exc, "sqlstate", None) != "23502":  # not a foreign message id
                raise
            [clash] = await self._run(what, thread_id,
                                      [self._statement("clash", list(rows), thread_id)])
            raise self._error(what, thread_id,
                              f"message {clash[0][0] if clash else '?'!r} is already stored "
                              f"in thread {clash[0][1] if clash else '?'!r}; it cannot also be "
                              f"saved to thread {thread_id!r} (give the message a new id); "
                              f"nothing was written") from exc
        owner, saved = row[0], row[1]
        if row[2] is None:  # the CTE touched no thread, so it wrote nothing
            if owner is None and resource_id is None:
                raise self._error(what, thread_id, f"thread {thread_id!r} does not exist and "
                                                   f"no resource_id was given to create it")
            if owner is None:  # created by another resource while this save started
                raise self._error(what, thread_id,
                                  f"thread {thread_id!r} was just created by another resource, "
                                  f"not {resource_id!r}; a thread never changes owner")
            raise self._error(what, thread_id,
                              f"thread {thread_id!r} belongs to resource {owner!r}, not "
                              f"{resource_id!r}; a thread never changes owner")
        if saved != len(rows):
            raise StreamkitError(f"streamkit bug: {saved} of {len(rows)} messages saved")
        return thread_of(row[2:])

    async def read_thread(self, thread_id: str,
                          limit: int | None = None) -> tuple[Thread | None, list[Message]]:
        """The thread and its messages (the last ``limit``, oldest first) in **one query**:
        what ``Memory.recall`` needs (the owner to check, the history to add). ``(None, [])``
        for an unknown thread.

        Example:
            >>> thread, history = await store.read_thread("t1", limit=20)
        """
        _check_limit(limit)
        self._refuse("read the thread", thread_id, ("thread id", thread_id))
        [rows] = await self._run("read the thread", thread_id,
                                 [self._statement("read_thread", limit, thread_id)])
        if not rows:
            return None, []
        thread = thread_of(rows[0])
        if rows[0][6] is None:  # the LEFT JOIN found no message
            return thread, []
        messages = self._messages(thread_id, [r[6:] for r in reversed(rows)])
        return thread, messages

    def _messages(self, thread_id: str, rows: Sequence[Sequence[object]]) -> list[Message]:
        try:
            return [message_of(row) for row in rows]
        except (MessageError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise self._error("read the messages", thread_id,
                              f"a stored message is not Mastra's v2 message content "
                              f"({exc}); expected content JSON like "
                              f"{{\"format\": 2, \"parts\": [...]}}") from exc

    async def get_messages(self, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's messages by ``createdAt`` then insertion order, oldest first; with
        ``limit``, the last ``limit`` of them. An unknown thread has none."""
        _check_limit(limit)
        self._refuse("read the messages", thread_id, ("thread id", thread_id))
        if limit == 0:
            return []
        [rows] = await self._run("read the messages", thread_id,
                                 [self._statement("last_messages", thread_id, limit)])
        return self._messages(thread_id, rows[::-1])

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and its messages; ``False`` when there was no such thread."""
        self._refuse("delete the thread", thread_id, ("thread id", thread_id))
        _, [[deleted]] = await self._run("delete the thread", thread_id, [
            self._statement("lock_thread", thread_id),
            self._statement("delete_thread", thread_id, thread_id)], writes=True)
        return bool(deleted)

    async def close(self) -> None:
        """Close the pool (its connections). Closing twice is fine; any call afterwards raises
        ``MemoryStoreError``."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close(timeout=self.timeout)


def _check_limit(limit: int | None) -> None:
    optional_int_at_least(limit, "limit", 0)
