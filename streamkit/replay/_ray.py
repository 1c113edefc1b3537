"""A replay as a data-parallel Ray Data job: the workers read, replay, write and sum.

What belongs here: ``ray_replay`` — the Ray Data plan of a replay and the pieces its workers
run (splitting files into streams, the replay actor, the partial sums). What does not: the
replay of one stream (``_run``), the worker process a stream may kill (``_isolate``), the local
executors (``_execute``).

The plan (nothing of the corpus passes through the driver, so its memory does not grow with
the corpus; ``benchmarks/README.md`` has the measurement)::

    read_binary_files(files)          the workers read the recordings (a local or shared
      -> map_batches(split)           directory, or s3:// gs:// ... through pyarrow.fs),
      -> map_batches(ReplayActor)     one row per stream, then streams in batches of
      -> write_json / write_parquet   ``batch_size`` on a pool of actors — the pipeline is
      -> map_batches(partial sums)    built once per actor — rows written by the workers
      -> driver: adds the partials    (``output=``), and the summary summed per block.

Decisions:

* Files are listed on the driver (Ray Data lists them there too): paths and URIs only, never
  their contents. A dangling symbolic link in a local corpus is a failed row naming it. Sources
  that are not files (``MemorySource``, ``RecordedStream``) are read on the driver and added
  to the dataset: they do not scale past the driver's memory, a corpus of files does.
* On a cluster a local path must be on storage every node sees (NFS...), or be a URI
  (``s3://bucket/recordings/``, ``gs://...``, with pyarrow's credentials from the environment);
  so must ``output``.
* Each actor owns a ``StreamWorker`` (a child process): a stream that kills it is retried once
  and then reported as ``WorkerDied`` under its id, and the per-stream deadline is a signal in
  that process's main thread, or a kill. Ray's own retries are bounded (``RAY_RETRIES``; Ray
  Data's default retries a failed task for ever): they are for a node lost under the job,
  not for a poisoned stream. An actor or task that still fails ends the replay with a
  ``StreamkitError``.
* The pipeline's own modules travel with the job: the module of a ``"module:attribute"`` (or
  the modules a pickled pipeline refers to) that is not installed (not under site-packages or
  the standard library) is shipped as ``runtime_env={"py_modules": [...]}`` of the replay
  actors. streamkit itself must be installed on the cluster
  (``pip install 'streamkit-agents[ray]'``).
* The rows: with ``output`` (a directory or URI, new or empty) the workers write them as JSON
  lines (``output_format="json"``, the ``--json`` row shape) or Parquet, and the summary sums
  what was written (read back by the workers). With ``on_stream`` the rows come back to the
  driver one batch at a time (bounded memory, but the driver's pace). Otherwise only the
  partial sums come back.
* Reading, splitting, writing and summing take no CPU slot (``num_cpus=0``: they are light);
  the actors take one each and there is one per CPU of the cluster — with actors in every slot,
  tasks that needed one would never be scheduled. Each of those stages runs at most one task
  per CPU at a time (``concurrency``): unbounded, a task without a CPU slot per file made Ray
  start a worker process for each (measured: the replay took 5x as long on 2 cores).
"""

from __future__ import annotations

import logging
import os
import pickle
import pickletools
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from streamkit.errors import InvalidArgument, StreamkitError

from ._isolate import StreamWorker
from ._report import ReplayReport
from ._run import COUNTS, ReplayRow
from ._sources import (
    SUFFIXES,
    RecordedStream,
    corpus_files,
    read_streams,
    split_file,
)

__all__ = ["ray_replay", "check_output", "RAY_RETRIES", "shipped_modules"]

#: Restarts of a replay actor and retries of a Ray task (a node lost under the job).
RAY_RETRIES = 2

#: Modules that must be installed on a cluster rather than shipped with a job.
_INSTALLED = ("streamkit", "streamkit_operators", "__main__")


def _arrow() -> Any:
    import pyarrow  # noqa: PLC0415 - pyarrow comes with the ray extra

    return pyarrow


def _stream_schema() -> Any:
    pa = _arrow()
    return pa.schema([("stream", pa.string()), ("chunks", pa.list_(pa.binary())),
                      ("error", pa.string())])


def row_schema(processor_ids: Iterable[str]) -> Any:
    """The Arrow schema of a stream's row (see ``_run.replay_stream``) for these processors."""
    pa = _arrow()
    counts = pa.struct([(name, pa.int64()) for name in (*COUNTS, "ns")])
    return pa.schema([
        ("stream", pa.string()), ("chunks", pa.int64()), ("delivered", pa.int64()),
        ("tripwire", pa.struct([("processor", pa.string()), ("reason", pa.string())])),
        ("error", pa.string()),
        ("processors", pa.struct([(pid, counts) for pid in dict.fromkeys(processor_ids)]))])


def rows_of(table: Any) -> list[ReplayRow]:
    """The rows of an Arrow table of rows, as ``_run.replay_stream`` returned them (a
    processor a failed stream never reached is absent, not null)."""
    rows: list[ReplayRow] = table.to_pylist()
    for row in rows:
        row["processors"] = {pid: counts for pid, counts in (row["processors"] or {}).items()
                             if counts is not None}
    return rows


def _split(batch: Any, root: str, shown: str) -> Any:
    """Files (``path``, ``bytes``) → streams; ids as a local replay names them (``shown``
    stands for the ``root`` the worker read)."""
    pa = _arrow()
    out: list[dict[str, object]] = []
    for path, data in zip(batch.column("path").to_pylist(), batch.column("bytes").to_pylist(),
                          strict=True):
        name = shown + path[len(root):] if path.startswith(root) else path
        out += [{"stream": s.id, "chunks": list(s.chunks), "error": s.error}
                for s in split_file(name, data)]
    return pa.Table.from_pylist(out, schema=_stream_schema())


class ReplayActor:
    """A Ray Data actor: replays batches of streams in its ``StreamWorker`` (which builds the
    pipeline once), and returns their rows as an Arrow table."""

    def __init__(self, payload: tuple[str, object], deadline: float | None,
                 processor_ids: list[str]) -> None:
        self.worker = StreamWorker(payload, deadline)
        self.schema = row_schema(processor_ids)

    def __call__(self, batch: Any) -> Any:
        streams = [RecordedStream(sid, tuple(chunks), error) for sid, chunks, error in zip(
            batch.column("stream").to_pylist(), batch.column("chunks").to_pylist(),
            batch.column("error").to_pylist(), strict=True)]
        rows = list(self.worker.replay(streams))
        return _arrow().Table.from_pylist(rows, schema=self.schema)

    def __del__(self) -> None:
        self.worker.close()


def _partial(batch: object) -> Any:
    """One block of rows → one row holding their sums (a pickled ``ReplayReport``)."""
    report = ReplayReport()
    for row in rows_of(batch):
        report.add(row)
    return _arrow().Table.from_pylist([{"partial": pickle.dumps(report)}])


def shipped_modules(payload: tuple[str, str | bytes]) -> list[str]:
    """The local paths of the modules ``payload`` names that the workers cannot import from
    an installation: packages and modules outside site-packages and the standard library."""
    _, value = payload
    if isinstance(value, str):  # a "spec" payload: module:attribute
        names = {value.split(":")[0]}
    else:  # every string of the pickle that names a loaded module: its globals' modules
        names = {arg for _, arg, _ in pickletools.genops(value)
                 if isinstance(arg, str) and arg.split(" ")[0] in sys.modules}
        names = {n.split(" ")[0] for n in names}
    installed = {os.path.realpath(p) for key in ("stdlib", "platstdlib", "purelib", "platlib")
                 if (p := sysconfig.get_paths().get(key))}
    found: list[str] = []
    for top in sorted({n.split(".")[0] for n in names} - set(_INSTALLED)):
        module = sys.modules.get(top)
        file = getattr(module, "__file__", None)
        if module is None or file is None:
            continue
        path = os.path.realpath(file)
        if os.path.basename(path) == "__init__.py":
            path = os.path.dirname(path)
        if any(path.startswith(root + os.sep) for root in installed):
            continue
        if path.endswith(".py") or os.path.isdir(path):
            found.append(path)
    return found


#: What a shipped module's folder keeps out of the upload (Ray reads only the ``.gitignore``
#: files inside that folder, and caps a package at 512 MiB): installed Node packages, virtual
#: environments, version control and caches are never a pipeline's code.
NOT_SHIPPED = ("node_modules/", ".venv/", "venv/", ".git/", "__pycache__/", "*.pyc",
               ".hypothesis/", ".mypy_cache/", ".pytest_cache/", ".ruff_cache/")


def _runtime_env(modules: list[str]) -> dict[str, object] | None:
    """The replay actors' ``runtime_env``: ``modules`` uploaded to the cluster (a task-level
    runtime_env takes URIs only; Ray's own upload, the one ``ray.init(runtime_env=)`` runs,
    turns the local paths into ``gcs://`` URIs)."""
    if not modules:
        return None
    try:
        from ray._private.runtime_env.py_modules import (  # noqa: PLC0415
            upload_py_modules_if_needed,
        )
    except ImportError as exc:
        raise StreamkitError(
            f"this Ray cannot ship the pipeline's modules {modules} with the replay ({exc}); "
            f"pass ray.init(runtime_env={{'py_modules': [...]}}) yourself") from exc
    with tempfile.TemporaryDirectory(prefix="streamkit-replay-") as scratch:
        env: dict[str, object] = upload_py_modules_if_needed(
            {"py_modules": modules, "excludes": list(NOT_SHIPPED)}, include_gitignore=True,
            scratch_dir=scratch,
            logger=logging.getLogger("streamkit.replay"))
    return env


def _files(source: str | Path) -> tuple[object, list[str], str, str, list[RecordedStream]]:
    """``(filesystem, paths, root, shown, failed)`` of a path or URI source."""
    import pyarrow.fs as pafs  # noqa: PLC0415 - pyarrow comes with the ray extra

    text = str(source)
    if "://" not in text:
        files, broken = corpus_files(source)
        return (pafs.LocalFileSystem(), [os.path.abspath(p) for p in files],
                os.path.abspath(text), str(Path(text)), broken)
    try:
        fs, root = pafs.FileSystem.from_uri(text)
        info = fs.get_file_info(root)
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"replay source {text!r} cannot be opened: {exc}") from exc
    if info.type == pafs.FileType.NotFound:
        raise InvalidArgument(f"replay source {text!r} does not exist (expected a JSON-lines "
                              f"or .sse file of chunks, or a directory of them)")
    if info.type == pafs.FileType.Directory:
        listed = fs.get_file_info(pafs.FileSelector(root, recursive=True))
        paths = sorted(i.path for i in listed
                       if i.type == pafs.FileType.File and i.path.endswith(SUFFIXES))
    else:
        paths = [root]
    return fs, paths, root.rstrip("/"), text.rstrip("/"), []


def check_output(output: str) -> None:
    """Refuse an ``output`` that already holds files: the summary sums what is there."""
    import pyarrow.fs as pafs  # noqa: PLC0415 - pyarrow comes with the ray extra

    try:
        fs, root = pafs.FileSystem.from_uri(output if "://" in output
                                            else os.path.abspath(output))
        info = fs.get_file_info(root)
        held = info.type == pafs.FileType.Directory and bool(
            fs.get_file_info(pafs.FileSelector(root)))
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"replay output {output!r} cannot be opened: {exc}") from exc
    if info.type == pafs.FileType.File or held:
        raise InvalidArgument(f"replay output {output!r} already exists and is not an empty "
                              f"directory; name a new or empty directory (or URI) for the rows")


def ray_replay(ray: ModuleType, sources: Sequence[object], payload: tuple[str, str | bytes],
               processor_ids: list[str], report: ReplayReport, *, batch_size: int,
               deadline: float | None, output: str | None, output_format: str,
               on_stream: Callable[[ReplayRow], object] | None) -> None:
    """Run the replay on the Ray instance ``ray`` (initialised, ``ray.data`` imported) and add
    its rows to ``report`` (see the module docstring)."""
    data = ray.data
    context = data.DataContext.get_current()
    context.enable_progress_bars = False
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    report.workers = cpus

    # Ray 2.60 deprecates ray_remote_args but has no named parameter for the retries yet: the
    # bounded retries are worth its warning, which is not the caller's to act on; nor is the
    # note that a corpus of fewer files than CPUs cannot use every task or actor.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        warnings.filterwarnings("ignore", message="The (minimum|maximum) number of concurrent")
        _run_plan(data, sources, payload, processor_ids, report, batch_size=batch_size,
                  deadline=deadline, output=output, output_format=output_format,
                  on_stream=on_stream, cpus=cpus, exceptions=ray.exceptions)


def _run_plan(data: ModuleType, sources: Sequence[object], payload: tuple[str, str | bytes],
              processor_ids: list[str], report: ReplayReport, *, batch_size: int,
              deadline: float | None, output: str | None, output_format: str,
              on_stream: Callable[[ReplayRow], object] | None, cpus: int,
              exceptions: ModuleType) -> None:
    pa = _arrow()
    retries = {"max_retries": RAY_RETRIES}
    parts: list[Any] = []
    driver_side: list[RecordedStream] = []
    for source in sources:
        if isinstance(source, (str, Path)):
            fs, paths, root, shown, broken = _files(source)
            driver_side += broken
            if paths:
                files = data.read_binary_files(paths, include_paths=True, filesystem=fs,
                                               num_cpus=0, concurrency=cpus,
                                               ray_remote_args=retries)
                parts.append(files.map_batches(_split, fn_args=(root, shown),
                                               batch_format="pyarrow", batch_size=None,
                                               num_cpus=0, concurrency=cpus, **retries))
        else:  # MemorySource, RecordedStream (read_streams raises InvalidType for the rest)
            driver_side += read_streams([source])
    if driver_side:
        parts.append(data.from_arrow(pa.Table.from_pylist(
            [{"stream": s.id, "chunks": list(s.chunks), "error": s.error}
             for s in driver_side], schema=_stream_schema())))
    if not parts:
        return
    streams = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
    modules = shipped_modules(payload)
    rows = streams.map_batches(
        ReplayActor, fn_constructor_args=(payload, deadline, processor_ids),
        batch_size=batch_size, batch_format="pyarrow",
        compute=data.ActorPoolStrategy(size=cpus), num_cpus=1,
        runtime_env=_runtime_env(modules),
        max_restarts=RAY_RETRIES, max_task_retries=RAY_RETRIES)
    if output is not None and "://" not in output:
        output = os.path.abspath(output)  # a worker's directory is not the driver's
    try:
        if output is not None:
            if output_format == "parquet":
                rows.write_parquet(output, concurrency=cpus,
                                   ray_remote_args={"num_cpus": 0, **retries})
                rows = data.read_parquet(output, num_cpus=0, concurrency=cpus,
                                         ray_remote_args=retries)
            else:
                rows.write_json(output, concurrency=cpus,
                                ray_remote_args={"num_cpus": 0, **retries})
                rows = data.read_json(output, num_cpus=0, concurrency=cpus,
                                      ray_remote_args=retries)
        if on_stream is not None:
            for batch in rows.iter_batches(batch_format="pyarrow", batch_size=None):
                for row in rows_of(batch):
                    report.add(row)
                    on_stream(row)
            return
        partials = rows.map_batches(_partial, batch_format="pyarrow", batch_size=None,
                                    num_cpus=0, concurrency=cpus, **retries)
        for part in partials.iter_rows():
            report.merge(pickle.loads(part["partial"]))
    except exceptions.RayError as exc:
        raise StreamkitError(f"a Ray replay task failed: {exc}") from exc
