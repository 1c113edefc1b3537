"""Secrets on error paths (issue 26, points 10 and 11), in-process with a real OpenAI-compatible
provider over HTTP on 127.0.0.1 whose ``base_url`` carries a password and whose error bodies
carry an e-mail, a card number and an API key.

Every way an error leaves a run — the ``error`` chunk, the ``data-step-retry`` reason,
``result.error`` / what ``generate()`` raises, the UI stream's ``errorText`` — carries the one
text the output guards let out, and no URL credentials; spans carry no error text with content
capture off and only that text with it on; messages a ``process_api_error`` hook adds, and tool
names, pass the guards before they are stored. The HTTP routes are
``tests/serve/test_error_redaction_http.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit import Agent, APICallError, Processor, tool
from streamkit.chunks import DataChunk, ErrorChunk, ToolCall, ToolErrorChunk, TripwireChunk
from streamkit.errors import StreamkitError
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import Message, message_to_dict
from streamkit.models import OpenAIChatModel
from streamkit.models._credentials import safe_url, strip_credentials
from streamkit.models._http import error_from_exception, error_from_status
from streamkit.serve import UIMessageStream
from streamkit.testing import ScriptedModel, api_error
from streamkit_operators import PIIDetector, RegexFilter

from ._http_server import ReplayServer, Reply

EMAIL = "bob.smith@example.com"
CARD = "4111 1111 1111 1111"
KEY = "sk-live_0123456789abcdefABCD"
PASSWORD = "hunter2-Pa55word"
#: Everything a client must never see.
SECRETS = (EMAIL, CARD, KEY, PASSWORD)
PROVIDER_TEXT = f"Invalid request for {EMAIL}: card {CARD} was declined; key {KEY} is revoked"


def error_reply(status: int = 400) -> Reply:
    return Reply.json({"error": {"message": PROVIDER_TEXT, "type": "invalid_request_error"}},
                      status=status)


def sse(*events: Any) -> Reply:
    body = b"".join(b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n"
                    for e in events)
    return Reply.sse(body)


def delta(**fields: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": fields}]}


def stop(reason: str = "stop") -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def answer(text: str) -> Reply:
    return sse(delta(role="assistant", content=text), stop(), "[DONE]")


def leaks(value: Any) -> list[str]:
    """The secrets found in ``value`` (rendered as text)."""
    text = value if isinstance(value, str) else repr(value)
    return [s for s in SECRETS if s in text]


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as srv:
        yield srv


@pytest.fixture
async def model(server: ReplayServer) -> AsyncIterator[OpenAIChatModel]:
    """A model on the replay server, closed after the test (its keep-alive connections would
    otherwise be collected, unclosed, during a later test that turns warnings into errors)."""
    server.replies.clear()
    base = f"http://alice:{PASSWORD}@127.0.0.1:{server.port}/v1"
    model = OpenAIChatModel("m", base_url=base, max_retries=0)
    yield model
    await model.aclose()


def guards() -> list[Any]:
    pii = PIIDetector(detection_types=["email", "credit-card", "api-key"])
    return [pii, RegexFilter(presets="secrets")]


def guarded(model: Any, **options: Any) -> Agent:
    g = guards()
    return Agent(id="a", model=model, input_processors=g, output_processors=g, **options)


async def drain(agent: Agent, prompt: str = "hi", **options: Any) -> tuple[list[Any], Any]:
    """The chunks of one run and what ``result()`` raised (or returned)."""
    stream = agent.stream(prompt, **options)
    chunks = [c async for c in stream]
    try:
        outcome: Any = await stream.result()
    except StreamkitError as exc:
        outcome = exc
    return chunks, outcome


def error_of(chunks: list[Any]) -> str:
    (err,) = [c for c in chunks if isinstance(c, ErrorChunk)]
    message: str = err.payload.error["message"]
    return message


# ----------------------------------------------------------------------------- URL credentials


async def test_provider_errors_name_the_url_without_its_password(model: OpenAIChatModel,
                                                                 server: ReplayServer) -> None:
    server.enqueue(error_reply())
    with pytest.raises(APICallError) as caught:
        async for _ in model.stream(_request()):
            pass
    err = caught.value
    assert PASSWORD not in str(err) and err.url is not None and PASSWORD not in err.url
    assert f"http://***@127.0.0.1:{server.port}/v1/chat/completions" in str(err)
    assert server.requests[-1].headers["authorization"].startswith("Basic ")  # still sent
    assert PASSWORD not in repr(model)


async def test_a_failed_connection_names_the_url_without_its_password() -> None:
    model = OpenAIChatModel("m", base_url=f"http://alice:{PASSWORD}@127.0.0.1:9/v1",
                            max_retries=0)
    with pytest.raises(APICallError) as caught:
        async for _ in model.stream(_request()):
            pass
    assert not leaks(str(caught.value)) and not leaks(caught.value.url)
    await model.aclose()


@pytest.mark.parametrize("url", [
    pytest.param("https://g.example/v1/models/m:stream?alt=sse&key=AIzaSyA0123456789",
                 id="key-param"),
    pytest.param("https://h.example/v1?api-version=2024-06-01&api-key=abc123def",
                 id="api-key-param"),
    pytest.param("https://tok3n@h.example/v1?access_token=abc123def", id="user-token")])
def test_api_keys_in_query_strings_are_masked(url: str) -> None:
    secret = url.rsplit("=", 1)[1]
    status = error_from_status("P", 500, f"upstream {url} failed", url, {})
    broken = error_from_exception("P", httpx.ConnectError(f"cannot reach {url}"), url)
    for err in (status, broken):
        assert secret not in str(err) and err.url is not None and secret not in err.url
        assert "tok3n" not in str(err) and (err.body is None or secret not in err.body)
    assert "api-version=2024-06-01" in safe_url(url) or "api-version" not in url


_USER = st.text(st.characters(codec="ascii", categories=("L", "N"),
                              include_characters="-._~!$'()*+,;=:@%"), min_size=1, max_size=20)
_VALUE = st.text(st.characters(codec="ascii", categories=("L", "N"), include_characters="-._~%"),
                 min_size=1, max_size=20)


@given(user=_USER, password=_USER, key=_VALUE, path=st.sampled_from(["", "/v1", "/a/b"]),
       name=st.sampled_from(["key", "api_key", "api-key", "apikey", "token", "access_token",
                             "secret", "password", "sig", "X-Goog-Api-Key"]))
def test_no_credential_survives_in_any_url(user: str, password: str, key: str, path: str,
                                           name: str) -> None:
    url = f"https://{user}:{password}@host.example:8443{path}?v=1&{name}={key}#frag"
    shown = safe_url(url)
    assert shown == f"https://***@host.example:8443{path}?v=1&{name}=***#frag"
    assert strip_credentials(f"GET {url} failed") == f"GET {shown} failed"


# ----------------------------------------------------------------------------- ways out


async def test_every_way_out_carries_the_one_redacted_text(model: OpenAIChatModel,
                                                           server: ReplayServer) -> None:
    server.enqueue(error_reply())
    chunks, outcome = await drain(guarded(model))
    shown = error_of(chunks)
    assert not leaks(shown)
    assert "**** **** **** 1111" in shown and f"***@127.0.0.1:{server.port}" in shown
    # result.error / what result() and generate() raise
    assert isinstance(outcome, APICallError) and str(outcome) == shown
    assert outcome.status_code == 400 and outcome.body is None and not leaks(outcome.url)
    assert isinstance(outcome.__cause__, APICallError)  # the original, for the developer only
    server.enqueue(error_reply())
    with pytest.raises(APICallError) as caught:
        await guarded(model).generate("hi")
    assert str(caught.value) == shown
    # the UI stream's errorText
    ui = UIMessageStream()
    parts = [p for c in chunks for p in ui.convert(c)]
    assert [p["errorText"] for p in parts if p["type"] == "error"] == [f"APICallError: {shown}"]


async def test_the_retry_reason_is_the_redacted_text(model: OpenAIChatModel,
                                                     server: ReplayServer) -> None:
    class RetryOnce(Processor):
        id = "retry-once"

        def process_api_error(self, error: Any, retry_count: int) -> Any:
            return {"retry": retry_count == 0}

    server.enqueue(error_reply(), error_reply())
    agent = guarded(model, error_processors=[RetryOnce()])
    chunks, outcome = await drain(agent)
    (retry,) = [c for c in chunks if isinstance(c, DataChunk) and c.type == "data-step-retry"]
    assert retry.data["processorId"] == "retry-once"
    assert retry.data["reason"] == error_of(chunks) == str(outcome)
    assert not leaks(retry.data["reason"]) and "**** **** **** 1111" in retry.data["reason"]


_WORDS = st.text(st.characters(codec="ascii", categories=("L", "N", "P", "Zs")), max_size=30)


@settings(max_examples=40, deadline=None)
@given(pieces=st.lists(st.one_of(_WORDS, st.sampled_from([EMAIL, CARD, KEY])), min_size=1,
                       max_size=6))
async def test_any_error_text_leaves_as_one_text_without_a_secret(pieces: list[str]) -> None:
    """Whatever the provider says, the error chunk, the retry reason and ``result.error`` carry
    the same text, and no secret the guards know of."""
    class RetryOnce(Processor):
        id = "retry-once"

        def process_api_error(self, error: Any, retry_count: int) -> Any:
            return {"retry": retry_count == 0}

    said = " | ".join(pieces)  # "|" keeps a drawn digit from joining the card number
    model = ScriptedModel([api_error(500, said), api_error(500, said)])
    chunks, outcome = await drain(guarded(model, error_processors=[RetryOnce()]))
    (retry,) = [c for c in chunks if isinstance(c, DataChunk) and c.type == "data-step-retry"]
    assert retry.data["reason"] == error_of(chunks) == str(outcome)
    assert [s for s in (EMAIL, CARD, KEY) if s in str(outcome)] == []


class DropErrors(Processor):
    id = "drop-errors"

    def process_output_stream(self, part: Any) -> Any:
        return None if isinstance(part, ErrorChunk) else part


@pytest.mark.parametrize("guard", [
    pytest.param(DropErrors(), id="dropped"),
    pytest.param(PIIDetector(detection_types=["email"], strategy="block"), id="tripped")])
async def test_a_guard_that_drops_or_blocks_the_error_withholds_its_text(
        model: OpenAIChatModel, server: ReplayServer, guard: Any) -> None:
    server.enqueue(error_reply())
    chunks, outcome = await drain(Agent(id="a", model=model, output_processors=[guard]))
    shown = error_of(chunks)  # the run still ends with its error, and only one
    assert shown == "APICallError: the error's text was withheld by an output processor"
    assert str(outcome) == shown and not any(isinstance(c, TripwireChunk) for c in chunks)


async def test_without_guards_the_text_is_the_providers_minus_credentials(
        model: OpenAIChatModel, server: ReplayServer) -> None:
    server.enqueue(error_reply())
    chunks, outcome = await drain(Agent(id="a", model=model))
    shown = error_of(chunks)
    assert PROVIDER_TEXT in shown and PASSWORD not in shown
    assert outcome.body is not None  # nothing was redacted: the very error raised


class Broken(Processor):
    """A stream hook or an input hook that raises, quoting what it saw."""

    id = "broken"

    def __init__(self, hook: str) -> None:
        super().__init__()
        setattr(self, hook, getattr(self, "_" + hook))

    def _process_output_stream(self, part: Any) -> Any:
        raise ValueError(f"cannot stream {part!r} to {EMAIL}")

    def _process_input(self, messages: Any) -> Any:
        raise ValueError(f"cannot take input for {EMAIL} with card {CARD}")


@pytest.mark.parametrize("hook,expected", [
    pytest.param("process_output_stream",
                 "processor 'broken' raised in process_output_stream: ValueError",
                 id="stream-hook-error-in-streamkit-words"),
    pytest.param("process_input", "**** **** **** 1111", id="input-hook-error-through-guards")])
async def test_a_processor_error_is_shown_without_what_it_quoted(
        model: OpenAIChatModel, server: ReplayServer, hook: str, expected: str) -> None:
    server.enqueue(answer("hello"))
    g = guards()
    lanes = {"input_processors": g, "output_processors": g}
    lane = "output_processors" if hook == "process_output_stream" else "input_processors"
    lanes[lane] = [*g, Broken(hook)]
    agent = Agent(id="a", model=model, **lanes)
    chunks, _ = await drain(agent)
    with pytest.raises(StreamkitError) as caught:
        server.enqueue(answer("hello"))
        await agent.generate("hi")
    shown = error_of(chunks)
    assert expected in shown and not leaks(shown) and str(caught.value) == shown


# ----------------------------------------------------------------------------- stored


async def test_a_message_process_api_error_adds_is_stored_as_the_guards_let_it(
        model: OpenAIChatModel, server: ReplayServer, tmp_path: Path) -> None:
    class Explain(Processor):
        """Adds what the provider said to the conversation, then retries."""

        id = "explain"

        def process_api_error(self, error: Any, retry_count: int, message_list: Any) -> Any:
            if retry_count:
                return None
            message_list.add(Message.user(f"(the last call failed: {error.body})"), "input")
            return {"retry": True}

    server.enqueue(error_reply(), answer("All good."))
    memory = Memory(SQLiteStore(str(tmp_path / "m.sqlite3")))
    try:
        agent = guarded(model, error_processors=[Explain()], memory=memory)
        result = await agent.generate("hi", thread_id="t1", resource_id="u1")
        stored = [message_to_dict(m) for m in await memory.get_messages("t1")]
    finally:
        await memory.close()
    assert result.text == "All good."
    assert any("the last call failed" in json.dumps(m) for m in stored)
    assert not leaks(json.dumps(stored)) and not leaks(repr(result.messages))
    retried_prompt = json.dumps(server.requests[-1].body["messages"])
    assert "the last call failed" in retried_prompt and not leaks(retried_prompt)


@pytest.mark.parametrize("strategy", ["filter", "block"])
async def test_an_added_message_a_guard_filters_or_blocks_is_not_stored(
        model: OpenAIChatModel, server: ReplayServer, tmp_path: Path, strategy: str) -> None:
    class Explain(Processor):
        id = "explain"

        def process_api_error(self, error: Any, retry_count: int, message_list: Any) -> Any:
            message_list.add(Message.user(f"(the last call failed: {error.body})"), "input")
            return {"retry": retry_count == 0}

    server.enqueue(error_reply(), answer("All good."))
    pii = PIIDetector(detection_types=["email"], strategy=strategy)
    memory = Memory(SQLiteStore(str(tmp_path / "m.sqlite3")))
    try:
        agent = Agent(id="a", model=model, input_processors=[pii], output_processors=[pii],
                      error_processors=[Explain()], memory=memory)
        chunks, outcome = await drain(agent, thread_id="t1", resource_id="u1")
        stored = json.dumps([message_to_dict(m) for m in await memory.get_messages("t1")])
    finally:
        await memory.close()
    assert "the last call failed" not in stored and not leaks(stored)
    if strategy == "filter":  # dropped: the retry goes on without it
        assert outcome.text == "All good."
        assert "the last call failed" not in json.dumps(server.requests[-1].body["messages"])
    else:  # the guard stopped the run: nothing of it is stored
        assert isinstance(chunks[-1], TripwireChunk) and stored == "[]"


async def test_tool_names_pass_the_guards(model: OpenAIChatModel, server: ReplayServer,
                                          tmp_path: Path) -> None:
    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return "shipped"

    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": f"send_to_{EMAIL}", "arguments": '{"order": "A1"}'}}
    server.enqueue(sse(delta(tool_calls=[call]), stop("tool_calls"), "[DONE]"),
                   answer("Sorry, I cannot do that."))
    memory = Memory(SQLiteStore(str(tmp_path / "m.sqlite3")))
    try:
        agent = guarded(model, tools=[lookup], memory=memory)
        stream = agent.stream("hi", thread_id="t1", resource_id="u1")
        chunks = [c async for c in stream]
        result = await stream.result()
        stored = [message_to_dict(m) for m in await memory.get_messages("t1")]
    finally:
        await memory.close()
    named = [c for c in chunks if isinstance(c, (ToolCall, ToolErrorChunk))]
    assert [c.type for c in named] == ["tool-call", "tool-error"]
    assert not leaks(repr(chunks)) and not leaks(json.dumps(stored))
    assert not leaks(repr(result.steps)) and not leaks(repr(result.messages))
    assert not leaks(json.dumps(server.requests[-1].body["messages"]))


# ----------------------------------------------------------------------------- spans


@pytest.fixture
def exporter() -> Iterator[Any]:
    """An in-memory span exporter behind the SDK's tracer provider; settings restored after."""
    pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk (test extra) missing")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from streamkit.tracing import _settings

    saved = _settings._settings
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    memory.provider = provider  # type: ignore[attr-defined]
    try:
        yield memory
    finally:
        _settings._settings = saved


def span_text(spans: Any) -> str:
    """Every name, attribute value, status description and event attribute of ``spans``."""
    out = []
    for s in spans:
        out.append(s.name)
        out.extend(repr(v) for v in (s.attributes or {}).values())
        out.append(repr(s.status.description))
        for event in s.events:
            out.extend(repr(v) for v in (event.attributes or {}).values())
    return "\n".join(out)


@tool
def explode(order: str) -> str:
    """Always fails, quoting what it was given."""
    raise ValueError(f"no order {order} for {EMAIL}")


async def _traced_runs(model: OpenAIChatModel, server: ReplayServer) -> tuple[list[Any], str]:
    """A tool that raises, then an API error retried once and failing again; the chunks and
    the text the client was shown of the run's error."""
    class RetryOnce(Processor):
        id = "retry-once"

        def process_api_error(self, error: Any, retry_count: int) -> Any:
            return {"retry": retry_count == 0}

    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "explode", "arguments": '{"order": "A1"}'}}
    server.enqueue(sse(delta(tool_calls=[call]), stop("tool_calls"), "[DONE]"),
                   error_reply(), error_reply())
    agent = guarded(model, tools=[explode], error_processors=[RetryOnce()])
    chunks, _ = await drain(agent)
    return chunks, error_of(chunks)


async def test_spans_carry_no_error_text_without_content_capture(
        model: OpenAIChatModel, server: ReplayServer, exporter: Any) -> None:
    from opentelemetry.trace import StatusCode

    from streamkit.tracing import instrument

    instrument(exporter.provider, capture_content=False)
    chunks, shown = await _traced_runs(model, server)
    spans = exporter.get_finished_spans()
    failed = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert sorted(s.name for s in failed) == ["chat m", "chat m", "execute_tool explode",
                                              "invoke_agent a"]
    assert all(s.status.description is None and not s.events for s in failed)
    text = span_text(spans)
    assert not leaks(text)
    for words in ("Invalid request", "declined", "no order", shown):  # nothing of either text
        assert words not in text
    assert {s.attributes["error.type"] for s in failed} == {"400", "ValueError"}


async def test_spans_with_content_capture_carry_what_the_client_was_shown(
        model: OpenAIChatModel, server: ReplayServer, exporter: Any) -> None:
    from opentelemetry.trace import StatusCode

    from streamkit.tracing import instrument

    instrument(exporter.provider, capture_content=True)
    chunks, shown = await _traced_runs(model, server)
    spans = exporter.get_finished_spans()
    assert not leaks(span_text(spans))
    (retry,) = [c for c in chunks if isinstance(c, DataChunk) and c.type == "data-step-retry"]
    (tool_error,) = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    told = {"chat m": [retry.data["reason"], shown], "invoke_agent a": [shown],
            "execute_tool explode": [tool_error.payload.error["message"]]}
    for name, texts in told.items():
        got = sorted((s for s in spans if s.name == name and
                      s.status.status_code is StatusCode.ERROR), key=lambda s: s.start_time)
        assert [s.status.description for s in got] == texts, name
        assert [[dict(e.attributes)["exception.message"] for e in s.events] for s in got] == \
            [[t] for t in texts]
    assert "b*******h@*******.com" in tool_error.payload.error["message"]


def _request() -> Any:
    from streamkit.models import ModelRequest

    return ModelRequest(prompt=[{"role": "user", "content": "hi"}])
