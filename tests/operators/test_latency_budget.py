"""Latency budgets: every buffering kind of StreamGuard (with sync and async checks), its
strategies and error paths, the guards' declarations, and the time-to-first-chunk each guard
added as the run's trace reports it (timed with a fake clock, never with sleeps)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from streamkit import Agent, ops
from streamkit.chunks import TextDelta, TextEnd
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.testing import ScriptedModel, text
from streamkit_operators import (
    Buffering,
    ModerationProcessor,
    PIIDetector,
    RegexFilter,
    StreamGuard,
    format_report,
    latency_report,
)

from ..conftest import as_mode

WORDS = ["One", " two", " three.", " Four", " five", " six.", " Seven"]


def delta(piece: str, id: str = "t1") -> TextDelta:
    return TextDelta(id=id, text=piece, run_id="r1", from_="AGENT")


def recorder(seen: list[tuple[str, str]], bad: str | None = None) -> Callable[..., Any]:
    def check(text: str, context: str) -> Any:
        seen.append((text, context))
        return f"contains {bad!r}" if bad and bad in text else None
    return check


async def run(guard: Any, pieces: list[str] = WORDS) -> tuple[list[Any], Any]:
    app = ops.apply([*map(delta, pieces), TextEnd(id="t1", run_id="r1", from_="AGENT")], guard)
    return [c async for c in app], app


def texts(chunks: list[Any]) -> list[str]:
    return [c.payload.text for c in chunks if c.type == "text-delta"]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# ----------------------------------------------------------------------------- declarations


def test_declarations_read_as_what_they_are() -> None:
    assert repr(Buffering.window(tokens=32, overlap=8)) == "Buffering.window(tokens=32, overlap=8)"
    assert repr(Buffering.end_of_stream(hold=False)) == "Buffering.end_of_stream(hold=False)"
    assert [b.holds for b in (Buffering.passthrough(), Buffering.holdback(),
                              Buffering.window(), Buffering.sentence(), Buffering.time(1.0),
                              Buffering.end_of_stream(), Buffering.end_of_stream(hold=False))
            ] == [False, True, True, True, True, True, False]
    with pytest.raises(InvalidArgument, match="overlap"):
        Buffering.window(tokens=4, overlap=4)
    with pytest.raises(InvalidArgument, match="seconds"):
        Buffering.time(0)
    with pytest.raises(InvalidArgument, match="kind"):
        Buffering("batch")


def test_every_stream_guard_declares_its_buffering() -> None:
    assert PIIDetector().buffering == Buffering.holdback(max_chars=1024)
    assert PIIDetector(strategy="warn").buffering == Buffering.passthrough()
    assert RegexFilter(presets="pii", max_hold=64).buffering == Buffering.holdback(max_chars=64)
    assert ModerationProcessor(model="x").buffering == Buffering.sentence()
    assert StreamGuard(bool, buffering=Buffering.window(16, 4)).buffering.tokens == 16


# ----------------------------------------------------------------------------- the kinds


@pytest.mark.parametrize("buffering, windows, emitted", [
    pytest.param(Buffering.passthrough(), WORDS, WORDS, id="passthrough-checks-each-delta"),
    # Windows close on delta boundaries: " three." is two tokens, so the first holds four.
    pytest.param(Buffering.window(tokens=3, overlap=0),
                 ["One two three.", " Four five six.", " Seven"],
                 ["One two three.", " Four five six.", " Seven"], id="window-of-3-tokens"),
    pytest.param(Buffering.sentence(), ["One two three.", " Four five six.", " Seven"],
                 ["One two three.", " Four five six.", " Seven"], id="sentence"),
    pytest.param(Buffering.end_of_stream(), ["".join(WORDS)], ["".join(WORDS)],
                 id="end-of-stream-hold"),
    pytest.param(Buffering.end_of_stream(hold=False), ["".join(WORDS)], WORDS,
                 id="end-of-stream-audit"),
])
async def test_each_kind_checks_these_windows_and_loses_nothing(
        buffering: Buffering, windows: list[str], emitted: list[str], mode: str) -> None:
    seen: list[tuple[str, str]] = []
    guard = StreamGuard(as_mode(recorder(seen), mode), buffering=buffering)
    out, _ = await run(guard)
    assert [w for w, _ in seen] == windows
    assert texts(out) == emitted
    assert out[-1].type == "text-end"


async def test_overlap_gives_each_window_the_end_of_the_previous_one(mode: str) -> None:
    seen: list[tuple[str, str]] = []
    guard = StreamGuard(as_mode(recorder(seen), mode), buffering=Buffering.window(3, overlap=2))
    await run(guard)
    assert seen == [("One two three.", ""), (" Four five six.", "three."),
                    (" Seven", "six.")]


async def test_time_windows_follow_the_clock(mode: str) -> None:
    clock = Clock()
    seen: list[tuple[str, str]] = []
    arrivals = iter([0.0, 0.4, 0.8, 1.2, 1.3, 2.5, 2.6])

    async def source() -> Any:
        for word in WORDS:
            clock.now = next(arrivals)
            yield delta(word)

    guard = StreamGuard(as_mode(recorder(seen), mode), buffering=Buffering.time(1.0),
                        clock=clock)
    out = [c async for c in ops.apply(source(), guard)]
    # A delta arriving a second or more after its window opened closes it.
    assert [w for w, _ in seen] == ["One two three. Four", " five six.", " Seven"]
    assert "".join(texts(out)) == "".join(WORDS)


async def test_a_sentence_end_split_over_tiny_deltas_is_found(mode: str) -> None:
    seen: list[tuple[str, str]] = []
    guard = StreamGuard(as_mode(recorder(seen), mode), buffering=Buffering.sentence())
    out, _ = await run(guard, ["He said \"hi", "!", "\"", ")", " Then", " left.", "\n", "\n", "x"])
    assert [w for w, _ in seen] == ['He said "hi!")', " Then left.", "\n\n", "x"]


async def test_sentence_windows_are_bounded_by_max_chars(mode: str) -> None:
    seen: list[tuple[str, str]] = []
    guard = StreamGuard(as_mode(recorder(seen), mode), buffering=Buffering.sentence(max_chars=8))
    out, _ = await run(guard, ["abcd", "efgh", "ij"])
    assert [w for w, _ in seen] == ["abcdefgh", "ij"]


async def test_a_new_text_id_and_non_text_chunks_release_in_order(mode: str) -> None:
    seen: list[tuple[str, str]] = []
    guard = StreamGuard(as_mode(recorder(seen), mode), buffering=Buffering.end_of_stream())
    app = ops.apply([delta("a", "x"), delta("b", "y"), TextEnd(id="y", run_id="r",
                                                                 from_="AGENT")], guard)
    out = [(c.type, getattr(c.payload, "id", None), getattr(c.payload, "text", None))
           async for c in app]
    assert out == [("text-delta", "x", "a"), ("text-delta", "y", "b"), ("text-end", "y", None)]


# ----------------------------------------------------------------------------- strategies


@pytest.mark.parametrize("strategy, expected", [
    pytest.param("filter", ["One two three.", " Seven"], id="filter-drops-the-window"),
    pytest.param("warn", ["One two three.", " Four five six.", " Seven"], id="warn-releases"),
])
async def test_filter_and_warn(strategy: str, expected: list[str], mode: str) -> None:
    guard = StreamGuard(as_mode(recorder([], bad="five"), mode), strategy=strategy)
    out, app = await run(guard)
    assert texts(out) == expected
    assert app.state("stream-guard")["violations"][0]["reason"] == "contains 'five'"


async def test_block_trips_before_the_window_is_shown(mode: str) -> None:
    guard = StreamGuard(as_mode(recorder([], bad="five"), mode), id="no-five")
    out, app = await run(guard)
    assert texts(out) == ["One two three."]
    assert out[-1].type == "tripwire" and out[-1].payload.reason == "contains 'five'"
    assert out[-1].payload.metadata == {"processorId": "no-five", "window": 1,
                                        "buffering": "Buffering.sentence(max_chars=400)"}


async def test_an_audit_can_only_trip_after_the_text_was_shown(mode: str) -> None:
    guard = StreamGuard(as_mode(recorder([], bad="five"), mode),
                        buffering=Buffering.end_of_stream(hold=False))
    out, _ = await run(guard)
    assert texts(out) == WORDS and out[-1].type == "tripwire"
    with pytest.raises(InvalidArgument, match="already streamed"):
        StreamGuard(bool, buffering=Buffering.end_of_stream(hold=False), strategy="filter")


@pytest.mark.parametrize("verdict, reason", [
    pytest.param(True, "stream-guard: content not allowed", id="true"),
    pytest.param({"reason": "why", "metadata": {"k": 1}}, "why", id="dict"),
])
async def test_verdict_shapes(verdict: Any, reason: str, mode: str) -> None:
    out, _ = await run(StreamGuard(as_mode(lambda text: verdict, mode)), ["x."])
    assert out[-1].payload.reason == reason
    if isinstance(verdict, dict):
        assert out[-1].payload.metadata["k"] == 1


async def test_check_errors_fail_closed_by_default_and_open_under_warn(mode: str) -> None:
    def broken(text: str) -> Any:
        raise ConnectionError("classifier unreachable")

    out, _ = await run(StreamGuard(as_mode(broken, mode)))
    assert texts(out) == [] and out[-1].type == "tripwire"
    assert out[-1].payload.reason == "Stream guard check failed: classifier unreachable"
    assert out[-1].payload.metadata["errorType"] == "ConnectionError"

    out, app = await run(StreamGuard(as_mode(broken, mode), error_strategy="warn"))
    assert "".join(texts(out)) == "".join(WORDS)
    assert len(app.state("stream-guard")["errors"]) == 3


def test_stream_guard_options() -> None:
    with pytest.raises(InvalidType, match="check function"):
        StreamGuard("not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="strategy"):
        StreamGuard(bool, strategy="redact")
    with pytest.raises(InvalidArgument, match="error_strategy"):
        StreamGuard(bool, error_strategy="ignore")
    assert StreamGuard(as_mode(bool, "async")).process_output_stream.__name__ == "_stream_async"
    assert StreamGuard(bool).process_output_stream.__name__ == "_stream_sync"


# ----------------------------------------------------------------------------- the trace


class PacedModel:
    """Wraps a scripted model so that each chunk it streams arrives 1 ms after the previous
    one on a fake clock: what a guard holds back then shows as whole milliseconds."""

    def __init__(self, inner: ScriptedModel, clock: list[int]) -> None:
        self.inner, self.clock = inner, clock

    def stream(self, request: Any) -> Any:
        async def chunks() -> Any:
            async for chunk in self.inner.stream(request):
                self.clock[0] += 1_000_000
                yield chunk
        return chunks()


async def test_the_trace_reports_the_time_to_first_chunk_each_guard_added(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: clock[0])
    answer = "First sentence here. " * 3 + "The end."
    guards = [ops.map(lambda c: c, id="pass-through"),
              PIIDetector(detection_types=["email"], phase="output"),
              StreamGuard(lambda text: None, id="sentence", buffering=Buffering.sentence()),
              StreamGuard(lambda text: None, id="audit",
                          buffering=Buffering.end_of_stream(hold=False)),
              StreamGuard(lambda text: None, id="hold-all",
                          buffering=Buffering.end_of_stream())]
    model = PacedModel(ScriptedModel([text(answer)]), clock)
    result = await Agent(id="a", model=model, output_processors=guards).generate("hi")
    assert result.text == answer
    delay_ms = {r.processor_id: round(r.first_chunk_delay * 1e3) for r in result.trace
                if r.hook == "process_output_stream"}
    # The model sends text-start at 1 ms, the 11 deltas at 2..12 ms, text-end at 13 ms. Each
    # guard's delay runs from when text first reached *it*: the redactor holds "First" until
    # " sentence" (1 ms); the sentence guard gets "First" at 3 ms and the whole first sentence
    # at 5 ms (2 ms); holding everything, from 5 ms to the text-end at 13 ms (8 ms). Pass-through
    # stages and an audit add nothing. The delays add up to what the client waited: 11 ms.
    assert delay_ms == {"pass-through": 0, "pii-detector": 1, "sentence": 2, "audit": 0,
                        "hold-all": 8}
    assert sum(delay_ms.values()) == 13 - 2
    rows = {r["processor"]: r for r in latency_report(result.trace, guards)}
    assert rows["hold-all"]["buffering"] == "Buffering.end_of_stream(hold=True)"
    assert rows["pii-detector"]["buffering"] == "Buffering.holdback(max_chars=1024)"
    assert rows["sentence"]["ttfc_ms"] == 2.0
    # step-start, text-start, 11 deltas, text-end, step-finish
    assert rows["pass-through"]["chunks"] == 15
    table = format_report(list(rows.values()))
    assert table.splitlines()[0].split() == ["processor", "step", "buffering", "chunks",
                                             "us_per_chunk", "ttfc_ms", "outcome"]


async def test_no_text_means_no_first_chunk_delay() -> None:
    guard = StreamGuard(lambda text: None, buffering=Buffering.end_of_stream())
    app = ops.apply([TextEnd(id="t", run_id="r", from_="AGENT")], guard, timed=True)
    _ = [c async for c in app]
    assert [r.first_chunk_delay for r in app.trace] == [None]


def test_the_benchmark_runs_and_reports_every_guard(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.bench_guards import contenders
    from benchmarks.bench_guards import run as bench

    report = bench(["--deltas", "40", "--repeat", "1", "--paced-deltas", "6",
                    "--interval", "0.0005", "--json"])
    assert [r["guard"] for r in report["rows"]] == [c.name for c in contenders()]
    assert report["rows"][0]["added_us_per_chunk"] == 0.0
    assert '"rows"' in capsys.readouterr().out
