"""OpenAIChatModel against a real HTTP server on 127.0.0.1 replaying recorded LiteLLM frames."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
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
from streamkit.errors import APICallError, MessageError, StreamkitError
from streamkit.models import ModelRequest, OpenAIChatModel, ToolSpec
from streamkit.models._http import RetryPolicy, parse_retry_after

from ._http_server import ReplayServer, Reply, fixture_bytes

QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = ToolSpec("get_weather", "Current weather for a city",
                   {"type": "object", "properties": {"city": {"type": "string"},
                                                     "unit": {"type": "string",
                                                              "enum": ["celsius", "fahrenheit"]}},
                    "required": ["city"]})
TIME = ToolSpec("get_time", "Current time in a timezone",
                {"type": "object", "properties": {"timezone": {"type": "string"}},
                 "required": ["timezone"]})


def sse(*events: Any) -> bytes:
    """An SSE body from JSON-able events (strings are sent as they are, e.g. ``[DONE]``)."""
    return b"".join(b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n"
                    for e in events)


def delta(**fields: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": fields}]}


def stop(reason: str = "stop") -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


class Sleeps:
    """An injected sleep that records the delays it was asked for and returns at once."""

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
    async with OpenAIChatModel("mock-text", base_url=server.base_url, api_key="sk-test",
                               sleep=sleeps) as m:
        yield m


async def collect(model: Any, request: ModelRequest | None = None) -> list[Any]:
    return [c async for c in model.stream(request or ModelRequest(prompt=QUESTION, run_id="r1"))]


def of(chunks: list[Any], cls: type) -> list[Any]:
    return [c for c in chunks if isinstance(c, cls)]


# --- text, tool calls, usage ----------------------------------------------------------------------


async def test_streamed_text_with_usage(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse"))
    chunks = await collect(model)
    assert type(chunks[0]) is ResponseMetadata
    assert chunks[0].payload.model_id == "mock-text"
    assert chunks[0].payload.timestamp == datetime.fromtimestamp(1796210955, UTC)
    assert [type(c) for c in chunks[1:2] + chunks[-2:]] == [TextStart, TextEnd, Finish]
    assert "".join(c.payload.text for c in of(chunks, TextDelta)) == \
        "Hello from the LiteLLM mock server."
    assert len(of(chunks, TextDelta)) == 12  # the recorded 3-character deltas, one per frame
    finish = chunks[-1].payload
    assert finish.step_result.reason == "stop" and finish.step_result.raw_reason == "stop"
    usage = finish.output.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (14, 9, 23)
    assert usage.reasoning_tokens == 0
    assert {(c.run_id, c.from_) for c in chunks} == {("r1", "AGENT")}


async def test_request_matches_the_recorded_one(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse"))
    await collect(model)
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.body == json.loads(fixture_bytes("openai/text-stream-usage.request.json"))
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"


async def test_one_streamed_tool_call(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("openai/tool-stream.sse"))
    chunks = await collect(model, ModelRequest(prompt=QUESTION, tools=[WEATHER, TIME]))
    kinds = [type(c) for c in chunks if type(c) is not ResponseMetadata]
    assert kinds == [ToolCallInputStreamingStart] + [ToolCallDelta] * 4 + \
        [ToolCallInputStreamingEnd, ToolCall, Finish]
    start, call = of(chunks, ToolCallInputStreamingStart)[0], of(chunks, ToolCall)[0]
    assert (start.payload.tool_call_id, start.payload.tool_name) == \
        ("call_peer_weather_1", "get_weather")
    streamed = "".join(c.payload.args_text_delta for c in of(chunks, ToolCallDelta))
    assert json.loads(streamed) == call.payload.args == {"city": "Paris", "unit": "celsius"}
    assert call.payload.tool_call_id == "call_peer_weather_1"
    assert chunks[-1].payload.step_result.reason == "tool-calls"
    assert chunks[-1].payload.output.usage.total_tokens == 19
    assert server.requests[0].body == json.loads(fixture_bytes("openai/tool-stream.request.json")
                                                 ) | {"model": "mock-text"}


async def test_parallel_tool_calls_in_one_step(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("openai/tool-stream-parallel.sse"))
    chunks = await collect(model, ModelRequest(prompt=QUESTION, tools=[WEATHER, TIME]))
    calls = of(chunks, ToolCall)
    assert [(c.payload.tool_call_id, c.payload.tool_name, c.payload.args) for c in calls] == [
        ("call_peer_weather_1", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("call_peer_time_2", "get_time", {"timezone": "Europe/Paris"})]
    by_call: dict[str, str] = {}
    for c in of(chunks, ToolCallDelta):
        by_call[c.payload.tool_call_id] = by_call.get(c.payload.tool_call_id, "") + \
            c.payload.args_text_delta
    assert json.loads(by_call["call_peer_time_2"]) == {"timezone": "Europe/Paris"}


@pytest.mark.parametrize("fixture,expected", [
    pytest.param("openai/text.json", "text", id="text"),
    pytest.param("openai/tool.json", "tool", id="tool-call"),
])
async def test_non_streaming_gives_the_same_chunks(server: ReplayServer, fixture: str,
                                                   expected: str) -> None:
    server.enqueue(Reply.json(fixture))
    async with OpenAIChatModel("mock-text", base_url=server.base_url, stream=False) as model:
        chunks = await collect(model, ModelRequest(prompt=QUESTION, tools=[WEATHER]))
    assert "stream" not in server.requests[0].body
    assert "authorization" not in server.requests[0].headers  # no key, local server: none sent
    finish = chunks[-1].payload
    if expected == "text":
        assert [type(c) for c in chunks] == [ResponseMetadata, TextStart, TextDelta, TextEnd,
                                             Finish]
        assert chunks[2].payload.text == "Hello from the LiteLLM mock server."
        assert (finish.step_result.reason, finish.output.usage.total_tokens) == ("stop", 30)
    else:
        assert [type(c) for c in chunks] == [ResponseMetadata, ToolCallInputStreamingStart,
                                             ToolCallDelta, ToolCallInputStreamingEnd, ToolCall,
                                             Finish]
        assert chunks[4].payload.args == {"city": "Paris", "unit": "celsius"}
        assert finish.step_result.reason == "tool-calls"


async def test_reasoning_deltas_come_before_text(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse(sse(delta(role="assistant", reasoning_content="Think"),
                                 delta(reasoning_content=" hard."), delta(content="Answer."),
                                 stop(), "[DONE]")))
    chunks = await collect(model)
    assert [type(c) for c in chunks] == [ResponseMetadata, ReasoningStart, ReasoningDelta,
                                         ReasoningDelta, ReasoningEnd, TextStart, TextDelta,
                                         TextEnd, Finish]
    assert chunks[1].payload.id == chunks[4].payload.id
    usage = chunks[-1].payload.output.usage
    assert usage.input_tokens is None  # the server sent no usage: unknown, not zero


async def test_ollama_style_reasoning_and_whole_tool_calls(server: ReplayServer,
                                                           model: Any) -> None:
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_time", "arguments": {"timezone": "UTC"}}}
    server.enqueue(Reply.sse(sse(delta(reasoning="hmm"), delta(tool_calls=[call]),
                                 stop("stop"), "[DONE]")))
    chunks = await collect(model, ModelRequest(prompt=QUESTION, tools=[TIME]))
    assert of(chunks, ReasoningDelta)[0].payload.text == "hmm"
    assert of(chunks, ToolCall)[0].payload.args == {"timezone": "UTC"}
    # a server that says "stop" after calling tools still ends a tool-calls step
    assert chunks[-1].payload.step_result.reason == "tool-calls"
    assert chunks[-1].payload.step_result.raw_reason == "stop"


async def test_malformed_tool_arguments_are_passed_on_raw(server: ReplayServer,
                                                          model: Any) -> None:
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "get_time", "arguments": '{"timezone": '}}
    server.enqueue(Reply.sse(sse(delta(tool_calls=[call]), stop("tool_calls"), "[DONE]")))
    chunks = await collect(model, ModelRequest(prompt=QUESTION, tools=[TIME]))
    assert of(chunks, ToolCall)[0].payload.args == '{"timezone": '


@pytest.mark.parametrize("raw,mapped", [
    ("length", "length"), ("content_filter", "content-filter"), ("function_call", "tool-calls"),
    ("weird", "other")])
async def test_finish_reasons_are_mapped(server: ReplayServer, model: Any, raw: str,
                                         mapped: str) -> None:
    server.enqueue(Reply.sse(sse(delta(content="x"), stop(raw), "[DONE]")))
    chunks = await collect(model)
    assert chunks[-1].payload.step_result.reason == mapped


# --- request bodies -------------------------------------------------------------------------------


async def test_prompt_tools_settings_and_options_reach_the_server(server: ReplayServer,
                                                                 model: Any) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse"))
    prompt: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is this? "},
                                     {"type": "image", "image": "https://x.test/a.png"},
                                     {"type": "file", "data": "aGk=", "mimeType": "image/png"}]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "hidden"}, {"type": "text", "text": "Looking."},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "get_weather",
             "args": {"city": "Paris"}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "get_weather",
             "result": {"temp": 21}},
        ]},
        {"role": "assistant", "content": "It is 21."},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    ]
    schema = {"title": "Weather", "type": "object", "properties": {"t": {"type": "number"}}}
    request = ModelRequest(
        prompt=prompt, tools=[WEATHER], tool_choice={"type": "tool", "toolName": "get_weather"},
        model_settings={"temperature": 0.2, "maxTokens": 50, "top_p": 0.9, "stopSequences": ["X"],
                        "seed": 7, "headers": {"x-trace": "t1"}},
        provider_options={"user": "u1", "openai": {"parallel_tool_calls": False},
                          "anthropic": {"top_k": 3}},
        structured_output=schema)
    await collect(model, request)
    sent = server.requests[0]
    body = sent.body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is this? "},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}]},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp":21}'},
        {"role": "assistant", "content": "It is 21."},
        {"role": "user", "content": "Thanks"},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": WEATHER.parameters}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["stop"],
            body["seed"]) == (0.2, 50, 0.9, ["X"], 7)
    assert body["stream_options"] == {"include_usage": True} and body["stream"] is True
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "Weather", "schema": schema}}
    assert body["user"] == "u1" and body["parallel_tool_calls"] is False
    assert "top_k" not in body and "anthropic" not in body and "headers" not in body
    assert sent.headers["x-trace"] == "t1"


@pytest.mark.parametrize("choice,sent", [
    pytest.param("auto", "auto", id="auto"),
    pytest.param("none", None, id="none-sends-no-tools-and-no-choice"),
    pytest.param("required", "required", id="required"),
    pytest.param(None, None, id="unset-is-left-out"),
])
async def test_tool_choice_mapping(server: ReplayServer, model: Any, choice: Any,
                                   sent: Any) -> None:
    server.enqueue(Reply.sse("openai/tool-stream.sse"))
    await collect(model, ModelRequest(prompt=QUESTION, tools=[WEATHER], tool_choice=choice))
    assert server.requests[0].body.get("tool_choice") == sent
    assert ("tools" in server.requests[0].body) is (choice != "none")


def test_bad_input_is_refused_before_any_call(model: Any) -> None:
    with pytest.raises(StreamkitError, match="tool_choice must be"):
        model.stream(ModelRequest(prompt=QUESTION, tools=[WEATHER], tool_choice="sometimes"))
    with pytest.raises(MessageError, match="unknown role 'robot'"):
        model.stream(ModelRequest(prompt=[{"role": "robot", "content": "hi"}]))
    with pytest.raises(MessageError, match="cannot take a file part of type 'application/zip'"):
        model.stream(ModelRequest(prompt=[{"role": "user", "content": [
            {"type": "file", "data": "aGk=", "mimeType": "application/zip"}]}]))


def test_api_openai_com_needs_a_key_named_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel("gpt-4o-mini")  # building it is fine: the key is needed at first use
    with pytest.raises(StreamkitError, match="OPENAI_API_KEY") as info:
        model.stream(ModelRequest(prompt=QUESTION))
    assert info.value.env_var == "OPENAI_API_KEY"


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("status,body,retryable", [
    pytest.param(400, "openai/error-400.json", False, id="400-bad-request"),
    pytest.param(401, {"error": {"message": "Invalid API key", "type": "auth"}}, False, id="401"),
    pytest.param(404, {"detail": "Not Found"}, False, id="404-fastapi-shape"),
])
async def test_client_errors_are_raised_at_once(server: ReplayServer, model: Any, sleeps: Sleeps,
                                                status: int, body: Any, retryable: bool) -> None:
    server.enqueue(Reply.json(body, status=status))
    with pytest.raises(APICallError) as info:
        await collect(model)
    err = info.value
    assert (err.status_code, err.is_retryable) == (status, retryable)
    assert err.url == f"{server.base_url}/chat/completions"
    assert len(server.requests) == 1 and sleeps.delays == []
    expected = fixture_bytes(body).decode() if isinstance(body, str) else json.dumps(body)
    assert err.body == expected
    assert f"HTTP {status}" in str(err)
    if status == 400:
        assert "ContextWindowExceededError" in str(err) and "(invalid_request_error)" in str(err)


async def test_server_errors_are_retried_with_backoff_then_raised(server: ReplayServer,
                                                                  model: Any,
                                                                  sleeps: Sleeps) -> None:
    server.enqueue(*[Reply.json({"error": {"message": "upstream down"}}, status=503)] * 3)
    with pytest.raises(APICallError, match="upstream down") as info:
        await collect(model)
    assert info.value.status_code == 503 and info.value.is_retryable
    assert len(server.requests) == 3  # max_retries=2
    first, second = sleeps.delays
    assert 0.25 <= first <= 0.5 and 0.5 <= second <= 1.0  # backoff 0.5 s doubling, equal jitter


async def test_429_with_retry_after_is_honoured(server: ReplayServer, model: Any,
                                                sleeps: Sleeps) -> None:
    server.enqueue(Reply.json("openai/error-429.json", status=429, headers={"retry-after": "3"}),
                   Reply.sse("openai/text-stream-usage.sse"))
    chunks = await collect(model)
    assert sleeps.delays == [3.0]
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body
    assert "".join(c.payload.text for c in of(chunks, TextDelta)).startswith("Hello")


async def test_retry_after_beyond_the_cap_is_not_waited_for(server: ReplayServer, model: Any,
                                                            sleeps: Sleeps) -> None:
    server.enqueue(Reply.json("openai/error-429.json", status=429,
                              headers={"retry-after": "3600"}))
    with pytest.raises(APICallError) as info:
        await collect(model)
    assert info.value.retry_after == 3600.0 and info.value.is_retryable
    assert sleeps.delays == [] and len(server.requests) == 1


async def test_x_should_retry_false_stops_retrying(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.json({"error": {"message": "no"}}, status=500,
                              headers={"x-should-retry": "false"}))
    with pytest.raises(APICallError) as info:
        await collect(model)
    assert not info.value.is_retryable and len(server.requests) == 1


async def test_error_event_under_http_200_after_text(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("openai/text-then-error-stream.sse"))
    seen: list[Any] = []
    with pytest.raises(APICallError, match="upstream failed mid-stream") as info:
        async for chunk in model.stream(ModelRequest(prompt=QUESTION)):
            seen.append(chunk)
    assert "".join(c.payload.text for c in of(seen, TextDelta)) == "Partial answer before "
    assert info.value.status_code == 500 and "internal_server_error" in str(info.value.body)
    assert len(server.requests) == 1  # text was already streamed: never replayed


async def test_error_event_before_any_output_is_retried(server: ReplayServer, model: Any,
                                                        sleeps: Sleeps) -> None:
    error = {"error": {"message": "overloaded", "type": "server_error", "code": "503"}}
    server.enqueue(Reply.sse(sse(error)), Reply.sse("openai/text-stream-usage.sse"))
    chunks = await collect(model)
    assert len(server.requests) == 2 and len(sleeps.delays) == 1
    assert chunks[-1].payload.step_result.reason == "stop"


@pytest.mark.parametrize("cut_at", [
    pytest.param(40, id="cut-inside-the-first-frame"),
    pytest.param(len(fixture_bytes("openai/text-stream-usage.sse")) - 30,
                 id="cut-inside-the-last-frame"),
])
async def test_stream_cut_mid_frame(server: ReplayServer, model: Any, cut_at: int) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse", cut_at=cut_at),
                   Reply.sse("openai/text-stream-usage.sse"))
    if cut_at == 40:  # nothing was yielded yet: retried, and the step completes
        chunks = await collect(model)
        assert len(server.requests) == 2 and type(chunks[-1]) is Finish
        return
    seen: list[Any] = []
    with pytest.raises(APICallError, match="broke off") as info:
        async for chunk in model.stream(ModelRequest(prompt=QUESTION)):
            seen.append(chunk)
    assert info.value.is_retryable and info.value.status_code is None
    assert isinstance(info.value.__cause__, httpx.RemoteProtocolError)
    assert of(seen, TextDelta) and not of(seen, Finish) and len(server.requests) == 1


async def test_a_cut_after_a_role_only_first_frame_is_retried(server: ReplayServer,
                                                              model: Any) -> None:
    body = sse(delta(role="assistant", content=""), delta(content="Hi"), stop(), "[DONE]")
    server.enqueue(Reply.sse(body, cut_at=body.index(b"Hi")), Reply.sse(body))
    chunks = await collect(model)
    assert len(server.requests) == 2
    assert [type(c) for c in chunks] == [ResponseMetadata, TextStart, TextDelta, TextEnd, Finish]


async def test_close_delimited_body_ending_mid_event(server: ReplayServer, model: Any) -> None:
    body = fixture_bytes("openai/text-stream-usage.sse")
    server.enqueue(Reply.sse(body, cut_at=len(body) - 30, is_chunked=False))
    with pytest.raises(APICallError, match="ended in the middle of an event") as info:
        await collect(model)
    assert info.value.is_retryable


async def test_stream_ending_without_finish_or_done(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse(sse(delta(content="Hel"), delta(content="lo"))))
    with pytest.raises(APICallError, match="without a finish_reason") as info:
        await collect(model)
    assert info.value.is_retryable


async def test_finish_without_done_is_accepted(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse(sse(delta(content="Hi"), stop())))
    chunks = await collect(model)
    assert chunks[-1].payload.step_result.reason == "stop"


async def test_malformed_json_event(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse(b'data: {"choices": [\n\n'))
    model.retry_policy = RetryPolicy(max_retries=0)
    with pytest.raises(APICallError, match="not valid JSON") as info:
        await collect(model)
    assert info.value.body == '{"choices": ['


async def test_slow_server_times_out_as_retryable(server: ReplayServer, sleeps: Sleeps) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse", hold_after=0))
    async with OpenAIChatModel("m", base_url=server.base_url, timeout=0.2, max_retries=0,
                               sleep=sleeps) as model:
        with pytest.raises(APICallError, match="timed out") as info:
            await collect(model)
    assert info.value.is_retryable and info.value.status_code is None
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)
    assert await asyncio.to_thread(server.requests[0].disconnected.wait, 5)


async def test_connection_refused_is_retried_then_raised(sleeps: Sleeps) -> None:
    with ReplayServer() as gone:
        url = gone.base_url  # a port that is closed once the server stops
    async with OpenAIChatModel("m", base_url=url, sleep=sleeps, max_retries=1) as model:
        with pytest.raises(APICallError, match="could not connect") as info:
            await collect(model)
    assert info.value.is_retryable and len(sleeps.delays) == 1


async def test_dropped_connection_is_retried(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.drop(), Reply.sse("openai/text-stream-usage.sse"))
    chunks = await collect(model)
    assert len(server.requests) == 2 and type(chunks[-1]) is Finish


async def test_per_call_max_retries_setting(server: ReplayServer, model: Any) -> None:
    server.enqueue(*[Reply.json({"error": {"message": "down"}}, status=500)] * 2)
    with pytest.raises(APICallError):
        await collect(model, ModelRequest(prompt=QUESTION, model_settings={"maxRetries": 0}))
    assert len(server.requests) == 1
    assert "maxRetries" not in server.requests[0].body


# --- cancellation and clients ---------------------------------------------------------------------


async def test_aclose_mid_stream_closes_the_connection(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse", hold_after=3))
    stream = model.stream(ModelRequest(prompt=QUESTION))
    first = [await stream.__anext__() for _ in range(3)]
    assert [type(c) for c in first] == [ResponseMetadata, TextStart, TextDelta]
    assert not server.requests[0].disconnected.is_set()
    await stream.aclose()
    assert await asyncio.to_thread(server.requests[0].disconnected.wait, 5)


async def test_cancelling_the_consumer_closes_the_connection(server: ReplayServer,
                                                             model: Any) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse", hold_after=2))
    got_text = asyncio.Event()

    async def consume() -> None:
        async for chunk in model.stream(ModelRequest(prompt=QUESTION)):
            if isinstance(chunk, TextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await got_text.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(server.requests[0].disconnected.wait, 5)


async def test_steps_reuse_one_connection(server: ReplayServer, model: Any) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse"),
                   Reply.sse("openai/tool-stream.sse"))
    await collect(model)
    await collect(model)
    assert len(server.requests) == 2 and server.connections == 1


async def test_a_borrowed_client_is_used_and_left_open(server: ReplayServer) -> None:
    server.enqueue(Reply.sse("openai/text-stream-usage.sse"))
    async with httpx.AsyncClient(headers={"x-from-client": "yes"}) as client:
        model = OpenAIChatModel("m", base_url=server.base_url, client=client)
        await collect(model)
        await model.aclose()
        assert not client.is_closed
    assert server.requests[0].headers["x-from-client"] == "yes"


# --- Retry-After and the policy -------------------------------------------------------------------


@pytest.mark.parametrize("headers,expected", [
    pytest.param({"Retry-After": "2"}, 2.0, id="seconds"),
    pytest.param({"retry-after": "1.5"}, 1.5, id="fractional-seconds"),
    pytest.param({"retry-after": "Wed, 01 Jan 2025 00:00:30 GMT"}, 30.0, id="http-date"),
    pytest.param({"retry-after": "Tue, 31 Dec 2024 23:00:00 GMT"}, 0.0, id="date-in-the-past"),
    pytest.param({"retry-after-ms": "250", "retry-after": "9"}, 0.25, id="openai-ms-wins"),
    pytest.param({"retry-after": "-1"}, None, id="negative"),
    pytest.param({"retry-after": "later"}, None, id="garbage"),
    pytest.param({}, None, id="absent"),
])
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    assert parse_retry_after(headers, now=now) == expected


def test_retry_policy_is_validated_and_capped() -> None:
    with pytest.raises(StreamkitError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    policy = RetryPolicy(backoff=1.0, max_backoff=4.0)
    assert all(2.0 <= policy.delay(n, None) <= 4.0 for n in (2, 5, 30))
    assert policy.delay(0, 7.0) == 7.0
