"""``SQLiteStore``: the embedded ``MessageStore`` (stdlib ``sqlite3``, one file or ``:memory:``).

What belongs here: the schema, the SQL, the threading model and the mapping of every
``sqlite3.Error`` to ``MemoryStoreError``. What does not: which messages are worth storing
(``streamkit.memory._memory``).

Threading model — one connection, one thread, one writer:

* Every call runs on a **dedicated single-thread executor** that owns the only connection. Each
  store method is one job, and a job holds a whole transaction, so the executor's FIFO queue *is*
  the writer lock: transactions never interleave, never span an ``await``, and reads see
  committed state. We chose this over ``asyncio.to_thread`` + an ``asyncio.Lock`` because the
  default pool would move the connection between threads (``check_same_thread=False`` and a
  second lock) and an ``asyncio.Lock`` is bound to one event loop, while this store may be used
  from several loops (tests, notebooks, a new loop after a restart).
* Files use WAL (readers in other processes never block the writer, and vice versa) with
  ``synchronous=NORMAL`` by default: a commit survives a crash of the process; ``FULL`` also
  survives power loss at the cost of an fsync per commit.
* Writes use ``BEGIN IMMEDIATE`` so that waiting for another process's write lock happens at
  ``BEGIN`` under the busy timeout (``busy_timeout`` seconds), never as a deadlock mid-
  transaction. Past the timeout the write fails with ``MemoryStoreError`` and nothing of the
  turn is committed.
* Cancelling the task awaiting a call does not stop the job: a ``save_messages`` already queued
  still commits (a turn is saved whole or not at all, never half).

Schema (version 1, in ``PRAGMA user_version``): ``streamkit_threads(id, resource_id, title,
metadata, created_us, updated_us)`` and ``streamkit_messages(seq, id unique, thread_id,
resource_id, role, created_us, body)``; times are epoch microseconds, ``body`` is Mastra's JSON
of the message, ``seq`` (``AUTOINCREMENT``, never reused) is the insertion order that breaks
``created_us`` ties. An upsert replaces ``body`` but keeps ``created_us`` and ``seq`` (as Mastra's
stores keep ``createdAt``): an updated message keeps its place in the thread, and the column is
what ``get_messages`` reports as its ``created_at``.

Example:
    >>> store = SQLiteStore("memory.db", busy_timeout=2.0)
    >>> memory = Memory(store=store, last_messages=10)
    >>> await memory.close()
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import msgspec

from streamkit.errors import InvalidType, MemoryStoreError
from streamkit.messages import Message, decode_message, message_encoder
from streamkit.validate import instance_of, one_of, optional_int_at_least, seconds

from ._store import Thread, from_micros, now_micros, to_micros

__all__ = ["SQLiteStore", "SCHEMA_VERSION"]

#: The schema version this module writes (``PRAGMA user_version``).
SCHEMA_VERSION = 1

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS streamkit_threads (
        id          TEXT PRIMARY KEY,
        resource_id TEXT NOT NULL,
        title       TEXT,
        metadata    TEXT,
        created_us  INTEGER NOT NULL,
        updated_us  INTEGER NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS streamkit_threads_by_resource
        ON streamkit_threads (resource_id, created_us)""",
    """CREATE TABLE IF NOT EXISTS streamkit_messages (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        id          TEXT NOT NULL UNIQUE,
        thread_id   TEXT NOT NULL REFERENCES streamkit_threads (id) ON DELETE CASCADE,
        resource_id TEXT NOT NULL,
        role        TEXT NOT NULL,
        created_us  INTEGER NOT NULL,
        body        TEXT NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS streamkit_messages_by_thread
        ON streamkit_messages (thread_id, created_us, seq)""",
)

_UPSERT = """
    INSERT INTO streamkit_messages (id, thread_id, resource_id, role, created_us, body)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET
        resource_id = excluded.resource_id, role = excluded.role, body = excluded.body"""

_THREAD_COLUMNS = "id, resource_id, title, metadata, created_us, updated_us"
_SYNCHRONOUS = frozenset(("OFF", "NORMAL", "FULL", "EXTRA"))
_ID_BATCH = 500  # ids per ``IN (...)``: far below SQLite's 32766 bound parameters

_T = TypeVar("_T")
_json_encode = msgspec.json.Encoder().encode
_json_decode = msgspec.json.Decoder().decode


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:  # the original error says more than a failed rollback
                pass
        raise


def _thread_of(row: Sequence[Any]) -> Thread:
    return Thread(id=row[0], resource_id=row[1], title=row[2],
                  metadata=None if row[3] is None else _json_decode(row[3]),
                  created_at=from_micros(row[4]), updated_at=from_micros(row[5]))


def _is_busy(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)


class SQLiteStore:
    """The embedded ``MessageStore``: a SQLite file (WAL mode) or ``":memory:"``.

    Args:
        path: the database file (created with its schema on first use), or ``":memory:"``
            (lives as long as the store; nothing survives ``close()``).
        busy_timeout: seconds a write waits for another connection's lock before it fails with
            ``MemoryStoreError``.
        synchronous: SQLite's ``synchronous`` pragma: ``"NORMAL"`` (default; durable across a
            process crash in WAL mode), ``"FULL"``/``"EXTRA"`` (also across power loss), ``"OFF"``.

    Raises:
        StreamkitError: a bad argument (here, or ``limit`` of ``get_messages``).
        MemoryStoreError: from any method, when SQLite fails (locked past ``busy_timeout``,
            ``file is not a database``, disk I/O error...) — the message names the thread and
            the operation, the attributes ``thread_id``, ``operation``, ``path`` and
            ``sqlite_error`` (``"SQLITE_BUSY"``...) say it as data; the original ``sqlite3``
            error is the ``__cause__``.

    Example:
        >>> store = SQLiteStore(tmp_path / "memory.db")
        >>> await store.get_thread("t1") is None
        True
        >>> await store.close()
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, busy_timeout: float = 5.0,
                 synchronous: str = "NORMAL") -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidType(f"SQLiteStore path must be a str or a path, got "
                              f"{type(path).__name__}")
        seconds(busy_timeout, "busy_timeout", allow_zero=True)
        instance_of(synchronous, "synchronous", str, f"one of {sorted(_SYNCHRONOUS)}")
        one_of(synchronous.upper(), "synchronous", sorted(_SYNCHRONOUS))
        self.path = os.fspath(path)
        self.busy_timeout = float(busy_timeout)
        self.synchronous = synchronous.upper()
        self.is_file = self.path != ":memory:"
        self.journal_mode: str | None = None  # known after the first call
        self._conn: sqlite3.Connection | None = None  # touched on the worker thread only
        self._executor: ThreadPoolExecutor | None = None
        self._guard = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # ------------------------------------------------------------------ the worker thread

    async def _call(self, what: str, thread_id: str | None,
                    fn: Callable[..., _T], *args: object) -> _T:
        with self._guard:
            if self._closed:
                raise MemoryStoreError(f"memory store {self.path}: could not {what} "
                                       f"(thread {thread_id!r}): the store is closed",
                                       thread_id=thread_id, operation=what, path=self.path)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="streamkit-sqlite")
            # Submitted under the guard, so close() cannot shut the executor down in between.
            future = asyncio.get_running_loop().run_in_executor(
                self._executor, self._run, what, thread_id, fn, args)
        return await future

    def _run(self, what: str, thread_id: str | None, fn: Callable[..., _T],
             args: tuple[object, ...]) -> _T:
        """Run ``fn(connection, *args)`` on the worker; the one place sqlite3 errors are mapped."""
        try:
            conn = self._conn
            if conn is None:
                conn = self._conn = self._open()
            return fn(conn, *args)
        except sqlite3.Error as exc:
            if not _is_busy(exc):
                # Corruption, I/O and the like: start from a fresh connection next time.
                self._drop_connection()
            raise self._error(what, thread_id, exc) from exc

    def _error(self, what: str, thread_id: str | None, exc: sqlite3.Error) -> MemoryStoreError:
        name = getattr(exc, "sqlite_errorname", type(exc).__name__)
        if _is_busy(exc):
            detail = (f"{exc} (another connection held the lock longer than "
                      f"busy_timeout={self.busy_timeout:g}s)")
        elif "not a database" in str(exc) or "malformed" in str(exc):
            detail = f"{exc} (the file is corrupted or is not a SQLite database)"
        else:
            detail = str(exc)
        return MemoryStoreError(
            f"memory store {self.path}: could not {what} (thread {thread_id!r}): {detail}",
            thread_id=thread_id, operation=what, path=self.path, sqlite_error=name)

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: we write BEGIN/COMMIT ourselves; timeout is the busy handler.
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        try:
            if self.is_file:
                self.journal_mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            else:
                self.journal_mode = "memory"
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                # Only a new database takes the write lock here; opening an existing one
                # never waits for a writer.
                with _write(conn):
                    if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                        for statement in _SCHEMA:
                            conn.execute(statement)
                        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise MemoryStoreError(
                    f"memory store {self.path}: schema version {version} is not "
                    f"{SCHEMA_VERSION}, the version this streamkit writes; open it with the "
                    f"streamkit that created it", path=self.path, operation="open the store",
                    thread_id=None)
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    # ------------------------------------------------------------------ the protocol

    async def create_thread(self, thread: Thread) -> Thread:
        """Insert ``thread``.

        Raises:
            MemoryStoreError: a thread with that id exists, or SQLite failed.

        Example:
            >>> await store.create_thread(Thread("t1", "u1", None, now, now))
        """
        if not isinstance(thread, Thread):
            raise InvalidType(f"create_thread() takes a Thread, got {type(thread).__name__}")
        meta = None if thread.metadata is None else _json_encode(thread.metadata).decode()
        row = (thread.id, thread.resource_id, thread.title, meta, to_micros(thread.created_at),
               to_micros(thread.updated_at))

        def create(conn: sqlite3.Connection) -> Thread:
            with _write(conn):
                found = conn.execute("SELECT resource_id FROM streamkit_threads WHERE id = ?",
                                     (thread.id,)).fetchone()
                if found is not None:
                    raise MemoryStoreError(
                        f"thread {thread.id!r} already exists (resource {found[0]!r})",
                        thread_id=thread.id, operation="create thread", path=self.path)
                conn.execute(f"INSERT INTO streamkit_threads ({_THREAD_COLUMNS}) "
                             f"VALUES (?, ?, ?, ?, ?, ?)", row)
            return thread

        return await self._call("create the thread", thread.id, create)

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None`` when there is none with that id.

        Example:
            >>> (await store.get_thread("t1")).resource_id
            'u1'
        """
        def get(conn: sqlite3.Connection) -> Thread | None:
            row = conn.execute(f"SELECT {_THREAD_COLUMNS} FROM streamkit_threads WHERE id = ?",
                               (thread_id,)).fetchone()
            return None if row is None else _thread_of(row)

        return await self._call("read the thread", thread_id, get)

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """The threads of ``resource_id``, newest ``created_at`` first.

        Example:
            >>> [t.id for t in await store.list_threads("u1")]
            ['t2', 't1']
        """
        def list_(conn: sqlite3.Connection) -> list[Thread]:
            rows = conn.execute(f"SELECT {_THREAD_COLUMNS} FROM streamkit_threads "
                                f"WHERE resource_id = ? ORDER BY created_us DESC, rowid DESC",
                                (resource_id,)).fetchall()
            return [_thread_of(r) for r in rows]

        return await self._call(f"list the threads of resource {resource_id!r}", None, list_)

    async def save_messages(self, thread_id: str, resource_id: str | None,
                            messages: Sequence[Message]) -> Thread:
        """Create the thread when missing and upsert ``messages`` in one transaction.

        Raises:
            MemoryStoreError: the thread belongs to another resource, is missing and
                ``resource_id`` is ``None``, a message id is stored in another thread, a message
                cannot be encoded (an arbitrary object in a part, a lone surrogate), or SQLite
                failed (then nothing was written).

        Example:
            >>> thread = await store.save_messages("t1", "u1", [Message.user("hi")])
        """
        # Encoded here, on the event loop: the worker gets bytes that no one can change.
        try:
            rows = [(m.id, m.role, to_micros(m.created_at), message_encoder.encode(m).decode())
                    for m in messages]
        except (TypeError, ValueError, RecursionError, OverflowError) as exc:
            what = "save the turn"
            raise MemoryStoreError(
                f"memory store {self.path}: could not {what} (thread {thread_id!r}): a message "
                f"cannot be encoded as JSON ({type(exc).__name__}: {exc}); nothing was written",
                thread_id=thread_id, operation=what, path=self.path) from exc
        now = now_micros()

        def save(conn: sqlite3.Connection) -> Thread:
            with _write(conn):
                found = conn.execute(f"SELECT {_THREAD_COLUMNS} FROM streamkit_threads "
                                     f"WHERE id = ?", (thread_id,)).fetchone()
                if found is None:
                    if resource_id is None:
                        raise MemoryStoreError(
                            f"thread {thread_id!r} does not exist and no resource_id was given "
                            f"to create it", thread_id=thread_id, operation="save messages",
                            path=self.path)
                    found = (thread_id, resource_id, None, None, now, now)
                    conn.execute(f"INSERT INTO streamkit_threads ({_THREAD_COLUMNS}) "
                                 f"VALUES (?, ?, ?, ?, ?, ?)", found)
                elif resource_id is not None and found[1] != resource_id:
                    raise MemoryStoreError(
                        f"thread {thread_id!r} belongs to resource {found[1]!r}, not "
                        f"{resource_id!r}; a thread never changes owner",
                        thread_id=thread_id, operation="save messages", path=self.path)
                else:
                    found = (*found[:5], max(now, found[5]))
                    conn.execute("UPDATE streamkit_threads SET updated_us = ? WHERE id = ?",
                                 (found[5], thread_id))
                ids = [r[0] for r in rows]
                for start in range(0, len(ids), _ID_BATCH):
                    batch = ids[start:start + _ID_BATCH]
                    clash = conn.execute(
                        f"SELECT id, thread_id FROM streamkit_messages WHERE thread_id != ? "
                        f"AND id IN ({', '.join('?' * len(batch))}) LIMIT 1",
                        (thread_id, *batch)).fetchone()
                    if clash is not None:
                        raise MemoryStoreError(
                            f"message {clash[0]!r} is already stored in thread {clash[1]!r}; "
                            f"it cannot also be saved to thread {thread_id!r} (give the message "
                            f"a new id)", thread_id=thread_id, operation="save messages",
                            path=self.path)
                owner = found[1]
                conn.executemany(_UPSERT, [(mid, thread_id, owner, role, us, body)
                                           for mid, role, us, body in rows])
            return _thread_of(found)

        return await self._call(f"save {len(rows)} message(s)", thread_id, save)

    async def get_messages(self, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's messages by ``created_at`` then insertion order, oldest first; with
        ``limit``, the last ``limit`` of them. An unknown thread has none.

        Example:
            >>> [m.role for m in await store.get_messages("t1", limit=2)]
            ['user', 'assistant']
        """
        optional_int_at_least(limit, "limit", 0)
        if limit == 0:
            return []

        def read(conn: sqlite3.Connection) -> list[Message]:
            if limit is None:
                rows = conn.execute("SELECT body, created_us FROM streamkit_messages "
                                    "WHERE thread_id = ? ORDER BY created_us, seq",
                                    (thread_id,)).fetchall()
            else:
                rows = conn.execute("SELECT body, created_us FROM streamkit_messages "
                                    "WHERE thread_id = ? ORDER BY created_us DESC, seq DESC "
                                    "LIMIT ?", (thread_id, limit)).fetchall()
                rows.reverse()
            messages = [decode_message(body) for body, _ in rows]
            for message, (_, created_us) in zip(messages, rows):
                # An updated message keeps its first created_at (its place in the thread).
                if to_micros(message.created_at) != created_us:
                    message.created_at = from_micros(created_us)
            return messages

        return await self._call("read the messages", thread_id, read)

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and its messages; ``False`` when there was no such thread.

        Example:
            >>> await store.delete_thread("t1")
            True
        """
        def delete(conn: sqlite3.Connection) -> bool:
            with _write(conn):
                conn.execute("DELETE FROM streamkit_messages WHERE thread_id = ?", (thread_id,))
                return conn.execute("DELETE FROM streamkit_threads WHERE id = ?",
                                    (thread_id,)).rowcount > 0

        return await self._call("delete the thread", thread_id, delete)

    async def close(self) -> None:
        """Close the connection and stop the worker thread (calls already queued finish
        first). Closing twice is fine; any call afterwards raises ``MemoryStoreError``.

        Example:
            >>> await store.close()
        """
        with self._guard:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(executor, self._drop_connection)
        finally:
            executor.shutdown(wait=False)
