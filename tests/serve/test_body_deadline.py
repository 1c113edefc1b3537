"""The request body's deadline (``_limits._read_body_within``): what ``asyncio.timeout`` did,
with one timer. The deadline turns into ``TimeoutError`` (the app's 408) only when it caused
the cancellation; a cancellation from outside still cancels, and nothing is left pending on the
task after either outcome. (Over real HTTP: ``test_limits.test_a_body_that_stops_arriving_gets
_a_408``.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamkit.serve._limits import _read_body_within

BODY = {"type": "http.request", "body": b"{}", "more_body": False}


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def test_a_body_already_in_is_returned_and_leaves_nothing_pending() -> None:
    async def receive() -> dict[str, Any]:
        return BODY

    task = asyncio.current_task()
    assert task is not None
    assert await _read_body_within(receive, 1024, 60.0) == BODY
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # no cancellation was left to land here


async def test_a_body_that_arrives_late_but_in_time_is_returned() -> None:
    arrived = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await arrived.wait()
        return BODY

    asyncio.get_running_loop().call_soon(arrived.set)
    assert await _read_body_within(receive, 1024, 60.0) == BODY


async def test_a_body_that_never_arrives_is_a_timeout_and_the_task_goes_on() -> None:
    task = asyncio.current_task()
    assert task is not None
    with pytest.raises(TimeoutError):
        await _read_body_within(_never, 1024, 0.01)
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # the task can still await: it answers the 408 after this


async def test_a_cancellation_from_outside_still_cancels() -> None:
    reading = asyncio.Event()

    async def receive() -> dict[str, Any]:
        reading.set()
        return await _never()

    task = asyncio.create_task(_read_body_within(receive, 1024, 60.0))
    await reading.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_an_outside_cancellation_that_meets_the_deadline_is_not_a_timeout() -> None:
    reading = asyncio.Event()

    async def receive() -> dict[str, Any]:
        reading.set()
        return await _never()

    task = asyncio.create_task(_read_body_within(receive, 1024, 0.0))
    await reading.wait()
    task.cancel()  # lands with the deadline's: the caller's cancellation must win
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
