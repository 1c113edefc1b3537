"""Replay: run a processor pipeline over recorded chunk streams and report what it would have done.

"What would this guard pipeline have done to last month's traffic?" — give it the recordings
(JSON-lines or SSE files of chunks, or threads from a memory store) and a pipeline; every stream
goes through the same fused chain a run uses (``streamkit.ops.apply``), and each processor's
effect is counted: chunks dropped, rewritten and added, redactions, tripwires, time per chunk.
Locally the streams are spread over worker processes on every core; with ``ray=`` the replay
is a Ray Data job whose workers read the recordings (a directory or an ``s3://``/``gs://``
URI), replay them on a pool of actors, write the rows (``output=``) and sum them. The counts
are sums over streams, so they are identical however the work was split.

What belongs here: the replay API and its report. What does not: the engine (``ops``), the
command line (``python -m streamkit replay``, in ``streamkit.__main__``).

Modules: ``_sources`` (files and memory threads → ``RecordedStream``), ``_run`` (one stream, the
probes that measure each processor, one batch), ``_deadline`` (each stream's deadline: one bad
record never hangs a replay), ``_isolate`` (worker processes a stream can kill without killing
the replay), ``_ray`` (the Ray Data job), ``_report`` (totals, table, JSON), ``_execute`` (the
API: which executor runs).

One bad record fails only its own stream, with its reason in the report: a line that does not
decode (nested 100,000 deep, say), an SSE event that cannot be read, a processor that raises, a
stream past its ``deadline`` (60 s by default), a stream that kills its worker process
(``WorkerDied``, after one retry), a dangling symbolic link in the corpus.

Example:
    >>> from streamkit.replay import replay
    >>> report = replay(["recordings/"], "myguards:PIPELINE")   # every core
    >>> print(report.summary())
    processor  in     out    dropped  rewritten  added  redactions  tripwires  us/chunk
    ...
    >>> ray_report = replay(["recordings/"], "myguards:PIPELINE", ray="auto")
    >>> ray_report.counts() == report.counts()
    True
"""

from ._execute import replay
from ._report import ProcessorReport, ReplayReport
from ._run import ReplayRow as ReplayRow  # the type of a row (on_stream=); not in __all__
from ._run import TripwireCell as TripwireCell
from ._run import load_pipeline
from ._sources import MemorySource, RecordedStream, read_streams

__all__ = ["replay", "ReplayReport", "ProcessorReport", "MemorySource", "RecordedStream",
           "read_streams", "load_pipeline"]
