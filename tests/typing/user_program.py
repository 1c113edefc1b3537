"""A user's program, checked with ``mypy --strict`` by ``tests/test_user_typing.py``.

It must type-check with no ignore comments and no casts: narrowing chunks with
``isinstance`` and ``match``, reading payload fields, typed streams, ``@tool`` signatures.
It is also run for real by that test, so every line here works as well as type-checks.
"""

from __future__ import annotations

import asyncio
from typing import Any, assert_type

from streamkit import Agent, Chunk, Processor, ops, tool
from streamkit.chunks import DataChunk, Finish, ReasoningDelta, TextDelta, ToolCall, ToolResult
from streamkit.testing import ScriptedModel, reasoning, text, tool_call


class WordCounter(Processor):
    id = "word-counter"

    def process_output_stream(self, part: Chunk, state: dict[str, Any]) -> Chunk | None:
        if isinstance(part, TextDelta):
            state["words"] = state.get("words", 0) + len(part.payload.text.split())
        return part


def is_reasoning(part: Chunk) -> bool:
    return isinstance(part, ReasoningDelta)


def describe(part: Chunk) -> str:
    match part:
        case TextDelta(payload=payload):
            assert_type(payload.text, str)
            return f"text {payload.text!r}"
        case ToolCall(payload=payload):
            return f"call {payload.tool_name}({payload.args!r})"
        case ToolResult(payload=payload):
            return f"result of {payload.tool_name}: {payload.result!r}"
        case Finish(payload=payload):
            return f"finish {payload.step_result.reason}"
        case DataChunk(type=kind, data=data):
            return f"{kind} {data!r}"
        case _:
            return part.type


@tool
def lookup_customer(customer_id: str, verbose: bool = False) -> dict[str, str]:
    """Look up a customer by id.

    Args:
        customer_id: the id, such as "C-42".
        verbose: include the history.
    """
    return {"id": customer_id, "tier": "gold"}


@tool(name="add")
async def add_numbers(x: int, y: int = 1) -> int:
    """Add two numbers."""
    return x + y


async def main() -> list[str]:
    # @tool keeps the function's signature: calling it directly is checked like the function.
    assert_type(lookup_customer("C-42"), dict[str, str])
    assert_type(await add_numbers(2, y=3), int)
    assert_type(lookup_customer.input_schema, dict[str, Any])

    agent = Agent(id="support", model=ScriptedModel([
        tool_call("lookup_customer", {"customer_id": "C-42"}),
        [reasoning("hmm"), text("You are a gold customer.")]]),
        tools=[lookup_customer, add_numbers], output_processors=[WordCounter()])
    lines: list[str] = []
    stream = agent.stream("Who am I?")
    async for chunk in stream:
        assert_type(chunk, Chunk)
        lines.append(describe(chunk))
        if isinstance(chunk, (TextDelta, ReasoningDelta)):
            assert_type(chunk.payload.text, str)
    result = await stream.result()
    assert_type(result.text, str)

    parts: list[Chunk] = [TextDelta(id="t", text="Hi there. "), ReasoningDelta(id="r", text="x")]
    async for out in ops.apply(parts, ops.drop(is_reasoning) | WordCounter()):
        assert_type(out, Chunk)
        lines.append(describe(out))
    again = Agent(id="again", model=ScriptedModel([text("Yes.")]))
    async for piece in again.stream("again?").text_stream:
        assert_type(piece, str)
        lines.append(piece)
    return lines


if __name__ == "__main__":
    print("\n".join(asyncio.run(main())))
