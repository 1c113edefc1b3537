"""AnthropicModel against a real HTTP server on 127.0.0.1 speaking the Messages API stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from streamkit.chunks import (
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
)
from streamkit.errors import APICallError, StreamkitError
from streamkit.models import AnthropicModel, ModelRequest, ToolSpec

from ._http_server import ReplayServer, Reply, fixture_bytes

QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = ToolSpec("get_weather", "Current weather for a city",
                   {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]})


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as srv:
        yield srv


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def model(server: ReplayServer, sleeps: Sleeps) -> Any:
    async with AnthropicModel("claude-sonnet-4-5", base_url=server.url, api_key="sk-ant-test",
                              sleep=sleeps) as m:
        yield m


async def collect(model: Any, request: ModelRequest | None = None) -> list[Any]:
    return [c async for c in model.stream(request or ModelRequest(prompt=QUESTION, run_id="r1"))]


def of(chunks: list[Any], cls: type) -> list[Any]:
    return [c for c in chunks if isinstance(c, cls)]


def events(*objs: dict[str, Any]) -> bytes:
    return b"".join(f"event: {o['type']}\ndata: {json.dumps(o)}\n\n".encode() for o in objs)


# --- streams --------------------------------------------------------------------------------------


async def test_streamed_text(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/text-stream.sse"))
    chunks = await collect(model)
    assert [type(c) for c in chunks] == [ResponseMetadata, TextStart, TextDelta, TextDelta,
                                         TextDelta, TextEnd, Finish]
    assert chunks[0].payload.id == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert "".join(c.payload.text for c in of(chunks, TextDelta)) == "Hello from Claude."
    finish = chunks[-1].payload
    assert (finish.step_result.reason, finish.step_result.raw_reason) == ("stop", "end_turn")
    usage = finish.output.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (25, 15, 40)
    assert {(c.run_id, c.from_) for c in chunks} == {("r1", "AGENT")}


async def test_request_headers_and_body(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/text-stream.sse"))
    await collect(model)
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body == {"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": True,
                         "messages": [{"role": "user", "content": [
                             {"type": "text", "text": "What is the weather in Paris?"}]}]}


async def test_text_then_two_tool_calls(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/tool-stream.sse"))
    chunks = await collect(model, ModelRequest(prompt=QUESTION, tools=[WEATHER]))
    kinds = [type(c) for c in chunks]
    assert kinds == [ResponseMetadata, TextStart, TextDelta, TextDelta, TextEnd,
                     ToolCallInputStreamingStart, ToolCallDelta, ToolCallDelta, ToolCallDelta,
                     ToolCallInputStreamingEnd, ToolCall,
                     ToolCallInputStreamingStart, ToolCallDelta, ToolCallInputStreamingEnd,
                     ToolCall, Finish]
    calls = of(chunks, ToolCall)
    assert [(c.payload.tool_call_id, c.payload.tool_name, c.payload.args) for c in calls] == [
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("toolu_01AbCdEfGhIjKlMnOpQrStUv", "get_time", {"timezone": "Europe/Paris"})]
    assert chunks[-1].payload.step_result.reason == "tool-calls"
    assert chunks[-1].payload.output.usage.total_tokens == 472 + 89


async def test_thinking_with_signature_and_redacted_thinking(server: ReplayServer,
                                                             model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/thinking-stream.sse"))
    chunks = await collect(model)
    assert [type(c) for c in chunks] == [ResponseMetadata, ReasoningStart, ReasoningDelta,
                                         ReasoningDelta, ReasoningEnd, ReasoningStart,
                                         ReasoningEnd, TextStart, TextDelta, TextEnd, Finish]
    end = chunks[4].payload
    assert end.signature == "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    assert end.provider_metadata == {"anthropic": {"signature": end.signature}}
    redacted = chunks[5].payload.provider_metadata["anthropic"]["redactedData"]
    assert redacted.startswith("EmwKAhgBEgy3va3p")
    usage = chunks[-1].payload.output.usage
    # every input token counts: uncached 30 + cache writes 100 + cache reads 2000
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == \
        (2130, 2000, 120)


async def test_structured_output_uses_a_json_tool_streamed_as_text(server: ReplayServer,
                                                                   model: Any) -> None:
    schema = {"type": "object", "properties": {"t": {"type": "number"}}}
    server.enqueue(Reply.sse(events(
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "json", "input": {}}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": '{"t": '}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": "21}"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"})))
    chunks = await collect(model, ModelRequest(prompt=QUESTION, structured_output=schema))
    assert not of(chunks, ToolCall)
    assert "".join(c.payload.text for c in of(chunks, TextDelta)) == '{"t": 21}'
    assert chunks[-1].payload.step_result.reason == "stop"
    body = server.requests[0].body
    assert body["tools"][0]["name"] == "json" and body["tools"][0]["input_schema"] == schema
    assert body["tool_choice"] == {"type": "tool", "name": "json"}


async def test_prompt_translation(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/text-stream.sse"))
    prompt: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather and this?"},
                                     {"type": "image", "image": "aGk=", "mimeType": "image/png"}]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "signed", "signature": "sig1"},
            {"type": "reasoning", "text": "unsigned"},
            {"type": "text", "text": "Checking."},
            {"type": "tool-call", "toolCallId": "toolu_1", "toolName": "get_weather",
             "args": {"city": "Paris"}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "toolu_1", "toolName": "get_weather",
             "result": {"temp": 21}},
            {"type": "tool-result", "toolCallId": "toolu_2", "toolName": "get_weather",
             "result": "no such city", "isError": True}]},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Merci"},
    ]
    request = ModelRequest(prompt=prompt, tools=[WEATHER], tool_choice="required",
                           model_settings={"temperature": 0.1, "maxTokens": 99, "stop": "END",
                                           "seed": 1, "topK": 4},
                           provider_options={"anthropic": {"metadata": {"user_id": "u1"}},
                                             "openai": {"user": "x"}})
    await collect(model, request)
    body = server.requests[0].body
    assert body["system"] == [{"type": "text", "text": "Be brief."},
                              {"type": "text", "text": "Answer in French."}]
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "Weather and this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "aGk="}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "signed", "signature": "sig1"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [  # tool results and the next user turn: one user turn
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp":21}'},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such city",
             "is_error": True},
            {"type": "text", "text": "Merci"}]},
    ]
    assert body["tools"] == [{"name": "get_weather", "description": "Current weather for a city",
                              "input_schema": WEATHER.parameters}]
    assert body["tool_choice"] == {"type": "any"}
    assert (body["temperature"], body["max_tokens"], body["stop_sequences"], body["top_k"]) == \
        (0.1, 99, ["END"], 4)
    assert "seed" not in body and "user" not in body
    assert body["metadata"] == {"user_id": "u1"}


@pytest.mark.parametrize("choice,sent", [
    pytest.param("auto", {"type": "auto"}, id="auto"),
    pytest.param("none", None, id="none-sends-no-tools-and-no-choice"),
    pytest.param({"type": "tool", "toolName": "get_weather"},
                 {"type": "tool", "name": "get_weather"}, id="named-tool"),
])
async def test_tool_choice_mapping(server: ReplayServer, model: Any, choice: Any,
                                   sent: Any) -> None:
    server.enqueue(Reply.sse("anthropic/text-stream.sse"))
    await collect(model, ModelRequest(prompt=QUESTION, tools=[WEATHER], tool_choice=choice))
    assert server.requests[0].body.get("tool_choice") == sent
    assert ("tools" in server.requests[0].body) is (choice != "none")


async def test_tool_choice_none_keeps_the_structured_output_tool(server: ReplayServer,
                                                                 model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/text-stream.sse"))
    schema = {"type": "object", "properties": {"t": {"type": "number"}}}
    await collect(model, ModelRequest(prompt=QUESTION, tools=[WEATHER], tool_choice="none",
                                      structured_output=schema))
    body = server.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["json"]
    assert body["tool_choice"] == {"type": "tool", "name": "json"}


async def test_thinking_budget_raises_the_default_max_tokens(server: ReplayServer,
                                                             model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/thinking-stream.sse"))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    await collect(model, ModelRequest(prompt=QUESTION,
                                      provider_options={"anthropic": {"thinking": thinking}}))
    body = server.requests[0].body
    assert body["thinking"] == thinking and body["max_tokens"] == 4096 + 2048


# --- errors ---------------------------------------------------------------------------------------


async def test_prefill_error_keeps_message_and_body(server: ReplayServer, model: Any,
                                                    sleeps: Sleeps) -> None:
    server.enqueue(Reply.json("anthropic/error-prefill.json", status=400,
                              headers={"request-id": "req_1"}))
    prompt = QUESTION + [{"role": "assistant", "content": "The weather is"}]
    with pytest.raises(APICallError) as info:
        await collect(model, ModelRequest(prompt=prompt))
    err = info.value
    assert (err.status_code, err.is_retryable) == (400, False)
    assert "does not support assistant message prefill" in str(err)
    assert "(invalid_request_error)" in str(err)
    assert err.body == fixture_bytes("anthropic/error-prefill.json").decode()
    assert len(server.requests) == 1 and sleeps.delays == []
    assert server.requests[0].body["messages"][-1] == {
        "role": "assistant", "content": [{"type": "text", "text": "The weather is"}]}


async def test_overloaded_529_is_retried(server: ReplayServer, model: Any,
                                         sleeps: Sleeps) -> None:
    server.enqueue(Reply.json("anthropic/error-overloaded.json", status=529),
                   Reply.json("anthropic/error-overloaded.json", status=529,
                              headers={"retry-after": "4"}),
                   Reply.sse("anthropic/text-stream.sse"))
    chunks = await collect(model)
    assert len(server.requests) == 3 and type(chunks[-1]) is Finish
    assert len(sleeps.delays) == 2 and sleeps.delays[1] == 4.0


async def test_error_event_mid_stream(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/overloaded-mid-stream.sse"))
    seen: list[Any] = []
    with pytest.raises(APICallError, match=r"stream error \(overloaded_error\)") as info:
        async for chunk in model.stream(ModelRequest(prompt=QUESTION)):
            seen.append(chunk)
    assert (info.value.status_code, info.value.is_retryable) == (529, True)
    assert '"overloaded_error"' in str(info.value.body)
    assert of(seen, TextDelta)[0].payload.text == "Partial"
    assert len(server.requests) == 1  # text was streamed: not replayed


async def test_error_right_after_message_start_is_retried(server: ReplayServer, model: Any,
                                                          sleeps: Sleeps) -> None:
    server.enqueue(Reply.sse(events(
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5}}},
        {"type": "ping"},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        Reply.sse("anthropic/text-stream.sse"))
    chunks = await collect(model)
    assert len(server.requests) == 2 and len(sleeps.delays) == 1
    assert len(of(chunks, ResponseMetadata)) == 1  # the failed attempt's metadata never left
    assert chunks[0].payload.id == "msg_01XFDUDYJgAACzvnptvVoYEL"


async def test_stream_without_message_stop_is_truncated(server: ReplayServer, model: Any) -> None:
    body = fixture_bytes("anthropic/text-stream.sse")
    cut = body[:body.index(b"event: message_stop")]
    server.enqueue(Reply.sse(cut))
    with pytest.raises(APICallError, match="ended before message_stop") as info:
        await collect(model)
    assert info.value.is_retryable and info.value.status_code is None


async def test_cut_mid_frame_is_an_api_error(server: ReplayServer, sleeps: Sleeps) -> None:
    server.enqueue(Reply.sse("anthropic/text-stream.sse", cut_at=700))
    async with AnthropicModel("c", base_url=server.url, api_key="k", max_retries=0) as model:
        with pytest.raises(APICallError, match="broke off") as info:
            await collect(model)
    assert info.value.is_retryable


async def test_aclose_closes_the_connection(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("anthropic/text-stream.sse", hold_after=4))
    stream = model.stream(ModelRequest(prompt=QUESTION))
    assert type(await stream.__anext__()) is ResponseMetadata
    await stream.aclose()
    assert await asyncio.to_thread(server.requests[0].disconnected.wait, 5)


def test_api_anthropic_com_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = AnthropicModel("claude-sonnet-4-5")
    with pytest.raises(StreamkitError, match="ANTHROPIC_API_KEY"):
        model.stream(ModelRequest(prompt=QUESTION))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    assert model._request_headers({})["x-api-key"] == "sk-env"


def test_base_url_with_v1_is_accepted() -> None:
    assert AnthropicModel("c", base_url="http://127.0.0.1:9/v1/").base_url == "http://127.0.0.1:9"
