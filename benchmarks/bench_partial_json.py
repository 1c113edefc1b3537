"""Partial structured output: reading a JSON answer as its deltas arrive, linear vs quadratic.

Run it with ``python -m benchmarks.bench_partial_json [--sizes 1000 4000 16000] [--delta 8]
[--repeat 5]``.

A JSON document of about ``size`` characters (a list of small records, the shape of a typical
structured answer) is cut into ``--delta``-character pieces. Three contenders, measured in the
same run, interleaved, medians of ``--repeat`` runs:

* **json.loads once** — the floor: parsing the finished text once, in C, showing nothing early.
* **PartialJSON, incremental** — what the agent does: each piece read once, plus a snapshot of
  the shown value whenever it changed (``streamkit._partial_json``).
* **re-parse per delta** — the baseline: the same parser run over the whole text so far at
  every delta (what Mastra's ``parsePartialJson(accumulatedText)`` does), with the same
  snapshots. Its time per delta grows with the text; the incremental one's does not.

Every run checks that the last value shown equals ``json.loads`` of the text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from streamkit._partial_json import PartialJSON


def document(size: int) -> str:
    rows, i = [], 0
    while len(json.dumps({"items": rows})) < size:
        rows.append({"name": f"item {i}", "price": i * 1.25, "tags": ["new", "sale"],
                     "ok": i % 2 == 0})
        i += 1
    return json.dumps({"items": rows})


def pieces_of(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def loads_once(pieces: list[str]) -> Any:
    return json.loads("".join(pieces))


def incremental(pieces: list[str]) -> Any:
    parser = PartialJSON()
    last = None
    for piece in pieces:
        if parser.feed(piece):
            last = parser.snapshot()
    return last


def reparse(pieces: list[str]) -> Any:
    text, last = "", None
    for piece in pieces:
        text += piece
        parser = PartialJSON()
        parser.feed(text)
        value = parser.snapshot()
        if value != last:
            last = value
    return last


CONTENDERS: dict[str, Callable[[list[str]], Any]] = {
    "json.loads once (floor)": loads_once, "PartialJSON, incremental": incremental,
    "re-parse per delta (baseline)": reparse}


def measure(size: int, delta: int, repeat: int) -> list[tuple[str, float]]:
    text = document(size)
    pieces = pieces_of(text, delta)
    expected = json.loads(text)
    times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    names = list(CONTENDERS)
    for r in range(repeat + 1):  # the first round warms up
        for name in names[r % len(names):] + names[:r % len(names)]:
            started = time.perf_counter()
            got = CONTENDERS[name](pieces)
            took = time.perf_counter() - started
            if got != expected:
                raise SystemExit(f"{name} showed a wrong value at size {size}")
            if r:
                times[name].append(took)
    return [(name, statistics.median(t) / len(pieces) * 1e6) for name, t in times.items()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--delta", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'chars':>7}  {'deltas':>6}  {'contender':<31} {'µs/delta':>9}  {'vs incremental':>14}")
    for size in args.sizes:
        rows = measure(size, args.delta, args.repeat)
        base = dict(rows)["PartialJSON, incremental"]
        deltas = len(pieces_of(document(size), args.delta))
        for name, us in rows:
            print(f"{size:>7}  {deltas:>6}  {name:<31} {us:>9.2f}  {us / base:>13.2f}×")


if __name__ == "__main__":
    main()
