"""Stream guards: what each costs per chunk, and how long it delays the first chunk.

Run it with ``python -m benchmarks.bench_guards [--deltas N] [--repeat R] [--interval S]``.

Each guard runs alone in an ``ops.apply`` pipeline, against a pass-through stage
(``ops.map(identity)``) measured in the same run, interleaved (repetition *r* runs every
contender once, in a rotated order) and reported as medians:

* **cost per chunk** — an answer of ``--deltas`` word-sized text deltas (with an email, a card
  number and a key in it) from a pre-built list, trace off: µs per delta, and what the guard adds
  over the pass-through stage.
* **time to first chunk** — the same answer paced like a model (``--interval`` seconds between
  deltas, default 2 ms ≈ 500 tokens/s), trace on: the guard's ``first_chunk_delay`` from the
  run's trace (first text delta in → first text delta out), and how many deltas it took in
  before letting text out. The pass-through row shows the floor (the cost of one call).

The model-backed row (``ModerationProcessor``) uses a ``FunctionModel`` checker that answers at
once, so it shows the guard's own overhead per window, not a real model's latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamkit import ops
from streamkit.chunks import TextDelta, TextEnd
from streamkit.testing import FunctionModel, text
from streamkit_operators import (
    Buffering,
    ModerationProcessor,
    PIIDetector,
    PlaceholderVault,
    RegexFilter,
    RestorePlaceholders,
    StreamGuard,
)

SENTENCE = ("Thanks for waiting, your order ships tomorrow and the invoice goes to "
            "ada.lovelace@example.com as usual. The card 4111 1111 1111 1111 was charged once, "
            "and key sk-live_0123456789abcdefXYZ stays private. Reply <EMAIL_1> if needed. ")


def _pieces(n: int) -> list[str]:
    words: list[str] = []
    while len(words) < n:
        words.extend(" " + w for w in SENTENCE.split())
    return words[:n]


def _chunks(pieces: list[str]) -> list[Any]:
    return [TextDelta(id="t1", text=p, run_id="r1", from_="AGENT") for p in pieces] + [
        TextEnd(id="t1", run_id="r1", from_="AGENT")]


def _quiet_checker() -> FunctionModel:
    return FunctionModel(lambda request: text('{"category_scores": null, "reason": null}'))


@dataclass
class Contender:
    name: str
    make: Callable[[], Any]


def contenders() -> list[Contender]:
    vault = PlaceholderVault()
    vault.placeholder("ada.lovelace@example.com", "email")
    keyword = "forbidden-phrase"

    def check(text: str) -> Any:
        return keyword in text

    return [
        Contender("pass-through (baseline)", lambda: ops.map(lambda c: c, id="pass-through")),
        Contender("PIIDetector (all types)", lambda: PIIDetector()),
        Contender("PIIDetector (email, card)",
                  lambda: PIIDetector(detection_types=["email", "credit-card"])),
        Contender("PIIDetector warn", lambda: PIIDetector(strategy="warn")),
        Contender("RegexFilter secrets", lambda: RegexFilter(presets="secrets",
                                                             strategy="redact")),
        Contender("RestorePlaceholders", lambda: RestorePlaceholders(vault)),
        Contender("StreamGuard passthrough",
                  lambda: StreamGuard(check, id="g", buffering=Buffering.passthrough())),
        Contender("StreamGuard window(32, 8)",
                  lambda: StreamGuard(check, id="g", buffering=Buffering.window(32, 8))),
        Contender("StreamGuard sentence",
                  lambda: StreamGuard(check, id="g", buffering=Buffering.sentence())),
        Contender("StreamGuard time(50 ms)",
                  lambda: StreamGuard(check, id="g", buffering=Buffering.time(0.05))),
        Contender("StreamGuard end_of_stream",
                  lambda: StreamGuard(check, id="g", buffering=Buffering.end_of_stream())),
        Contender("StreamGuard audit",
                  lambda: StreamGuard(check, id="g",
                                      buffering=Buffering.end_of_stream(hold=False))),
        Contender("Moderation sentence (fake model)",
                  lambda: ModerationProcessor(model=_quiet_checker(), phase="output")),
    ]


async def _cost_run(make: Callable[[], Any], chunks: list[Any]) -> float:
    guard = make()
    start = time.perf_counter()
    n = 0
    async for _ in ops.apply(chunks, guard):
        n += 1
    elapsed = time.perf_counter() - start
    if n == 0:
        raise RuntimeError("a guard emitted nothing: the benchmark would be a lie")
    return elapsed


async def _paced(pieces: list[str], interval: float) -> Any:
    for chunk in _chunks(pieces):
        yield chunk
        await asyncio.sleep(interval)


async def _ttfc_run(make: Callable[[], Any], pieces: list[str], interval: float
                    ) -> float | None:
    """The guard's ``first_chunk_delay`` from the run's trace, with a paced source."""
    app = ops.apply(_paced(pieces, interval), make(), timed=True)
    async for _ in app:
        pass
    record = next(r for r in app.trace if r.hook == "process_output_stream")
    return record.first_chunk_delay


async def main(deltas: int, repeat: int, interval: float, paced_deltas: int) -> dict[str, Any]:
    pieces = _pieces(deltas)
    chunks = _chunks(pieces)
    cands = contenders()
    for c in cands:  # warm-up: compiled chains, regex caches, lazy imports
        await _cost_run(c.make, chunks[:200])
    cost: dict[str, list[float]] = {c.name: [] for c in cands}
    for r in range(repeat):
        order = cands[r % len(cands):] + cands[:r % len(cands)]
        for c in order:
            cost[c.name].append(await _cost_run(c.make, chunks))
    paced = _pieces(paced_deltas)
    ttfc: dict[str, list[float]] = {c.name: [] for c in cands}
    for r in range(max(1, repeat // 2)):
        order = cands[r % len(cands):] + cands[:r % len(cands)]
        for c in order:
            delay = await _ttfc_run(c.make, paced, interval)
            if delay is not None:
                ttfc[c.name].append(delay)
    base = cands[0].name
    base_us = statistics.median(cost[base]) * 1e6 / len(chunks)
    rows = []
    for c in cands:
        us = statistics.median(cost[c.name]) * 1e6 / len(chunks)
        delay = statistics.median(ttfc[c.name]) if ttfc[c.name] else None
        buffering = getattr(c.make(), "buffering", None)
        rows.append({
            "guard": c.name, "buffering": repr(buffering) if buffering else "-",
            "us_per_chunk": round(us, 2), "added_us_per_chunk": round(us - base_us, 2),
            "x_baseline": round(us / base_us, 1) if base_us else None,
            "ttfc_ms": None if delay is None else round(delay * 1e3, 2),
            "ttfc_deltas": None if delay is None else round(delay / interval, 1),
        })
    return {"deltas": len(chunks), "repeat": repeat, "interval_s": interval,
            "paced_deltas": paced_deltas, "rows": rows}


def _table(report: dict[str, Any]) -> str:
    cols = [("guard", "guard"), ("buffering", "buffering"), ("us_per_chunk", "µs/chunk"),
            ("added_us_per_chunk", "+µs vs pass"), ("x_baseline", "× pass"),
            ("ttfc_ms", "TTFC added ms"), ("ttfc_deltas", "≈ deltas held")]
    cells = [[("-" if r[k] is None else str(r[k])) for k, _ in cols] for r in report["rows"]]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, (_, h) in enumerate(cols)]
    out = ["  ".join(h.ljust(w) for (_, h), w in zip(cols, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(out)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, default=2000, help="deltas per cost run")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--interval", type=float, default=0.002,
                        help="seconds between deltas in the time-to-first-chunk runs")
    parser.add_argument("--paced-deltas", type=int, default=80,
                        help="deltas per time-to-first-chunk run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    # The warn-strategy rows log every detection; the table is the output here.
    logging.getLogger("streamkit_operators").setLevel(logging.ERROR)
    started = time.perf_counter()
    report = asyncio.run(main(args.deltas, args.repeat, args.interval, args.paced_deltas))
    report["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"stream guards: {report['deltas']} chunks per cost run, median of "
              f"{report['repeat']}; time to first chunk with a delta every "
              f"{report['interval_s'] * 1e3:g} ms ({report['seconds']} s)")
        print(_table(report))
    return report


if __name__ == "__main__":
    run(sys.argv[1:])
