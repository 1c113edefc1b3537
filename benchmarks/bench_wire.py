"""Wire throughput: ``streamkit.wire`` against raw msgspec and stdlib ``json``, in one run.

Run it with ``python -m benchmarks.bench_wire [--chunks N] [--repeat R]``.

The workload is 100,000 chunks in the mix of a real agent run (a reasoning step that calls a
tool, then a text step; text deltas dominate), with Mastra's real ``step-finish``/``finish``
payloads from ``tests/fixtures/mastra``. Every contender works on the same structs or bytes:

* ``streamkit``: ``wire.encode`` / ``wire.decode``.
* ``raw msgspec``: one ``msgspec.json.Encoder().encode`` on the same chunk structs; decoding uses
  a typed ``msgspec.json.Decoder`` chosen per line *outside* the timed loop (the tagged union, or
  ``DataChunk`` for ``data-*`` lines) -- the floor streamkit's extra work is measured against.
* ``json``: ``json.dumps`` of the equivalent dicts / ``json.loads`` to dicts (no structs built,
  which flatters it).

Targets: encode within 1.2x of raw msgspec, at least 4x faster than ``json``.
"""

import argparse
import gc
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Union

import msgspec

from streamkit import wire
from streamkit.chunks import (
    CHUNK_TYPES,
    Chunk,
    DataChunk,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    Start,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
    ToolResult,
)

# Real Mastra 1.71.0 recordings, kept with the tests inside the repository.
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mastra"
RUN = "cabe82f0-7bdc-4c1b-9105-26c12ae29988"
ENVELOPE: dict[str, Any] = {"run_id": RUN, "from_": "AGENT"}
WORDS = "The quick brown fox jumps over the lazy dog while the agent streams its answer".split()


def _step_ends() -> tuple[Chunk, Chunk]:
    """Mastra's own step-finish and finish chunks (large nested payloads), or small stand-ins."""
    path = FIXTURES / "text-only.jsonl"
    if path.exists():
        chunks = [wire.decode(line) for line in path.read_text().splitlines()]
        return chunks[-2], chunks[-1]
    finish = {"stepResult": {"reason": "stop", "isContinued": False, "warnings": []},
              "output": {"text": "", "toolCalls": [], "usage": {"inputTokens": 1}},
              "metadata": {}, "messages": {"all": [], "user": [], "nonUser": []}}
    step_finish = wire.from_builtins({"type": "step-finish", "runId": RUN, "from": "AGENT",
                                      "payload": finish})
    return step_finish, wire.from_builtins({"type": "finish", "runId": RUN, "from": "AGENT",
                                            "payload": finish})


def one_run() -> list[Chunk]:
    """The chunks of one agent run: 76 chunks, 50 of them text or reasoning deltas."""
    step_finish, finish = _step_ends()
    chunks: list[Chunk] = [Start(id="support", message_id="msg-1", **ENVELOPE),
                           StepStart(request={}, warnings=[], message_id="msg-1",
                                     started_at=1796210641257, **ENVELOPE),
                           ReasoningStart(id="r-0", **ENVELOPE)]
    chunks += [ReasoningDelta(id="r-0", text=w + " ", **ENVELOPE) for w in WORDS[:10]]
    chunks += [ReasoningEnd(id="r-0", **ENVELOPE),
               ToolCallInputStreamingStart(tool_call_id="call-1", tool_name="lookupCustomer",
                                           **ENVELOPE)]
    chunks += [ToolCallDelta(args_text_delta=part, tool_call_id="call-1",
                             tool_name="lookupCustomer", **ENVELOPE)
               for part in ('{"customerId":', '"C-42"', "}")]
    chunks += [ToolCallInputStreamingEnd(tool_call_id="call-1", **ENVELOPE),
               ToolCall(tool_call_id="call-1", tool_name="lookupCustomer",
                        args={"customerId": "C-42"}, **ENVELOPE),
               DataChunk("data-progress", {"pct": 50}),
               ToolResult(tool_call_id="call-1", tool_name="lookupCustomer",
                          args={"customerId": "C-42"},
                          result={"customerId": "C-42", "name": "Ada Lovelace", "tier": "gold"},
                          **ENVELOPE),
               step_finish,
               StepStart(request={}, warnings=[], message_id="msg-1", started_at=1796210641299,
                         **ENVELOPE),
               TextStart(id="txt-0", **ENVELOPE)]
    chunks += [TextDelta(id="txt-0", text=WORDS[i % len(WORDS)] + " ", **ENVELOPE)
               for i in range(40)]
    chunks += [TextEnd(id="txt-0", type="text-end", **ENVELOPE), step_finish, finish]
    return chunks


def workload(n: int) -> list[Chunk]:
    run = one_run()
    return [run[i % len(run)] for i in range(n)]


def best_times(repeat: int, contenders: dict[str, tuple[Callable[[Sequence[Any]], Any],
                                                        Sequence[Any]]]) -> dict[str, float]:
    """Best wall time (seconds) of each contender over its items, GC paused.

    Rounds are interleaved -- every contender runs once per round -- so a noisy neighbour on the
    machine slows all of them alike instead of whichever happened to run at that moment.
    """
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeat):
        for name, (fn, items) in contenders.items():
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter()
                fn(items)
                best[name] = min(best[name], time.perf_counter() - start)
            finally:
                gc.enable()
    return best


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)

    chunks = workload(args.chunks)
    lines = [wire.encode(c) for c in chunks]
    dicts = [wire.to_builtins(c) for c in chunks]

    raw_encode = msgspec.json.Encoder().encode
    every = tuple(CHUNK_TYPES.values())
    union_decoder = msgspec.json.Decoder(Union[every])  # type: ignore[misc]  # noqa: UP007
    data_decoder = msgspec.json.Decoder(DataChunk)
    raw_pairs = [((data_decoder if isinstance(c, DataChunk) else union_decoder).decode, line)
                 for c, line in zip(chunks, lines)]
    # The raw encoder gives the same bytes here: no chunk in the mix has extra payload keys.
    if [raw_encode(c) for c in chunks[:200]] != lines[:200]:
        raise SystemExit("raw msgspec and streamkit.wire disagree on the encoded bytes")

    # Every contender is bound to a local name, so no loop pays for an attribute lookup.
    encode, decode, dumps, loads = wire.encode, wire.decode, json.dumps, json.loads
    timings = best_times(args.repeat, {
        "encode streamkit": (lambda xs: [encode(c) for c in xs], chunks),
        "encode msgspec": (lambda xs: [raw_encode(c) for c in xs], chunks),
        "encode json": (lambda xs: [dumps(d, separators=(",", ":")).encode() for d in xs], dicts),
        "decode streamkit": (lambda xs: [decode(b) for b in xs], lines),
        "decode msgspec": (lambda xs: [f(b) for f, b in xs], raw_pairs),
        "decode json": (lambda xs: [loads(b) for b in xs], lines),
    })

    n = len(chunks)
    print(f"{n:,} chunks ({sum(map(len, lines)) / n:.0f} bytes/chunk on average), "
          f"best of {args.repeat}")
    for name, seconds in timings.items():
        print(f"  {name:<18} {n / seconds:>12,.0f} chunks/s  {seconds * 1e9 / n:8.0f} ns/chunk")
    ratios = {}
    for op in ("encode", "decode"):
        ratios[f"{op} streamkit / msgspec (time)"] = (timings[f"{op} streamkit"]
                                                      / timings[f"{op} msgspec"])
        ratios[f"{op} json / streamkit (speed-up)"] = (timings[f"{op} json"]
                                                       / timings[f"{op} streamkit"])
    for name, value in ratios.items():
        print(f"  {name:<36} {value:5.2f}x")
    return ratios


if __name__ == "__main__":
    main()
