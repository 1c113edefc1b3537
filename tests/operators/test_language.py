"""LanguageDetector: detect / translate / block / warn, threshold, minimum length, targets by name
or code, and a failing checker model under warn and strict."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamkit import Agent
from streamkit.errors import InvalidArgument
from streamkit.testing import ScriptedModel, api_error, text
from streamkit_operators import LanguageDetector

FRENCH = "Bonjour, où est ma commande ?"


def answer(code: str | None, confidence: float, translated: str | None = None) -> Any:
    body: dict[str, Any] = {"iso_code": code, "confidence": confidence}
    if translated is not None:
        body["translated_text"] = translated
    return text(json.dumps(body))


async def run(guard: LanguageDetector, message: Any = FRENCH) -> tuple[Any, ScriptedModel]:
    main = ScriptedModel([text("ok")])
    result = await Agent(id="a", model=main, input_processors=[guard]).generate(message)
    return result, main


async def test_detect_adds_metadata_and_changes_nothing() -> None:
    checker = ScriptedModel([answer("fr", 0.97)])
    guard = LanguageDetector(model=checker, target_languages=["English"])
    result, main = await run(guard)
    assert main.requests[0].prompt[-1]["content"] == FRENCH
    info = result.states["language-detector"]["detections"][0]
    assert info == {"detected_language": "French", "iso_code": "fr", "confidence": 0.97,
                    "is_target_language": False, "target_languages": ["English"]}
    assert "translated_text" not in checker.requests[0].prompt[0]["content"]


async def test_translate_replaces_the_text_and_keeps_the_original_in_metadata() -> None:
    checker = ScriptedModel([answer("fr", 0.9, "Hello, where is my order?")])
    guard = LanguageDetector(model=checker, target_languages=["en", "de"], strategy="translate")
    result, main = await run(guard)
    assert main.requests[0].prompt[-1]["content"] == "Hello, where is my order?"
    assert "into English" in checker.requests[0].prompt[0]["content"]
    info = result.states["language-detector"]["detections"][0]
    assert info["is_target_language"] is False


async def test_translation_metadata_on_the_message() -> None:
    checker = ScriptedModel([answer("fr", 0.9, "Hello, where is my order?")])
    seen: dict[str, Any] = {}

    class Peek:
        id = "peek"

        def process_input(self, messages: list[Any]) -> None:
            seen.update(messages[-1].content.metadata["language_detection"])

    main = ScriptedModel([text("ok")])
    await Agent(id="a", model=main, input_processors=[
        LanguageDetector(model=checker, target_languages=["en"], strategy="translate"),
        Peek()]).generate(FRENCH)
    assert seen["translation"] == {"target_language": "en", "text": "Hello, where is my order?"}
    assert seen["original_content"] == FRENCH


async def test_target_language_is_left_alone_even_when_translating() -> None:
    checker = ScriptedModel([answer("en", 0.99, None)])
    guard = LanguageDetector(model=checker, target_languages="English", strategy="translate")
    result, main = await run(guard, "Where is my order, please?")
    assert main.requests[0].prompt[-1]["content"] == "Where is my order, please?"
    assert result.states["language-detector"]["detections"][0]["is_target_language"] is True


async def test_block_a_language_not_in_the_targets() -> None:
    guard = LanguageDetector(model=ScriptedModel([answer("fr", 0.9)]), target_languages=["en"],
                             strategy="block", include_detection_details=True)
    result, main = await run(guard)
    assert main.calls == 0 and result.tripwire is not None
    assert result.tripwire.reason == "Language not allowed: French (fr). Allowed: en"
    assert result.tripwire.metadata["detection"]["confidence"] == 0.9


async def test_warn_keeps_the_message() -> None:
    guard = LanguageDetector(model=ScriptedModel([answer("fr", 0.9)]), target_languages=["en"],
                             strategy="warn")
    result, main = await run(guard)
    assert result.tripwire is None and main.requests[0].prompt[-1]["content"] == FRENCH


async def test_low_confidence_changes_nothing_and_adds_no_metadata() -> None:
    guard = LanguageDetector(model=ScriptedModel([answer("fr", 0.5)]), target_languages=["en"],
                             strategy="block")
    result, _ = await run(guard)
    assert result.tripwire is None
    assert "detections" not in result.states.get("language-detector", {})


async def test_short_messages_are_not_checked() -> None:
    checker = ScriptedModel([])
    result, _ = await run(LanguageDetector(model=checker, target_languages=["en"]), "oui")
    assert checker.calls == 0 and result.text == "ok"


@pytest.mark.parametrize("failure", [
    pytest.param(api_error(429, "rate limited"), id="api-error"),
    pytest.param(text('{"iso_code": "fr"}'), id="answer-without-confidence"),
])
async def test_failing_checker_under_warn_and_strict(failure: Any) -> None:
    result, main = await run(LanguageDetector(model=ScriptedModel([failure]),
                                              target_languages=["en"], strategy="block"))
    assert result.tripwire is None and main.calls == 1
    assert result.states["language-detector"]["errors"]

    result, main = await run(LanguageDetector(model=ScriptedModel([failure]),
                                              target_languages=["en"], error_strategy="strict"))
    assert main.calls == 0 and result.tripwire is not None
    assert result.tripwire.reason.startswith("Language detection failed: ")


def test_options_are_validated() -> None:
    with pytest.raises(InvalidArgument, match="requires a model"):
        LanguageDetector(model=None, target_languages=["en"])
    with pytest.raises(InvalidArgument, match="target language"):
        LanguageDetector(model="x", target_languages=[])
    with pytest.raises(InvalidArgument, match="strategy"):
        LanguageDetector(model="x", target_languages=["en"], strategy="filter")
