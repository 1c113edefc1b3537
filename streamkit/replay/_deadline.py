"""The deadline of one replayed stream: one bad record must not hang a whole replay.

What belongs here: ``StreamClock``, which ends a stream that runs past its deadline, and
``DeadlineExceeded``, the signal it raises. What does not: what a stream's replay measures
(``_run``), scheduling (``_execute``).

A stream can hang in two ways, and each has its own end:

* An ``async def`` processor that waits for ever leaves the event loop free: an
  ``asyncio.timeout`` around the stream's replay cancels it at the deadline.
* A plain ``def`` processor that loops (a catastrophic regular expression, a ``while True``, a
  ``time.sleep``) holds the event loop, so no timer of the loop can fire. If the stream is
  still running ``GRACE`` seconds after its deadline, ``DeadlineExceeded`` is raised in the
  thread that replays it, again every ``GRACE`` seconds until the stream ends, in case the
  processor catches it. In the main thread (the command line, every
  worker process, a Ray task) that is a ``SIGALRM`` from the interval timer whose handler
  raises: it also interrupts what checks for signals in C — a regular expression match,
  ``time.sleep``, a blocking read. (The replay's previous ``SIGALRM`` handler is put back when
  it ends; a program that uses ``SIGALRM`` itself should pass ``deadline=None``.) In another
  thread (a replay started from a notebook, which runs on a helper thread) a watchdog thread
  raises it with ``PyThreadState_SetAsyncExc``, delivered at the next Python instruction that
  thread runs — not inside a C call that holds the GIL.
  A C call that neither returns to Python nor checks for signals cannot be reached: then the
  stream ends when that call does.

Decision: the deadline is per stream, not per replay — a replay of 10,000 streams has no
natural bound, one stream does, and a per-stream deadline lets every other stream finish. A
stream past it is reported as failed (``DeadlineExceeded: stream did not finish within N s``);
the replay goes on.
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

__all__ = ["DeadlineExceeded", "StreamClock", "DEFAULT_DEADLINE", "GRACE", "message"]

#: Seconds one stream's replay may take unless ``replay(deadline=)`` says otherwise.
DEFAULT_DEADLINE = 60.0

#: Seconds past the deadline before a stream is taken to hold the event loop.
GRACE = 1.0


class DeadlineExceeded(Exception):  # noqa: N818 - the name says what happened, as TimeoutError
    """Raised inside a stream's replay that runs past its deadline (a signal, caught per
    stream; it never reaches a caller of ``replay``). An ``Exception``, not a
    ``BaseException``: raised into a task of the event loop, a ``BaseException`` would end the
    loop itself rather than the task."""


def _raise_in(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(DeadlineExceeded))


def _absorb() -> None:
    """Let a ``DeadlineExceeded`` that ``_raise_in`` left pending for this thread arrive here,
    and drop it (the stream it was meant for has ended).

    The interpreter delivers a pending asynchronous exception at its next check (a call or a
    loop's back edge), so a few calls suffice; when nothing is pending they cost nothing more.
    Clearing it with ``PyThreadState_SetAsyncExc(id, NULL)`` instead leaves CPython 3.11's
    interpreter-wide "asynchronous exception pending" flag set, and a later ``sys.settrace``
    (coverage.py, a debugger) then never returns.
    """
    for _ in range(64):
        try:
            _checkpoint()
        except DeadlineExceeded:
            return


def _checkpoint() -> None:
    """A call: the point at which the interpreter delivers a pending asynchronous exception."""


def message(deadline: float) -> str:
    """A failed stream's reason (its row's ``error``)."""
    return (f"DeadlineExceeded: the stream did not finish within {deadline:g} s (replay "
            f"deadline=); it was stopped and the replay went on")


class StreamClock:
    """Watches the streams one thread replays, one after another: ``start(n)`` before stream
    ``n``, ``stop()`` after it, ``close()`` at the end. ``expired(n)``: whether stream ``n``
    had to be interrupted (see the module docstring).

    In the main thread the interval timer (``setitimer``) sends ``SIGALRM`` ``GRACE`` seconds
    after the deadline and every ``GRACE`` seconds after that: the kernel delivers it, so it
    needs no other Python thread to run — code that holds the GIL (a regular expression match
    does) would keep a watchdog thread from ever running. Elsewhere a watchdog thread raises
    the exception asynchronously.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._thread_id = threading.get_ident()
        self._cond = threading.Condition()
        self._running: tuple[int, float] | None = None  # (stream number, monotonic start)
        self._expired: set[int] = set()
        self._closed = False
        self._raised = False  # the watchdog raised in the stream's thread since its start
        self._signals = threading.current_thread() is threading.main_thread() \
            and hasattr(signal, "setitimer")
        self._previous: Callable[[int, FrameType | None], object] | int | None = None
        self._watchdog: threading.Thread | None = None
        if self._signals:
            self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
        else:
            self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                              name="streamkit-replay-deadline")
            self._watchdog.start()

    def start(self, n: int) -> None:
        with self._cond:
            self._running = (n, time.monotonic())
            self._cond.notify()
        if self._signals:
            signal.setitimer(signal.ITIMER_REAL, self.deadline + GRACE, GRACE)

    def stop(self) -> None:
        """The stream ended; an exception raised for it just before is dropped."""
        while True:
            try:
                if self._signals:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                with self._cond:
                    self._running = None
                    raised, self._raised = self._raised, False
                    self._cond.notify()
                if raised:
                    _absorb()
                return
            except DeadlineExceeded:  # delivered in between: the stream is over anyway
                continue

    def expired(self, n: int) -> bool:
        with self._cond:
            return n in self._expired

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._running = None
            self._cond.notify()
        if self._watchdog is not None:
            self._watchdog.join(timeout=GRACE + 1.0)
        if self._signals:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        running = self._running  # no lock: a handler must not wait for one
        if running is not None:
            self._expired.add(running[0])
            raise DeadlineExceeded(message(self.deadline))

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                running = self._running
                if running is None:
                    self._cond.wait()
                    continue
                n, started = running
                if n in self._expired:
                    # Raised once and the stream still runs (the processor caught it): again.
                    self._cond.wait(GRACE)
                    if self._running == running and not self._closed:
                        self._raised = True
                        _raise_in(self._thread_id)
                    continue
                left = started + self.deadline + GRACE - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._expired.add(n)
                self._raised = True
                _raise_in(self._thread_id)
