"""Single flight for ``ResponseCache``: of the callers that miss on one key at once, one computes
the value (calls the model) and the others wait for it, within this process and, through a
backend lease, across processes.

What belongs here: who computes and how long the others wait. What does not: what the value is
and how it is keyed or stored (``_response_cache``), the lease itself (``RedisCache``'s
``acquire_lease``/``release_lease``, a ``SET NX PX``).

How a miss on ``key`` goes (``SingleFlight.join``):

1. In this process, the first caller holds a ``Flight`` (a future); later callers wait on it
   (at most ``wait`` seconds in all), then read the cache: a hit is their answer; a miss (the
   holder failed, or stored nothing) and the next caller in line holds the flight.
2. The holder then takes the backend's lease when the backend has one. Taken: it computes.
   Held by another process: it polls the cache (20 ms, doubling to 250 ms) until the value is
   there (the answer, for it and for its waiters), the lease is free again (its holder
   finished without a value, or died and the lease expired: this caller takes it and
   computes), or ``wait`` is over (it computes without the lease).
3. The holder ends its flight when the value is stored, when the call fails, when its task
   ends (a cancelled request), or when the same task misses on the key again (its earlier
   request ended without reporting, e.g. a tripwire after the call) — whichever is first —
   which wakes its waiters and gives the lease back; a holder that died leaves a lease that
   expires after ``lease`` seconds. A request whose run ended without reporting inside a task
   that goes on to other work keeps the flight until then: its waiters wait at most ``wait``.

Every wait is bounded by ``wait`` (plus one backend call's own timeout). A backend that fails
or hangs fails open: the caller computes, as without single flight.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SingleFlight", "Flight"]

log = logging.getLogger("streamkit_operators")

_FIRST_POLL, _MAX_POLL = 0.02, 0.25


@dataclass(slots=True)
class Flight:
    """One caller's claim on a key: the future its waiters in this process wait on, the
    backend lease's token (``None``: no lease held), and the task whose end ends it."""

    key: str
    done: asyncio.Future[None]
    token: str | None = None
    task: asyncio.Task[Any] | None = None
    on_task_done: Callable[[Any], None] | None = field(default=None, repr=False)


#: What ``_bounded`` gives for a backend call that raised or did not answer in time.
_FAILED: Any = object()


async def _bounded(awaitable: Awaitable[Any], seconds: float) -> Any:
    """``awaitable``'s result, or ``_FAILED`` when it raised or took longer than ``seconds``."""
    try:
        return await asyncio.wait_for(awaitable, max(seconds, 0.05))
    except Exception as exc:  # noqa: BLE001 - fail open: the caller computes
        log.warning("response-cache: single flight: backend call failed (%s: %s); calling "
                    "the model", type(exc).__name__, exc)
        return _FAILED


def _value(got: Any) -> Any:
    """A read's value; a failed read is a miss."""
    return None if got is _FAILED else got


class SingleFlight:
    """One computation per key at a time (see the module docstring).

    Args:
        backend: the cache backend; its ``acquire_lease(key, ttl) -> token | None`` and
            ``release_lease(key, token)`` (when it has both) extend single flight across
            processes.
        lease: seconds a lease lives when its holder never gives it back (it died).
        wait: seconds a caller waits for another's value before computing it itself.
    """

    def __init__(self, backend: Any, *, lease: float, wait: float) -> None:
        self.backend = backend
        self.lease = lease
        self.wait = wait
        self.has_lease = all(callable(getattr(backend, m, None))
                             for m in ("acquire_lease", "release_lease"))
        self._flights: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Flight]] \
            = weakref.WeakKeyDictionary()
        self._ending: set[asyncio.Task[Any]] = set()

    async def join(self, key: str, read: Callable[[], Awaitable[Any]]
                   ) -> tuple[Any, Flight | None]:
        """After a miss on ``key``: ``(value, None)`` when another caller produced it (``read``
        returned it), else ``(None, flight)`` — this caller computes, and must ``end`` the
        flight — or ``(None, None)``: it waited ``wait`` seconds and computes unclaimed."""
        loop = asyncio.get_running_loop()
        flights = self._flights.setdefault(loop, {})
        deadline = loop.time() + self.wait
        while (other := flights.get(key)) is not None:
            if other.task is not None and other.task is asyncio.current_task():
                # Held by this very task, which runs one request at a time: left by an
                # earlier request that ended without reporting (a tripwire after the call).
                self.end(other)
                break
            left = deadline - loop.time()
            if left <= 0:
                return None, None
            try:
                await asyncio.wait_for(asyncio.shield(other.done), left)
            except TimeoutError:
                return None, None
            value = _value(await _bounded(read(), deadline - loop.time()))
            if value is not None:
                return value, None
        flight = self._hold(loop, flights, key)
        if not self.has_lease:
            return None, flight
        poll = _FIRST_POLL
        while True:
            left = deadline - loop.time()
            token = await _bounded(self.backend.acquire_lease(key, self.lease), left) \
                if left > 0 else None
            if token is _FAILED:
                return None, flight  # the backend is down or hung: fail open, compute
            if token:
                flight.token = str(token)
                # the previous holder may have stored the value just before letting go
                value = _value(await _bounded(read(), deadline - loop.time()))
                if value is not None:
                    self.end(flight)
                    return value, None
                return None, flight
            if loop.time() >= deadline:
                return None, flight  # waited long enough: compute without the lease
            await asyncio.sleep(min(poll, max(deadline - loop.time(), 0)))
            poll = min(poll * 2, _MAX_POLL)
            value = _value(await _bounded(read(), deadline - loop.time()))
            if value is not None:
                self.end(flight)
                return value, None

    def _hold(self, loop: asyncio.AbstractEventLoop, flights: dict[str, Flight],
              key: str) -> Flight:
        flight = flights[key] = Flight(key, loop.create_future())
        task = asyncio.current_task()
        if task is not None:
            def on_task_done(_: Any, flight: Flight = flight) -> None:
                flight.task = flight.on_task_done = None
                self.end(flight)  # the holder's request ended (cancelled) before it stored
            flight.task, flight.on_task_done = task, on_task_done
            task.add_done_callback(on_task_done)
        return flight

    def end(self, flight: Flight | None) -> None:
        """Wake the flight's waiters and give its lease back (idempotent)."""
        if flight is None or flight.done.done():
            return
        flight.done.set_result(None)
        flights = self._flights.get(flight.done.get_loop())
        if flights is not None and flights.get(flight.key) is flight:
            del flights[flight.key]
        if flight.task is not None and flight.on_task_done is not None:
            flight.task.remove_done_callback(flight.on_task_done)
        flight.task = flight.on_task_done = None
        token, flight.token = flight.token, None
        if token is not None:
            try:
                task = flight.done.get_loop().create_task(self._release(flight.key, token))
            except RuntimeError:  # the loop is closed: the lease expires by itself
                return
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    async def _release(self, key: str, token: str) -> None:
        try:
            await asyncio.wait_for(self.backend.release_lease(key, token), self.lease)
        except Exception as exc:  # noqa: BLE001 - the lease then expires by itself
            log.warning("response-cache: could not give a lease back (%s: %s); it expires "
                        "after %gs", type(exc).__name__, exc, self.lease)
