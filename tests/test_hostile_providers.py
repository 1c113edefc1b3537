"""Both provider translators against a misbehaving server: an ``APICallError`` or a correct result.

A real HTTP server on 127.0.0.1 (``tests/_hostile_server.py``) sends what hypothesis draws:
OpenAI Chat Completions chunks and Anthropic Messages events whose every field is sometimes of
the wrong type, junk lines, JSON nested past msgspec's recursion limit, bodies cut anywhere and
split into random reads. Whatever it sends, ``model.stream()`` either ends with a ``finish``
whose chunks all encode, or raises ``APICallError`` — never another exception, never a hang
(every wait in these tests is bounded). Well-formed streams must also give the right text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import Agent, wire
from streamkit.chunks import Finish, TextDelta
from streamkit.errors import APICallError
from streamkit.models import AnthropicModel, ModelRequest, OpenAIChatModel

from ._hostile_server import HostileServer, Misbehaviour, sse_body

FUZZ = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
WAIT = 10.0  # seconds any one test's model call may take before the test fails

REQUEST = ModelRequest(prompt=[{"role": "user", "content": "hi"}])


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with HostileServer() as s:
        yield s


@pytest.fixture
async def openai(server: HostileServer) -> AsyncIterator[OpenAIChatModel]:
    """One model for all examples of a test (building an HTTP client per example is slow)."""
    async with OpenAIChatModel("m", base_url=server.url, max_retries=0) as model:
        yield model


@pytest.fixture
async def anthropic(server: HostileServer) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel("m", base_url=server.url, max_retries=0) as model:
        yield model


async def outcome(model: Any) -> list[Any] | APICallError:
    """The chunks of one call, or its ``APICallError``; any other exception fails the test."""
    try:
        async with asyncio.timeout(WAIT):
            return [chunk async for chunk in model.stream(REQUEST)]
    except APICallError as exc:
        assert exc.message
        return exc


def assert_correct(chunks: list[Any]) -> None:
    """A finished step: ends with ``finish``, every chunk encodes, and what it decodes to
    encodes to the same bytes (a datetime comes back as its ISO text, so not ``==``)."""
    assert chunks and isinstance(chunks[-1], Finish)
    for chunk in chunks:
        data = wire.encode(chunk)
        assert wire.encode(wire.decode(data)) == data


def text_of(chunks: list[Any]) -> str:
    return "".join(c.payload.text for c in chunks if isinstance(c, TextDelta))


# --------------------------------------------------------------------------- strategies

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=8) \
    | st.floats(allow_nan=False)
junk = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)


def maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a value of the right shape, sometimes any JSON at all."""
    return st.one_of(good, good, good, junk)


def obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={k: maybe(v) for k, v in fields.items()})


small_text = st.text(max_size=10)
openai_call = obj(index=st.integers(0, 2), id=st.text(min_size=1, max_size=6),
                  type=st.just("function"),
                  function=obj(name=st.sampled_from(["lookup", "t"]),
                               arguments=st.sampled_from(['{"a"', ':1}', "{}", "", "{bad"])))
openai_delta = obj(role=st.just("assistant"),
                   content=small_text | st.lists(obj(type=st.sampled_from(["text", "image"]),
                                                     text=small_text), max_size=2),
                   reasoning_content=small_text, reasoning=small_text,
                   tool_calls=st.lists(openai_call, max_size=2))
openai_frame = obj(id=small_text, model=small_text, object=st.just("chat.completion.chunk"),
                   created=st.integers(0, 2**31) | st.floats(-1e20, 1e20),
                   choices=st.lists(obj(index=st.integers(0, 1), delta=openai_delta,
                                        message=openai_delta,
                                        finish_reason=st.sampled_from(
                                            ["stop", "length", "tool_calls", None])),
                                    max_size=2),
                   usage=obj(prompt_tokens=st.integers(0, 100),
                             completion_tokens=st.integers(0, 100),
                             total_tokens=st.integers(0, 200),
                             completion_tokens_details=obj(reasoning_tokens=st.integers(0, 9)),
                             prompt_tokens_details=obj(cached_tokens=st.integers(0, 9))),
                   error=st.none() | obj(message=small_text, code=st.sampled_from(
                       ["500", 429, "x", "99999999999999999999"])))

anthropic_usage = obj(input_tokens=st.integers(0, 99), output_tokens=st.integers(0, 99),
                      cache_read_input_tokens=st.integers(0, 9),
                      cache_creation_input_tokens=st.integers(0, 9))
anthropic_block = obj(type=st.sampled_from(["text", "thinking", "tool_use", "redacted_thinking",
                                            "server_tool_use"]),
                      text=small_text, thinking=small_text, id=st.text(min_size=1, max_size=5),
                      name=st.sampled_from(["lookup", "json"]), input=junk, data=small_text)
anthropic_delta = obj(type=st.sampled_from(["text_delta", "input_json_delta", "thinking_delta",
                                            "signature_delta", "citations_delta"]),
                      text=small_text, partial_json=st.sampled_from(['{"a"', ":1}", "{"]),
                      thinking=small_text, signature=small_text,
                      stop_reason=st.sampled_from(["end_turn", "tool_use", "max_tokens"]))
anthropic_event = st.one_of(
    st.builds(lambda rest: {"type": "message_start", **rest},
              obj(message=obj(id=small_text, model=small_text, usage=anthropic_usage))),
    st.builds(lambda rest: {"type": "content_block_start", **rest},
              obj(index=st.integers(0, 2), content_block=anthropic_block)),
    st.builds(lambda rest: {"type": "content_block_delta", **rest},
              obj(index=st.integers(0, 2), delta=anthropic_delta)),
    st.builds(lambda delta: {"type": "content_block_delta", "index": 0, "delta": delta},
              maybe(anthropic_delta)),
    st.builds(lambda rest: {"type": "content_block_stop", **rest}, obj(index=st.integers(0, 2))),
    st.builds(lambda rest: {"type": "message_delta", **rest},
              obj(delta=anthropic_delta, usage=anthropic_usage)),
    st.just({"type": "ping"}), st.just({"type": "message_stop"}),
    st.builds(lambda rest: {"type": "error", **rest},
              obj(error=obj(type=st.sampled_from(["overloaded_error", "api_error"]),
                            message=small_text))),
    obj(type=st.sampled_from(["brand_new_event", 5, None]), index=st.integers(0, 2)),
)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def frames_to_body(frames: list[Any], extras: list[bytes]) -> bytes:
    body = b"".join(sse_body(json.dumps(f)) for f in frames)
    return body + b"".join(extras)


extras = st.lists(st.sampled_from([
    b"data: [DONE]\n\n", b": keep-alive\n\n", b"data: not json\n\n", b"event: x\n\n",
    sse_body(nested(2_000)), sse_body('{"choices":' + nested(1_500) + "}"),
    b"data: {\"choices\": [\n\n", b"data: cut-off", b"\xff\xfe\n\n",
]), max_size=2)


@st.composite
def deliveries(draw: st.DrawFn, body: bytes) -> Misbehaviour:
    """How the server sends ``body``: whole or in small reads, cut or not, chunked or not."""
    cut = draw(st.none() | st.integers(0, len(body)))
    piece = draw(st.sampled_from([None, 5, 64]))
    sent = body if cut is None else body[:cut]
    return Misbehaviour.sse(sent, piece=piece, is_chunked=draw(st.booleans()),
                            ending="finish" if cut is None else "close")


# --------------------------------------------------------------------------- fuzzing


class TestFuzzedOpenAI:
    @FUZZ
    @given(st.lists(openai_frame, max_size=5), extras, st.data())
    async def test_any_stream_is_a_result_or_an_api_error(
            self, server: HostileServer, openai: Any, frames: list[Any], more: list[bytes],
            data: st.DataObject) -> None:
        body = frames_to_body(frames, more)
        server.enqueue(data.draw(deliveries(body)))
        got = await outcome(openai)
        if not isinstance(got, APICallError):
            assert_correct(got)

    @FUZZ
    @given(openai_frame)
    async def test_any_non_streamed_response(self, server: HostileServer, openai: Any,
                                             frame: Any) -> None:
        server.enqueue(Misbehaviour(headers={"content-type": "application/json"},
                                    pieces=[json.dumps(frame).encode()], is_chunked=False))
        openai.is_streaming = False
        got = await outcome(openai)
        if not isinstance(got, APICallError):
            assert_correct(got)

    @FUZZ
    @given(st.lists(st.text(max_size=8) | st.lists(small_text, max_size=3), min_size=1,
                    max_size=5))
    async def test_well_formed_text_comes_out_whole(self, server: HostileServer, openai: Any,
                                                    contents: list[Any]) -> None:
        frames = [{"choices": [{"index": 0, "delta": {"content": c if isinstance(c, str) else
                                                      [{"type": "text", "text": t}
                                                       for t in c]}}]} for c in contents]
        frames.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        server.enqueue(Misbehaviour.sse(frames_to_body(frames, [b"data: [DONE]\n\n"]), piece=5))
        got = await outcome(openai)
        assert not isinstance(got, APICallError), got
        assert_correct(got)
        assert text_of(got) == "".join(c if isinstance(c, str) else "".join(c)
                                       for c in contents)


class TestFuzzedAnthropic:
    @FUZZ
    @given(st.lists(anthropic_event, max_size=8), extras, st.booleans(), st.data())
    async def test_any_stream_is_a_result_or_an_api_error(
            self, server: HostileServer, anthropic: Any, events: list[Any], more: list[bytes],
            is_structured: bool, data: st.DataObject) -> None:
        # Blocks 0 and 1 open first (well formed), so the drawn deltas and stops have blocks
        # to reach and their wrong shapes get exercised.
        opened = [{"type": "content_block_start", "index": i, "content_block": block}
                  for i, block in enumerate(data.draw(st.lists(st.sampled_from([
                      {"type": "text", "text": ""}, {"type": "thinking", "thinking": ""},
                      {"type": "tool_use", "id": "t1", "name": "json"}]), max_size=2)))]
        body = frames_to_body([*opened, *events], more)
        if data.draw(st.booleans()):
            body += sse_body('{"type":"message_stop"}')
        server.enqueue(data.draw(deliveries(body)))
        request = ModelRequest(prompt=[{"role": "user", "content": "hi"}],
                               structured_output={"type": "object"} if is_structured else None)
        try:
            async with asyncio.timeout(WAIT):
                got: Any = [chunk async for chunk in anthropic.stream(request)]
        except APICallError as exc:
            got = exc
        if not isinstance(got, APICallError):
            assert_correct(got)

    @FUZZ
    @given(st.lists(st.text(max_size=8), min_size=1, max_size=5))
    async def test_well_formed_text_comes_out_whole(self, server: HostileServer,
                                                    anthropic: Any, texts: list[str]) -> None:
        events: list[Any] = [
            {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": t}} for t in texts),
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 2}},
            {"type": "message_stop"}]
        server.enqueue(Misbehaviour.sse(frames_to_body(events, []), piece=9))
        got = await outcome(anthropic)
        assert not isinstance(got, APICallError), got
        assert_correct(got)
        assert text_of(got) == "".join(texts)


# --------------------------------------------------------------------------- the cases


@pytest.mark.parametrize("frame", [
    pytest.param('{"choices":[{"delta":"oops"}]}', id="delta-a-string"),
    pytest.param('{"choices":5}', id="choices-a-number"),
    pytest.param('{"choices":[{"delta":{"tool_calls":[{"function":"x"}]}}]}',
                 id="function-a-string"),
    pytest.param('{"created":1e20,"choices":[{"delta":{"content":"x"}}]}', id="created-1e20"),
    pytest.param('{"usage":{"prompt_tokens":"many"}}', id="tokens-a-string"),
    pytest.param('{"choices":[{"finish_reason":[1]}]}', id="finish-reason-a-list"),
    pytest.param(nested(1_000), id="nested-1000"),
    pytest.param('{"choices":[{"delta":{"content":' + nested(3_000) + "}}]}",
                 id="content-nested-3000"),
])
async def test_wrong_shapes_end_the_agent_stream_with_an_error_chunk(
        server: HostileServer, openai: Any, frame: str) -> None:
    server.enqueue(Misbehaviour.sse(sse_body(frame, "[DONE]")))
    stream = Agent(id="a", model=openai).stream("hi")
    async with asyncio.timeout(WAIT):
        chunks = [chunk async for chunk in stream]
        with pytest.raises(APICallError):
            await stream.result()
    assert chunks[-1].type == "error"


@pytest.mark.parametrize("event", [
    pytest.param('{"type":"content_block_start","index":"0","content_block":{"type":"text"}}',
                 id="index-a-string"),
    pytest.param('{"type":"content_block_delta","index":0,"delta":"oops"}', id="delta-a-string"),
    pytest.param('{"type":"message_delta","usage":{"output_tokens":"many"}}',
                 id="tokens-a-string"),
    pytest.param('{"type":"message_start","message":[]}', id="message-a-list"),
    pytest.param('{"type":' + nested(2_000) + "}", id="nested-2000"),
    pytest.param('{"no_type":1}', id="no-type"),
])
async def test_wrong_shapes_from_anthropic(server: HostileServer, anthropic: Any,
                                          event: str) -> None:
    start = '{"type":"content_block_start","index":0,"content_block":{"type":"text"}}'
    server.enqueue(Misbehaviour.sse(sse_body(start, event, '{"type":"message_stop"}')))
    got = await outcome(anthropic)
    assert isinstance(got, APICallError) and not got.is_retryable


async def test_content_parts_are_read_as_text(server: HostileServer, openai: Any) -> None:
    parts = [{"type": "text", "text": "Hel"}, {"type": "image_url", "image_url": {}},
             {"type": "text", "text": "lo"}]
    server.enqueue(Misbehaviour.sse(sse_body(
        json.dumps({"choices": [{"delta": {"content": parts}}]}),
        json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]}), "[DONE]")))
    got = await outcome(openai)
    assert not isinstance(got, APICallError) and text_of(got) == "Hello"
