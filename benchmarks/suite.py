"""The fixed set ``python -m benchmarks`` runs, at three sizes: full, quick and tiny.

What belongs here: ``Sizes`` (how big each workload is and how often it repeats) and
``build_suite`` (every group, in table order, optionally filtered). What does not: the workloads
(``benchmarks.rows_*``) and the measuring (``benchmarks.harness``).

Full sizes are chosen so the whole suite stays under five minutes on two cores while every row
is a median of at least five interleaved runs (seven for the micro rows, which are cheap).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from .harness import Group
from .rows_agent import agent_groups, memory_groups, request_groups
from .rows_build import build_groups
from .rows_mastra import mirror_groups
from .rows_pii import pii_groups
from .rows_replay import replay_groups
from .rows_runner import runner_groups
from .rows_tracing import tracing_groups
from .rows_wire import wire_groups

__all__ = ["Sizes", "build_suite", "SECTIONS"]

#: Sections in table order; ``--only`` matches these names or any part of a group title.
SECTIONS = ("build", "wire", "runner", "agent", "tracing", "requests", "memory", "replay",
            "pii", "mastra")


@dataclass(frozen=True, slots=True)
class Sizes:
    """Workload sizes and repetitions of one suite run.

    Attributes:
        wire_chunks: chunks encoded/decoded per wire run.
        runner_chunks: chunks per standalone-runner run.
        agent_short / agent_long: text deltas of the short and long ``agent.stream`` rows.
        request_chunks: text deltas per request of the request and memory rows.
        requests: requests per run of a request row.
        concurrency: requests in flight in the concurrent request rows.
        inflight: concurrent streams of the memory rows.
        repeat_micro: timed runs of the wire and runner rows.
        repeat: timed runs of the agent, request and memory rows.
        mastra_n: text deltas of the Mastra mirror's streams (``benchmarks.rows_mastra``; its
            100-chunk request rows use ``requests`` and ``concurrency``).
        long_memory: also trace the memory of the long "3 transforms" agent row (~20 s more:
            tracemalloc makes a million-chunk stream several times slower).
        replay_streams: recorded streams per run of the replay rows.
        replay_ray: include the Ray row (a local Ray instance; off at tiny size, where the
            test suite runs the table and has its own Ray).
        long_lines_mib: sizes of the one-line SSE events of the "SSE long lines" rows.
        pii_kb: sizes (KB) of the one delta of the PII rows; ``pii_old_kb`` the sizes at which
            the code before issue 26 runs beside it (quadratic: ~4 s at 100 KB, ~270 s at 1 MB).
    """

    wire_chunks: int = 20_000
    runner_chunks: int = 5_000
    agent_short: int = 10_000
    agent_long: int = 1_000_000
    request_chunks: int = 100
    requests: int = 300
    concurrency: int = 100
    inflight: int = 1_000
    repeat_micro: int = 7
    repeat: int = 5
    long_memory: bool = True
    replay_streams: int = 10_000
    replay_ray: bool = True
    long_lines_mib: tuple[int, ...] = (1, 4, 16)
    mastra_n: int = 10_000
    pii_kb: tuple[int, ...] = (10, 100, 1024)
    pii_old_kb: tuple[int, ...] = (10, 100)

    @classmethod
    def full(cls) -> Sizes:
        return cls()

    @classmethod
    def quick(cls) -> Sizes:
        """A smoke run of every row in well under a minute (numbers are indicative only)."""
        return cls(wire_chunks=5_000, runner_chunks=2_000, agent_short=2_000, agent_long=50_000,
                   requests=100, inflight=200, repeat_micro=3, repeat=3, long_memory=False,
                   replay_streams=2_000, mastra_n=2_000, pii_kb=(10, 40, 256),
                   pii_old_kb=(10, 40))

    @classmethod
    def tiny(cls) -> Sizes:
        """Structure only (tests): every row runs, but on a handful of chunks."""
        return cls(wire_chunks=200, runner_chunks=100, agent_short=100, agent_long=1_000,
                   request_chunks=20, requests=10, concurrency=4, inflight=10, repeat_micro=2,
                   repeat=2, long_memory=False, replay_streams=100, replay_ray=False,
                   long_lines_mib=(1, 2), mastra_n=200, pii_kb=(1, 2, 4), pii_old_kb=(1, 2))

    def without_long_memory(self) -> Sizes:
        """Skip tracing the long agent row (``--no-long-memory``)."""
        return replace(self, long_memory=False)

    def with_repeat(self, repeat: int) -> Sizes:
        """Every row repeated ``repeat`` times (``--repeat``)."""
        return replace(self, repeat_micro=repeat, repeat=repeat)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_suite(sizes: Sizes, only: list[str] | None = None) -> list[Group]:
    """Every group of the fixed set, in table order.

    Args:
        sizes: workload sizes.
        only: keep just these sections (``build``, ``wire``, ``runner``, ``agent``,
            ``tracing``, ``requests``, ``memory``, ``replay``, ``pii``, ``mastra``) or the
            groups whose title contains one of these strings.
    """
    wanted = [w.lower() for w in only or []]
    patterns = [w for w in wanted if w not in SECTIONS]
    builders = {
        "wire": lambda: wire_groups(sizes.wire_chunks, sizes.repeat_micro,
                                    sizes.long_lines_mib),
        "build": lambda: build_groups(sizes.wire_chunks, sizes.repeat_micro),
        "runner": lambda: runner_groups(sizes.runner_chunks, sizes.repeat_micro),
        "agent": lambda: agent_groups(sizes.agent_short, sizes.agent_long, sizes.repeat,
                                      long_memory=sizes.long_memory),
        # Ratios near 1 need more, longer runs to rise above the noise (~8 s in all).
        "tracing": lambda: tracing_groups(sizes.agent_short * 5, sizes.repeat * 3),
        "requests": lambda: request_groups(sizes.requests, sizes.concurrency,
                                           sizes.request_chunks, sizes.repeat),
        "memory": lambda: memory_groups(sizes.inflight, sizes.request_chunks, sizes.repeat),
        "replay": lambda: replay_groups(sizes.replay_streams, min(sizes.repeat, 3),
                                        with_ray=sizes.replay_ray),
        "pii": lambda: pii_groups(sizes.pii_kb, sizes.pii_old_kb, min(sizes.repeat, 3)),
        "mastra": lambda: mirror_groups(sizes.mastra_n, sizes.repeat,
                                        seq_requests=sizes.requests,
                                        conc_requests=sizes.concurrency),
    }
    groups: list[Group] = []
    for section in SECTIONS:
        if wanted and section not in wanted and not patterns:
            continue
        for group in builders[section]():
            if not wanted or section in wanted or any(p in group.title.lower()
                                                      for p in patterns):
                groups.append(group)
    return groups
