"""Both protocols against the real Mastra server's transcripts, over real HTTP (uvicorn on
127.0.0.1): Mastra's agent API as ``@mastra/client-js`` calls it, and the AI SDK v5 UI message
stream. Node's real clients run in ``test_node_clients.py``; here every byte is checked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from itertools import groupby
from typing import Any

import httpx
import pytest

from streamkit import Agent, wire
from streamkit.memory import Memory
from streamkit.serve import create_app
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit.tools import tool

from ._fixtures import chat_bodies, exchange
from ._server import running
from .conftest import anchor_agent

MASTRA_SSE_HEADERS = ("content-type", "cache-control", "connection", "x-accel-buffering")
UI_HEADERS = MASTRA_SSE_HEADERS + ("x-vercel-ai-ui-message-stream",)


@pytest.fixture
async def client(anchor_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=anchor_url, timeout=30) as c:
        yield c


def events(body: bytes) -> list[Any]:
    """Split an SSE body exactly as client-js does: on ``\\n\\n``, keeping ``data: `` pieces."""
    out: list[Any] = []
    for piece in body.split(b"\n\n"):
        if piece.startswith(b"data: "):
            data = piece[6:].decode()
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def shape(items: list[Any]) -> list[str]:
    """Event types with runs of the same type collapsed (delta counts differ by chunking)."""
    types = [i if isinstance(i, str) else i["type"] for i in items]
    return [t for t, _ in groupby(types)]


def without_ids(items: list[Any]) -> list[Any]:
    """UI chunks with generated ids blanked, for comparing with a recording."""
    out = []
    for item in items:
        if isinstance(item, dict):
            item = {k: ("<id>" if k in ("id", "messageId", "toolCallId") else v)
                    for k, v in item.items()}
            if "inputTextDelta" in item:  # JSON spacing is the model's
                item["inputTextDelta"] = json.dumps(json.loads(item["inputTextDelta"]),
                                                    separators=(",", ":"))
        out.append(item)
    return out


def merged_deltas(items: list[Any]) -> list[Any]:
    """Consecutive deltas of one part merged into one (chunking differs, content must not)."""
    out: list[Any] = []
    for item in items:
        prev = out[-1] if out else None
        if isinstance(item, dict) and isinstance(prev, dict) and item["type"] == prev["type"] \
                and item["type"] in ("text-delta", "reasoning-delta", "tool-input-delta"):
            key = "inputTextDelta" if item["type"] == "tool-input-delta" else "delta"
            out[-1] = {**prev, key: prev[key] + item[key]}
        else:
            out.append(item)
    return out


# --------------------------------------------------------------------------- Mastra API


async def test_list_agents_and_details_have_the_fields_client_js_reads(
        client: httpx.AsyncClient) -> None:
    recorded = exchange("01-list-agents.http").json()["demo"]
    listed = (await client.get("/api/agents")).json()
    assert list(listed) == ["demo"]
    ours = listed["demo"]
    for key in ("id", "name", "description", "instructions", "tools", "agents", "workflows"):
        assert key in ours and type(ours[key]) is type(recorded[key]), key
    assert ours["name"] == "Demo Agent"
    tool = ours["tools"]["lookupCustomer"]
    assert set(tool) == set(recorded["tools"]["lookupCustomer"])
    schema = json.loads(tool["inputSchema"])["json"]  # a string holding {"json": schema}
    assert schema["required"] == ["customerId"]
    details = await client.get("/api/agents/demo")
    assert details.status_code == 200 and details.json() == ours


async def test_stream_is_framed_byte_for_byte_as_mastra_frames_it(
        client: httpx.AsyncClient) -> None:
    recorded = exchange("04-stream-text.http")
    response = await client.post("/api/agents/demo/stream", json=recorded.request)
    assert response.status_code == 200
    for header in MASTRA_SSE_HEADERS:
        assert response.headers[header] == recorded.headers[header], header
    assert response.headers["transfer-encoding"] == "chunked"
    body = response.content
    assert b"\r" not in body and body.endswith(b"\n\ndata: [DONE]\n\n")
    pieces = body.split(b"\n\n")
    assert pieces[-1] == b"" and all(p.startswith(b"data: ") for p in pieces[:-1])
    assert all(b"\n" not in p for p in pieces)  # one line per event, no event:/id: lines
    ours = events(body)
    assert shape(ours) == shape(recorded.events())
    for chunk in ours[:-1]:  # every chunk is Mastra's wire form and round-trips
        assert wire.to_builtins(wire.decode(json.dumps(chunk))) == chunk
        assert chunk["from"] == "AGENT" and chunk["runId"] == ours[0]["runId"]
    start, step = ours[0], ours[1]
    assert start["payload"] == {"id": "demo", "messageId": start["payload"]["messageId"]}
    assert step["payload"]["request"] == {}
    answer = "".join(c["payload"]["text"] for c in ours[:-1] if c["type"] == "text-delta")
    assert answer == "Echo: Hello there (turn 1)"
    finish = ours[-2]
    assert finish["payload"]["stepResult"]["reason"] == "stop"
    assert set(finish["payload"]["output"]["usage"]) >= {"inputTokens", "outputTokens",
                                                         "totalTokens"}


async def test_a_tool_turn_streams_as_the_recording_does(client: httpx.AsyncClient) -> None:
    recorded = exchange("05-stream-tool.http")
    body = (await client.post("/api/agents/demo/stream", json=recorded.request)).content
    ours = events(body)
    assert shape(ours) == shape(recorded.events())
    by_type = {c["type"]: c for c in ours if isinstance(c, dict)}
    assert by_type["data-progress"] == {"type": "data-progress", "data": {"pct": 50}}
    call, result = by_type["tool-call"]["payload"], by_type["tool-result"]["payload"]
    assert call["args"] == {"customerId": "C-42"} and call["toolName"] == "lookupCustomer"
    assert result["toolCallId"] == call["toolCallId"]
    assert result["result"] == exchange("05-stream-tool.http").events()[8]["payload"]["result"]


@pytest.mark.parametrize("messages", [
    pytest.param("Hello there", id="a-string"),
    pytest.param({"role": "user", "content": "Hello there"}, id="one-message"),
    pytest.param([{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}],
                 id="a-list-with-content-parts"),
])
async def test_generate_answers_mastra_full_output_for_every_messages_form(
        client: httpx.AsyncClient, messages: Any) -> None:
    recorded = exchange("03-generate-text.http").json()
    response = await client.post("/api/agents/demo/generate",
                                 json={"messages": messages, "unknownOption": {"x": 1}})
    assert response.status_code == 200 and response.headers["content-type"] == \
        "application/json"
    ours = response.json()
    assert list(ours) == list(recorded)  # Mastra's keys, in Mastra's order
    assert ours["text"] == "Echo: Hello there (turn 1)" and ours["finishReason"] == "stop"
    assert ours["usage"] == ours["totalUsage"] and ours["usage"]["totalTokens"] > 0
    assert [m["role"] for m in ours["messages"]] == ["user", "assistant"]


async def test_generate_tool_calls_are_mastra_chunks(client: httpx.AsyncClient) -> None:
    recorded = exchange("06-generate-tool.http").json()
    ours = (await client.post("/api/agents/demo/generate",
                              json=exchange("06-generate-tool.http").request)).json()
    assert ours["text"] == recorded["text"]
    assert [s["finishReason"] for s in ours["steps"]] == \
        [s["finishReason"] for s in recorded["steps"]]
    for key in ("toolCalls", "toolResults"):
        ours_chunks = ours["steps"][0][key]
        recorded_chunks = recorded["steps"][0][key]
        assert [c["type"] for c in ours_chunks] == [c["type"] for c in recorded_chunks]
        # client-js's executeToolCallAndRespond reads toolCall.payload.toolName
        assert ours_chunks[0]["payload"]["toolName"] == "lookupCustomer"
        assert set(ours_chunks[0]) == {"type", "runId", "from", "payload"}


async def test_memory_turns_and_the_memory_routes(client: httpx.AsyncClient) -> None:
    turn1 = exchange("07-stream-memory-turn1.http")
    turn2 = exchange("08-generate-memory-turn2.http")
    assert events((await client.post("/api/agents/demo/stream", json=turn1.request)).content
                  )[-1] == "[DONE]"
    answer = (await client.post("/api/agents/demo/generate", json=turn2.request)).json()
    assert answer["text"] == turn2.json()["text"] == "Echo: What is my name? (turn 2)"
    assert [m["role"] for m in answer["rememberedMessages"]] == ["user", "assistant"]

    threads = await client.get("/api/memory/threads",
                               params={"resourceId": "user-rec-1", "agentId": "demo"})
    recorded_threads = exchange("09-list-threads.http").json()
    assert set(threads.json()) == set(recorded_threads)
    assert [t["id"] for t in threads.json()["threads"]] == ["thread-rec-1"]
    assert set(threads.json()["threads"][0]) == set(recorded_threads["threads"][0])

    # client-js sends no resourceId here (Mastra 1.69 answered anyone); streamkit needs the
    # caller's resource (a query resourceId, or the server's resource hook).
    thread = (await client.get("/api/memory/threads/thread-rec-1",
                               params={"agentId": "demo", "resourceId": "user-rec-1"})).json()
    assert set(thread) == set(exchange("17-get-thread.http").json())
    assert thread["resourceId"] == "user-rec-1"

    listed = (await client.get("/api/memory/threads/thread-rec-1/messages",
                               params={"agentId": "demo", "resourceId": "user-rec-1"})).json()
    recorded_messages = exchange("10-thread-messages.http").json()
    assert set(listed) == set(recorded_messages)
    assert [m["role"] for m in listed["messages"]] == ["user", "assistant", "user", "assistant"]
    def texts(messages: list[Any]) -> list[str]:
        return ["".join(p["text"] for p in m["content"]["parts"] if p["type"] == "text")
                for m in messages]

    assert texts(listed["messages"]) == texts(recorded_messages["messages"])
    for ours, theirs in zip(listed["messages"], recorded_messages["messages"], strict=True):
        assert set(theirs) - {"type"} <= set(ours) and ours["type"] == "text"

    created = await client.post("/api/memory/threads", params={"agentId": "demo"},
                                json={"resourceId": "user-rec-1", "title": "Returns"})
    assert created.status_code == 200 and created.json()["title"] == "Returns"
    threads = (await client.get("/api/memory/threads",
                                params={"resourceId": "user-rec-1"})).json()
    assert threads["total"] == 2


async def test_memory_thread_may_be_an_object_and_needs_a_resource(
        client: httpx.AsyncClient) -> None:
    ok = await client.post("/api/agents/demo/generate",
                           json={"messages": "hi", "memory": {"thread": {"id": "t-obj"},
                                                              "resource": "u-obj"}})
    assert ok.status_code == 200
    missing = await client.post("/api/agents/demo/stream",
                                json={"messages": "hi", "memory": {"thread": "t-obj"}})
    assert missing.status_code == 400
    assert missing.json()["issues"][0]["field"] == "memory.resource"
    stolen = await client.post("/api/agents/demo/stream",
                               json={"messages": "hi", "memory": {"thread": "t-obj",
                                                                  "resource": "someone-else"}})
    assert stolen.status_code == 403
    assert stolen.json() == {"error": "Access denied: thread belongs to a different resource"}
    assert stolen.headers["content-type"] == "application/json"


@pytest.mark.parametrize("name", ["11-error-unknown-agent.http", "12-error-missing-messages.http",
                                  "13-error-unknown-agent-stream.http"])
async def test_errors_before_a_stream_are_mastras_json(client: httpx.AsyncClient,
                                                       name: str) -> None:
    recorded = exchange(name)
    path = recorded.path
    response = await client.post(path, json=recorded.request)
    assert response.status_code == recorded.status
    assert response.headers["content-type"] == "application/json"
    assert response.json() == recorded.json()


@pytest.mark.parametrize("body, field", [
    pytest.param(b"not json", "(body)", id="not-json"),
    pytest.param(b"[1, 2]", "(body)", id="not-an-object"),
    pytest.param(b'{"messages": 5}', "messages", id="messages-a-number"),
    pytest.param(b'{"messages": [{"role": "robot", "content": "x"}]}', "messages",
                 id="unknown-role"),
    pytest.param(b'{"messages": "hi", "maxSteps": "three"}', "maxSteps", id="max-steps-a-str"),
    pytest.param(b'{"messages": "hi", "requestContext": [1]}', "requestContext",
                 id="request-context-a-list"),
])
async def test_an_invalid_body_is_a_400_naming_the_field(client: httpx.AsyncClient,
                                                         body: bytes, field: str) -> None:
    for route in ("generate", "stream"):
        response = await client.post(f"/api/agents/demo/{route}", content=body,
                                     headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "Invalid request body"
        assert response.json()["issues"][0]["field"] == field


async def test_request_context_reaches_tools(memory: Memory) -> None:
    @tool
    def tenant(request_context: Any = None) -> str:
        """The caller's tenant."""
        return str(request_context["tenant"])

    agent = Agent(id="ctx", model=ScriptedModel([tool_call("tenant", {}), text("ok")]),
                  tools=[tenant])
    async with running(create_app(agent)) as url, httpx.AsyncClient(base_url=url) as c:
        out = (await c.post("/api/agents/ctx/generate",
                            json={"messages": "hi", "requestContext": {"tenant": "acme"}})).json()
    assert out["toolResults"][0]["payload"]["result"] == "acme"


# --------------------------------------------------------------------------- AI SDK UI stream


async def test_chat_text_turn_matches_the_recording(client: httpx.AsyncClient) -> None:
    recorded = exchange("14-ui-chat-text.http")
    response = await client.post("/chat/demo", json=recorded.request)
    assert response.status_code == 200
    for header in UI_HEADERS:
        assert response.headers[header] == recorded.headers[header], header
    ours = events(response.content)
    assert without_ids(merged_deltas(ours)) == without_ids(merged_deltas(recorded.events()))


async def test_chat_tool_turn_matches_the_recording(client: httpx.AsyncClient) -> None:
    recorded = exchange("15-ui-chat-tool.http")
    ours = events((await client.post("/chat/demo", json=recorded.request)).content)
    assert without_ids(merged_deltas(ours)) == without_ids(merged_deltas(recorded.events()))
    start = ours[0]
    ids = {c["toolCallId"] for c in ours if "toolCallId" in c}
    assert start["type"] == "start" and isinstance(start["messageId"], str) and len(ids) == 1


async def test_chat_unknown_agent_is_json_not_sse(client: httpx.AsyncClient) -> None:
    recorded = exchange("16-ui-chat-unknown-agent.http")
    response = await client.post("/chat/nope", json=recorded.request)
    assert response.headers["content-type"] == "application/json"
    assert response.status_code == 404  # Mastra says 500; see streamkit.serve._app
    assert response.json() == {"error": "Agent with id nope not found"}


async def test_chat_history_the_client_resends_becomes_model_messages(memory: Memory) -> None:
    model = ScriptedModel([text("ok")] * 6)
    agent = anchor_agent(None)
    agent.model = model
    async with running(create_app(agent)) as url, httpx.AsyncClient(base_url=url) as c:
        for body in chat_bodies():
            if body["path"] != "/chat/demo":
                continue
            response = await c.post("/chat/demo", json=body["body"])
            assert events(response.content)[-1] == "[DONE]"
    prompt = model.requests[-1].prompt  # the three-turn body: history with a tool part
    roles = [m["role"] for m in prompt]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool", "assistant",
                     "user"]
    call = next(p for p in prompt[4]["content"] if p["type"] == "tool-call")
    result = prompt[5]["content"][0]
    assert call["toolName"] == "lookupCustomer" and call["args"] == {"customerId": "C-42"}
    assert result["toolCallId"] == call["toolCallId"] == "call-lookup-4"
    assert result["result"]["name"] == "Ada Lovelace"
    assert prompt[-1]["content"] == "Thanks!"


async def test_chat_with_memory_sends_only_the_new_turn(client: httpx.AsyncClient) -> None:
    history: list[dict[str, Any]] = []
    for turn, said in enumerate(["My name is Ada", "What is my name?"], start=1):
        history.append({"id": f"u{turn}", "role": "user",
                        "parts": [{"type": "text", "text": said}]})
        body = {"id": "chat-m", "messages": history, "trigger": "submit-message",
                "memory": {"thread": "chat-thread", "resource": "chat-user"}}
        ours = events((await client.post("/chat/demo", json=body)).content)
        answer = "".join(c["delta"] for c in ours if isinstance(c, dict)
                         and c["type"] == "text-delta")
        assert answer == f"Echo: {said} (turn {turn})"  # turn 2 counts the remembered turn
        history.append({"id": f"a{turn}", "role": "assistant",
                        "parts": [{"type": "text", "text": answer}]})
    stored = (await client.get("/api/memory/threads/chat-thread/messages",
                               params={"agentId": "demo", "resourceId": "chat-user"})
              ).json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]


async def test_regenerate_drops_the_last_answer(client: httpx.AsyncClient) -> None:
    body = {"id": "c", "trigger": "regenerate-message", "messageId": "a1", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hello there"}]},
        {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "old"}]}]}
    ours = events((await client.post("/chat/demo", json=body)).content)
    assert "".join(c["delta"] for c in ours if isinstance(c, dict)
                   and c["type"] == "text-delta") == "Echo: Hello there (turn 1)"


@pytest.mark.parametrize("body", [
    pytest.param({"id": "c"}, id="no-messages"),
    pytest.param({"messages": [{"role": "user", "parts": [{"type": "bogus"}]}]},
                 id="unknown-part"),
    pytest.param({"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}],
                  "trigger": "resume"}, id="unknown-trigger"),
])
async def test_an_invalid_chat_body_is_a_400(client: httpx.AsyncClient,
                                             body: dict[str, Any]) -> None:
    response = await client.post("/chat/demo", json=body)
    assert response.status_code == 400 and response.json()["error"] == "Invalid request body"


async def test_the_chat_page_is_served(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    # The studio (tests/serve/test_studio.py drives it in a browser): it streams from the
    # studio route and draws Mastra's chunks.
    assert "api/studio/agents/" in page.text and "text-delta" in page.text
