"""Memory: threads of remembered messages for ``Agent``, stored in SQLite (or any ``MessageStore``).

What belongs here: ``Memory`` (what to recall and what to store, the thread API), the
``MessageStore`` protocol and its ``Thread`` record, ``SQLiteStore`` (the embedded default) and
``PostgresStore`` (shared by processes and machines; the ``postgres`` extra).
What does not: the agent loop. It calls exactly two methods (``docs/DESIGN.md``, "Agent ↔
memory protocol"): ``await memory.recall(thread_id, resource_id)`` before ``process_input``
(the result enters the ``MessageList`` with source ``memory``), and ``await
memory.remember(thread_id, resource_id, message_list)`` in its ``finish`` node, after
``process_output_result``, only when the run was neither tripped nor failed. A
``MemoryStoreError`` from either fails the run: ``generate()`` raises it; a stream whose turn
cannot be saved ends with an ``error`` chunk (a failed ``recall`` raises from the first
``async for`` step, before any chunk).

Modules: ``_memory`` (``Memory``, the persistence rules), ``_store`` (``MessageStore``,
``Thread``, and how to write a PostgreSQL store), ``_sqlite`` (``SQLiteStore``: WAL, one
connection on one worker thread, one writer), ``_postgres`` (``PostgresStore``: psycopg 3 async,
a pool, a row lock per thread), ``_pg_tables`` (``@mastra/pg``'s tables and their SQL),
``_pg_call`` (one call: its time budget, one pipelined round trip).

Example:
    >>> from streamkit import Agent
    >>> from streamkit.memory import Memory, SQLiteStore
    >>> from streamkit.testing import ScriptedModel, text
    >>> memory = Memory(store=SQLiteStore("memory.db"), last_messages=10)
    >>> agent = Agent(id="a", model=ScriptedModel([text("Hi Ada."), text("You are Ada.")]),
    ...               memory=memory)
    >>> _ = await agent.generate("I am Ada.", thread_id="t1", resource_id="u1")
    >>> (await agent.generate("Who am I?", thread_id="t1", resource_id="u1")).text
    'You are Ada.'
    >>> [t.id for t in await memory.list_threads("u1")]
    ['t1']
"""

from ._memory import Memory
from ._postgres import PostgresStore
from ._sqlite import SQLiteStore
from ._store import MessageStore, Thread

__all__ = ["Memory", "SQLiteStore", "PostgresStore", "MessageStore", "Thread"]
