"""Shared test helpers: sync/async parametrisation, a duck-typed processor, leak checks."""

from __future__ import annotations

import asyncio
import functools
import re
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent
from streamkit.errors import InvalidArgument, InvalidType, StreamkitError

from ._backends import pg_dsn, pg_schema, redis_prefix, redis_url  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """Run the test once with sync hooks and once with async hooks."""
    return request.param


def as_mode(fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
    """``fn`` itself for ``"sync"``; an ``async def`` with the same signature for ``"async"``
    (it yields to the loop once, so a missing ``await`` would show)."""
    if mode == "sync":
        return fn

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return fn(*args, **kwargs)

    return wrapper


class P:
    """A duck-typed processor: ``P("id", process_output_stream=fn, process_data_parts=True)``."""

    def __init__(self, id: str, **attrs: Any) -> None:
        self.id = id
        for key, value in attrs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"P({self.id!r})"


def hook(mode: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    return as_mode(fn, mode)


class AsyncGenTracker:
    """Records every async generator first iterated while installed."""

    def __init__(self) -> None:
        self.gens: list[weakref.ref[Any]] = []

    def open(self) -> list[Any]:
        alive = [g() for g in self.gens]
        return [g for g in alive if g is not None and g.ag_frame is not None]


@pytest.fixture
async def asyncgens() -> Any:
    """Track async generators created during the test; ``asyncgens.open()`` lists those not
    closed (a generator whose frame is gone has finished or been closed)."""
    tracker = AsyncGenTracker()
    old = sys.get_asyncgen_hooks()

    def firstiter(gen: Any) -> None:
        tracker.gens.append(weakref.ref(gen))
        if old.firstiter is not None:
            old.firstiter(gen)

    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=old.finalizer)
    try:
        yield tracker
    finally:
        sys.set_asyncgen_hooks(*old)


def assert_misuse(call: Callable[[], Any], error: type[Exception], words: str) -> None:
    """``call()`` raises ``error`` (a ``streamkit.errors`` class) whose message contains
    ``words``; ``InvalidArgument`` is also a ``ValueError`` and ``InvalidType`` a ``TypeError``."""
    with pytest.raises(error, match=re.escape(words)) as info:
        call()
    assert isinstance(info.value, StreamkitError)
    if isinstance(info.value, InvalidArgument):
        assert isinstance(info.value, ValueError)
    if isinstance(info.value, InvalidType):
        assert isinstance(info.value, TypeError)


def types(chunks: list[Any]) -> list[str]:
    """The wire type of each chunk."""
    return [c.type for c in chunks]


async def run_stream(agent: Agent, prompt: str = "hi", **kw: Any) -> tuple[list[Any], Any]:
    """Every chunk the consumer got, and the result (or the error that ended the run)."""
    stream = agent.stream(prompt, **kw)
    chunks = [c async for c in stream]
    try:
        result = await stream.result()
    except StreamkitError as exc:
        result = exc
    return chunks, result
