"""OpenTelemetry tracing of runs (``streamkit.tracing``, ``docs/tracing.md``): the span tree and its
attributes, checked with the SDK's in-memory exporter — a tool turn, tripwires, an API error an
error processor retries, errors nobody recovers, content capture behind a redacting guard,
nesting under the caller's span, concurrent runs — plus how tracing is switched on and off
(with opentelemetry absent, installed but unconfigured, configured globally) in fresh
interpreters."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk (test extra) missing")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from streamkit import Agent, APICallError, ProcessorError, tool  # noqa: E402
from streamkit._demo import build_agent  # noqa: E402
from streamkit.agent._observe import NOOP  # noqa: E402
from streamkit.errors import InvalidType  # noqa: E402
from streamkit.models import ModelRequest  # noqa: E402
from streamkit.testing import ScriptedModel, api_error, text, tool_call  # noqa: E402
from streamkit.tracing import _settings, instrument, uninstrument  # noqa: E402
from streamkit_operators import PIIDetector  # noqa: E402

from .conftest import REPO, P, as_mode  # noqa: E402

#: Attributes that carry message content: none of them without the opt-in.
CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


@dataclass
class Traced:
    exporter: InMemorySpanExporter
    provider: TracerProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        self.exporter.clear()


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
def traced() -> Iterator[Traced]:
    """Runs traced into an in-memory exporter (content capture off); settings restored after."""
    saved = _settings._settings
    provider, exporter = _provider()
    instrument(provider, capture_content=False)
    try:
        yield Traced(exporter, provider)
    finally:
        _settings._settings = saved


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan | None) -> list[ReadableSpan]:
    pid = parent.context.span_id if parent is not None else None
    found = [s for s in spans if (s.parent.span_id if s.parent is not None else None) == pid]
    return sorted(found, key=lambda s: (s.start_time or 0, s.end_time or 0))


def outline(spans: Sequence[ReadableSpan], parent: ReadableSpan | None = None,
            depth: int = 0) -> list[str]:
    """The tree as indented names, siblings in start order."""
    lines: list[str] = []
    for span in children(spans, parent):
        lines.append("  " * depth + span.name)
        lines.extend(outline(spans, span, depth + 1))
    return lines


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def in_order(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans named ``name``, in start order."""
    return sorted(named(spans, name), key=lambda s: s.start_time or 0)


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in spans]}"
    return found[0]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def mirrored(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """The processor spans as ``result.trace`` rows (hook, processor, step, outcome, calls,
    dropped)."""
    rows = []
    for s in spans:
        a = attrs(s)
        if "streamkit.processor.id" in a:
            rows.append((a["streamkit.processor.hook"], a["streamkit.processor.id"],
                         a.get("streamkit.step.number"), a["streamkit.processor.outcome"],
                         a["streamkit.processor.calls"], a["streamkit.processor.dropped"]))
    return sorted(rows, key=repr)


def trace_rows(result: Any) -> list[tuple[Any, ...]]:
    return sorted(((r.hook, r.processor_id, r.step, r.outcome, r.calls, r.dropped)
                   for r in result.trace), key=repr)


def every_value(spans: Sequence[ReadableSpan]) -> str:
    """Every attribute value of every span and span event, as one string."""
    out = []
    for s in spans:
        out.extend(repr(v) for v in (s.attributes or {}).values())
        out.append(repr(s.status.description))
        for event in s.events:
            out.extend(repr(v) for v in (event.attributes or {}).values())
    return "\n".join(out)


@tool
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order": order_id, "status": "shipped"}


# ----------------------------------------------------------------------------- the tree


async def test_tool_turn_tree_attributes_and_trace_mirror(traced: Traced, mode: str) -> None:
    seen: list[str] = []

    def stream(part: Any) -> Any:
        return part

    def tool_result(messages: Any) -> None:
        seen.append("tool")

    inp = P("inp", process_input=as_mode(lambda messages: None, mode))
    out = P("out", process_output_stream=as_mode(stream, mode),
            process_tool_result=as_mode(tool_result, mode),
            process_output_result=as_mode(lambda messages: None, mode))
    model = ScriptedModel([tool_call("lookup", {"order_id": "A1"}, id="c1"), text("Shipped.")])
    agent = Agent(id="support", name="Support desk", model=model, tools=[lookup],
                  input_processors=[inp], output_processors=[out])
    result = await agent.generate("Where is A1?", thread_id="thread-7",
                                  model_settings={"temperature": 0.2, "maxTokens": 50})
    spans = traced.spans()
    assert outline(spans) == [
        "invoke_agent Support desk",
        "  process_input inp",
        "  step 0",
        "    chat scripted-model",
        "    process_output_stream out",
        "    execute_tool lookup",
        "      process_tool_result out",
        "  step 1",
        "    chat scripted-model",
        "    process_output_stream out",
        "  process_output_result out",
    ]
    run = one(spans, "invoke_agent Support desk")
    a = attrs(run)
    assert run.kind is SpanKind.INTERNAL and run.parent is None
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert (a["gen_ai.agent.name"], a["gen_ai.agent.id"]) == ("Support desk", "support")
    assert (a["gen_ai.provider.name"], a["gen_ai.request.model"]) == ("scripted",
                                                                     "scripted-model")
    assert a["gen_ai.conversation.id"] == "thread-7"
    assert a["streamkit.run_id"] == result.run_id
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
            a["streamkit.usage.total_tokens"]) == (result.usage.input_tokens,
                                                   result.usage.output_tokens,
                                                   result.usage.total_tokens)
    assert a["gen_ai.response.finish_reasons"] == (result.finish_reason,)
    chats = in_order(spans, "chat scripted-model")
    for chat, step in zip(chats, result.steps, strict=True):
        c = attrs(chat)
        assert chat.kind is SpanKind.CLIENT
        assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.request.stream"] is True
        assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == \
            (step.usage.input_tokens, step.usage.output_tokens)
        assert c["gen_ai.response.finish_reasons"] == (step.finish_reason,)
        assert c["gen_ai.request.temperature"] == 0.2 and c["gen_ai.request.max_tokens"] == 50
        assert c["gen_ai.conversation.id"] == "thread-7"
    assert "gen_ai.response.time_to_first_chunk" in attrs(chats[1])  # the step with text
    assert "gen_ai.response.time_to_first_chunk" not in attrs(chats[0])  # a tool call only
    tool_span = one(spans, "execute_tool lookup")
    assert attrs(tool_span) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1", "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Look up an order."}
    steps = [one(spans, "step 0"), one(spans, "step 1")]
    assert [attrs(s)["streamkit.step.outcome"] for s in steps] == ["done", "done"]
    assert mirrored(spans) == trace_rows(result) and len(result.trace) == 5
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert not CONTENT_KEYS & {k for s in spans for k in attrs(s)}, "content captured by default"
    assert seen == ["tool"]


async def test_stream_spans_end_before_result_resolves(traced: Traced) -> None:
    agent = Agent(id="a", model=ScriptedModel([text("one two three")]))
    stream = agent.stream("hi")
    async for _ in stream:
        assert not named(traced.spans(), "invoke_agent a")  # still running
    result = await stream.result()
    assert outline(traced.spans()) == ["invoke_agent a", "  step 0", "    chat scripted-model"]
    assert result.text == "one two three"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk_size=st.integers(min_value=1, max_value=40), words=st.integers(1, 300))
def test_span_count_never_depends_on_chunk_count(chunk_size: int, words: int) -> None:
    provider, exporter = _provider()
    saved = _settings._settings
    instrument(provider)
    try:
        counter = P("counter", process_output_stream=lambda part: part)
        model = ScriptedModel([tool_call("lookup", {"order_id": "A1"}),
                               text(" ".join(["word"] * words), chunk_size=chunk_size)])
        agent = Agent(id="a", model=model, tools=[lookup], output_processors=[counter])
        result = asyncio.run(agent.generate("hi"))
    finally:
        _settings._settings = saved
    spans = exporter.get_finished_spans()
    assert len(spans) == 8 and sum(r.calls for r in result.trace) > words // chunk_size
    assert not any(s.events for s in spans)  # no span event per chunk either


INPUT_HOOKS = ("process_input", "process_input_step", "process_llm_request",
               "process_llm_response")
OUTPUT_HOOKS = ("process_output_stream", "process_output_step", "process_tool_result",
                "process_output_result")


def _passing(hook_name: str) -> Any:
    if hook_name == "process_output_stream":
        return lambda part: part
    return lambda: None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=st.sets(st.sampled_from(INPUT_HOOKS)), outputs=st.sets(st.sampled_from(OUTPUT_HOOKS)),
       tools=st.integers(0, 3), is_async=st.booleans())
def test_processor_spans_mirror_the_trace_one_to_one(inputs: set[str], outputs: set[str],
                                                     tools: int, is_async: bool) -> None:
    mode = "async" if is_async else "sync"
    inp = [P("inp", **{h: as_mode(_passing(h), mode) for h in inputs})] if inputs else []
    out = [P("out", **{h: as_mode(_passing(h), mode) for h in outputs})] if outputs else []
    script = [tool_call("lookup", {"order_id": str(i)}) for i in range(tools)]
    provider, exporter = _provider()
    saved = _settings._settings
    instrument(provider)
    try:
        agent = Agent(id="a", tools=[lookup], input_processors=inp, output_processors=out,
                      model=ScriptedModel([*script, text("done")]))
        result = asyncio.run(agent.generate("hi"))
    finally:
        _settings._settings = saved
    spans = exporter.get_finished_spans()
    assert mirrored(spans) == trace_rows(result)
    assert len(spans) == 1 + 2 * len(result.steps) + tools + len(result.trace)
    assert len({s.context.trace_id for s in spans}) == 1
    ids = {s.context.span_id for s in spans}
    assert all(s.parent is None or s.parent.span_id in ids for s in spans)


async def test_replayed_step_has_no_chat_span(traced: Traced) -> None:
    recorded = [c async for c in ScriptedModel([text("cached")]).stream(
        ModelRequest(prompt=[{"role": "user", "content": "hi"}]))]
    traced.clear()
    cache = P("cache", process_llm_request=lambda: {"response": recorded})
    agent = Agent(id="a", model=ScriptedModel([]), input_processors=[cache])
    result = await agent.generate("hi")
    spans = traced.spans()
    assert result.text == "cached"
    assert outline(spans) == ["invoke_agent a", "  step 0", "    process_llm_request cache"]
    assert attrs(one(spans, "step 0"))["streamkit.step.from_cache"] is True


# ----------------------------------------------------------------------------- tripwires


async def test_tripwire_is_recorded_and_is_not_an_error(traced: Traced, mode: str) -> None:
    def guard(part: Any, abort: Any) -> Any:
        if part.type == "text-delta" and "secret" in part.payload.text:
            abort("no secrets", metadata={"rule": "s"})
        return part

    agent = Agent(id="a", model=ScriptedModel([text("the secret plan")]),
                  output_processors=[P("guard", process_output_stream=as_mode(guard, mode))])
    result = await agent.generate("hi")
    spans = traced.spans()
    assert result.tripwire is not None
    assert outline(spans) == ["invoke_agent a", "  step 0", "    chat scripted-model",
                              "    process_output_stream guard"]
    a = attrs(one(spans, "invoke_agent a"))
    assert (a["streamkit.tripwire.processor_id"], a["streamkit.tripwire.reason"],
            a["streamkit.tripwire.retry"], a["streamkit.tripwire.hook"]) == \
        ("guard", "no secrets", False, "process_output_stream")
    p = attrs(one(spans, "process_output_stream guard"))
    assert (p["streamkit.processor.outcome"], p["streamkit.tripwire.reason"],
            p["streamkit.processor.retry"]) == ("tripwire", "no secrets", False)
    assert attrs(one(spans, "step 0"))["streamkit.step.outcome"] == "tripwire"
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert "gen_ai.output.messages" not in attrs(one(spans, "chat scripted-model"))
    assert mirrored(spans) == trace_rows(result)


async def test_tripwire_retry_starts_a_new_step_span(traced: Traced, mode: str) -> None:
    def check(messages: Any, abort: Any, retry_count: int) -> None:
        if retry_count == 0:
            abort("too short", retry=True)

    agent = Agent(id="a", model=ScriptedModel([text("no"), text("a longer answer")]),
                  output_processors=[P("len", process_output_step=as_mode(check, mode))],
                  max_processor_retries=2)
    result = await agent.generate("hi")
    spans = traced.spans()
    assert result.text == "a longer answer" and result.tripwire is None
    assert outline(spans) == [
        "invoke_agent a",
        "  step 0", "    chat scripted-model", "    process_output_step len",
        "  step 0", "    chat scripted-model", "    process_output_step len"]
    first, second = in_order(spans, "step 0")
    assert (attrs(first)["streamkit.step.outcome"], attrs(first)["streamkit.step.retry_count"]) \
        == ("retry", 0)
    assert (attrs(second)["streamkit.step.outcome"],
            attrs(second)["streamkit.step.retry_count"]) == ("done", 1)
    hooks = sorted((attrs(s)["streamkit.processor.outcome"], attrs(s)["streamkit.processor.retry"])
                   for s in named(spans, "process_output_step len"))
    assert hooks == [("ok", False), ("retry", True)]
    # Only the step that finished records its output; the withdrawn attempt's is not kept.
    traced.clear()
    instrument(traced.provider, capture_content=True)
    await agent.generate("hi", model=ScriptedModel([text("no"), text("a longer answer")]))
    outputs = [attrs(s).get("gen_ai.output.messages")
               for s in in_order(traced.spans(), "chat scripted-model")]
    assert outputs[0] is None and "a longer answer" in str(outputs[1])
    assert mirrored(spans) == trace_rows(result)


async def test_stream_tripwire_with_retry_marks_the_processor_span(traced: Traced) -> None:
    def guard(part: Any, abort: Any, retry_count: int) -> Any:
        if part.type == "text-delta" and retry_count == 0:
            abort("again", retry=True)
        return part

    agent = Agent(id="a", model=ScriptedModel([text("x"), text("y")]), max_processor_retries=1,
                  output_processors=[P("g", process_output_stream=guard)])
    result = await agent.generate("hi")
    rows = sorted((attrs(s)["streamkit.processor.outcome"], attrs(s)["streamkit.processor.retry"])
                  for s in named(traced.spans(), "process_output_stream g"))
    assert rows == [("ok", False), ("tripwire", True)] and result.text == "y"


# ----------------------------------------------------------------------------- errors


async def test_api_error_retried_by_an_error_processor(traced: Traced, mode: str) -> None:
    def on_error(error: Any) -> Any:
        return {"retry": True} if error.status_code == 429 else None

    agent = Agent(id="a", model=ScriptedModel([api_error(429, "slow down"), text("fine")]),
                  error_processors=[P("backoff", process_api_error=as_mode(on_error, mode))])
    result = await agent.generate("hi")
    spans = traced.spans()
    assert result.text == "fine"
    assert outline(spans) == ["invoke_agent a", "  step 0", "    chat scripted-model",
                              "    process_api_error backoff", "    chat scripted-model"]
    failed, ok = in_order(spans, "chat scripted-model")
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs(failed)["error.type"] == "429"
    # Content capture is off: the provider's error text is content (test_error_redaction.py).
    assert failed.events == () and failed.status.description is None
    assert ok.status.status_code is StatusCode.UNSET and "error.type" not in attrs(ok)
    handler = attrs(one(spans, "process_api_error backoff"))
    assert (handler["streamkit.processor.outcome"], handler["streamkit.processor.retry"]) == \
        ("changed", True)
    run = one(spans, "invoke_agent a")
    assert run.status.status_code is StatusCode.UNSET
    assert attrs(run)["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    assert mirrored(spans) == trace_rows(result)


class CutStream:
    """A model whose first stream ends without its ``finish`` (the loop's ``collect`` raises
    ``APICallError``); later calls play ``text(answer)``."""

    provider = "custom"
    model_id = "cut"

    def __init__(self, answer: str) -> None:
        self.calls = 0
        self.answer = answer

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self.calls += 1
        inner = ScriptedModel([text(self.answer)]).stream(request)
        return _without_finish(inner) if self.calls == 1 else inner


async def _without_finish(source: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for chunk in source:
        if chunk.type != "finish":
            yield chunk


async def test_stream_cut_before_its_finish_fails_that_chat_span(traced: Traced) -> None:
    agent = Agent(id="a", model=CutStream("whole answer"), error_processors=[
        P("again", process_api_error=lambda error: {"retry": True})])
    result = await agent.generate("hi")
    spans = traced.spans()
    assert result.text == "whole answer"
    cut, whole = in_order(spans, "chat cut")
    assert cut.status.status_code is StatusCode.ERROR and attrs(cut)["error.type"] == "APICallError"
    assert whole.status.status_code is StatusCode.UNSET
    assert outline(spans) == ["invoke_agent a", "  step 0", "    chat cut",
                              "    process_api_error again", "    chat cut"]


async def test_unrecovered_api_error_fails_chat_step_and_run(traced: Traced, mode: str) -> None:
    looked = P("look", process_api_error=as_mode(lambda error: None, mode))
    agent = Agent(id="a", model=ScriptedModel([api_error(503, "down")]),
                  error_processors=[looked])
    with pytest.raises(APICallError):
        await agent.generate("hi")
    spans = traced.spans()
    assert outline(spans) == ["invoke_agent a", "  step 0", "    chat scripted-model",
                              "    process_api_error look"]
    run, chat = one(spans, "invoke_agent a"), one(spans, "chat scripted-model")
    for span in (run, chat):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "503"
    assert attrs(one(spans, "step 0"))["streamkit.step.outcome"] == "error"
    assert attrs(one(spans, "process_api_error look"))["streamkit.processor.retry"] is False
    assert attrs(run)["gen_ai.response.finish_reasons"] == ("error",)


async def test_processor_error_fails_its_span_and_the_run(traced: Traced, mode: str) -> None:
    def broken(messages: Any) -> None:
        raise ValueError("bad input")

    agent = Agent(id="a", model=ScriptedModel([text("x")]),
                  input_processors=[P("broken", process_input=as_mode(broken, mode))])
    with pytest.raises(ProcessorError):
        await agent.generate("hi")
    spans = traced.spans()
    assert outline(spans) == ["invoke_agent a", "  process_input broken"]
    run, hook_span = one(spans, "invoke_agent a"), one(spans, "process_input broken")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == "ProcessorError"
    assert hook_span.status.status_code is StatusCode.ERROR
    assert attrs(hook_span)["streamkit.processor.outcome"] == "error"


async def test_raising_tool_fails_its_span_only(traced: Traced) -> None:
    @tool
    def explode(order_id: str) -> str:
        """Always fails."""
        raise ValueError(f"order {order_id} is cursed")

    agent = Agent(id="a", tools=[explode], model=ScriptedModel(
        [tool_call("explode", {"order_id": "A1"}), tool_call("missing", {}), text("sorry")]))
    result = await agent.generate("hi")
    spans = traced.spans()
    failed = one(spans, "execute_tool explode")
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs(failed)["error.type"] == "ValueError"
    assert "cursed" not in every_value(spans)  # the tool's message is content: off by default
    assert attrs(one(spans, "execute_tool missing"))["error.type"] == "ToolError"
    assert one(spans, "invoke_agent a").status.status_code is StatusCode.UNSET
    assert result.text == "sorry"


async def test_model_that_cannot_start_fails_the_chat_span(traced: Traced) -> None:
    agent = Agent(id="a", model=ScriptedModel([]))
    with pytest.raises(Exception, match="scripted step"):
        await agent.generate("hi")
    chat = one(traced.spans(), "chat scripted-model")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "ScriptExhausted"


async def test_closing_early_ends_every_span(traced: Traced) -> None:
    agent = Agent(id="a", model=ScriptedModel([text("one two three four")]))
    stream = agent.stream("hi")
    async for chunk in stream:
        if chunk.type == "text-delta":
            break
    await stream.aclose()
    spans = traced.spans()
    assert outline(spans) == ["invoke_agent a", "  step 0", "    chat scripted-model"]
    run = one(spans, "invoke_agent a")
    assert attrs(run)["streamkit.run.closed_early"] is True
    assert run.status.status_code is StatusCode.UNSET
    assert attrs(one(spans, "step 0"))["streamkit.step.outcome"] == "closed"


# ----------------------------------------------------------------------------- content


SECRET_EMAIL = "ada.lovelace@example.com"
SECRET_CARD = "4111 1111 1111 1111"


@tool
def account(email: str) -> dict[str, str]:
    """The account of an email address."""
    return {"owner": SECRET_EMAIL, "card": SECRET_CARD}


def _leaky_model() -> ScriptedModel:
    return ScriptedModel([tool_call("account", {"email": SECRET_EMAIL}),
                          text(f"Your card {SECRET_CARD} is on file for {SECRET_EMAIL}.")])


async def test_content_capture_records_only_what_processors_left(traced: Traced) -> None:
    instrument(traced.provider, capture_content=True)
    pii = PIIDetector(detection_types=["email", "credit-card"])
    agent = Agent(id="a", tools=[account], model=_leaky_model(), input_processors=[pii],
                  output_processors=[pii])
    result = await agent.generate(f"I am {SECRET_EMAIL}, card {SECRET_CARD}. My account?")
    spans = traced.spans()
    values = every_value(spans)
    for secret in (SECRET_EMAIL, SECRET_CARD, "ada.lovelace", "1111 1111 1111 1111"):
        assert secret not in values
    assert SECRET_EMAIL not in result.text
    # The content is there, redacted: the prompt as sent, the answer, the tool's exchange.
    chats = in_order(spans, "chat scripted-model")
    assert "**** **** **** 1111" in attrs(chats[0])["gen_ai.input.messages"]
    assert "**** **** **** 1111" in attrs(chats[1])["gen_ai.output.messages"]
    tool_span = attrs(one(spans, "execute_tool account"))
    assert "example.com" not in tool_span["gen_ai.tool.call.arguments"]
    assert "**** **** **** 1111" in tool_span["gen_ai.tool.call.result"]


async def test_content_capture_without_a_guard_shows_the_values(traced: Traced) -> None:
    """The control for the test above: the same run with no guard puts the secret on spans,
    so the absence there is the guard's doing."""
    instrument(traced.provider, capture_content=True)
    agent = Agent(id="a", tools=[account], model=_leaky_model())
    await agent.generate(f"I am {SECRET_EMAIL}.")
    spans = traced.spans()
    values = every_value(spans)
    assert SECRET_EMAIL in values and SECRET_CARD in values
    keys = {k for s in spans for k in attrs(s)}
    assert CONTENT_KEYS - {"gen_ai.system_instructions"} <= keys


@pytest.mark.parametrize(("env", "captured"), [
    pytest.param("true", True, id="env-true"), pytest.param("TRUE", True, id="env-upper"),
    pytest.param("false", False, id="env-false"), pytest.param(None, False, id="env-unset")])
async def test_content_capture_follows_the_environment(traced: Traced, env: str | None,
                                                       captured: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    instrument(traced.provider)  # capture_content=None: read at each run
    if env is None:
        monkeypatch.delenv(_settings.CAPTURE_ENV, raising=False)
    else:
        monkeypatch.setenv(_settings.CAPTURE_ENV, env)
    await Agent(id="a", model=ScriptedModel([text("hello")])).generate("hi")
    chat = attrs(one(traced.spans(), "chat scripted-model"))
    assert ("gen_ai.input.messages" in chat) is captured
    assert ("gen_ai.output.messages" in chat) is captured


async def test_explicit_capture_off_wins_over_the_environment(
        traced: Traced, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_settings.CAPTURE_ENV, "true")
    instrument(traced.provider, capture_content=False)
    await Agent(id="a", model=ScriptedModel([text("hello")])).generate("hi")
    assert not CONTENT_KEYS & {k for s in traced.spans() for k in attrs(s)}


# ----------------------------------------------------------------------------- context


async def test_run_nests_under_the_callers_span(traced: Traced) -> None:
    caller = traced.provider.get_tracer("app")
    agent = Agent(id="a", model=ScriptedModel([text("hello there")]))
    with caller.start_as_current_span("handle request") as parent:
        await agent.generate("hi")
        stream = agent.stream("again", model=ScriptedModel([text("streamed")]))
    # A stream belongs to the span current when stream() was called, wherever it is read.
    async for _ in stream:
        assert trace.get_current_span() is trace.INVALID_SPAN  # the run attached nothing
    spans = traced.spans()
    runs = named(spans, "invoke_agent a")
    assert len(runs) == 2
    for run in runs:
        assert run.parent is not None and run.parent.span_id == parent.get_span_context().span_id
        assert run.context.trace_id == parent.get_span_context().trace_id
    assert outline(spans)[:1] == ["handle request"]


async def test_spans_a_tool_makes_nest_under_its_execute_tool_span(traced: Traced) -> None:
    inner = traced.provider.get_tracer("tool-lib")

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        with inner.start_as_current_span("GET"):
            return "page"

    agent = Agent(id="a", tools=[fetch],
                  model=ScriptedModel([tool_call("fetch", {"url": "u"}), text("done")]))
    with inner.start_as_current_span("request"):
        await agent.generate("hi")
        assert trace.get_current_span().name == "request"  # type: ignore[attr-defined]
    spans = traced.spans()
    get, tool_span = one(spans, "GET"), one(spans, "execute_tool fetch")
    assert get.parent is not None and get.parent.span_id == tool_span.context.span_id


async def test_a_run_inside_a_tool_nests_under_the_tool(traced: Traced) -> None:
    helper = Agent(id="helper", model=ScriptedModel([text("sub-answer")]))

    @tool
    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return (await helper.generate(question)).text

    agent = Agent(id="main", tools=[ask_helper],
                  model=ScriptedModel([tool_call("ask_helper", {"question": "q"}), text("ok")]))
    await agent.generate("hi")
    assert outline(traced.spans()) == [
        "invoke_agent main", "  step 0", "    chat scripted-model",
        "    execute_tool ask_helper", "      invoke_agent helper", "        step 0",
        "          chat scripted-model", "  step 1", "    chat scripted-model"]


async def test_concurrent_runs_never_share_a_trace(traced: Traced) -> None:
    agent = Agent(id="a", tools=[lookup])

    async def one_run(i: int) -> str:
        model = ScriptedModel([tool_call("lookup", {"order_id": str(i)}), text(f"answer {i}")])
        return (await agent.generate("hi", model=model)).run_id

    run_ids = await asyncio.gather(*(one_run(i) for i in range(6)))
    spans = traced.spans()
    runs = named(spans, "invoke_agent a")
    assert sorted(attrs(r)["streamkit.run_id"] for r in runs) == sorted(run_ids)
    assert len({r.context.trace_id for r in runs}) == 6
    for run in runs:
        mine = [s for s in spans if s.context.trace_id == run.context.trace_id]
        assert outline(mine) == ["invoke_agent a", "  step 0", "    chat scripted-model",
                                 "    execute_tool lookup", "  step 1",
                                 "    chat scripted-model"]


async def test_two_streams_read_alternately_in_one_task_keep_their_trees(
        traced: Traced) -> None:
    agent = Agent(id="a")
    first = agent.stream("hi", model=ScriptedModel([text("a b c d e f")]))
    second = agent.stream("hi", model=ScriptedModel([text("u v w x y z")]))
    ita, itb = first.__aiter__(), second.__aiter__()
    done = set()
    while len(done) < 2:
        for name, it in (("a", ita), ("b", itb)):
            if name in done:
                continue
            try:
                await it.__anext__()
            except StopAsyncIteration:
                done.add(name)
            assert trace.get_current_span() is trace.INVALID_SPAN
    spans = traced.spans()
    runs = named(spans, "invoke_agent a")
    assert len({r.context.trace_id for r in runs}) == 2
    for run in runs:
        mine = [s for s in spans if s.context.trace_id == run.context.trace_id]
        assert outline(mine) == ["invoke_agent a", "  step 0", "    chat scripted-model"]


# ----------------------------------------------------------------------------- switching


async def test_uninstrument_stops_tracing_and_instrument_resumes(traced: Traced) -> None:
    agent = Agent(id="a", model=ScriptedModel([text("x"), text("y")]))
    uninstrument()
    stream = agent.stream("hi")
    assert stream._run.tracer is NOOP
    await stream.result()
    assert traced.spans() == []
    instrument(traced.provider)
    await agent.generate("hi")
    assert [s.name for s in traced.spans() if s.parent is None] == ["invoke_agent a"]


async def test_no_processor_spans_when_the_trace_is_off(traced: Traced) -> None:
    agent = Agent(id="a", model=ScriptedModel([text("x")]),
                  output_processors=[P("p", process_output_stream=lambda part: part)])
    result = await agent.generate("hi", trace=False)
    assert result.trace == [] and mirrored(traced.spans()) == []
    assert outline(traced.spans()) == ["invoke_agent a", "  step 0", "    chat scripted-model"]


@pytest.mark.parametrize(("kwargs", "expected"), [
    pytest.param({"tracer_provider": object()}, "TracerProvider", id="not-a-provider"),
    pytest.param({"capture_content": "yes"}, "capture_content", id="capture-not-bool")])
def test_instrument_rejects_bad_arguments(kwargs: dict[str, Any], expected: str) -> None:
    saved = _settings._settings
    try:
        with pytest.raises(InvalidType, match=expected):
            instrument(**kwargs)
        assert _settings._settings is saved  # nothing changed
    finally:
        _settings._settings = saved


def _python(*parts: str) -> str:
    """Run the parts (each dedented) as one script in a fresh interpreter; its stdout."""
    code = "\n".join(textwrap.dedent(part) for part in parts)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


_RUN = """
    import asyncio, sys
    from streamkit import Agent
    from streamkit.testing import ScriptedModel, text
    agent = Agent(id="a", model=ScriptedModel([text("hi"), text("hi")]))
    assert asyncio.run(agent.generate("x")).text == "hi"
"""


def test_without_opentelemetry_nothing_is_imported_and_instrument_says_why() -> None:
    out = _python("""
        import sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
    """, _RUN, """
        import streamkit.tracing
        from streamkit.errors import UsageError
        loaded = [m for m, mod in sys.modules.items()
                  if m.startswith("opentelemetry") and mod is not None]
        try:
            streamkit.tracing.instrument()
        except UsageError as exc:
            print(loaded, "|", exc)
    """)
    loaded, message = out.split(" | ")
    assert loaded == "[]" and "streamkit-agents[otel]" in message


def test_installed_but_unused_opentelemetry_is_never_imported() -> None:
    out = _python(_RUN, """
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        import opentelemetry.trace  # now loaded, but no provider is set
        stream = agent.stream("x")
        from streamkit.agent._observe import NOOP
        print(stream._run.tracer is NOOP)
    """)
    assert out.splitlines() == ["[]", "True"]


def test_a_global_provider_turns_tracing_on_without_instrument() -> None:
    out = _python("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    """, _RUN, """
        print(sorted(s.name for s in exporter.get_finished_spans()))
        import streamkit.tracing
        streamkit.tracing.uninstrument()
        exporter.clear()
        asyncio.run(agent.generate("x"))
        print(len(exporter.get_finished_spans()))
    """)
    assert out.splitlines() == ["['chat scripted-model', 'invoke_agent a', 'step 0']", "0"]


async def test_readme_tree_is_what_the_demo_emits(traced: Traced) -> None:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```\n(invoke_agent Support.+?)\n```", readme, re.S)
    assert block is not None, "README's tracing section lost its tree"
    shown = []
    for line in block.group(1).splitlines():
        name = re.sub(r"^[│├└─ ]*", "", line).split("  ")[0]
        depth = (len(line) - len(re.sub(r"^[│├└─ ]*", "", line))) // 3
        shown.append("  " * depth + name)
    await build_agent().generate("Where is my order? I'm customer C-42.", thread_id="t-1")
    assert outline(traced.spans()) == shown
