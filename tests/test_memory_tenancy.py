"""Memory's ownership rule when two resources race for a new thread, on SQLite and PostgreSQL:
a turn whose thread another resource created after ``recall`` checked it fails with the
ownership error (``operation == "check the thread"``, what the HTTP routes answer ``403`` to),
whatever the store's own words, never naming the owner, and nothing of it is stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent
from streamkit.errors import MemoryStoreError
from streamkit.memory import Memory, PostgresStore, SQLiteStore
from streamkit.testing import FunctionModel, text

OWNER, LATE = "first-resource", "second-resource"


class TakenBeforeSave:
    """A real store into which another resource creates the thread just before the first save
    — what a concurrent first turn of another resource does."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.taken = False

    async def save_messages(self, thread_id: str, resource_id: str | None,
                            messages: Any) -> Any:
        if not self.taken:
            self.taken = True
            await Memory(self.inner).create_thread(thread_id, resource_id=OWNER)
        return await self.inner.save_messages(thread_id, resource_id, messages)

    async def create_thread(self, thread: Any) -> Any:
        return await self.inner.create_thread(thread)

    async def get_thread(self, thread_id: str) -> Any:
        return await self.inner.get_thread(thread_id)

    async def list_threads(self, resource_id: str) -> Any:
        return await self.inner.list_threads(resource_id)

    async def get_messages(self, thread_id: str, limit: int | None = None) -> Any:
        return await self.inner.get_messages(thread_id, limit)

    async def delete_thread(self, thread_id: str) -> bool:
        return bool(await self.inner.delete_thread(thread_id))

    async def close(self) -> None:
        await self.inner.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def racing(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    if request.param == "sqlite":
        inner: Any = SQLiteStore(str(tmp_path / "race.sqlite3"))
    else:
        inner = PostgresStore(request.getfixturevalue("pg_dsn"),
                              schema=request.getfixturevalue("pg_schema"))
    memory = Memory(TakenBeforeSave(inner))
    yield memory
    await memory.close()


async def test_a_thread_taken_before_the_save_is_the_ownership_error(racing: Memory) -> None:
    agent = Agent(id="a", model=FunctionModel(lambda request: text("hello")), memory=racing)
    with pytest.raises(MemoryStoreError) as caught:
        await agent.generate("my secret", thread_id="t", resource_id=LATE)
    assert caught.value.operation == "check the thread"  # type: ignore[attr-defined]
    assert OWNER not in str(caught.value)
    assert await racing.get_messages("t") == []
    thread = await racing.get_thread("t")
    assert thread is not None and thread.resource_id == OWNER


async def test_the_owners_own_turn_is_stored(racing: Memory) -> None:
    agent = Agent(id="a", model=FunctionModel(lambda request: text("hello")), memory=racing)
    await agent.generate("mine", thread_id="t", resource_id=OWNER)
    assert [m.role for m in await racing.get_messages("t")] == ["user", "assistant"]
