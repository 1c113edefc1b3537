"""Replay: run a processor pipeline over recorded chunk streams and report what it would have done.

"What would this guard pipeline have done to last month's traffic?" — give it the recordings
(JSON-lines or SSE files of chunks, or threads from a memory store) and a pipeline; every stream
goes through the same fused chain a run uses (``streamkit.ops.apply``), and each processor's
effect is counted: chunks dropped, rewritten and added, redactions, tripwires, time per chunk.
Locally the streams are spread over every core; with ``ray=`` the same batches run as Ray Data
tasks on a cluster. The counts are sums over streams, so they are identical however the work
was split.

What belongs here: the replay API and its report. What does not: the engine (``ops``), the
command line (``python -m streamkit replay``, in ``streamkit.__main__``).

Modules: ``_sources`` (files and memory threads → ``RecordedStream``), ``_run`` (one stream, the
probes that measure each processor, one batch), ``_deadline`` (each stream's deadline: one bad
record never hangs a replay), ``_report`` (totals, table, JSON), ``_execute`` (in process, worker
processes, Ray).

One bad record fails only its own stream, with its reason in the report: a line that does not
decode (nested 100,000 deep, say), an SSE event that cannot be read, a processor that raises, a
stream past its ``deadline`` (60 s by default).

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
from ._run import load_pipeline
from ._sources import MemorySource, RecordedStream, read_streams

__all__ = ["replay", "ReplayReport", "ProcessorReport", "MemorySource", "RecordedStream",
           "read_streams", "load_pipeline"]
