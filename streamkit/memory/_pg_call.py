"""One ``PostgresStore`` call within its time budget: the budget, how a connection is cut, and
the transaction around the work.

What belongs here: bounding the time of a call on a psycopg pool, and keeping a connection that
was cut or left mid-protocol out of the pool. What does not: the SQL, the schema and the mapping
of errors to ``MemoryStoreError`` (``_postgres``).

``timeout`` (the store's, default 10 s) is the budget of a whole call: opening the pool, waiting
for a pooled connection and every statement share it (``Call``).

* **Client side**, because a server that stops answering (hung, or a silent network partition)
  never says so, and PostgreSQL's own timeouts cannot speak for it: when the budget runs out,
  the socket of the connection in use is shut down under psycopg (``shutdown``). Whatever
  psycopg was waiting for ends at once with a lost connection; the connection is closed, never
  returned to the pool, and the server rolls the transaction back. A caller that cancels a call
  (a client gone, a hook timeout) cuts its connection the same way, at once
  (``Call.abandon``): psycopg's own answer to a cancellation — ask the server to cancel, then
  wait for it — is what a hung server never answers.
* **Server side**, so that a transaction the client gave up on does not keep its locks: every
  transaction starts with (``SET LOCAL``, or ``set_config(..., true)`` in a pipeline)
  ``lock_timeout``, ``statement_timeout`` and
  ``idle_in_transaction_session_timeout``: 80% of what is left of the budget for the lock wait,
  90% for the others, so a row lock held by a stalled session ends the save with PostgreSQL's
  clean ``55P03`` (the connection stays usable; the lock wait, not the statement, is named) before
  the client would have to cut it. They go with ``BEGIN``: no round trip of their own.
* Waiting for a pooled connection is psycopg_pool's ``getconn(timeout=)`` with what is left;
  new connections get libpq's ``connect_timeout`` (set by the store).

Decisions:

* **One round trip per call** (``transact_pipelined``, what every store method uses): ``BEGIN``,
  the timeouts (one ``set_config`` statement), the statements and ``COMMIT`` go out together in
  psycopg's pipeline mode. A statement PostgreSQL refuses makes it skip the rest, ``COMMIT``
  included. The price: a connection lost after the pipeline left may have delivered all of it,
  so the outcome of a write is then unknown (``call.committing``). ``transact`` (``BEGIN``
  alone, then the work) remains for work that must read before it writes (the schema set-up).
* **Dead pooled connections** (the server restarted, ``pg_terminate_backend``, a proxy's idle
  timeout): a server that ends a session sends its goodbye or closes the socket, which leaves
  the idle connection readable. Before a pipelined call a zero-time ``select`` looks; a
  readable connection takes the checked path: ``BEGIN`` alone, and when that finds it closed,
  nothing of the call has reached the server, so the call moves to another connection — reads
  and writes alike — up to ``max_size`` more times, within its budget. No round trip is added
  on a healthy connection, unlike psycopg_pool's ``check=``, whose probe would also run where
  the budget cannot cut it (inside ``getconn``).
* A connection goes back to the pool only idle; closed, mid-transaction or mid-statement it is
  closed first, which makes the pool drop it and open a new one.

Example:
    >>> call = Call(timeout=5.0)
    >>> [rows] = await transact_pipelined(pool, call, [Statement("SELECT 1", ())], 4,
    ...                                   psycopg.Error)
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..errors import StreamkitError

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

__all__ = ["Call", "Statement", "transact", "transact_pipelined", "shutdown", "retrieve"]

#: The shares of a call's remaining budget given to PostgreSQL's own timeouts: the server ends
#: a lock wait, then a statement (cleanly, the connection stays usable) before the client cuts.
LOCK_SHARE, STATEMENT_SHARE = 0.8, 0.9
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE (psycopg is imported only when a store is made)
_SET_TIMEOUTS = ("SELECT set_config('lock_timeout', %s, true), "
                 "set_config('statement_timeout', %s, true), "
                 "set_config('idle_in_transaction_session_timeout', %s, true)")
_T = TypeVar("_T")


def shutdown(conn: psycopg.AsyncConnection[object]) -> None:
    """Shut the connection's socket down under psycopg: whatever it waits for (an answer, room
    to send) ends now with a lost connection, and the connection is broken for good.

    ``shutdown`` acts on the socket, not the descriptor, so doing it on a duplicate leaves
    psycopg's descriptor (and the event loop's watch on it) valid until psycopg closes it.

    Example:
        >>> shutdown(conn)  # conn.execute(...) waiting elsewhere raises OperationalError
    """
    try:
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # already closed: then it is cut anyway
        pass


def retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a finished task's outcome as seen: its caller was cancelled and has gone."""
    if not task.cancelled():
        task.exception()


class Call:
    """One store call's time budget: opening the pool, waiting for a connection and every
    statement end by ``at`` (event-loop time).

    ``guard(conn)`` arms a timer that cuts ``conn`` when the budget runs out; ``abandon()``
    cuts it now (the caller was cancelled; the call must not go on, not even on another
    connection). ``expired`` says the budget ran out (the lost connection is the timeout's
    doing), ``abandoned`` that the caller is gone, ``committing`` that ``COMMIT`` was sent.

    Example:
        >>> call = Call(timeout=5.0)
        >>> with call.guard(conn):
        ...     await conn.execute("SELECT 1")  # cut, and raising, 5 s after Call() at most
    """

    __slots__ = ("at", "expired", "abandoned", "committing", "conn", "_loop")

    def __init__(self, timeout: float) -> None:
        self._loop = asyncio.get_running_loop()
        self.at = self._loop.time() + timeout
        self.expired = self.abandoned = self.committing = False
        self.conn: psycopg.AsyncConnection[TupleRow] | None = None

    def left(self) -> float:
        """Seconds of the budget left (0 when spent)."""
        return max(0.0, self.at - self._loop.time())

    @contextmanager
    def guard(self, conn: psycopg.AsyncConnection[object]) -> Iterator[None]:
        """Cut ``conn`` if the budget runs out while the block runs."""
        timer = self._loop.call_at(self.at, self._expire)
        try:
            yield
        finally:
            timer.cancel()

    def _expire(self) -> None:
        self.expired = True
        if self.conn is not None:
            shutdown(self.conn)

    def abandon(self) -> bool:
        """Cut the connection in use now; ``False`` when none is held (the call is waiting for
        the pool, which a plain cancel ends cleanly). A connection is held from ``getconn`` to
        the end of ``putconn``, so a cancel never lands inside the pool's bookkeeping (a cut
        connection that went back idle is found closed by the next ``BEGIN``)."""
        self.abandoned = True
        if self.conn is None:
            return False
        shutdown(self.conn)
        return True


async def transact(pool: AsyncConnectionPool, call: Call,
                   fn: Callable[[psycopg.AsyncConnection[TupleRow]], Awaitable[_T]], retries: int,
                   error: type[Exception]) -> _T:
    """``fn(connection)`` between ``BEGIN`` (with the server-side timeouts) and ``COMMIT`` on a
    connection of ``pool``, all within ``call``'s budget.

    A connection found closed at ``BEGIN`` is swapped for another, ``retries`` times at most.
    ``error`` is psycopg's base error (psycopg is imported only when a store is made).

    Raises:
        TimeoutError: the budget was spent before a connection was taken.
        psycopg.Error: from the pool (``PoolTimeout``) or the connection; ``call.expired``
            says whether the budget ran out.
    """
    for attempt in range(retries + 1):
        if call.left() <= 0:
            call.expired = True
            raise TimeoutError("the call's time ran out")
        conn = call.conn = await pool.getconn(timeout=call.left())
        try:
            with call.guard(conn):
                left_ms = call.left() * 1000
                lock, statement = (max(1, int(left_ms * share))
                                   for share in (LOCK_SHARE, STATEMENT_SHARE))
                try:
                    await conn.execute(
                        f"BEGIN; SET LOCAL lock_timeout = {lock}; "
                        f"SET LOCAL statement_timeout = {statement}; "
                        f"SET LOCAL idle_in_transaction_session_timeout = {statement}")
                except error:
                    if conn.closed and attempt < retries and not (call.expired
                                                                  or call.abandoned):
                        continue  # closed while idle in the pool: nothing reached the server
                    raise
                try:
                    result = await fn(conn)
                    call.committing = True
                    await conn.execute("COMMIT")
                    return result
                except Exception:
                    if not conn.closed and not call.committing:
                        try:
                            await conn.execute("ROLLBACK")
                        except error:  # the first error says more
                            pass
                    raise
        finally:
            if not conn.closed and conn.info.transaction_status != _IDLE:
                await conn.close()  # never back into the pool mid-transaction
            await pool.putconn(conn)  # a closed connection is dropped, a new one opened
            call.conn = None
    raise StreamkitError("streamkit bug: transact() left its retry loop without returning "
                         "or raising")


class Statement(NamedTuple):
    """One SQL statement of a pipelined call: the query (a ``psycopg.sql`` object or a str)
    and its parameters."""

    query: Any
    params: Sequence[Any] | None = None


def _quiet(conn: psycopg.AsyncConnection[object]) -> bool:
    """Whether nothing arrived on an idle pooled connection: a server that ended the session
    (``pg_terminate_backend``, a restart, a proxy's idle timeout) has sent its goodbye or closed
    the socket, which makes it readable. A zero-time ``select``: no round trip."""
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except Exception:  # closed already (psycopg raises, or the descriptor is gone)
        return False
    return not readable


def _budget_ms(call: Call) -> tuple[int, int]:
    left_ms = call.left() * 1000
    return max(1, int(left_ms * LOCK_SHARE)), max(1, int(left_ms * STATEMENT_SHARE))


async def transact_pipelined(pool: AsyncConnectionPool, call: Call,
                             statements: Sequence[Statement], retries: int,
                             error: type[Exception]) -> list[list[Any]]:
    """``statements`` in one transaction, in **one round trip**: ``BEGIN``, the server-side
    timeouts, every statement and ``COMMIT`` go out together in psycopg's pipeline mode and
    the answers come back together. Returns each statement's rows (``[]`` for a statement that
    returns none).

    A statement that fails makes PostgreSQL skip the rest, ``COMMIT`` included, so nothing is
    committed (the transaction is rolled back). A connection lost after the pipeline went out
    leaves the outcome unknown (``call.committing`` is set): the server may have received all
    of it. A pooled connection with something to read while idle (the server ended the
    session) takes the health-checked path: ``BEGIN`` alone first, and another connection when
    it is found closed (as ``transact``), then the rest in one more round trip.

    Raises:
        TimeoutError: the budget was spent before a connection was taken.
        psycopg.Error: from the pool or the connection.
    """
    for attempt in range(retries + 1):
        if call.left() <= 0:
            call.expired = True
            raise TimeoutError("the call's time ran out")
        conn = call.conn = await pool.getconn(timeout=call.left())
        try:
            with call.guard(conn):
                lock, statement = _budget_ms(call)
                checked = not _quiet(conn)
                if checked:
                    try:
                        await conn.execute(
                            f"BEGIN; SET LOCAL lock_timeout = {lock}; "
                            f"SET LOCAL statement_timeout = {statement}; "
                            f"SET LOCAL idle_in_transaction_session_timeout = {statement}")
                    except error:
                        if conn.closed and attempt < retries and not (call.expired
                                                                      or call.abandoned):
                            continue  # closed while idle in the pool: nothing reached it
                        raise
                try:
                    cursors = []
                    async with conn.pipeline():
                        if not checked:
                            await conn.execute("BEGIN")
                            await conn.execute(_SET_TIMEOUTS, (str(lock), str(statement),
                                                               str(statement)))
                        for query, params in statements:
                            cursors.append(await conn.execute(query, params))
                        call.committing = True
                        await conn.execute("COMMIT")
                    return [await cur.fetchall() if cur.description is not None else []
                            for cur in cursors]
                except Exception:
                    if not conn.closed and conn.info.transaction_status != _IDLE:
                        try:
                            await conn.execute("ROLLBACK")
                        except error:  # the first error says more
                            pass
                    raise
        finally:
            if not conn.closed and conn.info.transaction_status != _IDLE:
                await conn.close()  # never back into the pool mid-transaction
            await pool.putconn(conn)
            call.conn = None
    raise StreamkitError("streamkit bug: transact_pipelined() left its retry loop without "
                         "returning or raising")
