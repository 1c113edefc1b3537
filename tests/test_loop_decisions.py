"""Two deliberate differences from Mastra 1.71 (README "Decisions", issue 27): a tool call
dropped by ``process_output_stream`` is never executed, and a ``process_output_step`` abort
without retry sends a ``tripwire`` chunk and ends with finish reason ``other``, running none of
the step's tools."""

from __future__ import annotations

from typing import Any

from streamkit import Agent, tool
from streamkit.testing import ScriptedModel, text, tool_call

from .conftest import P, as_mode, run_stream, types


def _tools() -> tuple[Any, list[str]]:
    ran: list[str] = []

    @tool
    def charge(amount: int) -> str:
        """Charges the customer."""
        ran.append(f"charge {amount}")
        return "charged"

    return charge, ran


async def test_a_dropped_tool_call_is_never_executed(mode: str) -> None:
    charge, ran = _tools()

    def drop_charges(part: Any) -> Any:
        return None if part.type == "tool-call" and part.payload.tool_name == "charge" else part

    model = ScriptedModel([[text("Charging."), tool_call("charge", {"amount": 5})], text("ok")])
    agent = Agent(id="a", model=model, tools=[charge], output_processors=[
        P("no-charges", process_output_stream=as_mode(drop_charges, mode))])
    chunks, result = await run_stream(agent)
    assert ran == []
    assert "tool-call" not in types(chunks) and "tool-result" not in types(chunks)
    # Nothing ran, so there is nothing to answer: the run ends with that step.
    assert result.tool_calls == [] and model.calls == 1 and result.text == "Charging."


async def test_an_output_step_abort_without_retry_runs_none_of_its_tools(mode: str) -> None:
    charge, ran = _tools()

    def refuse(tool_calls: Any, abort: Any) -> None:
        if tool_calls:
            abort("no charging today")

    model = ScriptedModel([[text("Charging."), tool_call("charge", {"amount": 5})], text("ok")])
    agent = Agent(id="a", model=model, tools=[charge], output_processors=[
        P("refuse", process_output_step=as_mode(refuse, mode))])
    chunks, result = await run_stream(agent)
    assert ran == []
    assert types(chunks)[-1] == "tripwire" and "tool-result" not in types(chunks)
    assert "finish" not in types(chunks)
    assert result.finish_reason == "other" and result.tripwire is not None
    assert result.tripwire.reason == "no charging today"
