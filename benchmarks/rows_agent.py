"""Agent rows: ``agent.stream`` on ``ScriptedModel``, requests per second, memory per request.

What belongs here: three groups, all through the public API (``Agent.stream`` consumed with
``async for``, default options, so the trace is on as users get it):

* **agent.stream** over one step of ``text(long_text(n), chunk_size=4)`` (``n`` text deltas of
  four characters, plus the loop's framing chunks), ``n`` = 10k and 1M, with 0/1/3/10
  pass-through processors and with the three real transforms (and once with ``trace=False``).
  The baseline of a 10k row is the model's own stream consumed directly (no agent) or the agent
  with no processors; the baseline of a 1M row is its 10k twin, so its ratio *is* the growth of
  the per-chunk cost with stream length. Each run also reads the clock as the stream goes
  (``_consume``): ``early_us``/``late_us`` (µs/chunk over an early and a late sixth of one
  stream) show the same thing from inside a single stream, and ``first_ms``/``tail_ms`` the work
  done once per stream before the first chunk and after the last text.
* **requests**: 100-chunk requests, sequential and 100 concurrent, without processors and with an
  input processor (``process_input``) and a result processor (``process_output_result``). The
  model yields to the event loop every 10 chunks, as a network stream does between reads;
  without that, "concurrent" requests would simply run one after another.
* **memory**: 1,000 concurrent 100-chunk streams (all in flight together: each yields to the
  loop every 10 chunks); the peak of traced memory divided by 1,000 is the memory per in-flight
  request. Baseline: the same 1,000 bare model streams with no agent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from streamkit import Agent
from streamkit.models import ModelRequest
from streamkit.testing import ScriptedModel, text

from .harness import Case, Group, Outcome
from .workloads import InputGuard, PassThrough, ResultWords, long_text, transforms

__all__ = ["agent_groups", "request_groups", "memory_groups", "Interleaved", "FRAMING"]

#: Chunks the loop adds around one text step: start, step-start, text-start, text-end,
#: step-finish, finish.
FRAMING = 6
#: Chunks a scripted text step has besides its deltas: text-start, text-end, finish.
MODEL_FRAMING = 3
CHUNK_SIZE = 4
INSTRUCTIONS = "You are a benchmark. Answer at length."


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else \
        f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


async def _consume(stream: AsyncIterator[Any], n: int) -> Outcome:
    """Count the chunks of ``stream``, reading the clock at the first chunk, after every twelfth
    of ``n`` chunks, and at the end (twelfths, so that rows which drop a tenth of their chunks
    still pass ten marks).

    Metrics: ``first_ms`` (time to the first chunk), ``early_us``/``late_us`` (µs per chunk from
    mark 1 to 3 and from mark 8 to 10: the streaming cost, free of once-per-stream work) and
    ``tail_ms`` (after the last mark, minus the chunks still streamed there at ``late_us``: the
    step's closing work, e.g. building the assistant message from every delta).
    """
    window = max(n // 12, 1)
    marks: list[float] = []
    clock = time.perf_counter
    start = clock()
    first = 0.0
    count = 0
    async for _ in stream:
        count += 1
        if count % window == 0:
            marks.append(clock())
        elif count == 1:
            first = clock()
    end = clock()
    metrics: dict[str, float] = {"first_ms": (first - start) * 1e3} if first else {}
    if len(marks) >= 10:
        early = (marks[2] - marks[0]) / (2 * window)
        late = (marks[9] - marks[7]) / (2 * window)
        rest = count - len(marks) * window
        metrics.update(early_us=early * 1e6, late_us=late * 1e6,
                       tail_ms=max(end - marks[-1] - rest * late, 0.0) * 1e3)
    return Outcome(count, metrics)


def _scripted(n: int) -> ScriptedModel:
    return ScriptedModel([text(long_text(n, CHUNK_SIZE), chunk_size=CHUNK_SIZE)])


def _request() -> ModelRequest:
    return ModelRequest(prompt=[{"role": "system", "content": INSTRUCTIONS},
                                {"role": "user", "content": "hi"}], run_id="bench")


# --------------------------------------------------------------------------- agent.stream


def _model_case(n: int, baseline: str | None, warm: int | None) -> Case:
    async def run() -> Outcome:
        return await _consume(_scripted(n).stream(_request()), n)

    async def warmup() -> Outcome:
        return await _consume(_scripted(warm or n).stream(_request()), warm or n)

    return Case(f"model stream alone · {_label(n)}", run, n, is_async=True, baseline=baseline,
                expect=n + MODEL_FRAMING, warmup=warmup if warm else None,
                note="ScriptedModel.stream() consumed directly, no agent")


def _agent_case(name: str, n: int, processors: list[Any], *, baseline: str | None,
                trace: bool = True, warm: int | None = None, memory: bool = True,
                exact: bool = True) -> Case:
    agent = Agent(id="bench", instructions=INSTRUCTIONS, output_processors=processors)
    options: dict[str, Any] = {} if trace else {"trace": False}

    async def run() -> Outcome:
        return await _consume(agent.stream("hi", model=_scripted(n), **options), n)

    async def warmup() -> Outcome:
        size = warm or n
        return await _consume(agent.stream("hi", model=_scripted(size), **options), size)

    return Case(f"{name} · {_label(n)}", run, n, is_async=True, baseline=baseline,
                expect=n + FRAMING if exact else None, warmup=warmup if warm else None,
                memory=memory)


def agent_groups(short: int, long: int, repeat: int, *, long_memory: bool) -> list[Group]:
    """One group: agent.stream at ``short`` and ``long`` chunks, interleaved."""
    s, l_ = _label(short), _label(long)
    configs: list[tuple[str, Any, bool]] = [
        ("1 pass-through", lambda: [PassThrough("pass-0")], True),
        ("3 pass-through", lambda: [PassThrough(f"pass-{i}") for i in range(3)], True),
        ("10 pass-through", lambda: [PassThrough(f"pass-{i}") for i in range(10)], True),
        ("3 transforms", transforms, False),
    ]
    model_short = f"model stream alone · {s}"
    zero_short = f"agent · 0 processors · {s}"
    cases = [_model_case(short, None, None),
             _agent_case("agent · 0 processors", short, [], baseline=model_short)]
    for name, make, exact in configs:
        cases.append(_agent_case(f"agent · {name}", short, make(), baseline=zero_short,
                                 exact=exact))
    cases.append(_agent_case("agent · 3 transforms · trace off", short, transforms(),
                             baseline=f"agent · 3 transforms · {s}", trace=False, exact=False))
    long_model = _model_case(long, model_short, short)
    long_model.memory = False  # only one long row is ever traced: tracemalloc is slow there
    cases.append(long_model)
    cases.append(_agent_case("agent · 0 processors", long, [], baseline=zero_short, warm=short,
                             memory=False))
    for name, make, exact in configs:
        cases.append(_agent_case(f"agent · {name}", long, make(),
                                 baseline=f"agent · {name} · {s}", warm=short, exact=exact,
                                 memory=long_memory and name == "3 transforms"))
    return [Group(f"agent.stream · ScriptedModel · {s} and {l_} chunks", cases, repeat=repeat)]


# --------------------------------------------------------------------------- requests


async def _interleave(source: AsyncIterator[Any], every: int) -> AsyncIterator[Any]:
    count = 0
    try:
        async for chunk in source:
            count += 1
            if count % every == 0:
                await asyncio.sleep(0)  # a network stream gives the loop back between reads
            yield chunk
    finally:
        closer = getattr(source, "aclose", None)
        if closer is not None:
            await closer()


class Interleaved:
    """Wraps a model so its stream yields to the event loop every ``every`` chunks."""

    provider = "interleaved"

    def __init__(self, inner: Any, every: int = 10) -> None:
        self.inner = inner
        self.every = every
        self.model_id = getattr(inner, "model_id", "interleaved")

    def stream(self, request: Any) -> AsyncIterator[Any]:
        return _interleave(self.inner.stream(request), self.every)


def _model(chunks: int) -> Interleaved:
    return Interleaved(_scripted(chunks))


async def _serve(agent: Agent | None, total: int, concurrency: int, chunks: int) -> int:
    """Serve ``total`` requests with ``concurrency`` in flight; the chunks the clients got."""
    pending = iter(range(total))

    async def client() -> int:
        got = 0
        for _ in pending:  # one shared iterator: each client takes the next request
            stream = _model(chunks).stream(_request()) if agent is None \
                else agent.stream("hi", model=_model(chunks))
            async for _chunk in stream:
                got += 1
        return got

    return sum(await asyncio.gather(*(client() for _ in range(concurrency))))


def request_groups(total: int, concurrency: int, chunks: int, repeat: int) -> list[Group]:
    """Requests per second, sequential and ``concurrency`` at a time."""
    bare = Agent(id="bench", instructions=INSTRUCTIONS)
    guarded = Agent(id="bench", instructions=INSTRUCTIONS, input_processors=[InputGuard()],
                    output_processors=[ResultWords()])
    per = chunks + FRAMING
    seq_none, seq_proc = "sequential · no processors", "sequential · input + result processor"

    def case(name: str, agent: Agent, conc: int, baseline: str | None) -> Case:
        async def run() -> int:
            return await _serve(agent, total, conc, chunks)
        # No memory column: a sequential row holds one request at a time (see the memory rows).
        return Case(name, run, total * per, is_async=True, baseline=baseline,
                    expect=total * per, requests=total, memory=False)

    return [Group(f"requests · {chunks}-chunk requests · {total} per run", [
        case(seq_none, bare, 1, None),
        case(seq_proc, guarded, 1, seq_none),
        case(f"{concurrency} concurrent · no processors", bare, concurrency, seq_none),
        case(f"{concurrency} concurrent · input + result processor", guarded, concurrency,
             seq_proc),
    ], repeat=repeat)]


def memory_groups(inflight: int, chunks: int, repeat: int) -> list[Group]:
    """Memory per in-flight request with ``inflight`` streams running together."""
    guarded = Agent(id="bench", instructions=INSTRUCTIONS, input_processors=[InputGuard()],
                    output_processors=[ResultWords()])
    bare_name = f"{inflight:,} bare model streams"

    def case(name: str, agent: Agent | None, baseline: str | None) -> Case:
        async def run() -> int:
            return await _serve(agent, inflight, inflight, chunks)
        per = chunks + (MODEL_FRAMING if agent is None else FRAMING)
        return Case(name, run, inflight * per, is_async=True, baseline=baseline,
                    expect=inflight * per, requests=inflight, concurrent=True)

    return [Group(f"memory · {inflight:,} concurrent {chunks}-chunk streams", [
        case(bare_name, None, None),
        case(f"{inflight:,} agent.stream · input + result processor", guarded, bare_name),
    ], repeat=repeat)]
