"""Where the time of one chunk goes in ``agent.stream``: ``python -m benchmarks.hotpath``.

What belongs here: the profile behind the README's hot-path section. Two views:

1. **A ladder** of wall-clock measurements (median of interleaved runs, GC on, like the suite),
   each adding one layer to the previous, so differences are the cost of a layer:

   * ``async for`` over a list re-yielded by an async generator (the floor of any async stream);
   * the ``ScriptedModel`` stream alone (adds building each chunk in the model's generator);
   * ``StreamChain.push`` over pre-built chunks in a plain loop, with the agent's timing mode
     (the fused chain alone), minus an empty loop;
   * ``agent.stream`` on pre-built chunks (``PrebuiltModel``), 0 processors: the agent's own
     per-chunk cost (node generator, driver generator, the chunk kept for the step, consumer);
   * the same with the 3 transforms, with ``trace=False``, with the GC off, and with the
     uppercase built by ``msgspec.structs.replace`` (a proposal for ``ops.map_text``);
   * the full row: ``agent.stream`` on ``ScriptedModel`` with the 3 transforms;
   * one request of a single delta: the fixed cost per request.

2. **cProfile** of the full row and of many one-delta requests: the functions with the most
   own time (``tottime``) and their call counts. cProfile inflates cheap calls, so read it for
   *where* and *how often*, and the ladder for *how much*.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import statistics
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import msgspec

from streamkit import Agent, Processor, ops
from streamkit.chunks import TextDelta
from streamkit.processors._chain import StreamChain
from streamkit.processors._runtime import RequestRuntime
from streamkit.processors._spec import register

from .rows_agent import INSTRUCTIONS, _request, _scripted
from .workloads import DropEveryNth, PrebuiltModel, count_words, transforms

__all__ = ["ladder", "profile", "main"]

Step = tuple[str, Callable[[], Coroutine[Any, Any, float]]]
_replace = msgspec.structs.replace


class UpperByReplace(Processor):
    """The uppercase transform built with ``msgspec.structs.replace`` (a proposal for
    ``ops.map_text``: ~4× cheaper than the chunk constructor, and it keeps ``metadata``,
    ``provider_metadata`` and payload ``extra`` keys, which the constructor drops)."""

    id = "upper"

    def process_output_stream(self, part: Any) -> Any:
        if part.__class__ is TextDelta:
            payload = part.payload
            return _replace(part, payload=_replace(payload, text=payload.text.upper()))
        return part


def transforms_by_replace() -> list[Any]:
    """``workloads.transforms()`` with ``UpperByReplace`` instead of ``ops.map_text``."""
    return [UpperByReplace(), DropEveryNth(),
            ops.scan(count_words, 0, key="words", types="text-delta", id="words")]


async def _collect(n: int) -> list[Any]:
    return [c async for c in _scripted(n).stream(_request())]


async def _drain(stream: Any) -> int:
    count = 0
    async for _ in stream:
        count += 1
    return count


def _steps(n: int, chunks: list[Any]) -> list[Step]:
    """The ladder's rungs; each returns the seconds its workload took."""
    agent0 = Agent(id="bench", instructions=INSTRUCTIONS)
    agent3 = Agent(id="bench", instructions=INSTRUCTIONS, output_processors=transforms())
    agent3r = Agent(id="bench", instructions=INSTRUCTIONS,
                    output_processors=transforms_by_replace())
    clock = time.perf_counter

    async def floor() -> float:
        start = clock()
        await _drain(PrebuiltModel(chunks).stream(None))
        return clock() - start

    async def model() -> float:
        start = clock()
        await _drain(_scripted(n).stream(_request()))
        return clock() - start

    async def chain() -> float:
        push = StreamChain([register(p) for p in transforms()], RequestRuntime(timed=True)).push
        start = clock()
        for c in chunks:
            push(c)
        return clock() - start

    async def loop() -> float:
        start = clock()
        for _ in chunks:
            pass
        return clock() - start

    def agent_run(agent: Agent, model: Callable[[], Any], **options: Any
                  ) -> Callable[[], Coroutine[Any, Any, float]]:
        async def run() -> float:
            stream = agent.stream("hi", model=model(), **options)
            start = clock()
            await _drain(stream)
            return clock() - start
        return run

    async def gc_off() -> float:
        gc.disable()
        try:
            return await agent_run(agent0, lambda: PrebuiltModel(chunks))()
        finally:
            gc.enable()

    return [
        ("async for over an async generator of pre-built chunks", floor),
        ("ScriptedModel stream alone", model),
        ("empty for loop over the chunks", loop),
        ("StreamChain.push loop · 3 transforms · timing sampled", chain),
        ("agent.stream · PrebuiltModel · 0 processors", agent_run(
            agent0, lambda: PrebuiltModel(chunks))),
        ("agent.stream · PrebuiltModel · 0 processors · GC off", gc_off),
        ("agent.stream · PrebuiltModel · 3 transforms", agent_run(
            agent3, lambda: PrebuiltModel(chunks))),
        ("agent.stream · PrebuiltModel · 3 transforms · trace off", agent_run(
            agent3, lambda: PrebuiltModel(chunks), trace=False)),
        ("agent.stream · PrebuiltModel · 3 transforms · upper by replace", agent_run(
            agent3r, lambda: PrebuiltModel(chunks))),
        ("agent.stream · ScriptedModel · 3 transforms", agent_run(agent3, lambda: _scripted(n))),
    ]


def ladder(n: int = 200_000, repeat: int = 5, requests: int = 300) -> dict[str, float]:
    """µs per chunk of every rung (median of ``repeat`` interleaved runs), plus
    ``"request (1 delta), µs"``: the wall time of one whole one-delta request."""
    with asyncio.Runner() as runner:
        chunks = runner.run(_collect(n))
        steps = _steps(n, chunks)
        agent = Agent(id="bench", instructions=INSTRUCTIONS)

        async def tiny_requests() -> float:
            start = time.perf_counter()
            for _ in range(requests):
                await _drain(agent.stream("hi", model=_scripted(1)))
            return time.perf_counter() - start

        times: dict[str, list[float]] = {name: [] for name, _ in steps}
        times["request (1 delta), µs"] = []
        for _name, fn in steps:  # warm-up
            runner.run(fn())
        runner.run(tiny_requests())
        for rep in range(repeat):
            for k in range(len(steps)):
                name, fn = steps[(rep + k) % len(steps)]
                gc.collect()
                times[name].append(runner.run(fn()) * 1e6 / n)
            gc.collect()
            times["request (1 delta), µs"].append(runner.run(tiny_requests()) * 1e6 / requests)
    return {name: statistics.median(values) for name, values in times.items()}


def profile(n: int = 100_000, requests: int = 1_000, top: int = 14) -> str:
    """cProfile of the full row (3 transforms, ``n`` chunks) and of ``requests`` one-delta
    requests: the ``top`` functions by own time, as text."""
    agent3 = Agent(id="bench", instructions=INSTRUCTIONS, output_processors=transforms())
    agent0 = Agent(id="bench", instructions=INSTRUCTIONS)
    out = io.StringIO()

    async def full() -> None:
        await _drain(agent3.stream("hi", model=_scripted(n)))

    async def many() -> None:
        for _ in range(requests):
            await _drain(agent0.stream("hi", model=_scripted(1)))

    for title, fn in ((f"agent.stream · ScriptedModel · 3 transforms · {n:,} chunks", full),
                      (f"{requests:,} one-delta requests · no processors", many)):
        with asyncio.Runner() as runner:
            runner.run(fn())  # warm
            prof = cProfile.Profile()
            prof.enable()
            runner.run(fn())
            prof.disable()
        out.write(f"\n{title} — top {top} by own time (cProfile inflates cheap calls)\n")
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _breakdown(r: dict[str, float]) -> list[tuple[str, float]]:
    floor = r["async for over an async generator of pre-built chunks"]
    agent0 = r["agent.stream · PrebuiltModel · 0 processors"]
    agent3 = r["agent.stream · PrebuiltModel · 3 transforms"]
    full = r["agent.stream · ScriptedModel · 3 transforms"]
    return [
        ("consumer `async for` + one async-generator hop (floor)", floor),
        ("agent loop per chunk (node + driver generators, step bookkeeping)", agent0 - floor),
        ("  of which: cyclic GC walking the chunks the step keeps",
         agent0 - r["agent.stream · PrebuiltModel · 0 processors · GC off"]),
        ("fused chain, 3 transforms (inside agent.stream)", agent3 - agent0),
        ("  same chain alone, StreamChain.push loop minus empty loop",
         r["StreamChain.push loop · 3 transforms · timing sampled"]
         - r["empty for loop over the chunks"]),
        ("  of which: stream-hook timing (trace on vs off)",
         agent3 - r["agent.stream · PrebuiltModel · 3 transforms · trace off"]),
        ("  proposal: uppercase by structs.replace saves",
         agent3 - r["agent.stream · PrebuiltModel · 3 transforms · upper by replace"]),
        ("ScriptedModel building chunks (scripted − pre-built)", full - agent3),
        ("  same, model stream alone minus floor", r["ScriptedModel stream alone"] - floor),
        ("total: agent.stream · ScriptedModel · 3 transforms", full),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hotpath", description=__doc__
                                     .splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-cprofile", action="store_true")
    args = parser.parse_args(argv)
    results = ladder(args.chunks, args.repeat)
    print(f"ladder: µs per chunk, median of {args.repeat} interleaved runs, "
          f"{args.chunks:,} chunks")
    for name, value in results.items():
        print(f"  {name:<62} {value:8.3f}")
    print("\nbreakdown of agent.stream · ScriptedModel · 3 transforms (µs per chunk):")
    for name, value in _breakdown(results):
        print(f"  {name:<66} {value:7.3f}")
    full = results["agent.stream · ScriptedModel · 3 transforms"]
    print(f"  → {1e6 / full:,.0f} chunks/s")
    if not args.no_cprofile:
        print(profile())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
