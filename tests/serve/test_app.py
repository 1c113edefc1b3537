"""``create_app`` and ``python -m streamkit serve``: what they accept, what they refuse, and
the UI chunk converter's invariants over many chunk sequences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit import Agent
from streamkit.chunks import (
    DataChunk,
    ErrorChunk,
    Finish,
    FinishPayload,
    Start,
    StepFinish,
    StepFinishPayload,
    StepOutputPayload,
    StepResultPayload,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingStart,
    ToolResult,
    TripwireChunk,
    UsagePayload,
)
from streamkit.errors import InvalidArgument, InvalidType, StreamkitError
from streamkit.memory import Memory
from streamkit.serve import UIMessageStream, create_app, load_target
from streamkit.testing import ScriptedModel, text

from ..conftest import REPO

WAIT = 60.0


def agent(aid: str = "a") -> Agent:
    return Agent(id=aid, model=ScriptedModel([text("hi")]))


@pytest.mark.parametrize("call, error, words", [
    pytest.param(lambda: create_app([]), InvalidArgument, "at least one agent", id="no-agents"),
    pytest.param(lambda: create_app([agent(), agent()]), InvalidArgument,
                 "two agents have the id 'a'", id="duplicate-ids"),
    pytest.param(lambda: create_app(["support"]), InvalidType, "serves streamkit Agents",
                 id="not-an-agent"),
    pytest.param(lambda: create_app(5), InvalidType, "takes an Agent, a list", id="a-number"),
    pytest.param(lambda: create_app(agent(), heartbeat=0), InvalidArgument,
                 "heartbeat must be", id="zero-heartbeat"),
    pytest.param(lambda: create_app(agent(), queue_size=0), InvalidArgument,
                 "queue_size must be", id="zero-queue"),
    pytest.param(lambda: create_app(agent(), memory="db.sqlite"), InvalidType,
                 "memory must be a streamkit Memory", id="memory-a-path"),
    pytest.param(lambda: load_target("no_colon"), InvalidArgument, "must be module:attribute",
                 id="target-without-colon"),
    pytest.param(lambda: load_target("no_such_module_xyz:agent"), InvalidArgument,
                 "cannot import", id="target-module-missing"),
    pytest.param(lambda: load_target("streamkit:nothing_here"), InvalidArgument,
                 "has no attribute", id="target-attribute-missing"),
    pytest.param(lambda: load_target("streamkit:__version__"), InvalidType,
                 "expected an Agent", id="target-not-an-agent"),
])
def test_misuse_is_a_streamkit_error_naming_the_problem(call: Any, error: type[Exception],
                                                        words: str) -> None:
    with pytest.raises(error, match=words) as info:
        call()
    assert isinstance(info.value, StreamkitError)


def test_agents_may_be_given_as_one_a_list_or_a_dict() -> None:
    for given_ in (agent("x"), [agent("x")], {"whatever": agent("x")}):
        assert list(create_app(given_).state.agents) == ["x"]


def test_load_target_reads_an_agent_a_list_or_a_dict(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "served_agents.py").write_text(
        "from streamkit import Agent\nfrom streamkit.testing import ScriptedModel, text\n"
        "one = Agent(id='one', model=ScriptedModel([text('1')]))\n"
        "many = [one, Agent(id='two', model=ScriptedModel([text('2')]))]\n"
        "named = {'x': one}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [a.id for a in load_target("served_agents:one")] == ["one"]
    assert [a.id for a in load_target("served_agents:many")] == ["one", "two"]
    assert [a.id for a in load_target("served_agents:named")] == ["one"]


async def test_memory_routes_need_an_agent_when_agents_do_not_share_memory() -> None:
    from ._server import running

    a = Agent(id="a", model=ScriptedModel([text("1")]), memory=Memory())
    b = Agent(id="b", model=ScriptedModel([text("1")]), memory=Memory())
    async with running(create_app([a, b])) as url, httpx.AsyncClient(base_url=url) as c:
        unnamed = await c.get("/api/memory/threads", params={"resourceId": "u"})
        named = await c.get("/api/memory/threads", params={"resourceId": "u", "agentId": "a"})
        missing = await c.get("/api/memory/threads/none",
                              params={"agentId": "a", "resourceId": "u"})
        paging = await c.get("/api/memory/threads",
                             params={"resourceId": "u", "agentId": "a", "page": "x"})
    assert unnamed.status_code == 400 and "agentId" in unnamed.json()["error"]
    assert named.status_code == 200 and named.json()["threads"] == []
    assert missing.status_code == 404 and missing.json() == {"error": "Thread none not found"}
    assert paging.status_code == 400


def _start(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m streamkit serve ...``; its URL from the first line it prints."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(REPO)])}
    proc = subprocess.Popen([sys.executable, "-m", "streamkit", "serve", *args, "--port", "0"],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(WAIT)
    if not line or "http://" not in line[0]:
        proc.kill()
        raise AssertionError(f"serve did not start: {proc.stderr.read()}")  # type: ignore[union-attr]
    return proc, line[0].split()[2]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(WAIT)


def test_serve_demo_command_line(tmp_path: Path) -> None:
    proc, url = _start(["--demo", "--memory", str(tmp_path / "demo.sqlite3")], tmp_path)
    try:
        agents = httpx.get(f"{url}/api/agents", timeout=WAIT).json()
        assert list(agents) == ["support"]
        body = {"messages": "Where is my order? I'm customer C-42.",
                "memory": {"thread": "cli", "resource": "me"}}
        stream = httpx.post(f"{url}/api/agents/support/stream", json=body, timeout=WAIT).text
        assert '"type":"data-progress"' in stream and stream.endswith("data: [DONE]\n\n")
    finally:
        _stop(proc)
    assert (tmp_path / "demo.sqlite3").exists()  # memory is SQLite by default


def test_serve_targets_command_line(tmp_path: Path) -> None:
    (tmp_path / "cli_agents.py").write_text(
        "from streamkit import Agent\nfrom streamkit.testing import ScriptedModel, text\n"
        "agents = [Agent(id='hello', model=ScriptedModel([text('Hello from a target')]))]\n")
    proc, url = _start(["cli_agents:agents"], tmp_path)
    try:
        out = httpx.post(f"{url}/api/agents/hello/generate", json={"messages": "hi"},
                         timeout=WAIT).json()
        assert out["text"] == "Hello from a target"
    finally:
        _stop(proc)


@pytest.mark.parametrize("args, words", [
    pytest.param([], "nothing to serve", id="nothing"),
    pytest.param(["nope_xyz:agent"], "cannot import 'nope_xyz'", id="bad-target"),
])
def test_serve_refuses_with_a_message(tmp_path: Path, args: list[str], words: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "streamkit", "serve", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=WAIT,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and words in proc.stderr


# --------------------------------------------------------------------------- UI chunks

R = {"run_id": "r", "from_": "AGENT"}
OUTPUT = StepOutputPayload(usage=UsagePayload(input_tokens=1, output_tokens=1, total_tokens=2))
#: docs/protocols.md, "The AI SDK chat route":
REQUIRED = {  # the fields the ai package's schema requires
    "start": set(), "finish": set(), "start-step": set(), "finish-step": set(),
    "text-start": {"id"}, "text-delta": {"id", "delta"}, "text-end": {"id"},
    "tool-input-start": {"toolCallId", "toolName"},
    "tool-input-delta": {"toolCallId", "inputTextDelta"},
    "tool-input-available": {"toolCallId", "toolName", "input"},
    "tool-output-available": {"toolCallId", "output"}, "error": {"errorText"},
}


@st.composite
def runs(draw: Any) -> list[Any]:
    """A run's chunks as the agent emits them: start, steps of text and tool calls, data
    chunks anywhere, and an end (finish, a tripwire or an error)."""
    chunks: list[Any] = [Start(id="a", message_id="m", **R)]
    for step in range(draw(st.integers(1, 3))):
        chunks.append(StepStart(message_id="m", **R))
        for part in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["text", "tool", "data"]))
            if kind == "text":
                tid = f"t{step}{part}"
                chunks.append(TextStart(id=tid, **R))
                chunks += [TextDelta(id=tid, text=draw(st.text(max_size=5)), **R)
                           for _ in range(draw(st.integers(0, 3)))]
                chunks.append(TextEnd(id=tid, **R))
            elif kind == "tool":
                cid = f"c{step}{part}"
                if draw(st.booleans()):
                    chunks.append(ToolCallInputStreamingStart(tool_call_id=cid, tool_name="t",
                                                              **R))
                    chunks.append(ToolCallDelta(tool_call_id=cid, tool_name="t",
                                                args_text_delta="{}", **R))
                chunks.append(ToolCall(tool_call_id=cid, tool_name="t", args={}, **R))
                chunks.append(ToolResult(tool_call_id=cid, tool_name="t", result=1, args={}, **R))
            else:
                chunks.append(DataChunk(type="data-x", data={"n": part},
                                        transient=draw(st.booleans())))
        chunks.append(StepFinish(payload=StepFinishPayload(
            step_result=StepResultPayload(reason="stop"), output=OUTPUT), **R))
    end = draw(st.sampled_from(["finish", "tripwire", "error"]))
    if end == "finish":
        chunks.append(Finish(payload=FinishPayload(step_result=StepResultPayload(reason="stop"),
                                                   output=OUTPUT), **R))
    elif end == "tripwire":
        chunks.append(TripwireChunk(reason="no", processor_id="p", **R))
    else:
        chunks.append(ErrorChunk(error={"message": "boom"}, **R))
    return chunks


@settings(max_examples=200, deadline=None)
@given(runs())
def test_ui_chunks_are_valid_for_the_ai_sdk_reader(chunks: list[Any]) -> None:
    ui = UIMessageStream()
    out = [part for chunk in chunks for part in ui.convert(chunk)] + ui.close()
    json.dumps(out)  # plain JSON
    assert out[0]["type"] == "start" and [p["type"] for p in out].count("start") == 1
    open_text: set[str] = set()
    tools: set[str] = set()
    for part in out:
        kind = part["type"]
        assert kind in REQUIRED or kind.startswith("data-"), kind
        assert REQUIRED.get(kind, {"data"}) <= set(part), part
        if kind == "text-start":
            open_text.add(part["id"])
        elif kind in ("text-delta", "text-end"):
            assert part["id"] in open_text  # a delta needs its start
        elif kind in ("tool-input-start", "tool-input-available"):
            tools.add(part["toolCallId"])
        elif kind == "tool-input-delta":
            assert part["toolCallId"] in tools
        elif kind == "tool-output-available":
            assert part["toolCallId"] in tools  # the reader errors otherwise
    ends = chunks[-1]
    if isinstance(ends, TripwireChunk):  # a tripwire ends without finish: one is appended
        assert out[-2]["type"] == "data-tripwire"
        assert out[-1] == {"type": "finish", "finishReason": "other"}
    elif isinstance(ends, ErrorChunk):
        assert out[-1] == {"type": "error", "errorText": "boom"}
    else:
        assert out[-1] == {"type": "finish", "finishReason": "stop"}


async def test_cors_lets_a_page_on_another_origin_stream() -> None:
    from ._server import running

    origin = {"origin": "http://localhost:3000"}
    async with running(create_app(agent())) as url, httpx.AsyncClient(base_url=url) as c:
        preflight = await c.options("/chat/a", headers={
            **origin, "access-control-request-method": "POST",
            "access-control-request-headers": "content-type"})
        listed = await c.get("/api/agents", headers=origin)
    assert preflight.status_code == 200
    assert listed.headers["access-control-allow-origin"] == "*"  # as Mastra's server answers
    async with running(create_app(agent(), allow_origins=())) as url:
        async with httpx.AsyncClient(base_url=url) as c:
            closed = await c.get("/api/agents", headers=origin)
    assert "access-control-allow-origin" not in closed.headers
