"""The storage contract behind ``Memory``: the ``Thread`` record and the ``MessageStore`` protocol.

What belongs here: the data a store keeps (threads, messages) and the exact promises every store
makes, so that ``Memory`` (which decides *what* to store) never depends on *how* it is stored.
What does not: SQL (``streamkit.memory._sqlite``, ``_postgres``), the persistence rules
(``_memory``).

The contract (every method is ``async``; a failure of the backend is a ``MemoryStoreError`` that
names the thread and what failed — never a raw driver exception):

* ``create_thread(thread)`` inserts a new thread; an id that exists already is an error.
* ``get_thread(thread_id)`` → ``Thread`` or ``None``.
* ``list_threads(resource_id)`` → the resource's threads, newest ``created_at`` first.
* ``save_messages(thread_id, resource_id, messages)`` runs in **one transaction**: create the
  thread when it is missing (with ``resource_id``; ``None`` there is an error), refuse a thread
  owned by another resource, refuse a message id stored in another thread, upsert every message
  by id (an id already in this thread is updated in place: new content, but it keeps its first
  ``created_at`` and insertion sequence, i.e. its place; a new id gets the next sequence
  number), bump the thread's ``updated_at``. Either all of it is
  committed or nothing is. Returns the thread.
* ``get_messages(thread_id, limit=None)`` → the thread's messages ordered by ``created_at``
  then insertion sequence, oldest first; with ``limit`` the *last* ``limit`` of them.
* ``delete_thread(thread_id)`` deletes the thread and its messages in one transaction; returns
  whether the thread existed.
* ``close()`` releases connections; the store may not be used afterwards.

One more method is used when a store has it (``PostgresStore`` does; a store of the bare
protocol is served by ``get_thread`` then ``get_messages``):

* ``read_thread(thread_id, limit)`` → ``(Thread | None, messages)``: the thread and its last
  ``limit`` messages as ``get_messages`` orders them, read together (one query, one round trip
  on a server). ``Memory.recall`` uses it to check the owner and read the history at once.

Writing a SQL-server store against this protocol: ``PostgresStore`` (``_postgres``, psycopg 3
async) is the worked example — Mastra's tables, the save as one CTE (thread upsert that locks
the row, then the messages from ``unnest`` arrays, with a foreign message id refused by a
``NOT NULL``), the recall as one ``LATERAL`` query, every call one pipelined round trip
(``_pg_call``), and every driver error mapped to ``MemoryStoreError`` in one place (``raise ...
from exc``), exactly as ``SQLiteStore._run`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from streamkit.messages import Message

__all__ = ["Thread", "MessageStore", "to_micros", "from_micros", "now_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(value: datetime) -> int:
    """``value`` as integer microseconds since the epoch (UTC); a naive value is local time.

    Integers order correctly where ISO strings of mixed precision (``.252Z``, ``.252123Z``) do
    not, so stores sort on this.

    Example:
        >>> to_micros(datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc))
        1000000
    """
    if value.tzinfo is None:
        value = value.astimezone(UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """The UTC datetime of ``value`` microseconds since the epoch (inverse of ``to_micros``).

    Example:
        >>> from_micros(1_000_000).isoformat()
        '1970-01-01T00:00:01+00:00'
    """
    seconds, micros = divmod(value, 1_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)


def now_micros() -> int:
    """Now, in epoch microseconds truncated to milliseconds (JavaScript's precision)."""
    now = to_micros(datetime.now(UTC))
    return now - now % 1000


@dataclass(frozen=True, slots=True)
class Thread:
    """A conversation thread: its messages belong to one resource (a user, an account...).

    Attributes:
        id: the thread id (the ``thread_id`` given to ``generate``).
        resource_id: the owner; a thread never changes owner.
        title: optional display title.
        created_at: when the thread was created (UTC).
        updated_at: when messages were last saved to it (UTC).
        metadata: any JSON-able dict, or ``None``.

    Example:
        >>> thread = await memory.create_thread("t1", resource_id="u1", title="Orders")
        >>> thread.resource_id, thread.title
        ('u1', 'Orders')
    """

    id: str
    resource_id: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] | None = None


@runtime_checkable
class MessageStore(Protocol):
    """Where ``Memory`` keeps threads and messages (see the module docstring for the contract).

    ``SQLiteStore`` is the embedded implementation; any object with these async methods works.

    Example:
        >>> store: MessageStore = SQLiteStore("memory.db")
        >>> memory = Memory(store=store, last_messages=20)
    """

    async def create_thread(self, thread: Thread) -> Thread:
        """Insert ``thread``; ``MemoryStoreError`` when its id exists."""
        ...

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None``."""
        ...

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """The resource's threads, newest first."""
        ...

    async def save_messages(self, thread_id: str, resource_id: str | None,
                            messages: Sequence[Message]) -> Thread:
        """Create the thread if missing and upsert ``messages``, all in one transaction."""
        ...

    async def get_messages(self, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's messages (the last ``limit``), oldest first."""
        ...

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and its messages; whether it existed."""
        ...

    async def close(self) -> None:
        """Release the store's connections."""
        ...
