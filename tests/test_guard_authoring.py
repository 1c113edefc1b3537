"""A guard author's traps (issue 29, point 5): ``state`` lives for the whole request, not per
attempt; hooks get ``retry_count`` to tell attempts apart (and pay nothing when they do not ask
for it); ``abort`` has a type to annotate with (``streamkit.Abort``); a hook spelled in
camelCase is named back in snake_case. Every hook behaviour runs with a sync and an async hook.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import streamkit
from streamkit import Agent, ops
from streamkit.errors import ProcessorDefinitionError
from streamkit.processors._spec import register
from streamkit.testing import ScriptedModel, text

from .conftest import REPO, P, as_mode
from .test_user_typing import strict_mypy

# The model's first attempt says "bad"; the guard asks for a retry; the second is accepted.
STEPS = [text("a bad draft"), text("a good answer")]


def buffering_guard(mode: str, *, reset_per_attempt: bool) -> P:
    """A guard that buffers the text it has seen (as a guard matching across chunks does) and
    retries the step when the buffer holds "bad"."""
    def guard(part: Any, state: dict[str, Any], abort: Any, retry_count: int) -> Any:
        if reset_per_attempt and state.get("attempt") != retry_count:
            state["attempt"], state["buffer"] = retry_count, ""
        if part.type == "text-delta":
            state["buffer"] = state.get("buffer", "") + part.payload.text
            if "bad" in state["buffer"] and retry_count == 0:
                abort("no bad drafts", retry=True)
        return part
    return P("buffer-guard", process_output_stream=as_mode(guard, mode))


async def test_state_lives_for_the_request_not_the_attempt(mode: str) -> None:
    agent = Agent(id="a", model=ScriptedModel(STEPS), max_processor_retries=1,
                  output_processors=[buffering_guard(mode, reset_per_attempt=False)])
    result = await agent.generate("hi")
    assert result.text == "a good answer" and [s.retry_count for s in result.steps] == [0, 1]
    # The rejected attempt's text is still in the buffer: state was not reset by the retry.
    assert result.states["buffer-guard"]["buffer"] == "a bada good answer"


async def test_retry_count_lets_a_guard_reset_per_attempt(mode: str) -> None:
    agent = Agent(id="a", model=ScriptedModel(STEPS), max_processor_retries=1,
                  output_processors=[buffering_guard(mode, reset_per_attempt=True)])
    result = await agent.generate("hi")
    assert result.text == "a good answer"
    assert result.states["buffer-guard"] == {"attempt": 1, "buffer": "a good answer"}


@pytest.mark.parametrize("hook", ["process_output_stream", "process_output_step",
                                  "process_llm_request", "process_input_step"])
async def test_every_in_step_hook_receives_the_retry_count(hook: str, mode: str) -> None:
    seen: list[int] = []

    def record(retry_count: int, abort: Any, part: Any = None) -> Any:
        if part is None or part.type == "text-delta":
            seen.append(retry_count)
            if retry_count < 2:
                abort("again", retry=True)
        return part

    def fn(retry_count: int, abort: Any, part: Any) -> Any:
        return record(retry_count, abort, part)

    def fn_no_part(retry_count: int, abort: Any) -> Any:
        return record(retry_count, abort)

    lane = "input_processors" if hook in ("process_llm_request", "process_input_step") \
        else "output_processors"
    chosen = fn if hook == "process_output_stream" else fn_no_part
    proc = P("counter", **{hook: as_mode(chosen, mode)})
    agent = Agent(id="a", model=ScriptedModel([text("one"), text("two"), text("three")]),
                  max_processor_retries=2, **{lane: [proc]})
    result = await agent.generate("hi")
    assert result.tripwire is None and seen == [0, 1, 2]


def test_a_stream_hook_that_does_not_ask_for_retry_count_is_not_passed_it(mode: str) -> None:
    """Only the named arguments reach the generated per-chunk call."""
    def plain(part: Any) -> Any:
        return part

    def counting(part: Any, retry_count: int) -> Any:
        return part

    without = ops.fused_source(P("plain", process_output_stream=as_mode(plain, mode)))
    with_count = ops.fused_source(P("counting", process_output_stream=as_mode(counting, mode)))
    assert "retry_count" not in without
    assert "retry_count" in with_count


@pytest.mark.parametrize("name, meant", [
    pytest.param("processOutputStream", "process_output_stream", id="camel-stream-hook"),
    pytest.param("processInput", "process_input", id="camel-input-hook"),
    pytest.param("processOutputStrem", "process_output_stream", id="camel-and-misspelled"),
    pytest.param("ProcessLlmRequest", "process_llm_request", id="pascal-case"),
    pytest.param("flushOutputStream", "flush_output_stream", id="camel-flush"),
    pytest.param("onViolation", "on_violation", id="camel-on-violation"),
    pytest.param("process_output_strem", "process_output_stream", id="snake-typo"),
])
def test_a_hook_in_camel_case_gets_its_snake_case_name(name: str, meant: str,
                                                       mode: str) -> None:
    def fn(part: Any = None) -> Any:
        return part

    alone = type("Guard", (streamkit.Processor,), {"id": "g", name: as_mode(fn, mode)})
    with_hook = type("Guard2", (streamkit.Processor,), {
        "id": "g2", name: as_mode(fn, mode), "process_input": as_mode(lambda: None, mode)})
    duck = P("duck", **{name: as_mode(fn, mode)})   # not a subclass: the attribute alone
    for processor in (alone(), with_hook(), duck):
        with pytest.raises(ProcessorDefinitionError, match=f"did you mean '{meant}'"):
            register(processor)


def test_snake_case_names_and_other_camel_case_methods_are_left_alone() -> None:
    class Guard(streamkit.Processor):
        id = "g"

        def process_output_stream(self, part: Any) -> Any:
            return part

        def helperMethod(self) -> None:  # noqa: N802 - not a hook name: fine
            return None

        def on_violation(self, violation: Any) -> None:
            return None

    assert set(register(Guard()).hooks) == {"process_output_stream"}


def test_the_type_of_abort_is_exported() -> None:
    assert streamkit.Abort is streamkit.processors.Abort is streamkit.tripwire.Abort
    assert "Abort" in streamkit.__all__ and "Abort" in streamkit.processors.__all__


PROGRAM = REPO / "tests" / "typing" / "guard_program.py"


def test_a_guard_annotated_with_abort_type_checks_and_misuse_is_caught(tmp_path: Path) -> None:
    limit = sys.getrecursionlimit()
    try:
        problems = strict_mypy(PROGRAM, tmp_path)
    finally:
        # mypy, run in this process, raises the recursion limit for good; the wire tests
        # that run later expect the default one (their nesting limits are measured by it).
        sys.setrecursionlimit(limit)
    expected = {n for n, line in enumerate(PROGRAM.read_text().splitlines(), 1)
                if line.rstrip().endswith("# E: arg-type")}
    found = {int(p.split(":")[1]) for p in problems if "[arg-type]" in p}
    others = [p for p in problems if "[arg-type]" not in p]
    assert len(expected) == 1 and found == expected and not others, problems


def test_the_documented_lifetime_of_state() -> None:
    """The processor guide and the ``Processor`` docstring say it (the trap the issue hit)."""
    guide = " ".join((REPO / "docs" / "processors.md").read_text().split())
    doc = " ".join((streamkit.Processor.__doc__ or "").split())
    for text_ in (guide, doc):
        assert "whole request, not per attempt" in text_ and "retry_count" in text_
