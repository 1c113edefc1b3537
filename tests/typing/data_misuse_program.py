"""Mistakes with the data around the chunks (issue 32): tool calls, tool results, step
overrides and prompts. ``tests/test_user_typing.py`` expects each line marked ``# E: <code>`` to
be reported by ``mypy --strict`` with that code, and the unmarked lines to be clean.
"""

from __future__ import annotations

from streamkit import Chunk, Processor, StepOverrides, StepResult, StepToolCall
from streamkit.messages import PromptMessage, SystemPromptMessage
from streamkit.models import ModelRequest


class Audit(Processor):
    id = "audit"

    def process_output_stream(self, part: Chunk) -> Chunk | None:
        print(part.payload.txt)  # E: union-attr
        return part

    def process_output_step(self, tool_calls: list[StepToolCall] | None) -> None:
        for call in tool_calls or ():
            name: str = call.tool_name  # right: a str
            same: str = call["tool_name"]  # right: the old dict key, typed as str
            print(name, same, call.tool_nam)  # E: attr-defined
            print(call["tool_nam"])  # E: call-overload
            count: int = call["tool_call_id"]  # E: assignment
            call.args = {}  # E: misc
            print(count)

    def process_input_step(self, step_number: int) -> StepOverrides:
        if step_number:
            return StepOverrides(active_tools=["search"], tool_choice="required")  # right
        return StepOverrides(active_tool=["search"])  # E: call-arg


def overrides() -> list[StepOverrides]:
    return [
        StepOverrides(model_settings={"temperature": 0}, model="openai/gpt-4o-mini"),  # right
        StepOverrides(active_tools=3),  # E: arg-type
        StepOverrides(model_settings=0.2),  # E: arg-type
        StepOverrides(model=42),  # E: arg-type
    ]


def results(step: StepResult, request: ModelRequest) -> bool:
    first = step.tool_results[0]
    ok: bool = first.is_error and first["is_error"]  # right
    failed: str = first.is_error  # E: assignment
    print(failed, request.prompt[0]["role"])  # right: a typed prompt message
    print(request.prompt[0]["rol"])  # E: typeddict-item
    return ok


def edit(prompt: list[PromptMessage]) -> list[PromptMessage]:
    terse: SystemPromptMessage = {"role": "system", "content": "Be terse."}  # right
    return [terse, *prompt, {"role": "user", "content": 3}]  # E: list-item
