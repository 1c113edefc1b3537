"""PrefillErrorHandler: the provider error shapes of
``docs/mastra-fidelity.md``, "PrefillErrorHandler"; one retry, no memory."""

from __future__ import annotations

import json

import pytest

from streamkit import Agent, APICallError, get_text
from streamkit.testing import ScriptedModel, api_error, text
from streamkit_operators import PrefillErrorHandler, is_prefill_error

ANTHROPIC = json.dumps({"type": "error", "error": {
    "type": "invalid_request_error",
    "message": "This model does not support assistant message prefill. The conversation must "
               "end with a user message."}})
GEMINI = json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                               "message": "Requests ending with a model turn are not supported "
                                          "for this model."}})


@pytest.mark.parametrize("message, body", [
    pytest.param("Bad Request", ANTHROPIC, id="anthropic-in-body"),
    pytest.param("does not support assistant message prefill", None, id="anthropic-in-message"),
    pytest.param("Assistant response prefill is incompatible with enable_thinking", None,
                 id="qwen-underscore"),
    pytest.param("assistant response prefill is incompatible with enable thinking", None,
                 id="llamacpp-space"),
    pytest.param("ASSISTANT RESPONSE PREFILL IS INCOMPATIBLE WITH ENABLE-THINKING", None,
                 id="upper-case-dash"),
    pytest.param("400", GEMINI, id="gemini-in-body"),
])
async def test_recovers_once_with_a_continue_reminder(message: str, body: str | None) -> None:
    model = ScriptedModel([api_error(400, message, body), text("Continuing.")])
    agent = Agent(id="p", model=model, error_processors=[PrefillErrorHandler()])
    result = await agent.generate("Write a haiku", thread_id="t1")
    assert result.text == "Continuing." and model.calls == 2
    retried = model.requests[1].prompt
    assert retried[-1] == {"role": "user", "content": "<system-reminder>continue</system-reminder>"}
    assert model.requests[0].prompt[-1]["content"] == "Write a haiku"
    # the reminder is context: never part of the stored turn
    assert all("system-reminder" not in get_text(m) for m in result.messages)
    assert [s.finish_reason for s in result.steps] == ["retry", "stop"]


async def test_only_on_the_first_attempt() -> None:
    model = ScriptedModel([api_error(400, "does not support assistant message prefill")] * 2)
    agent = Agent(id="p", model=model, error_processors=[PrefillErrorHandler()])
    with pytest.raises(APICallError, match="prefill"):
        await agent.generate("hi")
    assert model.calls == 2


@pytest.mark.parametrize("message, body, status", [
    pytest.param("Rate limit exceeded", None, 429, id="rate-limit"),
    pytest.param("Bad Request", json.dumps({"error": {"message": "max_tokens too large"}}), 400,
                 id="other-400"),
    pytest.param("prefill", None, 400, id="word-alone"),
])
async def test_other_errors_are_left_alone(message: str, body: str | None, status: int) -> None:
    model = ScriptedModel([api_error(status, message, body)])
    agent = Agent(id="p", model=model, error_processors=[PrefillErrorHandler()])
    with pytest.raises(APICallError):
        await agent.generate("hi")
    assert model.calls == 1


async def test_works_from_any_lane_and_in_a_stream() -> None:
    model = ScriptedModel([api_error(400, "does not support assistant message prefill"),
                           text("ok")])
    handler = PrefillErrorHandler(reminder="Please continue.")
    agent = Agent(id="p", model=model, input_processors=[handler], max_processor_retries=1)
    stream = agent.stream("hi")
    types = [c.type async for c in stream]
    assert (await stream.result()).text == "ok" and types[-1] == "finish"
    assert model.requests[1].prompt[-1]["content"] == "Please continue."
    assert model.requests[1].prompt.count(model.requests[1].prompt[-1]) == 1


def test_detection_walks_the_cause_chain_and_bytes_bodies() -> None:
    inner = APICallError("upstream", status_code=400, body=ANTHROPIC.encode())
    try:
        raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert is_prefill_error(outer)
    assert is_prefill_error(APICallError("x", body={"error": {"message": "Requests ending with "
                                                              "a model turn are not supported"}}))
    assert not is_prefill_error(ValueError("nothing to see"))
