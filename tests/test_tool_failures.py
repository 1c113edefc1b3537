"""A tool that raises (issue 27, point 4): the model gets the exception's message only, as in
Mastra; the developer gets the full traceback through ``logging`` (``streamkit.tools``, ERROR,
tool name and call id), in ``result.trace`` and as the ``execute_tool`` span's error status."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streamkit import Agent, tool
from streamkit.testing import ScriptedModel, text, tool_call

from .conftest import as_mode, run_stream


def _fetch_inventory(sku: str) -> str:
    raise RuntimeError("service unavailable")


def _flaky_tool(mode: str) -> Any:
    def check_stock(sku: str) -> str:
        """Checks the stock of a product."""
        return _fetch_inventory(sku)

    return tool(as_mode(check_stock, mode))


async def _run(mode: str) -> tuple[list[Any], Any, ScriptedModel]:
    model = ScriptedModel([tool_call("check_stock", {"sku": "A1"}, id="call_7"), text("sorry")])
    agent = Agent(id="a", model=model, tools=[_flaky_tool(mode)])
    chunks, result = await run_stream(agent)
    return chunks, result, model


async def test_the_model_reads_the_message_only(mode: str) -> None:
    chunks, result, model = await _run(mode)
    (tool_msg,) = [m for m in model.requests[1].prompt if m["role"] == "tool"]
    (item,) = tool_msg["content"]
    assert item["isError"] is True and item["result"] == "service unavailable"
    # The stored turn and the result say the same; the type stays on the chunk's error object.
    assert result.steps[0].tool_results[0]["result"] == "service unavailable"
    (part,) = [p for m in result.messages for p in m.content.parts
               if getattr(p, "type", "") == "tool-invocation"]
    assert part.tool_invocation.error_text == "service unavailable"
    (err,) = [c for c in chunks if c.type == "tool-error"]
    assert err.payload.error == {"name": "RuntimeError", "message": "service unavailable"}
    assert result.text == "sorry"


async def test_the_developer_gets_the_traceback_in_the_log(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="streamkit.tools"):
        await _run(mode)
    (record,) = [r for r in caplog.records if r.name == "streamkit.tools"]
    assert record.levelno == logging.ERROR
    message = record.getMessage()
    assert "'check_stock'" in message and "call_7" in message
    assert "RuntimeError: service unavailable" in message
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    # The formatted record carries the frames of the developer's own code.
    assert "_fetch_inventory" in caplog.text and "Traceback" in caplog.text


async def test_the_trace_records_the_failure_with_its_traceback(mode: str) -> None:
    _, result, _ = await _run(mode)
    (rec,) = [r for r in result.trace if r.hook == "execute_tool"]
    assert (rec.processor_id, rec.step, rec.outcome) == ("check_stock", 0, "error")
    assert rec.detail is not None and "call_7" in rec.detail
    assert "Traceback" in rec.detail and "_fetch_inventory" in rec.detail
    assert rec.detail.rstrip().endswith("RuntimeError: service unavailable")
    assert {"processor": "check_stock", "hook": "execute_tool", "outcome": "error"}.items() <= \
        result.trace_table()[-1].items()


async def test_a_streamkit_tool_error_is_a_warning_without_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([tool_call("nope", {}, id="call_9"), text("sorry")])
    with caplog.at_level(logging.INFO, logger="streamkit.tools"):
        result = await Agent(id="a", model=model, tools=[_flaky_tool("sync")]).generate("hi")
    (record,) = [r for r in caplog.records if r.name == "streamkit.tools"]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "call_9" in record.getMessage() and "unknown tool 'nope'" in record.getMessage()
    (rec,) = [r for r in result.trace if r.hook == "execute_tool"]
    assert rec.outcome == "error" and "Traceback" not in (rec.detail or "")
    assert result.steps[0].tool_results[0]["result"].startswith("unknown tool 'nope'")


async def test_a_message_less_exception_gives_the_model_its_type() -> None:
    @tool
    def broken() -> str:
        """Fails without a word."""
        raise KeyError

    model = ScriptedModel([tool_call("broken", {}), text("sorry")])
    result = await Agent(id="a", model=model, tools=[broken]).generate("hi")
    assert result.steps[0].tool_results[0]["result"] == "KeyError"


def test_the_execute_tool_span_fails_with_the_type_and_no_text(mode: str) -> None:
    pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk (test extra) missing")
    import asyncio

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from streamkit.tracing import _settings, instrument

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = _settings._settings
    instrument(provider, capture_content=False)  # issue 26: no error text without capture
    try:
        asyncio.run(_run(mode))
    finally:
        _settings._settings = saved
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool check_stock"]
    assert span.status.status_code is StatusCode.ERROR and span.status.description is None
    assert (span.attributes or {})["error.type"] == "RuntimeError" and not span.events
