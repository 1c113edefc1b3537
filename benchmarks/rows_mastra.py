"""streamkit's mirror of Mastra's own benchmark (``benchmarks/mastra-node/bench.mjs``).

What belongs here: the scenarios of that folder's README, in Python, row for row: the mock model
(one part per pull: ``response-metadata``, ``text-start``, N one-word ``text-delta``s where word
*i* is ``VOCAB[i % 50] + " "``, ``text-end``, ``finish``), and

* ``floor``: the mock model's stream read directly, no agent;
* ``a``: ``agent.stream`` with no processors; ``b``: K = 1, 3, 10 pass-through processors;
* ``c`` (the headline): uppercase every text delta (a new chunk), drop every 10th text delta
  (counter in ``state``), count words (in ``state``; read at ``finish``);
* ``d0``/``d``: 100-chunk requests, 300 sequential and 100 concurrent, without and with one
  ``process_input`` + one ``process_output_result`` processor.

Every run asserts what bench.mjs asserts (the streamed text, ``stream.text()`` for ``c``, the drop
and word counts, how often the request processors ran and what they saw), so neither side can
skip work. What does not belong here: running Node (``benchmarks.mastra``) and the ratio table
(``benchmarks.report.format_vs_mastra``).

Decisions where JavaScript and Python differ: the processors' hooks are plain ``def`` (Mastra's
are ``async`` because everything in JavaScript is; a Python processor that does no I/O is
written sync, and streamkit calls it inline); they test the chunk with ``isinstance`` as a user
would. The mock model builds each delta as it is pulled, with ``Stamper`` (the documented way for
a provider's hot loop), as Mastra's mock builds an object per pull. The timed span is Mastra's:
from just before ``agent.stream()`` to the end of iterating the stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from streamkit import Agent, Processor, ops
from streamkit.chunks import (
    Finish,
    FinishPayload,
    ModelChunk,
    ResponseMetadata,
    Stamper,
    StepFinish,
    StepOutputPayload,
    StepResultPayload,
    TextDelta,
    TextDeltaPayload,
    TextEnd,
    TextStart,
    UsagePayload,
)
from streamkit.messages import get_text
from streamkit.models import ModelRequest

from .harness import BenchmarkError, Case, Group

__all__ = ["VOCAB", "word_at", "MockModel", "mirror_groups", "SCENARIOS", "SMALL_N"]

#: bench.mjs's 50 words; chunk *i* carries ``VOCAB[i % 50] + " "``.
VOCAB = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
         "sigma tau upsilon phi chi psi omega apple banana cherry date elder fig grape hazel iris "
         "juniper kiwi lemon mango nectar olive peach quince rose sage thyme umber violet willow "
         "yarrow zinnia amber").split(" ")
SMALL_N = 100
INSTRUCTIONS = "You are a benchmark agent."
PROMPT = "Say the words."
#: Scenario key -> row name prefix (what ``format_vs_mastra`` pairs with bench.mjs's rows).
SCENARIOS = {"floor": "floor", "a": "a:no-processors", "b": "b:pass-through",
             "c": "c:transform", "d0": "d0:requests-no-processors",
             "d": "d:requests-in+result-processors"}


def word_at(i: int) -> str:
    return VOCAB[i % len(VOCAB)] + " "


async def _mock_stream(n: int, run_id: str) -> AsyncIterator[ModelChunk]:
    yield ResponseMetadata(id="resp-mock", model_id="mock-stream", timestamp=0, run_id=run_id,
                           from_="AGENT")
    yield TextStart(id="txt-0", run_id=run_id, from_="AGENT")
    delta = Stamper(TextDelta, run_id=run_id)
    for i in range(n):
        yield delta(TextDeltaPayload(id="txt-0", text=VOCAB[i % 50] + " "))
    yield TextEnd(id="txt-0", run_id=run_id, from_="AGENT")
    yield Finish(payload=FinishPayload(
        step_result=StepResultPayload(reason="stop"),
        output=StepOutputPayload(usage=UsagePayload(input_tokens=1, output_tokens=n,
                                                    total_tokens=n + 1))),
        run_id=run_id, from_="AGENT")


class MockModel:
    """bench.mjs's ``makeMockModel``: streams ``n`` one-word text deltas, one part per pull,
    with no awaits in between."""

    provider = "mock"
    model_id = "mock-stream"

    def __init__(self, n: int) -> None:
        self.n = n

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        return _mock_stream(self.n, request.run_id)


# --------------------------------------------------------------------------- processors


class PassThrough(Processor):
    def process_output_stream(self, part: Any) -> Any:
        return part


class Uppercase(Processor):
    """Uppercase every text delta: a new chunk (chunks are frozen; ``ops.with_text`` is the
    documented per-chunk way, ``part.replace(text=...)`` the general one)."""

    def process_output_stream(self, part: Any) -> Any:
        if not isinstance(part, TextDelta):
            return part
        return ops.with_text(part, part.payload.text.upper())


class DropEvery10th(Processor):
    """Drop every 10th text delta (a counter in the request's state)."""

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if not isinstance(part, TextDelta):
            return part
        n = state["n"] = state.get("n", 0) + 1
        return None if n % 10 == 0 else part


class WordCount(Processor):
    """Count words in state; at the step's end, report them to the probe (bench.mjs does it at
    ``finish``; streamkit's stream processors see ``step-finish`` last, the run's ``finish`` is
    not routed through them)."""

    def __init__(self, probe: dict[str, int]) -> None:
        super().__init__("word-count")
        self.probe = probe

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if isinstance(part, TextDelta):
            state["words"] = state.get("words", 0) + len(part.payload.text.split())
        elif isinstance(part, StepFinish):
            self.probe["words"] = state.get("words", 0)
            self.probe["seen_finish"] += 1
        return part


class InputCheck(Processor):
    def __init__(self, probe: dict[str, int]) -> None:
        super().__init__("input-check")
        self.probe = probe

    def process_input(self, messages: list[Any]) -> list[Any]:
        self.probe["input"] += 1
        if not messages:
            raise BenchmarkError("process_input got no messages")
        return messages


class ResultCheck(Processor):
    def __init__(self, probe: dict[str, int], expected: str) -> None:
        super().__init__("result-check")
        self.probe = probe
        self.expected = expected

    def process_output_result(self, messages: list[Any]) -> list[Any]:
        self.probe["output"] += 1
        text = "".join(get_text(m) for m in messages if m.role == "assistant")
        if text != self.expected:
            self.probe["bad_output"] += 1
        return messages


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise BenchmarkError(f"mirror assertion failed: {what}")


def expect_transform(deltas: list[str]) -> tuple[str, int]:
    """What ``c`` must produce: (the kept, uppercased text; its word count)."""
    kept = [d.upper() for i, d in enumerate(deltas) if (i + 1) % 10 != 0]
    return "".join(kept), sum(len(d.split()) for d in kept)


# --------------------------------------------------------------------------- rows


def _agent(**processors: Any) -> Agent:
    return Agent(id="bench-agent", instructions=INSTRUCTIONS, **processors)


async def _run_stream(agent: Agent, n: int) -> tuple[str, int, Any]:
    stream = agent.stream(PROMPT, model=MockModel(n))
    text: list[str] = []
    deltas = 0
    async for chunk in stream:
        if chunk.__class__ is TextDelta:
            text.append(chunk.payload.text)
            deltas += 1
    return "".join(text), deltas, stream


def _stream_case(name: str, n: int, agent: Agent, want: str, baseline: str | None) -> Case:
    async def run() -> int:
        text, deltas, _ = await _run_stream(agent, n)
        _check(deltas == n and text == want, f"{name}: text mismatch N={n}")
        return deltas

    return Case(name, run, n, is_async=True, baseline=baseline, expect=n)


def _floor_case(n: int, want: str) -> Case:
    async def run() -> int:
        parts: list[str] = []
        async for chunk in MockModel(n).stream(ModelRequest(prompt=[], run_id="floor")):
            if chunk.__class__ is TextDelta:
                parts.append(chunk.payload.text)
        _check("".join(parts) == want, f"floor text mismatch N={n}")
        return len(parts)

    return Case(f"floor · model stream · N={n:,}", run, n, is_async=True, expect=n)


def _transform_case(n: int, deltas: list[str], baseline: str) -> Case:
    probe = {"words": -1, "seen_finish": 0}
    agent = _agent(output_processors=[Uppercase("uppercase"), DropEvery10th("drop-every-10th"),
                                      WordCount(probe)])
    want_text, want_words = expect_transform(deltas)

    async def run() -> int:
        probe["words"] = -1
        text, count, stream = await _run_stream(agent, n)
        final = await stream.text
        _check(text == want_text, f"c streamed text mismatch N={n}")
        _check(final == want_text, f"c stream.text() mismatch N={n}")
        _check(count == n - n // 10, f"c delta count {count}")
        _check(probe["words"] == want_words, f"c word count {probe['words']} != {want_words}")
        return count

    return Case(f"c:transform · 3 processors · N={n:,}", run, n, is_async=True,
                baseline=baseline, expect=n - n // 10)


def _request_cases(seq: int, conc: int) -> list[Case]:
    n = SMALL_N
    want = "".join(word_at(i) for i in range(n))
    cases: list[Case] = []
    for key, k in (("d0", 0), ("d", 2)):
        probe = {"input": 0, "output": 0, "bad_output": 0}
        agent = _agent() if k == 0 else _agent(input_processors=[InputCheck(probe)],
                                               output_processors=[ResultCheck(probe, want)])

        def check_probe(count: int, k: int = k, probe: dict[str, int] = probe) -> None:
            if k:
                _check(probe["input"] == count, f"process_input ran {probe['input']}x, "
                                                f"expected {count}")
                _check(probe["output"] == count, f"process_output_result ran "
                                                 f"{probe['output']}x, expected {count}")
                _check(probe["bad_output"] == 0, "process_output_result saw the wrong text")

        async def one(agent: Agent = agent) -> None:
            text, _, _ = await _run_stream(agent, n)
            _check(text == want, "d text")

        async def sequential(probe: dict[str, int] = probe, one: Any = one,
                             check_probe: Any = check_probe) -> int:
            probe.update(input=0, output=0, bad_output=0)
            for _ in range(seq):
                await one()
            check_probe(seq)
            return seq

        async def concurrent(probe: dict[str, int] = probe, one: Any = one,
                             check_probe: Any = check_probe) -> int:
            probe.update(input=0, output=0, bad_output=0)
            await asyncio.gather(*(one() for _ in range(conc)))
            check_probe(conc)
            return conc

        base = f"{SCENARIOS[key]} · sequential"
        cases.append(Case(base, sequential, n * seq, is_async=True, expect=seq, requests=seq,
                          memory=False))
        cases.append(Case(f"{SCENARIOS[key]} · {conc} concurrent", concurrent, n * conc,
                          is_async=True, expect=conc, requests=conc, memory=False,
                          baseline=base))
    return cases


def mirror_groups(n: int, repeat: int, *, seq_requests: int = 300, conc_requests: int = 100,
                  ks: tuple[int, ...] = (1, 3, 10)) -> list[Group]:
    """The mirror, as two groups: the N-chunk streams and the 100-chunk requests."""
    deltas = [word_at(i) for i in range(n)]
    want = "".join(deltas)
    a_name = f"a:no-processors · N={n:,}"
    floor = _floor_case(n, want)
    cases = [floor, _stream_case(a_name, n, _agent(), want, floor.name)]
    for k in ks:
        agent = _agent(output_processors=[PassThrough(f"pass-{j}") for j in range(k)])
        cases.append(_stream_case(f"b:pass-through · K={k} · N={n:,}", n, agent, want, a_name))
    cases.append(_transform_case(n, deltas, a_name))
    return [Group(f"mastra mirror · agent.stream · N={n:,}", cases, repeat=repeat),
            Group(f"mastra mirror · {SMALL_N}-chunk requests",
                  _request_cases(seq_requests, conc_requests), repeat=repeat)]
