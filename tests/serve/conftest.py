"""Fixtures for the serving tests: the fixture server's agent, rebuilt in streamkit.

``anchor_agent`` mirrors the agent the real Mastra transcripts were recorded against (id
``demo``, a ``lookupCustomer`` tool that writes ``data-progress {pct: 50}``, a model that echoes
with reasoning, and answers from the tool's result), so streamkit's answers can be compared with
the recordings chunk by chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import prompt_text
from streamkit.models import ModelRequest
from streamkit.serve import create_app
from streamkit.testing import FunctionModel, reasoning, text, tool_call
from streamkit.tools import tool

from ._server import running

RECORD = {"customerId": "C-42", "name": "Ada Lovelace", "tier": "gold", "openTickets": 2}


@tool(name="lookupCustomer", description="Look up a customer record by id.")
def lookup_customer(customerId: str, writer: Any = None) -> dict[str, Any]:  # noqa: N803
    writer.custom({"type": "data-progress", "data": {"pct": 50}})
    return dict(RECORD) if customerId == "C-42" else {}


def _anchor_step(request: ModelRequest) -> Any:
    last = request.prompt[-1]
    if last["role"] == "tool":
        return text("Ada Lovelace is a gold customer with 2 open tickets.")
    content = last["content"]
    said = prompt_text(content)
    if "C-42" in said:
        return tool_call("lookupCustomer", {"customerId": "C-42"})
    turn = sum(1 for m in request.prompt if m["role"] == "user")
    return [reasoning("The user said something; echo it."),
            text(f"Echo: {said} (turn {turn})", chunk_size=9)]


def anchor_agent(memory: Memory | None = None, **options: Any) -> Agent:
    return Agent(id="demo", name="Demo Agent", instructions="You are a protocol-anchor agent.",
                 model=FunctionModel(_anchor_step, model_id="mock-model-id"),
                 tools=[lookup_customer], memory=memory, **options)


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Memory]:
    mem = Memory(SQLiteStore(str(tmp_path / "memory.sqlite3")), last_messages=20)
    yield mem
    await mem.close()


@pytest.fixture
async def anchor_url(memory: Memory) -> AsyncIterator[str]:
    """The anchor agent served by uvicorn on 127.0.0.1, with SQLite memory."""
    async with running(create_app([anchor_agent(memory)], memory=memory)) as url:
        yield url
