"""Where a replay runs: in this process, on every core (worker processes), or as Ray Data tasks.

What belongs here: ``replay`` (the Python API), the three executors — all of them run
``_run.replay_batch`` over the same batches, so their counts are identical — and the progress
bar. What does not: what one stream's replay measures (``_run``), sources (``_sources``).

Decisions:

* The driver reads the sources and ships streams in batches (``batch_size`` streams, as JSON
  bytes; decoding happens in the worker). Workers need no access to the files or the memory
  store, which is what a Ray cluster without shared storage needs; the price is that the
  driver holds the raw recordings while they are replayed.
* Workers rebuild the pipeline once per process: a ``"module:attribute"`` string is imported
  there (the module must be importable on the workers — on Ray, installed on the cluster or
  shipped with the job's ``runtime_env``), an object is pickled.
* Local processes are *spawned* (not forked): a fork would copy this process's event loop and
  threads. ``processes=None`` uses every core; ``processes=1`` replays in this process, with
  the pipeline object itself (nothing is pickled).
* ``ray``: ``None`` (no Ray), ``True`` or ``"local"`` (a Ray instance already initialised in
  this process, else a local one started for this replay), or an address (``"auto"``,
  ``"ray://head:10001"``, ``"head:6379"``). A Ray instance this function started is shut down
  before it returns; one it found running is left running.
* ``deadline`` (60 s by default, ``None``: off) bounds each stream, not the whole replay: a
  stream past it is reported as failed with the reason and the replay goes on (how a stream is
  stopped: ``_deadline``).
* Worker processes never outlive the replay: when it ends early (an error, the caller stops
  iterating, ``SIGTERM`` to the command line, which turns it into ``SystemExit``), the workers
  are terminated rather than left to finish their batches; and each worker exits by itself
  within half a second of its parent's death (a ``kill -9`` runs no cleanup in the parent).
* Progress goes to stderr: ``replay: 1200/10000 streams 12% 850/s``, redrawn at most ten times
  a second (``progress=False`` for none).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, TextIO

import msgspec

from streamkit.errors import InvalidArgument, InvalidType, StreamkitError

from ._deadline import DEFAULT_DEADLINE
from ._report import ProcessorReport, ReplayReport
from ._run import load_pipeline, pipeline_payload, processor_ids, replay_batch, replay_rows
from ._sources import RecordedStream, _run_async, read_streams

__all__ = ["replay"]


class _Progress:
    """A one-line progress bar on ``stream`` (stderr)."""

    def __init__(self, total: int, stream: TextIO | None, enabled: bool) -> None:
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.started = self.last = time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self.last >= 0.1 or self.done >= self.total):
            self.last = now
            rate = self.done / (now - self.started) if now > self.started else 0.0
            share = self.done * 100 // self.total if self.total else 100
            bar = "#" * (share // 5)
            self.stream.write(f"\rreplay: [{bar:<20}] {self.done}/{self.total} streams "
                              f"{share}% {rate:.0f}/s")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _batches(streams: list[RecordedStream], size: int) -> list[list[RecordedStream]]:
    return [streams[i:i + size] for i in range(0, len(streams), size)]


def _exit_with_parent(parent: int) -> None:
    """A worker's initializer: a daemon thread that ends the worker once ``parent`` is gone
    (the worker is then re-parented, so ``getppid()`` changes)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="streamkit-replay-parent", daemon=True).start()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End a pool whose batches are no longer wanted: cancel what has not started, terminate the
    workers (a batch in progress would otherwise run to its end) and reap them."""
    # Python < 3.14 has no public way to reach the workers (3.14: ``terminate_workers()``).
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)


def _processes(payload: tuple[str, Any], batches: list[list[RecordedStream]], workers: int,
               deadline: float | None) -> Iterator[list[dict[str, Any]]]:
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                               initializer=_exit_with_parent, initargs=(os.getpid(),))
    finished = False
    try:
        pending: set[Future[list[dict[str, Any]]]] = set()
        queue = iter(batches)
        # Bounded in flight: a few batches per worker, so results stream back as they finish.
        for batch in queue:
            pending.add(pool.submit(replay_batch, payload, batch, deadline))
            if len(pending) >= workers * 4:
                break
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                try:
                    rows = future.result()
                except BrokenProcessPool as exc:
                    raise StreamkitError(
                        "a replay worker process died (killed, out of memory, or a script "
                        "without `if __name__ == '__main__':` around its replay() call — "
                        "workers are spawned and import the main module)") from exc
                yield rows
                nxt = next(queue, None)
                if nxt is not None:
                    pending.add(pool.submit(replay_batch, payload, nxt, deadline))
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:
            _stop_workers(pool)


def _ray_rows(payload: tuple[str, Any], batches: list[list[RecordedStream]],
              ray_target: Any, report: ReplayReport, deadline: float | None
              ) -> Iterator[list[dict[str, Any]]]:
    # Ray takes seconds to import and is an optional extra: only a Ray replay loads it.
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise StreamkitError(f"replay(ray=...) needs Ray Data: pip install 'streamkit-agents[ray]' "
                             f"({exc})") from exc

    started = False
    if not ray.is_initialized():
        sys_path = os.pathsep.join(p for p in sys.path if p)
        env = {"env_vars": {"PYTHONPATH": sys_path}}
        try:
            if ray_target in (True, "local"):
                ray.init(include_dashboard=False, log_to_driver=False, runtime_env=env)
            else:
                ray.init(address=str(ray_target), log_to_driver=False, runtime_env=env)
        except Exception as exc:  # noqa: BLE001 - Ray raises builtins (ConnectionError...)
            raise StreamkitError(f"could not start or reach Ray at {ray_target!r}: "
                                 f"{type(exc).__name__}: {exc}") from exc
        started = True
    try:
        report.workers = int(ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        encoder = msgspec.msgpack.Encoder()
        items = [{"batch": encoder.encode([(s.id, list(s.chunks), s.error) for s in batch])}
                 for batch in batches]
        dataset = ray.data.from_items(items, override_num_blocks=max(1, len(items)))

        def task(row: dict[str, Any]) -> dict[str, Any]:
            decoded = msgspec.msgpack.decode(row["batch"])
            streams = [RecordedStream(sid, tuple(chunks), error)
                       for sid, chunks, error in decoded]
            rows = replay_batch(payload, streams, deadline)
            return {"rows": msgspec.msgpack.encode(rows)}

        rows = iter(dataset.map(task).iter_rows())
        while True:
            try:
                out = next(rows)
            except StopIteration:
                break
            except ray.exceptions.RayError as exc:
                raise StreamkitError(f"a Ray replay task failed: {exc}") from exc
            yield msgspec.msgpack.decode(out["rows"])
    finally:
        if started:
            ray.shutdown()


def replay(sources: Iterable[Any] | str, pipeline: Any, *, ray: Any = None,
           processes: int | None = None, batch_size: int = 200,
           on_stream: Callable[[dict[str, Any]], Any] | None = None,
           progress: bool = False, progress_stream: TextIO | None = None,
           deadline: float | None = DEFAULT_DEADLINE) -> ReplayReport:
    """Replay recorded streams through ``pipeline`` and report what each processor did.

    Args:
        sources: paths (JSON-lines or ``.sse`` files, directories of them), ``MemorySource``s
            or ``RecordedStream``s — see ``streamkit.replay._sources``.
        pipeline: a processor, a list or ``Pipeline``, or ``"module:attribute"`` naming one
            (or a no-argument factory); only stream hooks (``process_output_stream``) run.
        ray: ``None``/``False`` (local), ``True``/``"local"`` or an address: run as Ray Data
            tasks.
        processes: local worker processes (default: every core; ``1``: in this process).
        batch_size: streams per task.
        on_stream: called in this process with every stream's result row (for JSON lines).
        progress: draw a progress bar on ``progress_stream`` (stderr).
        deadline: seconds each stream may take (60 by default; ``None``: no limit). A stream
            past it fails alone, ``DeadlineExceeded: ...`` in its row and in
            ``error_samples``; the others are replayed.

    Returns:
        A ``ReplayReport``; ``report.counts()`` is identical for every ``ray``/``processes``.

    Raises:
        InvalidArgument / InvalidType: a bad source, pipeline or option.

    Example:
        >>> report = replay(["recordings/"], "myguards:PIPELINE")
        >>> print(report.summary())
        >>> report.counts() == replay(["recordings/"], "myguards:PIPELINE", ray=True).counts()
        True
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgument(f"batch_size must be an int >= 1, got {batch_size!r}")
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int)
                                  or processes < 1):
        raise InvalidArgument(f"processes must be None or an int >= 1, got {processes!r}")
    if ray is False:
        ray = None
    if ray is not None and ray is not True and not isinstance(ray, str):
        raise InvalidType(f"ray must be None, True, 'local' or an address string, got {ray!r}")
    if deadline is not None and (isinstance(deadline, bool)
                                 or not isinstance(deadline, (int, float)) or not deadline > 0):
        raise InvalidArgument(f"deadline must be None or a number of seconds > 0, got "
                              f"{deadline!r}")
    deadline = float(deadline) if deadline is not None else None
    if on_stream is not None and not callable(on_stream):
        raise InvalidType(f"on_stream must be callable, got {type(on_stream).__name__}")
    resolved = load_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    started = time.perf_counter()
    streams = list(read_streams([sources] if isinstance(sources, str) else sources))
    batches = _batches(streams, batch_size)
    workers = processes or os.cpu_count() or 1
    workers = min(workers, max(1, len(batches)))
    report = ReplayReport(processors={pid: ProcessorReport(pid)
                                      for pid in processor_ids(resolved)})
    if not batches:
        results: Iterator[list[dict[str, Any]]] = iter(())
    elif ray is not None:
        report.mode = "ray"
        results = _ray_rows(pipeline_payload(pipeline), batches, ray, report, deadline)
    elif workers > 1:
        report.mode = "processes"
        results = _processes(pipeline_payload(pipeline), batches, workers, deadline)
    else:
        workers = 1
        results = (replay_rows(resolved, batch, deadline, _run_async) for batch in batches)
    if ray is None:
        report.workers = workers
    bar = _Progress(len(streams), progress_stream, progress)
    try:
        for rows in results:
            for row in rows:
                report.add(row)
                if on_stream is not None:
                    on_stream(row)
            bar.update(len(rows))
    finally:
        bar.close()
        close = getattr(results, "close", None)
        if close is not None:  # stopped early: end the executor now (workers are terminated)
            close()
    report.seconds = time.perf_counter() - started
    return report
