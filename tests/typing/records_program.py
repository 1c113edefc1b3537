"""Records users read back (issue 32): events, replay rows, live results, scripted steps.

``tests/test_user_typing.py`` expects each line marked ``# E: <code>`` to be reported by
``mypy --strict`` with that code, and the unmarked lines to be clean.
"""

from __future__ import annotations

from typing import assert_type

from streamkit import Agent, AgentResult, display
from streamkit.events import EventLog, ToolCalled
from streamkit.replay import ReplayRow, replay
from streamkit.testing import ScriptedModel, text

log = EventLog()
calls = log.of(ToolCalled)
assert_type(calls, list[ToolCalled])
names = [c.tool_name for c in calls]


def on_row(row: ReplayRow) -> None:
    delivered: int = row["delivered"]
    error: str | None = row["error"]
    print(delivered, error, row["processors"].get("pii", {}).get("in", 0))
    print(row["deliverd"])  # E: typeddict-item
    tripped: str = row["tripwire"]  # E: assignment
    print(tripped, names)


async def watch(agent: Agent) -> None:
    result = await display.live(agent.stream("hi"))
    assert_type(result, AgentResult)


def run() -> None:
    replay(["recordings/"], "guards:PIPELINE", on_stream=on_row)
    ScriptedModel([text("hi"), [text("a"), text("b")]])
    ScriptedModel(["hello"])  # E: list-item
