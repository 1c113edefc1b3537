"""Replay at two corpus sizes: the driver's peak memory and chunks/s, local vs Ray, the Ray
plan before issue 30 (point 4) beside the one after it, in one run.

    python -m benchmarks.replay_scale                     # 2,000 and 8,000 streams
    python -m benchmarks.replay_scale --sizes 500 2000 --chunks 50

Each measurement runs in a fresh Python process (its peak RSS, ``ru_maxrss``, is the driver's
peak memory: nothing else ran in it), connected to one local Ray instance started here first
(so Ray's start is not part of any row), its workers at nice 0 like the local processes (Ray's
default is 15). The rows:

* **local (processes)**: ``replay(dir, ...)`` on every core — the driver reads the corpus.
* **Ray, before**: the plan before the fix, kept here as the baseline — the driver reads every
  recording, encodes the batches, builds ``ray.data.from_items`` and pulls every row back.
* **Ray, after**: ``replay(dir, ..., ray=address)`` — the workers read, replay and sum.

Every row must return the same counts (checked): a row that skipped work fails. chunks/s is the
corpus's chunks over the replay's wall time (reading included).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PIPELINE = "benchmarks.rows_replay:guard_pipeline"
PER_FILE = 100


def make_corpus(root: Path, streams: int, chunks: int) -> tuple[int, int]:
    """``streams`` recorded streams of ``chunks`` chunks in files of ``PER_FILE``; (chunks,
    bytes) written."""
    rng = random.Random(30)
    root.mkdir(parents=True, exist_ok=True)
    total = size = 0
    for f in range(0, streams, PER_FILE):
        lines: list[str] = []
        for i in range(f, min(f + PER_FILE, streams)):
            run = {"runId": f"r{i}", "from": "AGENT"}
            lines.append(json.dumps({"type": "start", **run,
                                     "payload": {"id": "a", "messageId": f"m{i}"}}))
            lines.append(json.dumps({"type": "reasoning-delta", **run,
                                     "payload": {"id": "rs", "text": "hm"}}))
            for k in range(chunks - 2):
                word = f"user{i}@example.com " if rng.random() < 0.01 else \
                    ("FORBIDDEN " if rng.random() < 0.001 else f"word{k} ")
                lines.append(json.dumps({"type": "text-delta", **run,
                                         "payload": {"id": "t", "text": word}}))
            total += chunks
        body = ("\n".join(lines) + "\n").encode()
        (root / f"part-{f // PER_FILE:05d}.jsonl").write_bytes(body)
        size += len(body)
    return total, size


def _old_ray(corpus: str, address: str) -> Any:
    """The Ray plan before issue 30 point 4 (the baseline): the driver reads and ships it all."""
    import msgspec
    import ray
    import ray.data

    from streamkit.replay import ProcessorReport, RecordedStream, ReplayReport, read_streams
    from streamkit.replay._run import (
        load_pipeline,
        pipeline_payload,
        processor_ids,
        replay_batch,
    )

    ray.init(address=address, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    payload = pipeline_payload(PIPELINE)
    streams = list(read_streams([corpus]))
    batches = [streams[i:i + 200] for i in range(0, len(streams), 200)]
    report = ReplayReport(processors={p: ProcessorReport(p)
                                      for p in processor_ids(load_pipeline(PIPELINE))})
    encoder = msgspec.msgpack.Encoder()
    items = [{"batch": encoder.encode([(s.id, list(s.chunks), s.error) for s in batch])}
             for batch in batches]
    dataset = ray.data.from_items(items, override_num_blocks=max(1, len(items)))

    def task(row: dict[str, Any]) -> dict[str, Any]:
        decoded = msgspec.msgpack.decode(row["batch"])
        rows = replay_batch(payload, [RecordedStream(sid, tuple(c), e)
                                      for sid, c, e in decoded], 60.0)
        return {"rows": msgspec.msgpack.encode(rows)}

    for out in dataset.map(task).iter_rows():
        for row in msgspec.msgpack.decode(out["rows"]):
            report.add(row)
    ray.shutdown()
    return report


def measure(mode: str, corpus: str, address: str) -> dict[str, Any]:
    """One replay in this (fresh) process; its counts, seconds and this process's peak RSS."""
    from streamkit.replay import replay

    started = time.perf_counter()
    if mode == "ray-before":
        report = _old_ray(corpus, address)
    elif mode == "ray-after":
        report = replay([corpus], PIPELINE, ray=address, batch_size=200)
    else:
        report = replay([corpus], PIPELINE, batch_size=200)
    seconds = time.perf_counter() - started
    return {"counts": report.counts(), "seconds": seconds,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _run_one(mode: str, corpus: Path, address: str) -> dict[str, Any]:
    code = ("import json, sys; from benchmarks.replay_scale import measure; "
            "print('RESULT ' + json.dumps(measure(*sys.argv[1:4])))")
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code, mode, str(corpus), address], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=3600)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
            return result
    raise RuntimeError(f"{mode} failed:\n{done.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--chunks", type=int, default=100, help="chunks per stream")
    args = parser.parse_args()
    import ray

    # Ray runs its workers at nice 15 by default: on a host shared with other work (this one
    # is) they would get a fraction of a core while the local row's processes get a full share.
    # At nice 0 the rows compete alike; both Ray plans run under the same setting.
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    address = ray.get_runtime_context().gcs_address
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="replay-scale-") as tmp:
            for n in args.sizes:
                corpus = Path(tmp) / f"c{n}"
                chunks, size = make_corpus(corpus, n, args.chunks)
                results = {mode: _run_one(mode, corpus, address)
                           for mode in ("local", "ray-after", "ray-before")}
                counts = {json.dumps(r["counts"], sort_keys=True) for r in results.values()}
                if len(counts) != 1:
                    raise RuntimeError(f"the rows disagree at {n} streams: {results}")
                for mode, r in results.items():
                    rows.append((n, size / 1e6, mode, r["rss_mb"], chunks / r["seconds"],
                                 r["seconds"]))
                    print(f"{n} streams ({size / 1e6:.0f} MB): {mode}: peak RSS "
                          f"{r['rss_mb']:.0f} MB, {chunks / r['seconds']:,.0f} chunks/s",
                          file=sys.stderr)
    finally:
        ray.shutdown()
    print("| streams | corpus | mode | driver peak RSS | chunks/s | seconds |")
    print("|---|---|---|---|---|---|")
    for n, mb, mode, rss, rate, seconds in rows:
        print(f"| {n:,} | {mb:.0f} MB | {mode} | {rss:,.0f} MB | {rate:,.0f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
