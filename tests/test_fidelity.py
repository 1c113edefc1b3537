"""Where streamkit once disagreed with Mastra 1.71.0 (each scenario was run on Mastra itself with a
scripted model): the run-wide system prompt from ``process_input``, ``Processor.name``,
``tool_choice`` as hooks see it, ``stream.text`` after ``process_output_result``, and how an
error-processor retry closes the failed attempt. (Composition with ``|`` is in ``test_ops``,
undeclared tool arguments in ``test_tools``.)"""

from __future__ import annotations

from typing import Any

import pytest

from streamkit import Agent, MessagesUpdate, Processor, tool
from streamkit.testing import ScriptedModel, api_error, text, tool_call

from .conftest import P, hook, run_stream, types


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def system_prompts(model: ScriptedModel) -> list[list[str]]:
    """The system messages of every request the model got, in order."""
    return [[m["content"] for m in r.prompt if m["role"] == "system"] for r in model.requests]


# ----------------------------------------------------------------------------- 1. system prompt


REPLACEMENTS = [
    pytest.param(lambda messages: {"messages": messages, "system_messages": ["You are terse."]},
                 id="dict with messages"),
    pytest.param(lambda: {"system_messages": ["You are terse."]}, id="dict, system only"),
    pytest.param(lambda messages: MessagesUpdate(messages=messages,
                                                 system_messages=["You are terse."]),
                 id="MessagesUpdate with messages"),
    pytest.param(lambda: MessagesUpdate(system_messages=["You are terse."]),
                 id="MessagesUpdate, system only"),
]


@pytest.mark.parametrize("replace", REPLACEMENTS)
@pytest.mark.parametrize("entry", ["generate", "stream"])
async def test_process_input_system_messages_replace_the_instructions_on_every_step(
        mode: str, replace: Any, entry: str) -> None:
    model = ScriptedModel([tool_call("get_weather", {"city": "Paris"}), text("Sunny.")])
    agent = Agent(id="a", instructions="You are chatty.", model=model, tools=[get_weather],
                  input_processors=[P("sys", process_input=hook(mode, replace))])
    if entry == "generate":
        result = await agent.generate("Weather in Paris?")
    else:
        _, result = await run_stream(agent, "Weather in Paris?")
    assert result.text == "Sunny."
    assert system_prompts(model) == [["You are terse."], ["You are terse."]]
    assert [m["content"] for m in model.requests[0].prompt if m["role"] == "user"] == \
        ["Weather in Paris?"]


async def test_the_replacement_is_what_each_attempt_starts_from(mode: str) -> None:
    """A step's own system edit lasts that step; a retry and the next step start again from
    what ``process_input`` left, never from the agent's instructions."""
    def step_edit(step_number: int, retry_count: int) -> Any:
        if step_number == 0 and retry_count == 0:
            return {"system_messages": ["Only for the first attempt."]}
        return None

    def reject_once(abort: Any, retry_count: int, text: str) -> None:
        if retry_count == 0 and text == "bad":
            abort("try again", retry=True)

    model = ScriptedModel([text("bad"), tool_call("get_weather", {"city": "Paris"}),
                           text("Sunny.")])
    agent = Agent(id="a", instructions="You are chatty.", model=model, tools=[get_weather],
                  max_processor_retries=1,
                  input_processors=[
                      P("sys", process_input=hook(mode, lambda: {
                          "system_messages": ["You are terse."]})),
                      P("step", process_input_step=hook(mode, step_edit))],
                  output_processors=[P("guard", process_output_step=hook(mode, reject_once))])
    result = await agent.generate("Weather in Paris?")
    assert result.text == "Sunny."
    prompts = system_prompts(model)
    assert prompts[0] == ["Only for the first attempt."]
    assert prompts[1][0] == "You are terse." and "try again" in prompts[1][1]
    assert prompts[2] == ["You are terse."]
    assert not any("You are chatty." in p for step in prompts for p in step)


async def test_api_error_retry_keeps_the_replacement(mode: str) -> None:
    model = ScriptedModel([api_error(503, "busy"), text("ok")])
    agent = Agent(id="a", instructions="You are chatty.", model=model,
                  input_processors=[P("sys", process_input=hook(mode, lambda: {
                      "system_messages": ["You are terse."]}))],
                  error_processors=[P("again", process_api_error=hook(mode, lambda: {
                      "retry": True}))])
    assert (await agent.generate("hi")).text == "ok"
    assert system_prompts(model) == [["You are terse."], ["You are terse."]]


# ----------------------------------------------------------------------------- 2. name


def test_processor_name_defaults_to_its_id() -> None:
    class Guard(Processor):
        id = "guard"

        def process_output_stream(self, part: Any) -> Any:
            return part

    class Named(Guard):
        name = "The Guard"

    guard = Guard()
    assert guard.name == "guard"
    assert Named().name == "The Guard"
    assert Processor("p").name == "p" and Processor("p", name="Shown").name == "Shown"
    guard.name = "Renamed"
    assert guard.name == "Renamed" and guard.id == "guard"
    late = Processor()
    late.id = "set-later"
    assert late.name == "set-later"


# ----------------------------------------------------------------------------- 4. tool_choice


@pytest.mark.parametrize("given,seen,sent", [
    pytest.param(None, "auto", None, id="unset: hooks see auto, the request leaves it out"),
    pytest.param("required", "required", "required", id="set: hooks see it, it is sent"),
])
async def test_hooks_see_the_current_tool_choice(mode: str, given: Any, seen: str,
                                                 sent: Any) -> None:
    got: list[tuple[str, Any]] = []
    model = ScriptedModel([text("ok")])
    agent = Agent(id="a", model=model, tools=[get_weather], input_processors=[P(
        "look",
        process_input_step=hook(mode, lambda tool_choice: got.append(("step", tool_choice))),
        process_llm_request=hook(mode, lambda tool_choice: got.append(("llm", tool_choice))))])
    await agent.generate("hi", **({} if given is None else {"tool_choice": given}))
    assert got == [("step", seen), ("llm", seen)]
    assert model.requests[0].tool_choice == sent


async def test_an_override_of_tool_choice_is_seen_by_the_next_processor(mode: str) -> None:
    got: list[Any] = []
    model = ScriptedModel([text("ok")])
    agent = Agent(id="a", model=model, tools=[get_weather], input_processors=[
        P("set", process_input_step=hook(mode, lambda: {"tool_choice": "none"})),
        P("look", process_input_step=hook(mode, lambda tool_choice: got.append(tool_choice)))])
    await agent.generate("hi")
    assert got == ["none"] and model.requests[0].tool_choice == "none"


# ----------------------------------------------------------------------------- 5. stream.text


def _edit_in_place(messages: list[Any]) -> None:
    for m in messages:
        for part in m.content.parts:
            if part.type == "text":
                part.text = part.text.replace("secret", "[redacted]")


def _edit_by_list(messages: list[Any]) -> list[Any]:
    _edit_in_place(messages)
    return messages


def _edit_by_dict(messages: list[Any]) -> dict[str, Any]:
    return {"messages": _edit_by_list(messages)}


@pytest.mark.parametrize("edit", [
    pytest.param(_edit_in_place, id="edited in place"),
    pytest.param(_edit_by_list, id="returned list"),
    pytest.param(_edit_by_dict, id="returned dict"),
])
async def test_stream_text_is_the_edited_result_text(mode: str, edit: Any) -> None:
    model = ScriptedModel([text("the secret word")])
    agent = Agent(id="a", model=model,
                  output_processors=[P("edit", process_output_result=hook(mode, edit))])
    stream = agent.stream("hi")
    streamed = "".join([c.payload.text async for c in stream if c.type == "text-delta"])
    assert streamed == "the secret word"  # the deltas went out before the result hook ran
    assert await stream.text == "the [redacted] word"
    assert (await stream.result()).text == "the [redacted] word"


async def test_stream_text_after_a_result_tripwire_is_what_was_received(mode: str) -> None:
    def block(abort: Any) -> None:
        abort("no")

    agent = Agent(id="a", model=ScriptedModel([text("hello")]),
                  output_processors=[P("g", process_output_result=hook(mode, block))])
    stream = agent.stream("hi")
    assert await stream.text == "hello"
    assert (await stream.result()).text == ""


# ----------------------------------------------------------------------------- 6/7. error retry


def retry_on_busy(error: Any) -> Any:
    return {"retry": True} if getattr(error, "status_code", None) == 503 else None


async def test_error_processor_retry_closes_the_failed_attempt(mode: str) -> None:
    model = ScriptedModel([api_error(503, "busy"), text("ok")])
    agent = Agent(id="a", model=model, error_processors=[
        P("look-only", process_api_error=hook(mode, lambda: None)),
        P("busy-retry", process_api_error=hook(mode, retry_on_busy))])
    chunks, result = await run_stream(agent)
    assert types(chunks) == [
        "start", "step-start", "data-step-retry", "step-finish",
        "step-start", "text-start", "text-delta", "text-end", "step-finish", "finish"]
    closed = chunks[3].payload.step_result
    assert (closed.reason, closed.is_continued) == ("retry", True)
    assert chunks[2].transient is True
    assert chunks[2].data == {"stepNumber": 0, "reason": "busy", "processorId": "busy-retry",
                              "retryCount": 1}
    assert result.text == "ok"
    assert [s.finish_reason for s in result.steps] == ["retry", "stop"]


async def test_processor_retry_still_closes_its_attempt_the_same_way(mode: str) -> None:
    def once(abort: Any, retry_count: int) -> None:
        if retry_count == 0:
            abort("again", retry=True)

    agent = Agent(id="a", model=ScriptedModel([text("first"), text("second")]),
                  max_processor_retries=1,
                  output_processors=[P("guard", process_output_step=hook(mode, once))])
    chunks, result = await run_stream(agent)
    t = types(chunks)
    assert t[:2] == ["start", "step-start"]
    withdraw = t.index("data-step-retry")
    assert t[withdraw:withdraw + 3] == ["data-step-retry", "step-finish", "step-start"]
    assert chunks[withdraw].data["processorId"] == "guard"
    assert chunks[withdraw + 1].payload.step_result.reason == "retry"
    assert result.text == "second"


async def test_a_refused_error_retry_surfaces_the_error_without_a_withdrawal(mode: str) -> None:
    model = ScriptedModel([api_error(400, "bad request")])
    agent = Agent(id="a", model=model, error_processors=[
        P("busy-retry", process_api_error=hook(mode, retry_on_busy))])
    chunks, result = await run_stream(agent)
    assert "data-step-retry" not in types(chunks)
    assert types(chunks)[-1] == "error"
    assert getattr(result, "status_code", None) == 400
