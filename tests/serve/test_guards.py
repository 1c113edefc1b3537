"""Processors run exactly as in-process: what a redacting guard lets out is what goes on the
wire (both protocols) and into memory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamkit import Agent
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import message_to_dict
from streamkit.serve import create_app
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.tools import tool
from streamkit_operators import PIIDetector

from ..conftest import as_mode
from ._server import running

EMAIL, PHONE = "ada.lovelace@example.com", "+44 20 7946 0958"
MASKED_EMAIL, MASKED_PHONE = "a**********e@*******.com", "+** ** **** 0958"


@tool
def contact(customer_id: str) -> dict[str, Any]:
    """A customer's contact details."""
    return {"customer_id": customer_id, "email": EMAIL, "phone": PHONE}


def leaky_model() -> ScriptedModel:
    return ScriptedModel([
        tool_call("contact", {"customer_id": "C-42"}),
        text(f"Write to {EMAIL} or call {PHONE} any time."),
    ])


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Memory]:
    mem = Memory(SQLiteStore(str(tmp_path / "guard.sqlite3")))
    yield mem
    await mem.close()


def _body(route: str, thread: str) -> tuple[str, dict[str, Any]]:
    mem = {"thread": thread, "resource": "u1"}
    if route == "mastra":
        return "/api/agents/a/stream", {"messages": "contact for C-42?", "memory": mem}
    return "/chat/a", {"id": "c", "memory": mem, "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "contact for C-42?"}]}]}


async def _stored(memory: Memory, thread: str) -> str:
    return str([message_to_dict(m) for m in await memory.get_messages(thread)])


@pytest.mark.parametrize("route", ["mastra", "chat"])
async def test_pii_detector_redacts_the_wire_and_memory(route: str, memory: Memory) -> None:
    pii = PIIDetector(detection_types=["email", "phone"], phase="output")
    agent = Agent(id="a", model=leaky_model(), tools=[contact], memory=memory,
                  output_processors=[pii])
    path, body = _body(route, "t-pii")
    async with running(create_app(agent)) as url, httpx.AsyncClient(base_url=url) as c:
        wire = (await c.post(path, json=body)).text
    stored = await _stored(memory, "t-pii")
    for seen in (wire, stored):
        assert EMAIL not in seen and "7946" not in seen
        assert MASKED_EMAIL in seen and MASKED_PHONE in seen  # the shape is kept
    assert "data: [DONE]" in wire and "Write to" in stored


@pytest.mark.parametrize("route", ["mastra", "chat"])
async def test_a_redacting_stream_hook_runs_as_in_process(route: str, mode: str,
                                                          memory: Memory) -> None:
    def redact(part: Any) -> Any:
        if part.type == "text-delta" and "secret" in part.payload.text:
            return part.replace(text=part.payload.text.replace("secret", "[redacted]"))
        return part

    class Redactor:
        id = "redactor"
        process_output_stream = staticmethod(as_mode(redact, mode))

    agent = Agent(id="a", model=ScriptedModel([text("the secret is out")]), memory=memory,
                  output_processors=[Redactor()])
    path, body = _body(route, "t-red")
    async with running(create_app(agent)) as url, httpx.AsyncClient(base_url=url) as c:
        wire = (await c.post(path, json=body)).text
    stored = await _stored(memory, "t-red")
    in_process = await Agent(id="b", model=ScriptedModel([text("the secret is out")]),
                             output_processors=[Redactor()]).generate("x")
    assert in_process.text == "the [redacted] is out"
    assert "secret" not in wire and "[redacted]" in wire
    assert "secret" not in stored and in_process.text in stored


@pytest.mark.parametrize("route", ["mastra", "chat"])
async def test_a_tripwire_ends_the_stream_and_nothing_is_stored(route: str, mode: str,
                                                                memory: Memory) -> None:
    def guard(part: Any, abort: Any) -> Any:
        if part.type == "text-delta" and "forbidden" in part.payload.text:
            abort("forbidden word")
        return part

    class Guard:
        id = "guard"
        process_output_stream = staticmethod(as_mode(guard, mode))

    agent = Agent(id="a", model=ScriptedModel([text("this is forbidden talk")]), memory=memory,
                  output_processors=[Guard()])
    path, body = _body(route, "t-trip")
    async with running(create_app(agent)) as url, httpx.AsyncClient(base_url=url) as c:
        events = [json.loads(line[6:]) for line in (await c.post(path, json=body)).text
                  .split("\n\n") if line.startswith("data: {")]
    types = [e["type"] for e in events]
    if route == "mastra":
        assert types[-1] == "tripwire" and "finish" not in types
        assert events[-1]["payload"]["reason"] == "forbidden word"
        assert events[-1]["payload"]["processorId"] == "guard"
    else:
        assert types[-2:] == ["data-tripwire", "finish"]
        assert events[-2]["data"]["reason"] == "forbidden word"
        assert events[-1]["finishReason"] == "other"
    deltas = [e for e in events if e["type"] == "text-delta"]
    assert deltas and not any("forbidden" in json.dumps(e) for e in deltas)
    assert await memory.get_thread("t-trip") is None  # a tripped turn is not stored
