"""Worker processes that a stream can kill without killing the replay.

What belongs here: ``StreamWorker`` — one spawned child process that replays streams for its
owner and sends their rows back — and ``process_rows``, the local executor over several of
them. What does not: what a stream's replay measures (``_run``), Ray (``_ray``, whose actors
each own one ``StreamWorker``).

Why a child process, also inside a Ray actor: a stream that ends its process (``os._exit`` in
a processor, the kernel's OOM killer, a crash in a C extension) must cost its own row, not the
replay. The child keeps in shared memory which stream of the batch it runs and since when, and
sends rows in groups (``FLUSH_ROWS``, or after ``FLUSH_SECONDS``: a message per stream costs
the owner a wake-up each, which inside a Ray Data actor — whose other threads hold the GIL —
made the replay 4-5x slower). When the child dies the owner knows the stream to blame:

* it retries it ``RETRIES`` time(s) in a fresh child (an OOM kill can be a neighbour's fault);
  the streams that had ended since the last rows sent are replayed again, at no cost to them;
* if the stream kills that child too, it is reported as failed, ``WorkerDied: ...`` with how
  the process ended, under its id (``<file>#<n>``: file and stream), and the rest of the batch
  is replayed in a new child. The retries are bounded: a poisoned stream costs ``RETRIES + 1``
  process starts, never a loop.

The per-stream deadline runs in the child's main thread (``SIGALRM``, see ``_deadline``); a
stream that no signal reaches — a C call that neither returns nor checks for signals, a
processor that swallows every exception — is ended by the owner, which kills the child
``HARD_MARGIN`` seconds after the deadline and its grace: the stream is reported as past its
deadline (not retried: it would only hang again). Without a deadline no stream is timed.

A child exits by itself within half a second of its owner's death (a ``kill -9`` runs no
cleanup in the owner), and ``stop()`` kills it at once.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Iterator
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Literal, Protocol, TypeAlias

from streamkit.errors import StreamkitError

from ._deadline import GRACE, message
from ._run import ReplayRow, error_row, pipeline_of, replay_rows
from ._sources import RecordedStream

__all__ = ["StreamWorker", "process_rows", "RETRIES", "HARD_MARGIN", "START_TIMEOUT",
           "FLUSH_ROWS", "FLUSH_SECONDS", "exit_with_parent", "describe_exit"]

#: Times a stream whose worker process died is replayed again before it is reported.
RETRIES = 1

#: Seconds past a stream's deadline (and ``GRACE``) before its worker process is killed.
HARD_MARGIN = 5.0

#: Seconds a new worker process may take to start and build the pipeline.
START_TIMEOUT = 300.0


def exit_with_parent(parent: int) -> None:
    """A daemon thread that ends this process once ``parent`` is gone (the process is then
    re-parented, so ``getppid()`` changes)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="streamkit-replay-parent", daemon=True).start()


#: Rows a worker process sends at once, and the most seconds it holds one back.
FLUSH_ROWS = 64
FLUSH_SECONDS = 0.05


class Progress(Protocol):
    """``[index of the running stream, when it started]`` shared with a worker process (a
    ``RawArray("d", 2)``; a list in the parent until the first child starts)."""

    def __getitem__(self, i: int, /) -> float: ...

    def __setitem__(self, i: int, value: float, /) -> None: ...


class _RowSender:
    """A worker process's rows of one batch: sent ``FLUSH_ROWS`` at a time or after
    ``FLUSH_SECONDS``, with ``progress`` kept up to date after every stream."""

    def __init__(self, conn: Connection, progress: Progress) -> None:
        self.conn, self.progress = conn, progress
        self.held: list[ReplayRow] = []
        self.done = 0
        self.flushed = time.monotonic()
        progress[1], progress[0] = self.flushed, 0

    def add(self, row: ReplayRow) -> None:
        self.held.append(row)
        now = time.monotonic()
        self.done += 1
        self.progress[1], self.progress[0] = now, self.done  # the next stream starts now
        if len(self.held) >= FLUSH_ROWS or now - self.flushed >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.conn.send(("rows", self.held))
        self.held = []
        self.flushed = time.monotonic()


def _child(conn: Connection, payload: tuple[str, object], deadline: float | None, parent: int,
           progress: Progress) -> None:
    """A worker process: build the pipeline once, then replay each batch it is sent, sending
    ``("rows", [row, ...])`` as streams end. ``progress`` (shared memory: stream index within
    the batch, its monotonic start) says which stream runs, so its owner knows whom a death or
    a hang belongs to without a message per stream (a message per stream costs its owner a
    wake-up each, which is what the replay's time went to inside a Ray Data actor)."""
    exit_with_parent(parent)
    try:
        pipeline = pipeline_of(payload)
    except BaseException as exc:  # noqa: BLE001 - reported to the owner, which raises it
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        sender = _RowSender(conn, progress)
        replay_rows(pipeline, [RecordedStream(*s) for s in batch], deadline,
                    on_row=sender.add)
        sender.flush()


def describe_exit(code: int | None) -> str:
    """How a process ended, for a failed stream's reason."""
    if code is None:
        return "did not end"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the kernel's OOM killer sends it: out of memory?)" \
            if -code == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {code}"


class StreamWorker:
    """One child process replaying streams for its owner (see the module docstring).

    Args:
        payload: ``_run.pipeline_payload(pipeline)``.
        deadline: seconds each stream may take (``None``: no limit).
        retries: times a stream whose process died is replayed again (``RETRIES``).

    Example:
        >>> worker = StreamWorker(pipeline_payload("guards:PIPELINE"), 60.0)
        >>> rows = list(worker.replay(streams))   # one row per stream, in order
        >>> worker.close()
    """

    def __init__(self, payload: tuple[str, object], deadline: float | None, *,
                 retries: int = RETRIES) -> None:
        self._payload, self._deadline, self._retries = payload, deadline, retries
        self._child: tuple[BaseProcess, Connection] | None = None
        self._progress: Progress = [0.0, 0.0]
        self._closed = False

    def _start(self) -> None:
        ctx = get_context("spawn")
        ours, theirs = ctx.Pipe()
        progress = ctx.RawArray("d", 2)
        proc = ctx.Process(target=_child, args=(theirs, self._payload, self._deadline,
                                                os.getpid(), progress),
                           name="streamkit-replay-worker", daemon=True)
        proc.start()
        theirs.close()
        self._child = (proc, ours)
        self._progress = progress
        kind, detail = self._next(START_TIMEOUT)
        if kind == "ready":
            return
        self.stop()
        if kind == "failed":
            raise StreamkitError(f"a replay worker process could not build the pipeline: "
                                 f"{detail}")
        if kind == "late":
            raise StreamkitError(f"a replay worker process did not start within "
                                 f"{START_TIMEOUT:g} s")
        raise StreamkitError(
            f"a replay worker process {detail} before it started (killed, out of memory, or a "
            f"script without `if __name__ == '__main__':` around its replay() call — workers "
            f"are spawned and import the main module)")

    def _next(self, timeout: float | None) -> tuple[str, object]:
        """The child's next message; ``("died", how)`` if it ended, ``("late", None)`` if
        nothing came within ``timeout`` seconds."""
        if self._child is None:
            return ("died", "was stopped")
        proc, conn = self._child
        try:
            ready = wait([conn, proc.sentinel], timeout)
        except (OSError, ValueError):  # closed by stop() from another thread
            return ("died", "was stopped")
        if not ready:
            return ("late", None)
        try:
            if conn.poll():  # rows sent just before the child died come first
                got: tuple[str, object] = conn.recv()
                return got
        except (EOFError, OSError):
            pass
        proc.join(5)
        return ("died", describe_exit(proc.exitcode))

    def _running(self) -> tuple[int, float]:
        """The index (in the batch) of the stream the child replays, and when it started."""
        started, index = self._progress[1], self._progress[0]
        return int(index), started

    def replay(self, streams: list[RecordedStream]) -> Iterator[ReplayRow]:
        """Each stream's row (in order, but for streams replayed again after a death); a
        stream that killed its process ``retries + 1`` times or that only a kill could stop
        has its reason in its row."""
        pending = list(streams)
        deaths: dict[int, int] = {}  # position in ``streams`` → deaths while it ran
        order = list(range(len(streams)))
        limit = None if self._deadline is None else self._deadline + GRACE + HARD_MARGIN
        while pending and not self._closed:
            if self._child is None:
                self._start()
            if self._child is None:
                return
            done = 0
            kind: str
            value: Any = None
            # The batch's first stream starts now (the child sets the same on receipt): what
            # the previous batch left there would date a hang from the wrong moment.
            self._progress[1], self._progress[0] = time.monotonic(), 0
            try:
                self._child[1].send([(s.id, s.chunks, s.error) for s in pending])
            except (BrokenPipeError, EOFError, OSError):
                kind = "died"
            else:
                kind = "rows"
            while kind == "rows" and done < len(pending):
                kind, value = self._next(None if limit is None else 1.0)
                if kind == "rows":
                    yield from value
                    done += len(value)
                elif kind == "late":  # a second without rows: is the running stream past?
                    _, started = self._running()
                    if limit is None or time.monotonic() - started <= limit:
                        kind = "rows"
            if done >= len(pending) or self._closed:
                return
            # The child died or hangs: the stream it was running is to blame; the ones after
            # the last rows it sent and before that one ended but their rows were lost.
            index, _ = self._running()
            index = min(max(index, done), len(pending) - 1)
            how = describe_exit(self._reap()) if kind == "died" else ""
            self.stop()
            culprit, position = pending[index], order[index]
            keep = list(range(done, index))
            if kind == "late":
                yield error_row(culprit, f"{message(self._deadline or 0.0)} (its worker "
                                         f"process was killed: no signal reached the "
                                         f"processor)")
            elif kind == "died":
                deaths[position] = deaths.get(position, 0) + 1
                if deaths[position] > self._retries:
                    yield error_row(culprit, (
                        f"WorkerDied: the process replaying this stream {how or value}, "
                        f"{deaths[position]} time(s); the stream was left out and the replay "
                        f"went on"))
                else:
                    keep.append(index)
            else:
                raise StreamkitError(f"a replay worker process sent {kind!r}, expected rows")
            keep += range(index + 1, len(pending))
            pending = [pending[i] for i in keep]
            order = [order[i] for i in keep]

    def _reap(self) -> int | None:
        if self._child is None:
            return None
        proc = self._child[0]
        proc.join(5)
        return proc.exitcode

    def stop(self) -> None:
        """Kill the child now (a new one starts for the next batch)."""
        child, self._child = self._child, None
        if child is not None:
            proc, conn = child
            if proc.is_alive():
                proc.kill()
            proc.join(5)
            conn.close()

    def close(self) -> None:
        """End the child: asked to exit, killed if it does not within a second."""
        self._closed = True
        child = self._child
        if child is not None and child[0].is_alive():
            try:
                child[1].send(None)
            except (OSError, ValueError):
                pass
            child[0].join(1)
        self.stop()


#: What a driver thread reports: a batch's rows, the error that stopped it, or that it is done.
_Report: TypeAlias = ("tuple[Literal['rows'], list[ReplayRow]] "
                      "| tuple[Literal['error'], BaseException] | tuple[Literal['done'], None]")


def process_rows(payload: tuple[str, object], batches: list[list[RecordedStream]], workers: int,
                 deadline: float | None) -> Iterator[list[ReplayRow]]:
    """Replay ``batches`` on ``workers`` ``StreamWorker``s; each batch's rows as it ends.

    Each worker is driven by a thread of this process (the threads only wait on pipes). When
    the caller stops early (an error, ``close()``, ``SystemExit`` from ``SIGTERM``) every
    child is killed rather than left to finish its batch.
    """
    todo: queue.SimpleQueue[list[RecordedStream]] = queue.SimpleQueue()
    for batch in batches:
        todo.put(batch)
    results: queue.Queue[_Report] = queue.Queue(maxsize=workers * 2)
    stopping = threading.Event()
    pool = [StreamWorker(payload, deadline) for _ in range(workers)]

    def put(item: _Report) -> None:
        while not stopping.is_set():
            try:
                results.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def drive(worker: StreamWorker) -> None:
        try:
            while not stopping.is_set():
                try:
                    batch = todo.get_nowait()
                except queue.Empty:
                    break
                rows = list(worker.replay(batch))
                if not stopping.is_set():
                    put(("rows", rows))
            worker.close()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            put(("error", exc))
        finally:
            put(("done", None))

    threads = [threading.Thread(target=drive, args=(w,), name="streamkit-replay-driver",
                                daemon=True) for w in pool]
    for thread in threads:
        thread.start()
    finished = 0
    try:
        while finished < len(threads):
            try:
                report = results.get(timeout=0.5)
            except queue.Empty:
                continue
            match report:
                case ("rows", rows):
                    yield rows
                case ("error", error):
                    raise error
                case _:
                    finished += 1
    finally:
        stopping.set()
        for worker in pool:
            worker.close()
        for thread in threads:
            thread.join(timeout=10)
