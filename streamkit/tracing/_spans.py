"""The span tree of a traced run (``docs/tracing.md``, "The span tree"), built from the run's
events (``streamkit.events``): ``SpanTracer`` is an observer the run gets when tracing is on, and
reads nothing of the run but its events (the same events ``observers=`` and the studio get).

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

import contextlib
import importlib.metadata
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from .._loop_nodes import (
    PROCESS_API_ERROR,
    PROCESS_LLM_REQUEST,
    PROCESS_OUTPUT_STREAM,
    LoopNode,
)
from ..events import (
    ErrorDetail,
    HookCalled,
    ModelFinished,
    ModelStarted,
    RunEvent,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
    Transition,
)
from ._content import input_messages, output_messages, to_json

__all__ = ["SpanTracer", "tracer_for", "error_type"]

_INTERNAL, _CLIENT = SpanKind.INTERNAL, SpanKind.CLIENT

#: A step's outcome as its events say it → ``streamkit.step.outcome``.
_STEP_OUTCOMES = {"accepted": "done", "retried": "retry", "tripwire": "tripwire",
                  "error": "error", "closed": "closed"}

_NO_CONTEXT: AbstractContextManager[None] = nullcontext()

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

_cached: tuple[trace.TracerProvider, trace.Tracer] | None = None


def _version() -> str:
    """The installed distribution's version, for the instrumentation scope (read from its
    metadata, not from ``streamkit/__init__``, which sits above the agent: importing it from here
    would put the tracing above the agent it observes). Empty when streamkit runs from a source
    tree that was not installed."""
    try:
        return importlib.metadata.version("streamkit-agents")
    except importlib.metadata.PackageNotFoundError:
        return ""


_VERSION = _version()


def tracer_for(provider: trace.TracerProvider | None, capture: bool) -> SpanTracer | None:
    """A ``SpanTracer`` for one run, or ``None`` when ``provider`` (default: the global one)
    would record nothing (none set, or a no-op provider)."""
    global _cached
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        tracer = cached[1]
    else:
        tracer = provider.get_tracer("streamkit", _VERSION)
        _cached = (provider, tracer)
    if isinstance(tracer, trace.NoOpTracer):
        return None
    return SpanTracer(tracer, capture, otel_context.get_current())


def error_type(error: ErrorDetail) -> str:
    """``error.type``: the HTTP status of an ``APICallError`` that has one, else the class name
    (low cardinality, as the conventions ask)."""
    if error.status_code is not None:
        return str(error.status_code)
    return error.type


def _set_error(span: Span, error: ErrorDetail, text: str | None) -> None:
    """Status ERROR and ``error.type``; ``text`` (what the client was shown, or ``None``) as the
    description and an ``exception`` event."""
    span.set_attribute("error.type", error_type(error))
    span.set_status(Status(StatusCode.ERROR, text))
    if text is not None:
        span.add_event("exception", {"exception.type": error.type,
                                     "exception.message": text})


def _model_attrs(provider: str | None, model_id: str | None) -> tuple[str, str]:
    return (provider if provider else "unknown", model_id if model_id is not None else "")


def _setting(value: object) -> AttributeValue | None:
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


class SpanTracer:
    """The span tree of one run, built from its events (``streamkit.events``): an observer the
    run gets when tracing is on. Created when the run is (``parent`` is the caller's context
    then); every span it starts has an explicit parent, so no context is attached across the
    run's yields and concurrent runs never share a span.

    The events of one transition come in order (``Transition``, then what ends, then what
    starts); processor records (``HookCalled``) wait for the next other event, where a
    ``process_api_error`` record learns whether its retry was granted."""

    __slots__ = ("_tracer", "_capture", "_parent", "_run_span", "_run_ctx", "_thread_id",
                 "_step_span", "_step_ctx", "_stream_start", "_chat_span", "_chat_end",
                 "_chat_output", "_tools", "_records")

    #: Spans are per run, step, tool and processor: no per-chunk events.
    chunk_detail = False

    def __init__(self, tracer: trace.Tracer, capture: bool, parent: Context) -> None:
        self._tracer = tracer
        self._capture = capture
        self._parent = parent
        self._run_span: Span | None = None
        self._run_ctx = parent
        self._thread_id: str | None = None
        self._step_span: Span | None = None
        self._step_ctx: Context | None = None
        self._stream_start = 0
        self._chat_span: Span | None = None
        self._chat_end = 0
        self._chat_output: ModelFinished | None = None
        self._tools: dict[str, tuple[Span, Context]] = {}
        # Trace records waiting for the next event (a process_api_error record learns there
        # whether its retry was granted): (event, start ns, end ns, parent).
        self._records: list[tuple[HookCalled, int, int, Context]] = []

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, HookCalled):
            self._record(event)
            return
        if self._records:
            if isinstance(event, Transition):
                self._flush(event.node, event.next)
            else:
                self._flush(None, None)
        handler = _HANDLERS.get(event.__class__)
        if handler is not None:
            handler(self, event)

    # ------------------------------------------------------------------ the run

    def _begin(self, ev: RunStarted) -> None:
        provider, model_id = _model_attrs(ev.provider, ev.model_id)
        name = ev.agent_name or ev.agent_id
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
            "gen_ai.agent.id": ev.agent_id, "gen_ai.provider.name": provider,
            "gen_ai.request.model": model_id, "streamkit.run_id": ev.run_id}
        if ev.thread_id is not None:
            attrs["gen_ai.conversation.id"] = ev.thread_id
        self._thread_id = ev.thread_id
        span = self._tracer.start_span(f"invoke_agent {name}", context=self._parent,
                                       kind=_INTERNAL, attributes=attrs)
        self._run_span = span
        self._run_ctx = trace.set_span_in_context(span, self._parent)

    def _end(self, ev: RunFinished) -> None:
        span = self._run_span
        if span is None:
            return
        self._run_span = None
        self._end_step("error" if ev.failure is not None else "closed" if ev.closed_early
                       else "done")
        if span.is_recording():
            usage = ev.usage
            span.set_attributes({
                "gen_ai.usage.input_tokens": usage.get("input_tokens", 0),
                "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
                "streamkit.usage.total_tokens": usage.get("total_tokens", 0),
                "gen_ai.response.finish_reasons": [ev.finish_reason or ""]})
            tw = ev.tripwire
            if tw is not None:
                # A guard doing its job is not an error: the status stays unset.
                span.set_attributes({"streamkit.tripwire.processor_id": tw.processor_id or "",
                                     "streamkit.tripwire.reason": tw.reason,
                                     "streamkit.tripwire.retry": tw.retry,
                                     "streamkit.tripwire.hook": tw.hook or ""})
            if ev.closed_early:
                span.set_attribute("streamkit.run.closed_early", True)
        if ev.failure is not None:
            _set_error(span, ev.failure, self._shown(ev.failure))
        span.end()

    def _transition(self, ev: Transition) -> None:
        # What ends is reported by the events that follow; here only what a stream starts.
        if ev.next == PROCESS_OUTPUT_STREAM:
            if ev.node == PROCESS_LLM_REQUEST and self._step_span is not None:
                self._step_span.set_attribute("streamkit.step.from_cache", True)
            if not self._stream_start:
                self._stream_start = time.time_ns()

    # ------------------------------------------------------------------ steps and model calls

    def _in_step(self) -> Context:
        """The parent of what happens in a step: the step's span, else the run's."""
        return self._step_ctx if self._step_ctx is not None else self._run_ctx

    def _start_step(self, ev: StepStarted) -> None:
        self._end_step("done")  # never two open steps (the graph does not allow it)
        span = self._tracer.start_span(
            f"step {ev.step_number}", context=self._run_ctx, kind=_INTERNAL,
            attributes={"streamkit.step.number": ev.step_number,
                        "streamkit.step.retry_count": ev.retry_count})
        self._step_span = span
        self._step_ctx = trace.set_span_in_context(span, self._run_ctx)

    def _step_finished(self, ev: StepFinished) -> None:
        self._end_step(_STEP_OUTCOMES[ev.outcome])

    def _end_step(self, outcome: str) -> None:
        span = self._step_span
        if span is None:
            return
        self._end_tools()
        self._end_chat(delivered=outcome == "done")
        span.set_attribute("streamkit.step.outcome", outcome)
        span.end()
        self._step_span = self._step_ctx = None
        self._stream_start = 0

    def _start_chat(self, ev: ModelStarted) -> None:
        self._end_chat(delivered=False)  # never two open calls (the graph does not allow it)
        provider, model_id = _model_attrs(ev.provider, ev.model_id)
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
            "gen_ai.request.model": model_id, "gen_ai.request.stream": True,
            "streamkit.step.number": ev.step_number}
        if self._thread_id is not None:
            attrs["gen_ai.conversation.id"] = self._thread_id
        if ev.structured:
            attrs["gen_ai.output.type"] = "json"
        for key, value in ev.model_settings.items():
            name = _SETTINGS.get(key)
            setting = _setting(value) if name is not None else None
            if name is not None and setting is not None:
                attrs[name] = [setting] if name.endswith("stop_sequences") and \
                    isinstance(setting, str) else setting
        span = self._tracer.start_span(f"chat {model_id}" if model_id else "chat",
                                       context=self._in_step(), kind=_CLIENT, attributes=attrs)
        if self._capture and span.is_recording():
            span.set_attribute("gen_ai.input.messages", input_messages(ev.prompt))
        self._chat_span = span
        self._chat_end = 0
        self._chat_output = None

    def _model_finished(self, ev: ModelFinished) -> None:
        if ev.error is not None:
            self._chat_failed(ev.error)
            return
        # The call's stream ended: what it returned. The span ends with its step.
        span = self._chat_span
        if span is None:
            return
        self._chat_end = time.time_ns()
        self._chat_output = ev
        if span.is_recording():
            usage = ev.usage or {}
            span.set_attributes({
                "gen_ai.usage.input_tokens": usage.get("input_tokens", 0),
                "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
                "gen_ai.response.finish_reasons": [ev.finish_reason or ""]})
            if ev.time_to_first_text is not None:
                span.set_attribute("gen_ai.response.time_to_first_chunk",
                                   ev.time_to_first_text)

    def _shown(self, error: ErrorDetail) -> str | None:
        """With content capture, the text a client was shown of ``error``; else ``None``."""
        return error.shown if self._capture else None

    def _chat_failed(self, error: ErrorDetail) -> None:
        span = self._chat_span
        if span is None:
            return
        self._chat_span = None
        _set_error(span, error, self._shown(error))
        span.end()

    def _end_chat(self, *, delivered: bool) -> None:
        span = self._chat_span
        if span is None:
            return
        self._chat_span = None
        out = self._chat_output
        if delivered and self._chat_end and out is not None and self._capture \
                and span.is_recording():
            span.set_attribute("gen_ai.output.messages", output_messages(
                out.text, out.reasoning, out.tool_calls, out.finish_reason or ""))
        span.end(end_time=self._chat_end or None)

    # ------------------------------------------------------------------ tools

    def _start_tool(self, ev: ToolCalled) -> None:
        ctx = self._in_step()
        name, cid = ev.tool_name, ev.tool_call_id
        attrs: dict[str, AttributeValue] = {"gen_ai.operation.name": "execute_tool",
                                 "gen_ai.tool.name": name, "gen_ai.tool.call.id": cid,
                                 "gen_ai.tool.type": "function"}
        if ev.description:
            attrs["gen_ai.tool.description"] = ev.description
        span = self._tracer.start_span(f"execute_tool {name}", context=ctx, kind=_INTERNAL,
                                       attributes=attrs)
        if self._capture and span.is_recording():
            span.set_attribute("gen_ai.tool.call.arguments", to_json(ev.args))
        previous = self._tools.get(cid)
        if previous is not None:  # a model reused a call id: keep both spans whole
            previous[0].end()
        self._tools[cid] = (span, trace.set_span_in_context(span, ctx))

    def tool_context(self, tool_call_id: str) -> AbstractContextManager[None]:
        """Entered around a tool's own work, in its task: spans the tool makes nest under its
        ``execute_tool`` span (``RunObserver``'s optional context hook)."""
        entry = self._tools.get(tool_call_id)
        return _NO_CONTEXT if entry is None else _attached(entry[1])

    def _tool_returned(self, ev: ToolReturned) -> None:
        """End the call's span: failed with ``error.type``; with content capture, the result
        as the consumer received it (after ``process_tool_result`` and the stream processors;
        none when a processor dropped it)."""
        entry = self._tools.pop(ev.tool_call_id, None)
        if entry is None:
            return
        span = entry[0]
        if ev.error is not None:
            # The error as its tool-error chunk was delivered (after the guards), not the
            # exception the tool raised.
            shown = ev.result if ev.delivered and ev.is_error else None
            _set_error(span, ev.error, to_json(shown) if self._capture and
                       shown is not None else None)
        if ev.delivered and self._capture and span.is_recording():
            span.set_attribute("gen_ai.tool.call.result", to_json(ev.result))
        span.end()

    def _end_tools(self) -> None:
        """End every tool span still open (a step that ended before its calls did)."""
        for span, _ in self._tools.values():
            span.end()
        self._tools = {}

    # ------------------------------------------------------------------ processor spans

    def _record(self, ev: HookCalled) -> None:
        """A ``result.trace`` record was added: its span is made at the next other event."""
        end = time.time_ns()
        if ev.step is None:
            ctx = self._run_ctx
        elif ev.hook == "process_tool_result" and ev.tool_call_id in self._tools:
            ctx = self._tools[ev.tool_call_id][1]
        else:
            ctx = self._in_step()
        if ev.hook == "process_output_stream":
            start = self._stream_start or end - int(ev.duration_s * 1e9)
        else:
            start = end - int(ev.duration_s * 1e9)
        self._records.append((ev, start, end, ctx))

    def _flush(self, node: LoopNode | None, nxt: LoopNode | None) -> None:
        records, self._records = self._records, []
        granted = -1
        if node == PROCESS_API_ERROR and nxt == PROCESS_LLM_REQUEST:
            # The hook that asked for the retry is the last one that ran (later ones are not
            # called once one asks).
            for i in range(len(records) - 1, -1, -1):
                if records[i][0].hook == "process_api_error":
                    granted = i if records[i][0].outcome == "changed" else -1
                    break
        for i, (ev, start, end, ctx) in enumerate(records):
            self._processor_span(ev, start, end, ctx, ev.retry or i == granted)

    def _processor_span(self, ev: HookCalled, start: int, end: int, ctx: Context,
                        retry: bool) -> None:
        attrs: dict[str, AttributeValue] = {
            "streamkit.processor.id": ev.processor_id, "streamkit.processor.hook": ev.hook,
            "streamkit.processor.outcome": ev.outcome, "streamkit.processor.retry": retry,
            "streamkit.processor.calls": ev.calls, "streamkit.processor.dropped": ev.dropped,
            "streamkit.processor.duration": ev.duration_s}
        if ev.step is not None:
            attrs["streamkit.step.number"] = ev.step
        if ev.ttfc_s is not None:
            attrs["streamkit.processor.first_chunk_delay"] = ev.ttfc_s
        if ev.outcome in ("tripwire", "retry") and ev.detail is not None:
            attrs["streamkit.tripwire.reason"] = ev.detail
        span = self._tracer.start_span(f"{ev.hook} {ev.processor_id}", context=ctx,
                                       kind=_INTERNAL, attributes=attrs, start_time=start)
        if ev.outcome == "error":  # its text may quote content: none here (module docstring)
            span.set_attribute("error.type", "ProcessorError")
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)


#: Event class → what the span tracer does with it (the per-chunk events are not asked for).
_HANDLERS: dict[type[RunEvent], Callable[..., None]] = {
    RunStarted: SpanTracer._begin, RunFinished: SpanTracer._end,
    Transition: SpanTracer._transition, StepStarted: SpanTracer._start_step,
    StepFinished: SpanTracer._step_finished, ModelStarted: SpanTracer._start_chat,
    ModelFinished: SpanTracer._model_finished, ToolCalled: SpanTracer._start_tool,
    ToolReturned: SpanTracer._tool_returned,
}
