"""Replay rows: recorded streams per second through a guard pipeline, in one process, on every
core, and on Ray — one group, so the three are measured interleaved in the same run.

What belongs here: the generated recordings, the pipeline (named ``module:attribute`` so worker
processes and Ray tasks rebuild it) and the group. The ``req/s`` column of these rows is
streams per second. Every row returns the report's counts and must return the ones the
generator put in, so a row that skipped work would fail rather than look fast.

* **one process**: ``replay(..., processes=1)``, the baseline.
* **all cores**: ``replay(...)`` — spawned worker processes, one per core; the pool's start
  (importing streamkit in each worker) is part of every run, as it is of every replay.
* **Ray**: ``replay(..., ray=True)`` on a local Ray instance with one CPU per core, started
  once at warm-up (Ray's start is not part of a replay's cost once a cluster runs) and shut down
  when the benchmark process exits.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import sys
from typing import Any

from streamkit import ops
from streamkit.replay import RecordedStream, replay
from streamkit_operators import PIIDetector

from .harness import Case, Group

__all__ = ["replay_groups", "guard_pipeline", "recordings"]

PIPELINE = "benchmarks.rows_replay:guard_pipeline"


def guard_pipeline() -> list[Any]:
    """Reasoning dropped, e-mail addresses redacted, a forbidden word trips."""
    return [ops.drop(lambda p: p.type == "reasoning-delta", id="drop-reasoning"),
            PIIDetector(detection_types=["email"], id="pii"),
            ops.abort(lambda p: p.type == "text-delta" and "FORBIDDEN" in p.payload.text,
                      "forbidden", id="forbidden")]


def recordings(n: int) -> tuple[list[RecordedStream], tuple[int, int, int]]:
    """``n`` small recorded streams and what the pipeline must find: (streams, redactions,
    tripwires)."""
    rng = random.Random(7)
    streams, emails, trips = [], 0, 0
    for i in range(n):
        run = {"runId": f"r{i}", "from": "AGENT"}
        words = ["Your", "order", "ships", "today."]
        if rng.random() < 0.3:
            words.append(f"Mail user{i}@example.com.")
            emails += 1
        if rng.random() < 0.1:
            words.append("FORBIDDEN")
            trips += 1
        chunks = [{"type": "start", **run, "payload": {"id": "a", "messageId": f"m{i}"}},
                  {"type": "reasoning-delta", **run, "payload": {"id": "rs", "text": "hm"}}]
        chunks += [{"type": "text-delta", **run, "payload": {"id": "t", "text": w + " "}}
                   for w in words]
        streams.append(RecordedStream(f"s{i}", tuple(json.dumps(c).encode() for c in chunks)))
    return streams, (n, emails, trips)


def _check(report: Any) -> tuple[int, int, int]:
    return (report.streams, report.processors["pii"].redactions,
            report.processors["forbidden"].tripwires)


def _ray_started() -> None:
    # Ray is optional (the ray extra) and slow to import: loaded only when its row runs.
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                     p for p in sys.path if p)}})
        atexit.register(ray.shutdown)


def replay_groups(n: int, repeat: int, *, with_ray: bool = True) -> list[Group]:
    """The replay group over ``n`` recorded streams."""
    streams, expect = recordings(n)
    chunks = sum(len(s.chunks) for s in streams)
    cores = os.cpu_count() or 1

    def case(name: str, baseline: str | None, **kw: Any) -> Case:
        def run() -> tuple[int, int, int]:
            if kw.get("ray"):
                _ray_started()
            return _check(replay(streams, PIPELINE, batch_size=max(50, n // 40), **kw))
        return Case(name, run, chunks, baseline=baseline, expect=expect, requests=n,
                    memory=False, note="req/s = recorded streams replayed per second")

    one = "one process"
    cases = [case(one, None, processes=1), case(f"all cores ({cores} processes)", one)]
    if with_ray:
        cases.append(case(f"Ray Data (local, {cores} CPUs)", one, ray=True))
    return [Group(f"replay · {n:,} recorded streams · 3 guards", cases, repeat=repeat)]
