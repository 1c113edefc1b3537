"""The span tree of a traced run (``docs/tracing.md``, "The span tree"), built from the calls
``RunTracer`` defines.

::

    invoke_agent {agent}                      the run; child of the caller's span at stream()
    ├─ process_input {processor}              one span per result.trace record, one to one
    ├─ step {n}                               one per step attempt (entering process_input_step)
    │   ├─ process_input_step / process_llm_request {processor}
    │   ├─ chat {model}           CLIENT      one per model call: an API retry is a new one
    │   ├─ process_api_error {processor}      after a failed chat
    │   ├─ process_output_stream {processor}  one per processor per step (calls, dropped)
    │   ├─ process_llm_response / process_output_step {processor}
    │   └─ execute_tool {tool}                one per tool call; process_tool_result inside
    └─ process_output_result {processor}

Every span gets an explicit parent context: the run never makes a span "current" in the
consumer's context, because the run is an async generator and the consumer runs its own code
(and other runs) between chunks. The one exception is a tool's own task, where the tool's span
is attached while the tool runs (and detached in that task), so spans the tool makes nest under
it. Spans the model client makes (an instrumented HTTP library) run in the consumer's context
and nest under the caller's span, not under ``chat``.

Decisions the spec leaves open:

* A retry asked for by ``process_api_error`` stays in its step span (a second ``chat`` span
  follows the failed one); a tripwire retry starts a new step span (it re-enters
  ``process_input_step``), with ``streamkit.step.retry_count``.
* A step answered by ``process_llm_request``'s replay (a cache hit) has no ``chat`` span (no
  model was called); its step span says ``streamkit.step.from_cache``.
* ``gen_ai.response.time_to_first_chunk`` is measured to the first text delta the consumer
  received (after the output processors, hold-back included), from the start of the call.
* ``gen_ai.output.messages`` is recorded only for a step that finished (not tripped, not
  retried, not failed); so the ``chat`` span is ended at the step's end with the end time the
  call had.
* A stream processor's span covers the stream it watched (from the step's first stream to its
  record); the time spent inside its hook is ``streamkit.processor.duration``.
* Error text is content: spans hold only what a client could have seen. With content capture
  off a failed span has status ERROR and ``error.type`` and nothing more (no description, no
  ``exception`` event: a provider's error text or a tool's exception can quote the data they
  were given). With it on, the description and an ``exception`` event (type and message, no
  stack trace: a chained cause would carry the raw text) hold the text the client was shown —
  the run's error chunk after the output processors (``agent/_shown``), a tool's error as its
  ``tool-error`` chunk was delivered. A processor's span never carries its error's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import __version__
from ..errors import APICallError
from ..processors._runtime import TraceRecord
from ._content import input_messages, output_messages, to_json
from ._tracer import NOOP, RunTracer

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..agent._run import Run

__all__ = ["SpanTracer", "tracer_for", "error_type"]

_INTERNAL, _CLIENT = SpanKind.INTERNAL, SpanKind.CLIENT

#: Where a step ends when the loop leaves it other than by ``step_finish``.
_STEP_EXITS = {"retry": "retry", "tripwire": "tripwire", "fail": "error"}

#: ``model_settings`` spellings (streamkit/Mastra, as the providers accept them) → attributes.
_SETTINGS = {
    "temperature": "gen_ai.request.temperature", "max_tokens": "gen_ai.request.max_tokens",
    "maxTokens": "gen_ai.request.max_tokens", "max_output_tokens": "gen_ai.request.max_tokens",
    "maxOutputTokens": "gen_ai.request.max_tokens", "top_p": "gen_ai.request.top_p",
    "topP": "gen_ai.request.top_p", "top_k": "gen_ai.request.top_k",
    "topK": "gen_ai.request.top_k", "stop": "gen_ai.request.stop_sequences",
    "stop_sequences": "gen_ai.request.stop_sequences",
    "stopSequences": "gen_ai.request.stop_sequences", "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "frequencyPenalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "presencePenalty": "gen_ai.request.presence_penalty",
}

_cached: tuple[Any, trace.Tracer] | None = None


def tracer_for(provider: Any, capture: bool) -> RunTracer:
    """A ``SpanTracer`` for one run, or ``NOOP`` when ``provider`` (default: the global one)
    would record nothing (none set, or a no-op provider)."""
    global _cached
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return NOOP
    cached = _cached
    if cached is not None and cached[0] is provider:
        tracer = cached[1]
    else:
        tracer = provider.get_tracer("streamkit", __version__)
        _cached = (provider, tracer)
    if isinstance(tracer, trace.NoOpTracer):
        return NOOP
    return SpanTracer(tracer, capture, otel_context.get_current())


def error_type(exc: BaseException) -> str:
    """``error.type``: the HTTP status of an ``APICallError`` that has one, else the class name
    (low cardinality, as the conventions ask)."""
    if isinstance(exc, APICallError) and exc.status_code is not None:
        return str(exc.status_code)
    return type(exc).__name__


def _set_error(span: Span, exc: BaseException, text: str | None) -> None:
    """Status ERROR and ``error.type``; ``text`` (what the client was shown, or ``None``) as the
    description and an ``exception`` event."""
    span.set_attribute("error.type", error_type(exc))
    span.set_status(Status(StatusCode.ERROR, text))
    if text is not None:
        span.add_event("exception", {"exception.type": type(exc).__name__,
                                     "exception.message": text})


def _model_attrs(model: Any) -> tuple[str, str]:
    provider = getattr(model, "provider", None)
    model_id = getattr(model, "model_id", None)
    return (provider if isinstance(provider, str) and provider else "unknown",
            model_id if isinstance(model_id, str) else "")


def _setting(value: Any) -> Any:
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


@contextlib.contextmanager
def _attached(ctx: Context) -> Iterator[None]:
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


class SpanTracer(RunTracer):
    """The span tree of one run. Created when the run is (``parent`` is the caller's context
    then); every span it starts has an explicit parent, so no context is attached across the
    run's yields and concurrent runs never share a span."""

    __slots__ = ("_tracer", "_capture", "_parent", "_run", "_run_span", "_run_ctx",
                 "_step_span", "_step_ctx", "_stream_start", "_chat_span", "_chat_perf",
                 "_chat_end", "_tools", "_tool_now", "_records")

    def __init__(self, tracer: trace.Tracer, capture: bool, parent: Context) -> None:
        self._tracer = tracer
        self._capture = capture
        self._parent = parent
        self._run: Run | None = None
        self._run_span: Span | None = None
        self._run_ctx = parent
        self._step_span: Span | None = None
        self._step_ctx: Context | None = None
        self._stream_start = 0
        self._chat_span: Span | None = None
        self._chat_perf = 0
        self._chat_end = 0
        self._tools: dict[str, tuple[Span, Context]] = {}
        self._tool_now: str | None = None
        # Trace records waiting for the next transition (a process_api_error record learns
        # there whether its retry was granted): (record, start ns, end ns, parent, retry).
        self._records: list[tuple[TraceRecord, int, int, Context, bool]] = []

    # ------------------------------------------------------------------ the run

    def begin(self, run: Run) -> None:
        cfg = run.config
        name = cfg.agent_name or cfg.agent_id
        provider, model_id = _model_attrs(cfg.model)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
            "gen_ai.agent.id": cfg.agent_id, "gen_ai.provider.name": provider,
            "gen_ai.request.model": model_id, "streamkit.run_id": run.run_id}
        if cfg.thread_id is not None:
            attrs["gen_ai.conversation.id"] = cfg.thread_id
        span = self._tracer.start_span(f"invoke_agent {name}", context=self._parent,
                                       kind=_INTERNAL, attributes=attrs)
        self._run, self._run_span = run, span
        self._run_ctx = trace.set_span_in_context(span, self._parent)
        run.runtime.on_record = self._record

    def end(self, run: Run, exc: BaseException | None) -> None:
        span = self._run_span
        if span is None:
            return
        self._run_span = None
        self._flush(None, None)
        st = run.state
        closed = isinstance(exc, (GeneratorExit, asyncio.CancelledError))
        failed = st.error if st.error is not None else None if closed else exc
        if isinstance(failed, APICallError):
            self._chat_failed(failed)
        self._end_step(run, "error" if failed is not None else "closed" if closed else "done")
        if span.is_recording():
            usage = st.usage
            span.set_attributes({
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "streamkit.usage.total_tokens": usage.total_tokens,
                "gen_ai.response.finish_reasons": [st.finish_reason]})
            tw = st.tripwire
            if tw is not None:
                # A guard doing its job is not an error: the status stays unset.
                span.set_attributes({"streamkit.tripwire.processor_id": tw.processor_id or "",
                                     "streamkit.tripwire.reason": tw.reason,
                                     "streamkit.tripwire.retry": tw.retry,
                                     "streamkit.tripwire.hook": tw.hook or ""})
            if closed:
                span.set_attribute("streamkit.run.closed_early", True)
        if failed is not None:
            _set_error(span, failed, self._shown(failed))
        span.end()
        run.runtime.on_record = None
        self._run = None

    def transition(self, run: Run, node: str, nxt: str) -> None:
        if self._records:
            self._flush(node, nxt)
        # What ends first (a step's end comes before the next step's start).
        if nxt == "process_api_error":  # from model, process_output_stream or collect
            error = run.state.step.api_error if run.state.step is not None else None
            if error is not None:
                self._chat_failed(error)
        elif node == "collect":
            self._chat_done(run)
        elif node == "process_tool_result":
            self._end_tools(run)
        elif node == "model" and nxt == "fail" and run.state.error is not None:
            self._chat_failed(run.state.error)  # the model could not even start its stream
        exit_ = _STEP_EXITS.get(nxt)
        if exit_ is not None:
            self._end_step(run, exit_)
        elif node == "step_finish":
            self._end_step(run, "done")
        # What starts.
        if nxt == "process_input_step":
            self._start_step(run)
        elif nxt == "model":
            self._start_chat(run)
        elif nxt == "process_output_stream":
            if node == "process_llm_request" and self._step_span is not None:
                self._step_span.set_attribute("streamkit.step.from_cache", True)
            if not self._stream_start:
                self._stream_start = time.time_ns()
        elif nxt == "tools":
            self._start_tools(run)

    # ------------------------------------------------------------------ steps and model calls

    def _in_step(self) -> Context:
        """The parent of what happens in a step: the step's span, else the run's."""
        return self._step_ctx if self._step_ctx is not None else self._run_ctx

    def _start_step(self, run: Run) -> None:
        self._end_step(run, "done")  # never two open steps (the graph does not allow it)
        st = run.state
        span = self._tracer.start_span(
            f"step {st.step_number}", context=self._run_ctx, kind=_INTERNAL,
            attributes={"streamkit.step.number": st.step_number,
                        "streamkit.step.retry_count": st.retry_count})
        self._step_span = span
        self._step_ctx = trace.set_span_in_context(span, self._run_ctx)

    def _end_step(self, run: Run, outcome: str) -> None:
        span = self._step_span
        if span is None:
            return
        self._end_tools(run)
        self._end_chat(run, delivered=outcome == "done")
        span.set_attribute("streamkit.step.outcome", outcome)
        span.end()
        self._step_span = self._step_ctx = None
        self._stream_start = 0

    def _start_chat(self, run: Run) -> None:
        self._end_chat(run, delivered=False)  # never two open calls (the graph does not allow it)
        st = run.state
        step = run.step
        provider, model_id = _model_attrs(step.model)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
            "gen_ai.request.model": model_id, "gen_ai.request.stream": True,
            "streamkit.step.number": st.step_number}
        if run.config.thread_id is not None:
            attrs["gen_ai.conversation.id"] = run.config.thread_id
        if step.structured_output is not None:
            attrs["gen_ai.output.type"] = "json"
        for key, value in step.model_settings.items():
            name = _SETTINGS.get(key)
            setting = _setting(value) if name is not None else None
            if name is not None and setting is not None:
                attrs[name] = [setting] if name.endswith("stop_sequences") and \
                    isinstance(setting, str) else setting
        span = self._tracer.start_span(f"chat {model_id}" if model_id else "chat",
                                       context=self._in_step(), kind=_CLIENT, attributes=attrs)
        if self._capture and span.is_recording():
            span.set_attribute("gen_ai.input.messages", input_messages(step.prompt))
        self._chat_span = span
        self._chat_perf = time.perf_counter_ns()
        self._chat_end = 0

    def _chat_done(self, run: Run) -> None:
        """The call's stream ended: what it returned. The span ends with its step."""
        span = self._chat_span
        if span is None:
            return  # a replayed step: no model was called
        step = run.step
        self._chat_end = time.time_ns()
        if span.is_recording():
            span.set_attributes({
                "gen_ai.usage.input_tokens": step.usage.input_tokens,
                "gen_ai.usage.output_tokens": step.usage.output_tokens,
                "gen_ai.response.finish_reasons": [step.finish_reason]})
            rec = step.recorder
            if rec is not None and rec.first_text_ns > self._chat_perf:
                span.set_attribute("gen_ai.response.time_to_first_chunk",
                                   (rec.first_text_ns - self._chat_perf) / 1e9)

    def _shown(self, exc: BaseException) -> str | None:
        """With content capture, the text a client was shown of ``exc``; else ``None``."""
        run = self._run
        return run.shown_text(exc) if self._capture and run is not None else None

    def _chat_failed(self, exc: BaseException) -> None:
        span = self._chat_span
        if span is None:
            return
        self._chat_span = None
        _set_error(span, exc, self._shown(exc))
        span.end()

    def _end_chat(self, run: Run, *, delivered: bool) -> None:
        span = self._chat_span
        if span is None:
            return
        self._chat_span = None
        if delivered and self._chat_end and self._capture and span.is_recording():
            step = run.step
            span.set_attribute("gen_ai.output.messages", output_messages(
                step.text, step.reasoning, step.tool_calls, step.finish_reason))
        span.end(end_time=self._chat_end or None)

    # ------------------------------------------------------------------ tools

    def _start_tools(self, run: Run) -> None:
        step = run.step
        ctx = self._in_step()
        for call in step.tool_calls:
            name, cid = call["tool_name"], call["tool_call_id"]
            attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                     "gen_ai.tool.name": name, "gen_ai.tool.call.id": cid,
                                     "gen_ai.tool.type": "function"}
            description = getattr(step.tools.get(name), "description", None)
            if isinstance(description, str) and description:
                attrs["gen_ai.tool.description"] = description
            span = self._tracer.start_span(f"execute_tool {name}", context=ctx, kind=_INTERNAL,
                                           attributes=attrs)
            if self._capture and span.is_recording():
                span.set_attribute("gen_ai.tool.call.arguments", to_json(call["args"]))
            previous = self._tools.get(cid)
            if previous is not None:  # a model reused a call id: keep both spans whole
                previous[0].end()
            self._tools[cid] = (span, trace.set_span_in_context(span, ctx))

    def tool_context(self, tool_call_id: str) -> AbstractContextManager[None]:
        entry = self._tools.get(tool_call_id)
        return super().tool_context(tool_call_id) if entry is None else _attached(entry[1])

    def tool_hooks(self, tool_call_id: str) -> None:
        self._tool_now = tool_call_id

    def _end_tools(self, run: Run) -> None:
        """End every open tool span: failed ones with ``error.type``; with content capture,
        the result as the consumer received it (after ``process_tool_result`` and the stream
        processors; none when a processor dropped it)."""
        if not self._tools:
            return
        step = run.state.step
        outcomes = {o.call.tool_call_id: (o.ok, o.value) for o in step.tool_outcomes} \
            if step is not None else {}
        delivered = {r["tool_call_id"]: r for r in step.tool_results} if step is not None else {}
        for cid, (span, _) in self._tools.items():
            outcome = outcomes.get(cid)
            got = delivered.get(cid)
            if outcome is not None and not outcome[0]:
                # The error as its tool-error chunk was delivered (after the guards), not the
                # exception the tool raised.
                shown = got["result"] if got is not None and got["is_error"] else None
                _set_error(span, outcome[1], to_json(shown) if self._capture and
                           shown is not None else None)
            if got is not None and self._capture and span.is_recording():
                span.set_attribute("gen_ai.tool.call.result", to_json(got["result"]))
            span.end()
        self._tools = {}
        self._tool_now = None

    # ------------------------------------------------------------------ processor spans

    def _record(self, rec: TraceRecord) -> None:
        """A ``result.trace`` record was added: its span is made at the next transition."""
        end = time.time_ns()
        if rec.step is None:
            ctx = self._run_ctx
        elif rec.hook == "process_tool_result" and self._tool_now in self._tools:
            ctx = self._tools[self._tool_now][1]
        else:
            ctx = self._in_step()
        retry = rec.outcome == "retry"
        if rec.hook == "process_output_stream":
            start = self._stream_start or end - int(rec.duration * 1e9)
            run = self._run
            info = run.state.pending_tripwire if run is not None else None
            if rec.outcome == "tripwire" and info is not None:
                retry = info.retry and info.processor_id == rec.processor_id
        else:
            start = end - int(rec.duration * 1e9)
        self._records.append((rec, start, end, ctx, retry))

    def _flush(self, node: str | None, nxt: str | None) -> None:
        records, self._records = self._records, []
        granted = -1
        if node == "process_api_error" and nxt == "process_llm_request":
            # The hook that asked for the retry is the last one that ran (later ones are not
            # called once one asks).
            for i in range(len(records) - 1, -1, -1):
                if records[i][0].hook == "process_api_error":
                    granted = i if records[i][0].outcome == "changed" else -1
                    break
        for i, (rec, start, end, ctx, retry) in enumerate(records):
            self._processor_span(rec, start, end, ctx, retry or i == granted)

    def _processor_span(self, rec: TraceRecord, start: int, end: int, ctx: Context,
                        retry: bool) -> None:
        attrs: dict[str, Any] = {
            "streamkit.processor.id": rec.processor_id, "streamkit.processor.hook": rec.hook,
            "streamkit.processor.outcome": rec.outcome, "streamkit.processor.retry": retry,
            "streamkit.processor.calls": rec.calls, "streamkit.processor.dropped": rec.dropped,
            "streamkit.processor.duration": rec.duration}
        if rec.step is not None:
            attrs["streamkit.step.number"] = rec.step
        if rec.first_chunk_delay is not None:
            attrs["streamkit.processor.first_chunk_delay"] = rec.first_chunk_delay
        if rec.outcome in ("tripwire", "retry") and rec.detail is not None:
            attrs["streamkit.tripwire.reason"] = rec.detail
        span = self._tracer.start_span(f"{rec.hook} {rec.processor_id}", context=ctx,
                                       kind=_INTERNAL, attributes=attrs, start_time=start)
        if rec.outcome == "error":  # its text may quote content: none here (module docstring)
            span.set_attribute("error.type", "ProcessorError")
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)
