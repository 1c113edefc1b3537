"""Request bodies: any JSON a client sends is either a call or a ``streamkit.errors`` class
naming the field (never a builtin exception); and the frame buffer's edge cases."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.errors import StreamkitError
from streamkit.serve._requests import parse_agent_call, parse_chat_call, read_json
from streamkit.serve._sse import EventStream

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=12)
KEYS = ["messages", "memory", "threadId", "resourceId", "requestContext", "maxSteps",
        "toolChoice", "activeTools", "modelSettings", "providerOptions", "structuredOutput",
        "trigger", "id", "runId"]
PARTS = st.fixed_dictionaries({"type": st.sampled_from(
    ["text", "reasoning", "step-start", "file", "tool-x", "dynamic-tool", "data-y",
     "source-url", "bogus"])}, optional={"text": JSON, "state": st.sampled_from(
        ["output-available", "output-error", "input-available", "weird"]),
        "toolCallId": JSON, "input": JSON, "output": JSON, "toolName": JSON, "url": JSON,
        "mediaType": JSON, "data": JSON, "errorText": JSON})
UI_MESSAGES = st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"])},
    optional={"id": JSON, "parts": st.lists(PARTS, max_size=3) | JSON, "metadata": JSON}),
    max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6))
def test_any_mastra_body_is_a_call_or_a_streamkit_error(body: dict[str, Any]) -> None:
    try:
        call = parse_agent_call(body)
    except StreamkitError as exc:
        assert str(exc)
        return
    assert call.messages


@settings(max_examples=300, deadline=None)
@given(UI_MESSAGES, st.dictionaries(st.sampled_from(KEYS[1:]), JSON, max_size=3))
def test_any_chat_body_is_a_call_or_a_streamkit_error(messages: list[Any],
                                                      extra: dict[str, Any]) -> None:
    try:
        call = parse_chat_call({**extra, "messages": messages})
    except StreamkitError as exc:
        assert str(exc)
        return
    assert call.messages


@given(st.binary(max_size=20))
def test_any_bytes_are_an_object_or_a_streamkit_error(body: bytes) -> None:
    try:
        assert isinstance(read_json(body), dict)
    except StreamkitError as exc:
        assert getattr(exc, "field", None) == "(body)"


async def _frames(items: list[Any]) -> AsyncIterator[bytes]:
    for item in items:
        if isinstance(item, Exception):
            raise item
        yield item


async def test_an_error_before_the_first_frame_is_raised_by_first() -> None:
    events = EventStream(_frames([ValueError("before")]))
    with pytest.raises(ValueError, match="before"):
        await events.first()


async def test_an_error_after_the_first_frame_is_raised_by_ready_after_the_frames() -> None:
    events = EventStream(_frames([b"a", b"b", RuntimeError("a bug")]), queue_size=8)
    assert await events.first() == b"a"
    assert await events.wait(5.0)
    sent: list[bytes] = []
    with pytest.raises(RuntimeError, match="a bug"):
        while True:
            batch = events.ready()
            assert batch is not None
            sent += batch
            if not batch:
                await events.wait(5.0)
    assert sent == [b"b"]
    await events.cancel()


async def test_an_empty_stream_ends_and_stays_ended() -> None:
    events = EventStream(_frames([]))
    assert await events.first() == b""
    assert events.ready() is None and events.ready() is None


async def test_the_producer_waits_when_the_buffer_is_full() -> None:
    produced: list[int] = []

    async def frames() -> AsyncIterator[bytes]:
        for i in range(100):
            produced.append(i)
            yield json.dumps(i).encode()

    events = EventStream(frames(), queue_size=4)
    await events.first()
    for _ in range(10):
        await asyncio.sleep(0)  # let the producer run as far as it can
    assert len(produced) == 5  # the first frame taken, then 4 waiting
    assert events.ready() == [b"1", b"2", b"3", b"4"]
    await events.cancel()


@pytest.mark.parametrize("value", [[1], ["ok", None], [{"name": "x"}]])
def test_active_tools_that_are_not_tool_names_are_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(StreamkitError) as caught:
        parse_agent_call({"messages": "hi", "activeTools": value})
    assert getattr(caught.value, "field", None) == "activeTools"
    assert "tool names" in str(caught.value)


def test_the_options_a_body_gives_are_agent_stream_keywords() -> None:
    call = parse_agent_call({
        "messages": "hi", "memory": {"thread": "t1", "resource": "r1"},
        "requestContext": {"k": 1}, "maxSteps": 3, "toolChoice": "none",
        "activeTools": ["a"], "modelSettings": {"temperature": 0},
        "providerOptions": {"p": {"x": 1}}, "structuredOutput": {"schema": {"type": "object"}}})
    assert call.options == {
        "thread_id": "t1", "resource_id": "r1", "request_context": {"k": 1}, "max_steps": 3,
        "tool_choice": "none", "active_tools": ["a"], "model_settings": {"temperature": 0},
        "provider_options": {"p": {"x": 1}}, "structured_output": {"type": "object"}}
