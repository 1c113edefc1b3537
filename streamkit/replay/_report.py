"""What a replay found: per-processor totals, the summary table, the JSON form.

What belongs here: ``ProcessorReport`` and ``ReplayReport`` (sums of stream rows, in any order
— so a replay split over processes or a Ray cluster adds up to the same counts), and their
text and JSON renderings. What does not: producing the rows (``_run``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._run import COUNTS, ReplayRow

__all__ = ["ProcessorReport", "ReplayReport"]


@dataclass(slots=True)
class ProcessorReport:
    """One processor's totals over every replayed stream.

    Attributes:
        id: the processor id.
        chunks_in / chunks_out: chunks that reached it / left it.
        dropped, rewritten, added: see ``streamkit.replay._run`` (``in = passed + rewritten +
            dropped``; ``out = passed + rewritten + added``).
        redactions: detections it recorded (``state["detections"]``/``["redactions"]``).
        tripwires: streams it ended with a tripwire.
        ns: nanoseconds spent in it (sampled); ``us_per_chunk`` divides by ``chunks_in``.
    """

    id: str
    chunks_in: int = 0
    chunks_out: int = 0
    dropped: int = 0
    rewritten: int = 0
    added: int = 0
    redactions: int = 0
    tripwires: int = 0
    ns: int = 0

    @property
    def us_per_chunk(self) -> float:
        return self.ns / self.chunks_in / 1000 if self.chunks_in else 0.0

    def add(self, counts: dict[str, int]) -> None:
        self.chunks_in += counts["in"]
        self.chunks_out += counts["out"]
        self.dropped += counts["dropped"]
        self.rewritten += counts["rewritten"]
        self.added += counts["added"]
        self.redactions += counts["redactions"]
        self.tripwires += counts["tripwires"]
        self.ns += counts["ns"]

    def counts(self) -> dict[str, int]:
        """The totals that do not depend on timing (identical between two replays)."""
        return {"in": self.chunks_in, "out": self.chunks_out, "dropped": self.dropped,
                "rewritten": self.rewritten, "added": self.added,
                "redactions": self.redactions, "tripwires": self.tripwires}


@dataclass
class ReplayReport:
    """A replay's result: per-processor totals and the stream counts.

    Attributes:
        processors: ``{id: ProcessorReport}`` in pipeline order.
        streams: streams replayed; ``chunks`` the chunks they held; ``delivered`` the chunks
            that came out of the pipeline.
        tripped: streams ended by a tripwire; ``errors`` streams that failed (a chunk that
            does not decode, a processor that raised) — ``error_samples`` keeps the first few.
        mode: ``"inline"``, ``"processes"`` or ``"ray"``; ``workers`` how many ran;
            ``seconds`` the wall time.

    Example:
        >>> report = replay(["recordings/"], "guards:PIPELINE")
        >>> report.processors["pii"].redactions
        412
        >>> print(report.summary())
    """

    processors: dict[str, ProcessorReport] = field(default_factory=dict)
    streams: int = 0
    chunks: int = 0
    delivered: int = 0
    tripped: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    mode: str = "inline"
    workers: int = 1
    seconds: float = 0.0

    def add(self, row: ReplayRow) -> None:
        """Add one stream's result row."""
        self.streams += 1
        self.chunks += row["chunks"]
        self.delivered += row["delivered"]
        self.tripped += row["tripwire"] is not None
        if row["error"] is not None:
            self.errors += 1
            if len(self.error_samples) < 10:
                self.error_samples.append(f"{row['stream']}: {row['error']}")
        for pid, counts in row["processors"].items():
            report = self.processors.get(pid)
            if report is None:
                report = self.processors[pid] = ProcessorReport(pid)
            report.add(counts)

    def merge(self, other: ReplayReport) -> None:
        """Add the totals of ``other`` (a partial report over other streams: what each Ray Data
        block sums up before the driver adds the blocks together)."""
        self.streams += other.streams
        self.chunks += other.chunks
        self.delivered += other.delivered
        self.tripped += other.tripped
        self.errors += other.errors
        room = 10 - len(self.error_samples)
        self.error_samples += other.error_samples[:max(0, room)]
        for pid, theirs in other.processors.items():
            ours = self.processors.get(pid)
            if ours is None:
                ours = self.processors[pid] = ProcessorReport(pid)
            ours.add({**theirs.counts(), "ns": theirs.ns})

    @property
    def streams_per_second(self) -> float:
        return self.streams / self.seconds if self.seconds > 0 else 0.0

    def counts(self) -> dict[str, object]:
        """Everything that does not depend on timing or on where it ran: equal for two replays
        of the same streams and pipeline, locally or on Ray."""
        return {"streams": self.streams, "chunks": self.chunks, "delivered": self.delivered,
                "tripped": self.tripped, "errors": self.errors,
                "processors": {pid: p.counts() for pid, p in self.processors.items()}}

    def to_json(self) -> dict[str, object]:
        """The report as JSON-able data (the ``summary`` line of ``--json``)."""
        return {**self.counts(), "mode": self.mode, "workers": self.workers,
                "seconds": round(self.seconds, 3),
                "streams_per_second": round(self.streams_per_second, 1),
                "error_samples": list(self.error_samples),
                "us_per_chunk": {pid: round(p.us_per_chunk, 3)
                                 for pid, p in self.processors.items()}}

    def summary(self) -> str:
        """An aligned text table, one row per processor, and a line of totals."""
        cols = ("processor", "in", "out", *[c for c in COUNTS if c not in ("in", "out")],
                "us/chunk")
        rows = [[pid, *(str(v) for v in p.counts().values()), f"{p.us_per_chunk:.2f}"]
                for pid, p in self.processors.items()]
        widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
                  for i, c in enumerate(cols)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
        lines.append(f"{self.streams} streams, {self.chunks} chunks in, {self.delivered} out; "
                     f"{self.tripped} tripped, {self.errors} failed; {self.mode} x"
                     f"{self.workers}, {self.seconds:.2f} s ({self.streams_per_second:.0f} "
                     f"streams/s)")
        lines += [f"  failed: {sample}" for sample in self.error_samples]
        return "\n".join(lines)
