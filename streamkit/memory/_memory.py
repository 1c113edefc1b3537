"""``Memory``: what an agent remembers between calls, and Mastra's rules for what gets stored.

What belongs here: the two calls the agent makes (``recall`` before ``process_input``,
``remember`` in its ``finish`` node), the filter that decides which messages are stored, thread
ownership checks, and the public thread API. What does not: SQL or connections (a
``MessageStore``, ``SQLiteStore`` by default).

The persistence rules (``docs/mastra-fidelity.md``, "What memory stores"):

* Only what remains of this call's ``input`` and ``response`` messages **after every processor**
  is stored — never ``memory`` (already stored), ``context`` or system messages. Response
  messages are built from the chunks the consumer received, so what a stream consumer saw is
  what is stored.
* ``partial-call`` tool invocations are dropped, and messages left with no parts are not stored;
  transient signals (``role="signal"`` with ``metadata["transient"] is True``) are not stored.
  ``data-*`` parts in the list are the non-transient ones (transient chunks never enter it).
* The whole turn is saved in one transaction; an id already stored is updated, not duplicated.
* A turn that ends in a tripwire or an error is not stored: the agent only calls ``remember``
  when the run reached ``finish``. Memory is a loop node, not a processor, so per-call
  processor lists (``output_processors=[]``) never remove it.
* The thread is created on first save with the call's ``resource_id``; a thread owned by another
  resource is refused before the model is called.

Unlike Mastra (issue #19149), ``last_messages=0`` turns recall off but keeps saving.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import msgspec

from streamkit.errors import InvalidArgument, InvalidType, MemoryStoreError, StreamkitError
from streamkit.messages import Message, StepStartPart, ToolInvocationPart
from streamkit.validate import optional_int_at_least

from ._sqlite import SQLiteStore
from ._store import MessageStore, Thread, from_micros, now_micros

_ONE_MS = timedelta(milliseconds=1)

__all__ = ["Memory", "storable_messages"]


def _check_id(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        expected = "a non-empty str or None" if optional else "a non-empty str"
        error = InvalidArgument if isinstance(value, str) else InvalidType
        raise error(f"{name} must be {expected}, got {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: SQLite (and JSON) cannot hold it
            raise InvalidArgument(f"{name} {value!r} is not valid Unicode text (a lone "
                                  f"surrogate at position {exc.start}); expected a str that "
                                  f"encodes as UTF-8") from None


def _is_transient_signal(message: Message) -> bool:
    metadata = message.content.metadata
    return message.role == "signal" and isinstance(metadata, dict) \
        and metadata.get("transient") is True


def _storable(message: Message, thread_id: str, resource_id: str) -> Message | None:
    """The copy of ``message`` to store (stamped with the thread), or ``None`` to skip it."""
    if message.role == "system" or _is_transient_signal(message):
        return None
    content = message.content
    parts = [p for p in content.parts
             if not (isinstance(p, ToolInvocationPart) and p.state == "partial-call")]
    if len(parts) != len(content.parts):
        # A step boundary with nothing after it no longer separates anything.
        while parts and isinstance(parts[-1], StepStartPart):
            parts.pop()
    if not any(not isinstance(p, StepStartPart) for p in parts):
        return None
    changes: dict[str, object] = {}
    if len(parts) != len(content.parts):
        changes["parts"] = parts
    mirror = content.tool_invocations
    if isinstance(mirror, list) and any(t.state == "partial-call" for t in mirror):
        changes["tool_invocations"] = [t for t in mirror if t.state != "partial-call"]
    # Shallow copies: the live list (and ``result.messages``) keep what the run produced.
    new_content = msgspec.structs.replace(content, **changes) if changes else content
    return msgspec.structs.replace(message, content=new_content, thread_id=thread_id,
                                   resource_id=resource_id)


def storable_messages(messages: Sequence[Message], thread_id: str,
                      resource_id: str) -> list[Message]:
    """The messages ``Memory.remember`` stores out of ``messages``, in ``created_at`` order.

    Applies the persistence rules of the module docstring to already selected messages (system
    and transient signal messages skipped, ``partial-call`` invocations dropped, messages left
    without parts skipped) and stamps copies with ``thread_id``/``resource_id``; the given
    messages are not changed.

    Example:
        >>> msgs = [Message.user("hi"), Message.assistant([ToolInvocationPart(ToolInvocation(
        ...     state="partial-call", tool_call_id="c1", tool_name="t"))])]
        >>> [m.role for m in storable_messages(msgs, "t1", "u1")]
        ['user']
    """
    ordered = sorted(messages, key=lambda m: m.created_at)  # stable: ties keep list order
    kept = (_storable(m, thread_id, resource_id) for m in ordered)
    return [m for m in kept if m is not None]


class Memory:
    """Conversation memory for an ``Agent``: threads of messages that belong to resources.

    Args:
        store: where threads and messages live; default ``SQLiteStore(":memory:")`` (gone when
            the process ends — pass ``SQLiteStore("memory.db")`` to keep them).
        last_messages: how many of the thread's latest messages enter each call's
            ``MessageList`` (source ``memory``); ``0`` recalls nothing (saving continues),
            ``None`` recalls the whole thread.

    Raises:
        StreamkitError: a store that does not implement ``MessageStore`` or a bad
            ``last_messages``.

    Example:
        >>> memory = Memory(store=SQLiteStore("memory.db"), last_messages=10)
        >>> agent = Agent(id="support", model=model, memory=memory)
        >>> await agent.generate("My order is late.", thread_id="t1", resource_id="u1")
        >>> [m.role for m in await memory.get_messages("t1")]
        ['user', 'assistant']
    """

    def __init__(self, store: MessageStore | None = None, *,
                 last_messages: int | None = 10) -> None:
        if store is None:
            store = SQLiteStore(":memory:")
        if not isinstance(store, MessageStore):
            raise InvalidType(f"Memory(store=...) needs a MessageStore (such as "
                              f"SQLiteStore(path)), got {type(store).__name__}")
        optional_int_at_least(last_messages, "last_messages", 0)
        self.store = store
        self.last_messages = last_messages

    def __repr__(self) -> str:
        return f"Memory(store={self.store!r}, last_messages={self.last_messages!r})"

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ the agent's two calls

    async def _owner(self, thread_id: str, resource_id: str | None) -> Thread | None:
        """The thread (``None`` if new), after checking that ``resource_id`` may use it; a new
        thread needs a ``resource_id``."""
        thread = await self.store.get_thread(thread_id)
        self._check_owner(thread_id, resource_id, thread)
        return thread

    @staticmethod
    def _check_owner(thread_id: str, resource_id: str | None, thread: Thread | None) -> None:
        if thread is None:
            if resource_id is None:
                raise MemoryStoreError(
                    f"thread {thread_id!r} does not exist; pass resource_id= to create it",
                    thread_id=thread_id, operation="check the thread")
        elif resource_id is not None and thread.resource_id != resource_id:
            raise MemoryStoreError(
                f"thread {thread_id!r} belongs to resource {thread.resource_id!r}, not "
                f"{resource_id!r}", thread_id=thread_id, operation="check the thread")

    async def recall(self, thread_id: str, resource_id: str | None) -> list[Message]:
        """The thread's last ``last_messages`` messages, oldest first (``[]`` for a new thread).

        The agent calls this before ``process_input`` and adds the result with source
        ``memory``. Nothing is written: a new thread is created by the first ``remember``.

        Raises:
            MemoryStoreError: the thread belongs to another resource, does not exist while
                ``resource_id`` is ``None``, or the store failed.

        Example:
            >>> [get_text(m) for m in await memory.recall("t1", "u1")]
            ['Where is my order?', 'It ships today.']
        """
        _check_id("thread_id", thread_id)
        _check_id("resource_id", resource_id, optional=True)
        read_thread = getattr(self.store, "read_thread", None)
        if read_thread is None:  # a store of the bare protocol: two calls
            thread = await self._owner(thread_id, resource_id)
            if thread is None or self.last_messages == 0:
                return []
            return await self.store.get_messages(thread_id, limit=self.last_messages)
        # One query for the owner check and the history (PostgresStore: one round trip); an
        # owner that is not the caller gets the same error, and nothing of the history.
        found, history = await read_thread(thread_id, self.last_messages)
        self._check_owner(thread_id, resource_id, found)
        return list(history)

    async def remember(self, thread_id: str, resource_id: str | None,
                       message_list: object) -> list[Message]:
        """Store this call's turn: ``message_list.get.input.db() + .get.response.db()`` as they
        are after every processor, filtered by the rules of the module docstring, in one
        transaction. Returns the stored copies (``[]`` when nothing was left to store).

        Raises:
            MemoryStoreError: the store failed (nothing of the turn was stored), or the
                thread belongs to another resource (``operation`` is ``"check the thread"``,
                also when another resource created it since ``recall``).

        Example:
            >>> stored = await memory.remember("t1", "u1", message_list)
            >>> [m.role for m in stored]
            ['user', 'assistant']
        """
        _check_id("thread_id", thread_id)
        _check_id("resource_id", resource_id, optional=True)
        views = getattr(message_list, "get", None)
        if views is None or not hasattr(views, "input") or not hasattr(views, "response"):
            raise InvalidType(f"remember() takes a MessageList, got "
                              f"{type(message_list).__name__}")
        owner = resource_id
        if owner is None:  # the thread must exist then; its owner stamps the messages
            thread = await self._owner(thread_id, None)
            owner = thread.resource_id if thread is not None else ""
        stored = storable_messages(views.input.db() + views.response.db(), thread_id, owner)
        if stored and self.last_messages == 0:
            stored = await self._after_stored(thread_id, stored)
        if stored:
            try:
                await self.store.save_messages(thread_id, resource_id, stored)
            except MemoryStoreError as exc:
                await self._taken_since(thread_id, resource_id, exc)
                raise
        return stored

    async def _after_stored(self, thread_id: str, turn: list[Message]) -> list[Message]:
        """``turn`` moved in time, as one block, to just after the thread's latest stored
        message when it would otherwise sort before it.

        A recalled history gives the run's ``MessageList`` the thread's latest time, and the
        turn's messages are stamped after it; with ``last_messages=0`` nothing is recalled, so
        a turn that starts within the millisecond its predecessor's last message was stamped
        (a fast model) would sort into it: ``user two`` before ``assistant re: one``. One read
        of the latest message, only for memories that recall nothing."""
        latest = await self.store.get_messages(thread_id, limit=1)
        if not latest or turn[0].created_at > latest[-1].created_at:
            return turn
        shift = latest[-1].created_at - turn[0].created_at + _ONE_MS
        return [msgspec.structs.replace(m, created_at=m.created_at + shift) for m in turn]

    async def _taken_since(self, thread_id: str, resource_id: str | None,
                           exc: MemoryStoreError) -> None:
        """Raise the ownership error when a failed save found the thread taken by another
        resource since ``recall`` checked it (a concurrent first turn): the same error whatever
        the store's words, and it does not name the owner."""
        if resource_id is None:
            return
        try:
            thread = await self.store.get_thread(thread_id)
        except StreamkitError:
            return  # the store is failing: its own error says more
        if thread is not None and thread.resource_id != resource_id:
            raise MemoryStoreError(
                f"thread {thread_id!r} belongs to another resource, not {resource_id!r}",
                thread_id=thread_id, operation="check the thread") from exc

    # ------------------------------------------------------------------ threads and resources

    async def create_thread(self, thread_id: str | None = None, *, resource_id: str,
                            title: str | None = None,
                            metadata: dict[str, Any] | None = None) -> Thread:
        """Create a thread owned by ``resource_id`` (``thread_id`` defaults to a uuid4).

        Threads are also created on first use by ``agent.generate(..., thread_id=,
        resource_id=)``; create one yourself to give it a title or metadata.

        Raises:
            MemoryStoreError: a thread with that id exists, or the store failed.

        Example:
            >>> thread = await memory.create_thread(resource_id="u1", title="Returns")
            >>> (await memory.get_thread(thread.id)).title
            'Returns'
        """
        _check_id("thread_id", thread_id, optional=True)
        _check_id("resource_id", resource_id)
        if title is not None and not isinstance(title, str):
            raise InvalidType(f"title must be a str or None, got {type(title).__name__}")
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidType(f"metadata must be a dict or None, got "
                              f"{type(metadata).__name__}")
        now = from_micros(now_micros())
        thread = Thread(id=thread_id or str(uuid.uuid4()), resource_id=resource_id, title=title,
                        created_at=now, updated_at=now, metadata=metadata)
        return await self.store.create_thread(thread)

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None``.

        Example:
            >>> (await memory.get_thread("t1")).resource_id
            'u1'
        """
        _check_id("thread_id", thread_id)
        return await self.store.get_thread(thread_id)

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """The threads of ``resource_id``, newest first.

        Example:
            >>> [t.id for t in await memory.list_threads("u1")]
            ['t2', 't1']
        """
        _check_id("resource_id", resource_id)
        return await self.store.list_threads(resource_id)

    async def get_messages(self, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's stored messages, oldest first (the last ``limit`` when given).

        Example:
            >>> [m.role for m in await memory.get_messages("t1")]
            ['user', 'assistant', 'user', 'assistant']
        """
        _check_id("thread_id", thread_id)
        return await self.store.get_messages(thread_id, limit=limit)

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and all its messages; ``False`` when it did not exist.

        Example:
            >>> await memory.delete_thread("t1")
            True
        """
        _check_id("thread_id", thread_id)
        return await self.store.delete_thread(thread_id)

    async def close(self) -> None:
        """Close the store (its connection and worker thread).

        Example:
            >>> async with Memory(SQLiteStore("memory.db")) as memory:
            ...     ...
        """
        await self.store.close()
