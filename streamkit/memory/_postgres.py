"""``PostgresStore``: the ``MessageStore`` on PostgreSQL (psycopg 3, async, a psycopg_pool pool).

What belongs here: the PostgreSQL schema, its SQL, the pool, the text PostgreSQL cannot hold,
and the mapping of every psycopg error to ``MemoryStoreError``. What does not: how one call is
kept within its time and off a dead connection (``_pg_call``), which messages are worth storing
(``streamkit.memory._memory``), the protocol (``_store``), SQLite (``_sqlite``).

The rules are ``SQLiteStore``'s (the contract in ``_store``); how they are kept here:

* **One transaction per call**, on a connection from the pool. ``save_messages`` locks the
  thread's row (``SELECT ... FOR UPDATE``): saves to one thread are serialised by PostgreSQL,
  saves to different threads run in parallel, from any number of processes and machines.
* Messages are upserted with one ``INSERT ... SELECT FROM unnest(...) ON CONFLICT (id) DO UPDATE
  ... WHERE thread_id = EXCLUDED.thread_id RETURNING id``: an id that another thread stored
  meanwhile (two turns racing with one new id) updates nothing, is noticed by the count of
  returned ids, and rolls the whole turn back with ``MemoryStoreError``.
* A lost connection (server restart, ``pg_terminate_backend``, network) in the middle of a
  transaction rolls it back on the server; the caller gets ``MemoryStoreError``, the pool drops
  the broken connection and the next call gets a fresh one.
* Everything lives in ``schema`` (created on first use with the tables, under an advisory lock
  so processes starting together do not race), which keeps deployments — and test runs —
  apart. ``streamkit_schema_version`` holds the schema version for later migrations; a newer
  version is refused.
* Columns: ``created_at``/``updated_at`` are ``timestamptz`` (microseconds, so ordering matches
  SQLite's); ``body`` and ``metadata`` are ``json`` (not ``jsonb``): ``json`` keeps the text as
  written, so a message reads back byte for byte (``jsonb`` would reorder a metadata dict's
  keys); ``seq`` (identity) breaks ``created_at`` ties in insertion order.
* The pool belongs to the event loop that first used the store (psycopg_pool's workers are
  tasks of that loop): make one store per loop (per process, per test).

Bounded time: ``timeout`` (default 10 s) bounds a whole call — opening the pool, waiting for a
pooled connection, every statement — on the client side (a hung server never says so) and, set
from it per transaction, on the server side (``lock_timeout``, ``statement_timeout``); a
connection found dead at ``BEGIN`` is swapped for another. How, and why: ``_pg_call``. New
connections get libpq's ``connect_timeout`` (``timeout`` rounded up, at least 2 s) and
``application_name`` ``streamkit:<schema>`` (what ``pg_stat_activity`` shows), unless the DSN
sets them.

Decisions:

* **Text PostgreSQL cannot hold** is refused before anything is sent, with
  ``MemoryStoreError``: a NUL (``"\\x00"``) in an id, a resource id or a title (PostgreSQL
  ``text`` has no NUL), a lone surrogate anywhere (no UTF-8 form; SQLite refuses it too). A NUL
  inside a message or in thread metadata is fine: they are ``json``, where it is ``\\u0000``,
  and reads back as written.
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
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import msgspec

from streamkit.errors import InvalidArgument, InvalidType, MemoryStoreError, StreamkitError
from streamkit.messages import Message, decode_message, message_encoder

from ._pg_call import Call, retrieve, transact
from ._store import Thread, from_micros, now_micros, to_micros

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore", "SCHEMA_VERSION", "DSN_ENV"]

#: The schema version this module writes (table ``streamkit_schema_version``).
SCHEMA_VERSION = 1
#: The environment variable read when no DSN is given.
DSN_ENV = "STREAMKIT_PG_DSN"

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_T = TypeVar("_T")
_json_encode = msgspec.json.Encoder().encode

_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS {schema}",
    """CREATE TABLE IF NOT EXISTS {schema}.streamkit_schema_version (
        version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())""",
    """CREATE TABLE IF NOT EXISTS {schema}.streamkit_threads (
        seq         bigint GENERATED ALWAYS AS IDENTITY,
        id          text PRIMARY KEY,
        resource_id text NOT NULL,
        title       text,
        metadata    json,
        created_at  timestamptz NOT NULL,
        updated_at  timestamptz NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS streamkit_threads_by_resource
        ON {schema}.streamkit_threads (resource_id, created_at, seq)""",
    """CREATE TABLE IF NOT EXISTS {schema}.streamkit_messages (
        seq         bigint GENERATED ALWAYS AS IDENTITY,
        id          text PRIMARY KEY,
        thread_id   text NOT NULL REFERENCES {schema}.streamkit_threads (id) ON DELETE CASCADE,
        resource_id text NOT NULL,
        role        text NOT NULL,
        created_at  timestamptz NOT NULL,
        body        json NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS streamkit_messages_by_thread
        ON {schema}.streamkit_messages (thread_id, created_at, seq)""",
)

_THREAD_COLUMNS = "id, resource_id, title, metadata, created_at, updated_at"


class _Driver(NamedTuple):
    Error: type[Exception]
    PoolTimeout: type[Exception]
    SQL: Any
    Identifier: Any
    Json: Any
    AsyncConnectionPool: Any
    conninfo_to_dict: Callable[[str], dict[str, Any]]


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
    return _Driver(psycopg.Error, PoolTimeout, sql.SQL,
                   sql.Identifier, Json, AsyncConnectionPool,
                   psycopg.conninfo.conninfo_to_dict)  # psycopg imports its conninfo


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _thread_of(row: Sequence[Any]) -> Thread:
    return Thread(id=row[0], resource_id=row[1], title=row[2], metadata=row[3],
                  created_at=_utc(row[4]), updated_at=_utc(row[5]))


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
    """A ``MessageStore`` in PostgreSQL, shared by every process that uses the same DSN.

    Args:
        dsn: a libpq connection string or URL (``postgresql://user@host:5432/db``); ``None``
            reads ``STREAMKIT_PG_DSN``.
        schema: the PostgreSQL schema holding the tables (created on first use); one per
            deployment, or per test run.
        min_size: connections the pool keeps open.
        max_size: connections it opens at most (concurrent calls beyond wait for one).
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
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise InvalidArgument(f"{name} must be an int >= 1, got {size!r}")
        if max_size < min_size:
            raise InvalidArgument(f"max_size ({max_size}) must be >= min_size ({min_size})")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise InvalidArgument(f"timeout must be a number of seconds > 0, got {timeout!r}")
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
        self._connect: dict[str, Any] = {
            "autocommit": True, "application_name": self.application_name[:63],
            "connect_timeout": params.get("connect_timeout") or max(2, math.ceil(timeout))}
        self._sizes = (min_size, max_size)
        self._pool: AsyncConnectionPool | None = None
        self._opening: asyncio.Lock | None = None
        self._closed = False
        self._q = {name: db.SQL(text).format(schema=db.Identifier(schema))
                   for name, text in _QUERIES.items()}

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

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        # Processes opening a new schema together: one creates it, the others wait here.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                           (f"streamkit-schema:{self.schema}",))
        for statement in _SCHEMA:
            await conn.execute(self._db.SQL(statement).format(
                schema=self._db.Identifier(self.schema)))
        cur = await conn.execute(self._q["version"])
        row = await cur.fetchone()
        if row is None or row[0] is None:
            await conn.execute(self._q["set_version"], (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            raise self._error("open the store", None,
                              f"schema version {row[0]} is not {SCHEMA_VERSION}, the "
                              f"version this streamkit writes; open it with the streamkit "
                              f"that created it")

    async def _run(self, what: str, thread_id: str | None,
                   fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[_T]]) -> _T:
        """``fn(connection)`` inside one transaction, all of it within ``timeout``; the one
        place psycopg errors are mapped.

        The work runs in its own task so that a caller's cancellation reaches it as a cut
        connection (``Call.abandon``), never as a ``CancelledError`` inside psycopg."""
        if self._closed:
            raise self._error(what, thread_id, "the store is closed")
        call = Call(self.timeout)
        work = asyncio.ensure_future(self._call(call, fn))
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
            raise self._failure(what, thread_id, exc, call) from exc
        except OSError as exc:  # TimeoutError included
            raise self._failure(what, thread_id, exc, call) from exc

    async def _call(self, call: Call,
                    fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[_T]]) -> _T:
        return await transact(await self._get_pool(call), call, fn, self._sizes[1],
                               self._db.Error)

    def _failure(self, what: str, thread_id: str | None, exc: BaseException,
                 call: Call) -> MemoryStoreError:
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
            detail += ("; it was lost while committing, so PostgreSQL may or may not have "
                       "stored this call" if call.committing else
                       "; nothing of this call was committed")
        return self._error(what, thread_id, detail, sqlstate)

    # ------------------------------------------------------------------ the protocol

    async def create_thread(self, thread: Thread) -> Thread:
        """Insert ``thread``.

        Raises:
            MemoryStoreError: a thread with that id exists, or PostgreSQL failed.

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
        meta = None if thread.metadata is None else self._db.Json(thread.metadata)

        async def create(conn: psycopg.AsyncConnection[Any]) -> Thread:
            cur = await conn.execute(self._q["insert_thread"], (
                thread.id, thread.resource_id, thread.title, meta, thread.created_at,
                thread.updated_at))
            if cur.rowcount == 0:
                cur = await conn.execute(self._q["owner"], (thread.id,))
                row = await cur.fetchone()
                raise self._error(what, thread.id, f"thread {thread.id!r} already exists (resource "
                                  f"{row[0] if row else None!r})")
            return thread

        return await self._run(what, thread.id, create)

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None`` when there is none with that id."""
        self._refuse("read the thread", thread_id, ("thread id", thread_id))
        async def get(conn: psycopg.AsyncConnection[Any]) -> Thread | None:
            cur = await conn.execute(self._q["get_thread"], (thread_id,))
            row = await cur.fetchone()
            return None if row is None else _thread_of(row)

        return await self._run("read the thread", thread_id, get)

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """The threads of ``resource_id``, newest ``created_at`` first."""
        what = f"list the threads of resource {resource_id!r}"
        self._refuse(what, None, ("resource id", resource_id))
        async def list_(conn: psycopg.AsyncConnection[Any]) -> list[Thread]:
            cur = await conn.execute(self._q["list_threads"], (resource_id,))
            return [_thread_of(row) for row in await cur.fetchall()]

        return await self._run(what, None, list_)

    async def save_messages(self, thread_id: str, resource_id: str | None,
                            messages: Sequence[Message]) -> Thread:
        """Create the thread when missing and upsert ``messages`` in one transaction.

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
        rows: dict[str, tuple[str, datetime, str]] = {}
        for m in messages:
            self._refuse(what, thread_id, ("message id", m.id))
            first = rows.get(m.id)
            created = first[1] if first else from_micros(to_micros(m.created_at))
            try:
                body = message_encoder.encode(m).decode()
            except (TypeError, ValueError, RecursionError, OverflowError) as exc:
                raise self._error(what, thread_id, f"message {m.id!r} cannot be stored as JSON "
                                                   f"({type(exc).__name__}: {exc}); expected "
                                                   f"JSON-able parts of valid Unicode text; "
                                                   f"nothing was written") from exc
            rows[m.id] = (m.role, created, body)
        ids = list(rows)
        now = from_micros(now_micros())

        async def save(conn: psycopg.AsyncConnection[Any]) -> Thread:
            if resource_id is not None:
                await conn.execute(self._q["insert_thread"],
                                   (thread_id, resource_id, None, None, now, now))
            cur = await conn.execute(self._q["lock_thread"], (thread_id,))
            found = await cur.fetchone()
            if found is None:
                raise self._error(what, thread_id, f"thread {thread_id!r} does not exist and "
                                                   f"no resource_id was given to create it")
            if resource_id is not None and found[1] != resource_id:
                raise self._error(what, thread_id,
                                  f"thread {thread_id!r} belongs to resource {found[1]!r}, not "
                                  f"{resource_id!r}; a thread never changes owner")
            cur = await conn.execute(self._q["touch_thread"], (now, thread_id))
            touched = await cur.fetchone()
            if not ids:
                return _thread_of(touched or found)
            cur = await conn.execute(self._q["clash"], (ids, thread_id))
            clash = await cur.fetchone()
            if clash is None:
                cur = await conn.execute(self._q["upsert"], (
                    thread_id, found[1], ids, [r[0] for r in rows.values()],
                    [r[1] for r in rows.values()], [r[2] for r in rows.values()]))
                if len(await cur.fetchall()) == len(ids):
                    return _thread_of(touched or found)
                # Another thread stored one of these ids after our check: find which.
                cur = await conn.execute(self._q["clash"], (ids, thread_id))
                clash = await cur.fetchone()
            raise self._error(what, thread_id,
                              f"message {clash[0] if clash else '?'!r} is already stored in "
                              f"thread {clash[1] if clash else '?'!r}; it cannot also be saved "
                              f"to thread {thread_id!r} (give the message a new id)")

        return await self._run(what, thread_id, save)

    async def get_messages(self, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's messages by ``created_at`` then insertion order, oldest first; with
        ``limit``, the last ``limit`` of them. An unknown thread has none."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 0):
            raise InvalidArgument(f"limit must be None or an int >= 0, got {limit!r}")
        self._refuse("read the messages", thread_id, ("thread id", thread_id))
        if limit == 0:
            return []

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[Message]:
            if limit is None:
                cur = await conn.execute(self._q["messages"], (thread_id,))
                rows = await cur.fetchall()
            else:
                cur = await conn.execute(self._q["last_messages"], (thread_id, limit))
                rows = await cur.fetchall()
                rows.reverse()
            messages = []
            for body, created_at in rows:
                message = decode_message(body)
                # An updated message keeps its first created_at (its place in the thread).
                if to_micros(message.created_at) != to_micros(created_at):
                    message.created_at = _utc(created_at)
                messages.append(message)
            return messages

        return await self._run("read the messages", thread_id, read)

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and its messages; ``False`` when there was no such thread."""
        self._refuse("delete the thread", thread_id, ("thread id", thread_id))
        async def delete(conn: psycopg.AsyncConnection[Any]) -> bool:
            await conn.execute(self._q["delete_messages"], (thread_id,))
            cur = await conn.execute(self._q["delete_thread"], (thread_id,))
            return cur.rowcount > 0

        return await self._run("delete the thread", thread_id, delete)

    async def close(self) -> None:
        """Close the pool (its connections). Closing twice is fine; any call afterwards raises
        ``MemoryStoreError``."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close(timeout=self.timeout)


_QUERIES = {
    "version": "SELECT max(version) FROM {schema}.streamkit_schema_version",
    "set_version": "INSERT INTO {schema}.streamkit_schema_version (version) VALUES (%s)",
    "insert_thread": f"INSERT INTO {{schema}}.streamkit_threads ({_THREAD_COLUMNS}) "
                     f"VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
    "owner": "SELECT resource_id FROM {schema}.streamkit_threads WHERE id = %s",
    "get_thread": f"SELECT {_THREAD_COLUMNS} FROM {{schema}}.streamkit_threads WHERE id = %s",
    "list_threads": f"SELECT {_THREAD_COLUMNS} FROM {{schema}}.streamkit_threads "
                    f"WHERE resource_id = %s ORDER BY created_at DESC, seq DESC",
    "lock_thread": f"SELECT {_THREAD_COLUMNS} FROM {{schema}}.streamkit_threads "
                   f"WHERE id = %s FOR UPDATE",
    "touch_thread": f"UPDATE {{schema}}.streamkit_threads "
                    f"SET updated_at = greatest(updated_at, %s) WHERE id = %s "
                    f"RETURNING {_THREAD_COLUMNS}",
    "clash": "SELECT id, thread_id FROM {schema}.streamkit_messages "
             "WHERE id = ANY(%s) AND thread_id <> %s LIMIT 1",
    "upsert": """
        INSERT INTO {schema}.streamkit_messages AS m
            (id, thread_id, resource_id, role, created_at, body)
        SELECT u.id, %s, %s, u.role, u.created_at, u.body
        FROM unnest(%s::text[], %s::text[], %s::timestamptz[], %s::json[])
            WITH ORDINALITY AS u(id, role, created_at, body, n)
        ORDER BY u.n
        ON CONFLICT (id) DO UPDATE SET
            resource_id = EXCLUDED.resource_id, role = EXCLUDED.role, body = EXCLUDED.body
            WHERE m.thread_id = EXCLUDED.thread_id
        RETURNING m.id""",
    "messages": "SELECT body::text, created_at FROM {schema}.streamkit_messages "
                "WHERE thread_id = %s ORDER BY created_at, seq",
    "last_messages": "SELECT body::text, created_at FROM {schema}.streamkit_messages "
                     "WHERE thread_id = %s ORDER BY created_at DESC, seq DESC LIMIT %s",
    "delete_messages": "DELETE FROM {schema}.streamkit_messages WHERE thread_id = %s",
    "delete_thread": "DELETE FROM {schema}.streamkit_threads WHERE id = %s",
}
