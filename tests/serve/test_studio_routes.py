"""The studio's data routes (the page is test_studio.py's, in a browser) under real uvicorn
on 127.0.0.1, with a keep-alive client, on the served demo agent (its model unpaced): one turn
per studio case — the events the studio stream route sends, in order, with what each processor
did — plus the agents and graph routes, the tenancy of the stream route, a continued thread,
and the ``serve`` command's studio line.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamkit._demo import STUDIO_PROMPTS, build_serve_agent
from streamkit.events import ToolCalled, decode_event
from streamkit.memory import Memory, SQLiteStore
from streamkit.serve import create_app
from streamkit.serve._studio import event_frame

from ._server import running
from .test_app import WAIT, _start, _stop

RESOURCE = "studio-tester"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    memory = Memory(SQLiteStore(str(tmp_path / "studio.sqlite3")), last_messages=20)
    app = create_app([build_serve_agent(memory, pace=0)], memory=memory)
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        yield http
    await memory.close()


def frames(body: str) -> list[dict[str, Any]]:
    """The events of an SSE body (each ``data:`` frame decoded with ``decode_event`` too, so
    the JSON is what the typed events encode to), checking it ends with ``[DONE]``."""
    parts = [p for p in body.split("\n\n") if p]
    assert parts[-1] == "data: [DONE]", parts[-3:]
    out = []
    for part in parts[:-1]:
        assert part.startswith("data: {"), part
        decode_event(part[len("data: "):])
        out.append(json.loads(part[len("data: "):]))
    return out


async def turn(http: httpx.AsyncClient, prompt: str, thread: str = "t1",
               resource: str = RESOURCE) -> list[dict[str, Any]]:
    answer = await http.post("/api/studio/agents/support/stream", json={
        "messages": prompt, "memory": {"thread": thread, "resource": resource}})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    return frames(answer.text)


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def acted(events: list[dict[str, Any]], processor: str) -> list[dict[str, Any]]:
    return [e for e in of(events, "action") if e["processor_id"] == processor
            and e["action"] != "passed"]


def delivered_text(events: list[dict[str, Any]]) -> str:
    return "".join(e["chunk"]["payload"]["text"] for e in of(events, "chunk")
                   if e["chunk"]["type"] == "text-delta")


def check_envelope(events: list[dict[str, Any]]) -> None:
    """Every run: run-start first, run-finish last, one run id, chunks numbered from 0."""
    assert events[0]["type"] == "run-start" and events[-1]["type"] == "run-finish"
    assert events[0]["agent_id"] == "support" and events[0]["model_id"] == "demo-support"
    assert events[0]["resource_id"] == RESOURCE
    assert len({e["run_id"] for e in events}) == 1
    assert [e["seq"] for e in of(events, "chunk")] == list(range(len(of(events, "chunk"))))
    assert [e["seq"] for e in of(events, "model-chunk")] == \
        list(range(len(of(events, "model-chunk"))))


async def test_redaction_turn_reports_the_diff(client: httpx.AsyncClient) -> None:
    events = await turn(client, STUDIO_PROMPTS["redaction"])
    check_envelope(events)
    [redacted] = acted(events, "mask-emails")
    assert redacted["action"] == "redacted" and redacted["chunk_type"] == "text-delta"
    assert "ada@example.com" in redacted["before"] and "[email]" in redacted["after"]
    # The model produced the address; the consumer never got it.
    [source] = [e for e in of(events, "model-chunk") if e["seq"] == redacted["seq"]]
    assert "ada@example.com" in source["chunk"]["payload"]["text"]
    assert "ada@example.com" not in delivered_text(events)
    assert "[email]" in delivered_text(events)
    # The model chunk comes before the action on it, which comes before the chunk out.
    pos = {id(e): i for i, e in enumerate(events)}
    out = next(e for e in of(events, "chunk") if "[email]" in json.dumps(e["chunk"]))
    assert pos[id(source)] < pos[id(redacted)] < pos[id(out)]
    assert events[-1]["outcome"] == "ok" and "[email]" in events[-1]["text"]


async def test_retry_turn_withdraws_then_accepts(client: httpx.AsyncClient) -> None:
    events = await turn(client, STUDIO_PROMPTS["retry"])
    check_envelope(events)
    steps = [(e["type"], e["step_number"], e["retry_count"]) + (
        (e["outcome"],) if e["type"] == "step-finish" else ())
        for e in events if e["type"] in ("step-start", "step-finish")]
    assert steps == [("step-start", 0, 0), ("step-finish", 0, 0, "retried"),
                     ("step-start", 0, 1), ("step-finish", 0, 1, "accepted")]
    retried = of(events, "step-finish")[0]
    assert retried["processor_id"] == "no-promises" and "guarantee" in retried["reason"]
    [aborted] = acted(events, "no-promises")
    assert aborted["action"] == "aborted" and "guarantee" in aborted["reason"]
    assert "guaranteed" in aborted["before"]
    assert [e["next"] for e in of(events, "transition")].count("retry") == 1
    assert events[-1]["outcome"] == "ok" and "5 business days" in events[-1]["text"]


async def test_tripwire_turn_is_blocked(client: httpx.AsyncClient) -> None:
    events = await turn(client, STUDIO_PROMPTS["tripwire"])
    check_envelope(events)
    [aborted] = acted(events, "block-secrets")
    assert aborted["action"] == "aborted" and aborted["reason"] == \
        "the answer would reveal a credential"
    assert of(events, "step-finish")[-1]["outcome"] == "tripwire"
    finish = events[-1]
    assert finish["outcome"] == "tripwire" and finish["tripwire"] == {
        "reason": "the answer would reveal a credential", "processor_id": "block-secrets",
        "retry": False, "hook": "process_output_stream"}
    assert "hunter2" not in delivered_text(events)
    assert any(e["chunk"]["type"] == "tripwire" for e in of(events, "chunk"))


async def test_tool_turns(client: httpx.AsyncClient) -> None:
    events = await turn(client, STUDIO_PROMPTS["progress"])
    check_envelope(events)
    [call] = of(events, "tool-call")
    [result] = of(events, "tool-result")
    assert call["tool_name"] == result["tool_name"] == "track_order"
    assert call["tool_call_id"] == result["tool_call_id"] and call["args"] == \
        {"order_id": "ORD-1001"}
    assert result["is_error"] is False and result["result"]["status"] == "out for delivery"
    progress = [e["chunk"] for e in of(events, "chunk")
                if e["chunk"]["type"] == "data-progress"]
    assert {p["id"] for p in progress} == {"track-ORD-1001"}
    assert [p["data"]["pct"] for p in progress] == [0, 25, 50, 75, 100]
    assert [e["outcome"] for e in of(events, "step-finish")] == ["accepted", "accepted"]
    nodes = [e["node"] for e in of(events, "transition")]
    assert "tools" in nodes and nodes.count("step_finish") == 2

    events = await turn(client, STUDIO_PROMPTS["tool"])
    hidden = acted(events, "hide-reasoning")
    assert hidden and {e["action"] for e in hidden} == {"dropped"}
    assert not any(e["chunk"]["type"].startswith("reasoning") for e in of(events, "chunk"))
    hooks = {(e["processor_id"], e["hook"]) for e in of(events, "hook")}
    assert ("redact-tool-pii", "process_tool_result") in hooks
    [result] = of(events, "tool-result")
    assert result["result"]["email"] == "[email]"  # as the consumer got it
    assert result["raw"]["email"] == "ada@example.com"  # as the tool returned it
    [hooked] = acted(events, "redact-tool-pii")  # and the processor that changed it, how
    assert hooked["action"] == "redacted" and hooked["chunk_type"] == "process_tool_result"
    assert "ada@example.com" in hooked["before"] and '"email":"[email]"' in hooked["after"]


async def test_stream_route_keeps_the_mastra_rules(client: httpx.AsyncClient) -> None:
    await turn(client, "hello", thread="mine")
    denied = await client.post("/api/studio/agents/support/stream", json={
        "messages": "What did I say?", "memory": {"thread": "mine", "resource": "someone"}})
    assert denied.status_code == 403
    assert denied.json() == {"error": "Access denied: thread belongs to a different resource"}
    missing = await client.post("/api/studio/agents/nobody/stream", json={"messages": "x"})
    assert missing.status_code == 404
    bad = await client.post("/api/studio/agents/support/stream", json={"messages": 5})
    assert bad.status_code == 400 and "error" in bad.json()
    no_resource = await client.post("/api/studio/agents/support/stream", json={
        "messages": "x", "threadId": "mine"})
    assert no_resource.status_code == 400


async def test_continued_thread(client: httpx.AsyncClient) -> None:
    await turn(client, "first words", thread="cont")
    events = await turn(client, "second words", thread="cont")
    assert "first words" in events[-1]["text"]  # the demo model repeats what it remembers
    threads = await client.get("/api/memory/threads",
                               params={"resourceId": RESOURCE, "agentId": "support"})
    assert threads.status_code == 200
    listed = threads.json()
    listed = listed["threads"] if isinstance(listed, dict) else listed
    assert "cont" in {t["id"] for t in listed}
    messages = await client.get("/api/memory/threads/cont/messages",
                                params={"resourceId": RESOURCE, "agentId": "support"})
    assert messages.status_code == 200
    assert "second words" in messages.text and "first words" in messages.text


async def test_agents_and_graph(client: httpx.AsyncClient) -> None:
    agents = (await client.get("/api/studio/agents")).json()
    [support] = agents
    assert support["id"] == "support" and support["modelId"] == "demo-support"
    procs = {p["id"]: p for p in support["processors"]}
    assert procs["mask-emails"]["hooks"] == ["process_output_stream"]
    assert procs["mask-emails"]["lane"] == "output"
    assert "process_tool_result" in procs["redact-tool-pii"]["hooks"]
    assert {t["id"] for t in support["tools"]} == {"lookup_customer", "track_order"}
    graph = (await client.get("/api/studio/agents/support/graph")).json()
    names = {n["name"] for n in graph["nodes"]}
    assert {"start", "model", "process_output_stream", "tools", "end"} <= names
    stream_node = next(n for n in graph["nodes"] if n["name"] == "process_output_stream")
    assert "mask-emails" in stream_node["processors"]
    assert {"src": "process_output_stream", "dst": "retry"} in \
        [{"src": e["src"], "dst": e["dst"]} for e in graph["edges"]]
    assert 'data-node="process_output_stream"' in graph["svg"]
    assert (await client.get("/api/studio/agents/nobody/graph")).status_code == 404


def test_serve_prints_the_studio_url(tmp_path: Path) -> None:
    proc, url = _start(["--demo", "--memory", str(tmp_path / "demo.sqlite3")], tmp_path)
    try:
        assert proc.stdout is not None
        studio = proc.stdout.readline()
        assert re.fullmatch(r"streamkit studio: http://127\.0\.0\.1:\d+/\n", studio), studio
        assert studio.split()[2] == url.rstrip("/") + "/"
    finally:
        _stop(proc)
    proc, url = _start(["--demo", "--no-studio", "--pace-ms", "0", "--memory",
                        str(tmp_path / "demo2.sqlite3")], tmp_path)
    try:
        assert httpx.get(url + "/api/studio/agents", timeout=WAIT).status_code == 404
        assert httpx.get(url + "/api/agents", timeout=WAIT).status_code == 200
    finally:
        _stop(proc)


def test_pace_is_checked() -> None:
    from streamkit._demo import PACE_ENV, pace_ms
    from streamkit.errors import InvalidArgument

    assert pace_ms(12) == 12.0 and pace_ms(0) == 0.0
    with pytest.raises(InvalidArgument, match="--pace-ms must be milliseconds"):
        pace_ms(-1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(PACE_ENV, "fast")
        with pytest.raises(InvalidArgument, match=f"{PACE_ENV} must be milliseconds"):
            pace_ms()
        mp.setenv(PACE_ENV, "")
        assert pace_ms() == 30.0


async def test_studio_off_and_values_without_json() -> None:
    """``create_app(studio=False)`` has no studio routes; a tool whose result has no JSON form
    fails (the library's rule) and the event says so, raw and delivered; a value with no JSON
    form in an event is framed as its repr."""
    from streamkit import Agent
    from streamkit.testing import ScriptedModel, text, tool_call
    from streamkit.tools import tool

    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque thing>"

    @tool
    def thing() -> Any:
        """Return an object."""
        return Opaque()

    def make() -> Agent:
        return Agent(id="a", model=ScriptedModel([tool_call("thing", {}), text("done")]),
                     tools=[thing])

    async with running(create_app([make()], studio=False)) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        assert (await http.get("/api/studio/agents")).status_code == 404
        gone = await http.post("/api/studio/agents/a/stream", json={"messages": "x"})
        assert gone.status_code in (404, 405)
    async with running(create_app([make()])) as url, \
            httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        answer = await http.post("/api/studio/agents/a/stream", json={"messages": "x"})
        events = frames(answer.text)
        [returned] = of(events, "tool-result")
        assert returned["is_error"] is True and "cannot be encoded as JSON" in returned["raw"]
        assert events[-1]["type"] == "run-finish"
    frame = event_frame(ToolCalled(run_id="r", step_number=0, tool_call_id="c",
                                   tool_name="t", args=Opaque()))
    assert json.loads(frame[len(b"data: "):])["args"] == "<Opaque thing>"


async def test_the_demo_model_waits_its_pace_before_each_chunk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``pace`` reaches the served model and the terminal demo's: one wait of ``pace`` ms per
    chunk (counted, not timed), none at 0."""
    import asyncio

    from streamkit._demo import build_agent

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def counted(delay: float, *args: Any) -> Any:
        if delay:
            waits.append(delay)
        return await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", counted)
    for agent, prompt in ((build_serve_agent(pace=30), "hello"),
                          (build_agent(pace=30), "hello")):
        waits.clear()
        stream = agent.stream(prompt)
        got = [c async for c in stream]
        assert waits and set(waits) == {0.03}
        model_chunks = [c for c in got if c.type in ("text-delta", "text-start", "text-end")]
        assert len(waits) >= len(model_chunks)
    waits.clear()
    await build_serve_agent(pace=0).generate("hello")
    assert waits == []
