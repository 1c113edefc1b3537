"""Where a replay runs: in this process, in worker processes on every core, or as a Ray Data job.

What belongs here: ``replay`` (the Python API), the choice of executor and the progress bar.
What does not: what one stream's replay measures (``_run``), sources (``_sources``), the worker
processes (``_isolate``), the Ray Data job (``_ray``). Every executor replays each stream with
``_run.replay_rows``, so their counts are identical.

Decisions:

* Locally this process reads the sources and ships streams in batches (``batch_size``
  streams) to ``_isolate.StreamWorker`` processes, one per core: a stream that kills its worker
  (``os._exit``, the OOM killer) is retried once and then reported as a failed row naming it
  (``WorkerDied``), and the replay goes on. ``processes=1`` replays in this process with the
  pipeline object itself (nothing is pickled, nothing protects this process from a stream that
  ends it).
* On Ray (``ray=``) nothing of the corpus passes through this process: see ``_ray``.
* Workers rebuild the pipeline once per process: a ``"module:attribute"`` string is imported
  there, an object is pickled.
* Local processes are *spawned* (not forked): a fork would copy this process's event loop and
  threads.
* ``ray``: ``None`` (no Ray), ``True`` or ``"local"`` (a Ray instance already initialised in
  this process, else a local one started for this replay), or an address (``"auto"``,
  ``"ray://head:10001"``, ``"head:6380"``). A Ray instance this function started is shut down
  before it returns; one it found running is left running.
* ``deadline`` (60 s by default, ``None``: off) bounds each stream, not the whole replay: a
  stream past it is reported as failed with the reason and the replay goes on (how a stream is
  stopped: ``_deadline``, and ``_isolate`` for one no signal reaches).
* Worker processes never outlive the replay: when it ends early (an error, the caller stops
  iterating, ``SIGTERM`` to the command line, which turns it into ``SystemExit``), the workers
  are killed rather than left to finish their batches; and each worker exits by itself
  within half a second of its parent's death (a ``kill -9`` runs no cleanup in the parent).
* Progress goes to stderr: ``replay: 1200/10000 streams 12% 850/s``, redrawn at most ten times
  a second (``progress=False`` for none); a Ray replay draws none (the driver does not count
  the corpus).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TextIO

from streamkit.errors import InvalidArgument, InvalidType, StreamkitError
from streamkit.validate import int_at_least, optional_int_at_least, optional_seconds

from ._deadline import DEFAULT_DEADLINE
from ._isolate import process_rows
from ._ray import check_output, ray_replay
from ._report import ProcessorReport, ReplayReport
from ._run import ReplayRow, load_pipeline, pipeline_payload, processor_ids, replay_rows
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


def _ray_started(target: object) -> tuple[ModuleType, bool]:
    """Ray, initialised: ``(ray, started)`` — whether this replay started it (and must shut it
    down)."""
    # Ray takes seconds to import and is an optional extra: only a Ray replay loads it.
    try:
        import ray  # noqa: PLC0415
        import ray.data  # noqa: PLC0415, F401
    except ImportError as exc:
        raise StreamkitError(f"replay(ray=...) needs Ray Data: pip install 'streamkit-agents[ray]' "
                             f"({exc})") from exc
    if ray.is_initialized():
        return ray, False
    try:
        if target in (True, "local"):
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=str(target), log_to_driver=False)
    except Exception as exc:  # noqa: BLE001 - Ray raises builtins (ConnectionError...)
        raise StreamkitError(f"could not start or reach Ray at {target!r}: "
                             f"{type(exc).__name__}: {exc}") from exc
    return ray, True


def replay(sources: Iterable[object] | str, pipeline: object, *, ray: object = None,
           processes: int | None = None, batch_size: int = 200,
           on_stream: Callable[[ReplayRow], object] | None = None,
           progress: bool = False, progress_stream: TextIO | None = None,
           deadline: float | None = DEFAULT_DEADLINE, output: str | Path | None = None,
           output_format: str = "json") -> ReplayReport:
    """Replay recorded streams through ``pipeline`` and report what each processor did.

    Args:
        sources: paths (JSON-lines or ``.sse`` files, directories of them; with ``ray``
            also ``s3://``/``gs://``... URIs), ``MemorySource``s or ``RecordedStream``s — see
            ``streamkit.replay._sources``.
        pipeline: a processor, a list or ``Pipeline``, or ``"module:attribute"`` naming one
            (or a no-argument factory); only stream hooks (``process_output_stream``) run.
        ray: ``None``/``False`` (local), ``True``/``"local"`` or an address: a Ray Data job
            (``streamkit.replay._ray``).
        processes: local worker processes (default: every core; ``1``: in this process, with
            no protection from a stream that ends the process).
        batch_size: streams per task.
        on_stream: called in this process with every stream's result row (for JSON lines).
        progress: draw a progress bar on ``progress_stream`` (stderr; local replays only —
            a Ray replay does not count the corpus on the driver).
        deadline: seconds each stream may take (60 by default; ``None``: no limit). A stream
            past it fails alone, ``DeadlineExceeded: ...`` in its row and in
            ``error_samples``; the others are replayed.
        output: with ``ray``, a new or empty directory or URI the Ray workers write the rows
            to (``output_format`` ``"json"``: JSON lines, or ``"parquet"``).

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
    int_at_least(batch_size, "batch_size", 1)
    optional_int_at_least(processes, "processes", 1)
    if ray is False:
        ray = None
    if ray is not None and ray is not True and not isinstance(ray, str):
        raise InvalidType(f"ray must be None, True, 'local' or an address string, got {ray!r}")
    deadline = optional_seconds(deadline, "deadline")
    if on_stream is not None and not callable(on_stream):
        raise InvalidType(f"on_stream must be callable, got {type(on_stream).__name__}")
    if output_format not in ("json", "parquet"):
        raise InvalidArgument(f"output_format must be 'json' or 'parquet', got "
                              f"{output_format!r}")
    if output is not None and (ray is None or not isinstance(output, (str, Path))):
        raise InvalidArgument(f"output= (a directory or URI for the rows) is written by Ray "
                              f"workers: pass ray= too, or take the rows with on_stream; got "
                              f"output={output!r}, ray={ray!r}")
    resolved = load_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    source_list = [sources] if isinstance(sources, (str, Path)) else list(sources)
    started = time.perf_counter()
    report = ReplayReport(processors={pid: ProcessorReport(pid)
                                      for pid in processor_ids(resolved)})
    if ray is not None:
        report.mode = "ray"
        payload = pipeline_payload(pipeline)
        if output is not None:
            check_output(str(output))
        ray_module, ray_started = _ray_started(ray)
        try:
            ray_replay(ray_module, source_list, payload, list(report.processors), report,
                       batch_size=batch_size, deadline=deadline,
                       output=None if output is None else str(output),
                       output_format=output_format, on_stream=on_stream)
        finally:
            if ray_started:
                ray_module.shutdown()
        report.seconds = time.perf_counter() - started
        return report
    streams = list(read_streams(source_list))
    batches = _batches(streams, batch_size)
    workers = min(processes or os.cpu_count() or 1, max(1, len(batches)))
    if not batches:
        results: Iterator[list[ReplayRow]] = iter(())
    elif processes == 1:
        workers = 1
        results = (replay_rows(resolved, batch, deadline, _run_async) for batch in batches)
    else:
        report.mode = "processes"
        results = process_rows(pipeline_payload(pipeline), batches, workers, deadline)
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
        if close is not None:  # stopped early: end the executor now (workers are killed)
            close()
    report.seconds = time.perf_counter() - started
    return report
