"""ModerationProcessor: input and stream moderation with a scripted checker model — strategies,
threshold, categories, windows, retry, and a failing checker under warn and strict."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamkit import Agent
from streamkit.errors import InvalidArgument
from streamkit.testing import FunctionModel, ScriptedModel, api_error, text
from streamkit_operators import Buffering, ModerationProcessor


def verdict(**scores: float) -> Any:
    body = {"category_scores": [{"category": k.replace("_", "/"), "score": v}
                                for k, v in scores.items()] or None, "reason": None}
    return text(json.dumps(body))


def judged(request: Any) -> str:
    """The text a moderation request asked about (after 'Text to moderate:')."""
    return request.prompt[-1]["content"].split("Text to moderate:\n", 1)[1]


def checker_flagging(word: str, category: str = "hate", score: float = 0.9) -> FunctionModel:
    """A checker that flags any text containing ``word``."""
    def answer(request: Any) -> Any:
        flagged = word in judged(request)
        return text(json.dumps({"category_scores": [{"category": category, "score": score}]
                                if flagged else None,
                                "reason": f"contains {word!r}" if flagged else None}))
    return FunctionModel(answer)


def text_of(chunks: list[Any]) -> str:
    return "".join(c.payload.text for c in chunks if c.type == "text-delta")


# ----------------------------------------------------------------------------- input


async def test_input_block_stops_before_the_main_model() -> None:
    checker = ScriptedModel([text(json.dumps({
        "category_scores": [{"category": "hate", "score": 0.92}], "reason": "a slur"}))])
    main = ScriptedModel([text("never")])
    agent = Agent(id="a", model=main, input_processors=[
        ModerationProcessor(model=checker, include_scores=True)])
    result = await agent.generate("something hateful")
    assert main.calls == 0
    assert result.tripwire is not None and result.tripwire.processor_id == "moderation"
    assert result.tripwire.reason == ("Content flagged for moderation. Categories: hate. "
                                      "Reason: a slur. Scores: hate: 0.92")
    assert result.tripwire.metadata["categories"] == ["hate"]
    request = checker.requests[0]
    assert request.model_settings == {"temperature": 0}
    assert request.prompt[0]["role"] == "system" and "hate/threatening" in \
        request.prompt[0]["content"]
    assert request.structured_output["required"] == ["category_scores"]


@pytest.mark.parametrize("scores, flagged", [
    pytest.param({"hate": 0.49}, False, id="below-threshold"),
    pytest.param({"hate": 0.5}, True, id="at-threshold"),
    pytest.param({"spam": 0.99}, False, id="category-not-configured"),
    pytest.param({}, False, id="null-scores"),
])
async def test_threshold_and_categories(scores: dict[str, float], flagged: bool) -> None:
    main = ScriptedModel([text("ok")])
    agent = Agent(id="a", model=main, input_processors=[
        ModerationProcessor(model=ScriptedModel([verdict(**scores)]))])
    result = await agent.generate("hello there")
    assert (result.tripwire is not None) is flagged


async def test_custom_categories_and_instructions() -> None:
    checker = ScriptedModel([verdict(spam=0.8)])
    guard = ModerationProcessor(model=checker, categories=["spam"], threshold=0.7,
                                instructions="Is it spam?")
    result = await Agent(id="a", model=ScriptedModel([text("x")]),
                         input_processors=[guard]).generate("buy now")
    assert result.tripwire is not None and "Categories: spam" in result.tripwire.reason
    assert checker.requests[0].prompt[0]["content"] == "Is it spam?"


async def test_input_warn_keeps_and_filter_drops() -> None:
    main = ScriptedModel([text("ok")])
    warn = ModerationProcessor(model=checker_flagging("hate"), strategy="warn")
    result = await Agent(id="a", model=main, input_processors=[warn]).generate(
        ["fine", "I hate this"])
    assert [m["content"] for m in main.requests[0].prompt] == ["fine", "I hate this"]
    assert result.states["moderation"]["violations"][0]["source"] == "input"

    main = ScriptedModel([text("ok")])
    drop = ModerationProcessor(model=checker_flagging("hate"), strategy="filter")
    await Agent(id="a", model=main, input_processors=[drop]).generate(["fine", "I hate this"])
    assert [m["content"] for m in main.requests[0].prompt] == ["fine"]


async def test_last_message_only() -> None:
    checker = checker_flagging("hate")
    guard = ModerationProcessor(model=checker, last_message_only=True)
    result = await Agent(id="a", model=ScriptedModel([text("ok")]),
                         input_processors=[guard]).generate(["I hate it", "what now?"])
    assert result.tripwire is None and checker.calls == 1


@pytest.mark.parametrize("failure", [
    pytest.param(api_error(503, "overloaded"), id="api-error"),
    pytest.param(text("I think it is fine"), id="not-json"),
])
async def test_failing_checker_warn_fails_open(failure: Any) -> None:
    main = ScriptedModel([text("answered")])
    guard = ModerationProcessor(model=ScriptedModel([failure]), error_strategy="warn")
    result = await Agent(id="a", model=main, input_processors=[guard]).generate("hello")
    assert result.tripwire is None and result.text == "answered"
    assert result.states["moderation"]["errors"]


@pytest.mark.parametrize("failure, error_type", [
    pytest.param(api_error(503, "overloaded"), "APICallError", id="api-error"),
    pytest.param(text("I think it is fine"), "ModelAnswerError", id="not-json"),
])
async def test_failing_checker_strict_aborts(failure: Any, error_type: str) -> None:
    main = ScriptedModel([text("never")])
    guard = ModerationProcessor(model=ScriptedModel([failure]), error_strategy="strict")
    result = await Agent(id="a", model=main, input_processors=[guard]).generate("hello")
    assert main.calls == 0 and result.tripwire is not None
    assert result.tripwire.reason.startswith("Moderation failed: ")
    assert result.tripwire.metadata["errorType"] == error_type


def test_phase_decides_which_hooks_exist() -> None:
    assert not hasattr(ModerationProcessor(model="x", phase="input"), "process_output_stream")
    assert not hasattr(ModerationProcessor(model="x", phase="output"), "process_input")
    both = ModerationProcessor(model="x")
    assert hasattr(both, "process_input") and hasattr(both, "process_output_stream")


def test_options_are_validated() -> None:
    with pytest.raises(InvalidArgument, match="phase"):
        ModerationProcessor(model="x", phase="stream")
    with pytest.raises(InvalidArgument, match="requires a model"):
        ModerationProcessor(model=None)
    with pytest.raises(InvalidArgument, match="strategy"):
        ModerationProcessor(model="x", strategy="redact")
    with pytest.raises(InvalidArgument, match="error_strategy"):
        ModerationProcessor(model="x", error_strategy="ignore")
    with pytest.raises(InvalidArgument, match="threshold"):
        ModerationProcessor(model="x", threshold=2)
    with pytest.raises(InvalidArgument, match="holdback"):
        ModerationProcessor(model="x", buffering=Buffering.holdback())


# ----------------------------------------------------------------------------- stream

ANSWER = "You are welcome. I hate mondays. See you soon."


async def stream_with(guard: ModerationProcessor, answer: str = ANSWER, **kw: Any
                      ) -> tuple[list[Any], Any]:
    agent = Agent(id="a", model=ScriptedModel([text(answer)]), output_processors=[guard], **kw)
    assert guard.phase == "output"
    stream = agent.stream("hi")
    chunks = [c async for c in stream]
    return chunks, await stream.result()


async def test_stream_block_by_sentence_never_shows_the_flagged_sentence() -> None:
    checker = checker_flagging("hate")
    chunks, result = await stream_with(ModerationProcessor(model=checker, phase="output"))
    assert text_of(chunks) == "You are welcome."
    assert chunks[-1].type == "tripwire" and result.tripwire is not None
    assert result.tripwire.metadata["window"] == 1
    # A sentence ends at its mark; the space after it opens the next window.
    assert [judged(r) for r in checker.requests] == ["You are welcome.", " I hate mondays."]


@pytest.mark.parametrize("strategy, expected", [
    pytest.param("filter", "You are welcome. See you soon.", id="filter-drops-the-window"),
    pytest.param("warn", ANSWER, id="warn-releases-it"),
])
async def test_stream_filter_and_warn(strategy: str, expected: str) -> None:
    checker = checker_flagging("hate")
    guard = ModerationProcessor(model=checker, strategy=strategy, phase="output")
    chunks, result = await stream_with(guard)
    assert text_of(chunks) == expected == result.text
    assert checker.calls == 3


async def test_token_windows_with_overlap_give_context() -> None:
    checker = checker_flagging("never-flag")
    guard = ModerationProcessor(model=checker, buffering=Buffering.window(tokens=4, overlap=2),
                                phase="output")
    chunks, _ = await stream_with(guard, "one two three four five six seven eight nine")
    assert text_of(chunks) == "one two three four five six seven eight nine"
    first, second = checker.requests[0], checker.requests[1]
    assert "Earlier text" not in first.prompt[-1]["content"]
    assert "Earlier text (context):\nthree four\n" in second.prompt[-1]["content"]
    assert judged(second) == " five six seven eight"


async def test_passthrough_checks_every_delta_like_mastra() -> None:
    checker = checker_flagging("never-flag")
    guard = ModerationProcessor(model=checker, buffering=Buffering.passthrough(),
                                phase="output")
    await stream_with(guard, "a b c d")
    assert [judged(r) for r in checker.requests] == ["a", " b", " c", " d"]


async def test_stream_checker_failure_under_warn_and_strict() -> None:
    failing = FunctionModel(lambda request: api_error(500, "checker down"))
    chunks, result = await stream_with(ModerationProcessor(model=failing, phase="output"))
    assert text_of(chunks) == ANSWER and result.tripwire is None
    assert len(result.states["moderation"]["errors"]) == 3

    chunks, result = await stream_with(ModerationProcessor(model=failing, phase="output",
                                                           error_strategy="strict"))
    assert text_of(chunks) == "" and result.tripwire is not None
    assert result.tripwire.reason.startswith("Moderation failed: ")


async def test_stream_block_with_retry_re_runs_the_step() -> None:
    main = ScriptedModel([text(ANSWER), text("You are welcome. See you soon.")])
    guard = ModerationProcessor(model=checker_flagging("hate"), retry=True, phase="output")
    agent = Agent(id="a", model=main, output_processors=[guard], max_processor_retries=1)
    stream = agent.stream("hi")
    chunks = [c async for c in stream]
    result = await stream.result()
    retry = next(c for c in chunks if c.type == "data-step-retry")
    assert retry.data["processorId"] == "moderation" and retry.data["retryCount"] == 1
    assert result.text == "You are welcome. See you soon." and result.tripwire is None
    assert "Content flagged for moderation" in main.requests[1].prompt[-1]["content"]
