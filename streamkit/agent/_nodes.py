"""The node functions of the agent loop (``_loop.build_graph`` connects them).

Every node is ``async def node(run) -> Literal[LoopNode.X, ...]`` (or ``Stream[Literal[...]]``):
it returns the next node, or a ``Stream`` of chunks followed by the next node. The ``Literal``
names the node's edges: mypy checks each ``return`` against it, and ``check_node_functions``
checks it against the loop table (``_loop_nodes.LOOP``) when this module is imported. Chunks a
node produces go out through ``run.emit(chunk, origin)``; the routing table (``_routing.ROUTES``)
decides whether the output processors see them. Errors are raised, never turned into a next
node here: ``Run.events`` routes them (``TripWire`` → retry/tripwire, ``APICallError`` →
process_api_error, other streamkit errors → fail).

A hook node whose row in the graph names no processor (not in ``run.graph.busy``) does only its
own bookkeeping: no hook arguments, message views or copies are built for hooks that are not
there (for a short request that work was a sizeable part of its cost).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Literal, TypeVar

from msgspec import UNSET, structs

from .. import _loop_nodes as node
from .._chunk_base import _struct_call
from .._loop_nodes import LoopNode, check_node_functions
from .._partial_json import PartialJSON
from .._prompt import PromptMessage
from .._tool_records import StepToolCall, ToolOutcome
from ..chunks import (
    Chunk,
    ChunkBase,
    DataChunk,
    Finish,
    ObjectResult,
    ResponseMetadata,
    Start,
    StartPayload,
    StepFinish,
    StepFinishPayload,
    StepStart,
    StepStartPayload,
    ToolErrorChunk,
    ToolResult,
    TripwireChunk,
    coerce_chunk,
)
from ..errors import APICallError, StreamkitError, ToolError
from ..messages import (
    DataPart,
    Message,
    MessageContent,
    MessageList,
    StepStartPart,
    TextPart,
    ToolInvocationPart,
    get_text,
)
from ..models import ModelRequest, resolve_model
from ..models._base import ToolChoice
from ..processors._runner import (
    StepOverrides,
    run_api_error,
    run_input_step,
    run_llm_request,
    run_llm_response,
    run_message_hook,
)
from ..processors._runtime import TraceRecord
from ..processors._spec import ProcessorSpec
from ..tools import Tool, report_failure, tools_by_name
from ._build import (
    StepRecorder,
    error_text,
    parse_object,
    reason_of,
    schema_of,
    usage_of,
)
from ._result import StepResult, Usage
from ._routing import Origin
from ._run import NodeFn, Run, Stream
from ._shown import fingerprint, guard_changed
from ._state import FEEDBACK_TEMPLATE, RunConfig, StepState
from ._step_end import raw_usage_of, response_metadata

__all__ = ["start", "process_input", "process_input_step", "prepare_step",
           "process_llm_request", "model", "process_output_stream", "collect",
           "process_api_error", "process_llm_response", "process_output_step", "tools",
           "process_tool_result", "step_finish", "retry", "process_output_result", "finish",
           "tripwire", "fail"]

AGENT = "AGENT"

C = TypeVar("C", bound=ChunkBase)


def _own(cls: type[C], payload: object, run: Run) -> C:
    """One of the loop's own chunks (``start``, ``step-start``, ``step-finish``, ``finish``),
    built by msgspec's struct constructor as ``Stamper`` builds them. The public constructor
    (``Start(id=..., run_id=...)``) checks a caller's keywords and, being a metaclass
    ``__call__`` written in Python, costs ~1.1 µs against ~0.35 here; the payloads here are
    built whole, so there is nothing for it to check. Four per step."""
    return _struct_call(cls, payload=payload, run_id=run.run_id, from_=AGENT)  # type: ignore[no-any-return]


#: Chunks of the model's stream the loop keeps instead of delivering: its per-step ``finish``
#: (usage, reason; the loop emits its own ``step-finish``/``finish``) and response metadata.
_HELD = frozenset((Finish, ResponseMetadata))


def _base_args(run: Run) -> dict[str, object]:
    """Arguments every in-step hook may ask for."""
    st = run.state
    args: dict[str, object] = {
        "message_list": st.message_list, "retry_count": st.retry_count,
        "request_context": run.runtime.request_context, "steps": list(st.steps),
        "step_number": st.step_number, "abort_signal": None, "writer": run.hook_writer,
    }
    if st.step is not None:
        args["model"] = st.step.model
    return args


# ----------------------------------------------------------------------------- before the loop


async def start(run: Run) -> Literal[LoopNode.PROCESS_INPUT]:
    """Remembered history (source ``memory``), then the caller's input (source ``input``)."""
    cfg, ml = run.config, run.state.message_list
    if cfg.memory is not None and cfg.thread_id is not None:
        history = await cfg.memory.recall(cfg.thread_id, cfg.resource_id)
        if history:
            ml.add(history, "memory")
    if run.state.input_messages is not None:
        ml.add(run.state.input_messages, "input")
    return node.PROCESS_INPUT


async def process_input(run: Run) -> Literal[LoopNode.PROCESS_INPUT_STEP]:
    st = run.state
    if node.PROCESS_INPUT in run.graph.busy:
        await run_message_hook(run.runtime, run.config.input_specs, "process_input",
                               st.message_list,
                               {"retry_count": 0, "request_context": run.runtime.request_context},
                               default_source="input")
    # What process_input left is the run's system prompt: every step starts from it (Mastra:
    # a process_input that returns system_messages replaces the instructions for the run).
    st.system_snapshot = st.message_list.snapshot_system()
    run.emit(_own(Start, StartPayload(id=run.config.agent_id, message_id=run.run_id), run),
             Origin.RUN)
    return node.PROCESS_INPUT_STEP


# ----------------------------------------------------------------------------- one step


async def process_input_step(run: Run) -> Literal[LoopNode.PREPARE_STEP]:
    cfg, st = run.config, run.state
    # Every attempt starts from the agent's own untagged system messages (edits last one step).
    st.message_list.restore_system(st.system_snapshot)
    step = st.step = StepState(
        number=st.step_number, retry_count=st.retry_count,
        checkpoint=st.message_list.checkpoint(), model=cfg.model,
        tools={name: t for name, t in cfg.tools.items()
               if cfg.active_tools is None or name in cfg.active_tools},
        tool_choice=cfg.tool_choice, model_settings=dict(cfg.model_settings),
        provider_options=dict(cfg.provider_options), structured_output=cfg.structured_output)
    run.chain.retry_count = st.retry_count
    if node.PROCESS_INPUT_STEP in run.graph.busy:
        overrides = await run_input_step(run.runtime, cfg.input_specs, st.message_list,
                                         _step_args(run, step), step=st.step_number)
        _apply_overrides(cfg, step, overrides)
    return node.PREPARE_STEP


def _step_args(run: Run, step: StepState) -> dict[str, object]:
    args = _base_args(run)
    args.update(model=step.model, tools=dict(step.tools), tool_choice=_tool_choice(step),
                active_tools=list(step.tools), provider_options=step.provider_options,
                model_settings=step.model_settings, structured_output=step.structured_output)
    return args


def _tool_choice(step: StepState) -> ToolChoice:
    """The step's tool choice as hooks see it: the current setting, ``"auto"`` when none was
    set (Mastra's default, and what providers do without one). The model request carries it only
    when something set it, so a request body stays what it was without processors."""
    return step.tool_choice if step.tool_choice is not None else "auto"


def _apply_overrides(cfg: RunConfig, step: StepState, ov: StepOverrides) -> None:
    if ov.model is not None:
        step.model = resolve_model(ov.model)
    if ov.tools is not None:
        step.tools = tools_by_name(ov.tools)
    if ov.active_tools is not None:
        known = {**cfg.tools, **step.tools}
        missing = [n for n in ov.active_tools if n not in known]
        if missing:
            raise ToolError(f"active_tools names unknown tool(s) {missing}; known: "
                            f"{sorted(known)}", tool_name=missing[0])
        step.tools = {n: known[n] for n in ov.active_tools}
    if ov.tool_choice is not None:
        step.tool_choice = ov.tool_choice
    if ov.model_settings is not None:
        step.model_settings = dict(ov.model_settings)
    if ov.provider_options is not None:
        step.provider_options = dict(ov.provider_options)
    if ov.structured_output is not None:
        step.structured_output = ov.structured_output


async def prepare_step(run: Run) -> Literal[LoopNode.PROCESS_LLM_REQUEST]:
    if run.config.prepare_step is not None:
        step = run.step
        overrides = await run_input_step(run.runtime, (run.config.prepare_step,),
                                         run.state.message_list, _step_args(run, step),
                                         step=run.state.step_number)
        _apply_overrides(run.config, step, overrides)
    return node.PROCESS_LLM_REQUEST


def _prompt(run: Run) -> list[PromptMessage]:
    prompt = run.state.message_list.prompt()
    for text in run.state.feedback:
        prompt.append({"role": "system", "content": text})
    return prompt


async def process_llm_request(run: Run) -> Literal[LoopNode.MODEL, LoopNode.PROCESS_OUTPUT_STREAM]:
    step = run.step
    if node.PROCESS_LLM_REQUEST not in run.graph.busy:
        step.prompt = _prompt(run)
        return node.MODEL
    args = _base_args(run)
    args.update(prompt=_prompt(run), tools=dict(step.tools), tool_choice=_tool_choice(step),
                model_settings=step.model_settings, provider_options=step.provider_options,
                structured_output=step.structured_output)
    prompt, replay = await run_llm_request(run.runtime, run.config.input_specs, args,
                                           step=run.state.step_number)
    step.prompt = prompt
    if replay is not None:
        step.replay = [_reenvelope(c, run.run_id) for c in replay]
        return node.PROCESS_OUTPUT_STREAM
    return node.MODEL


def _reenvelope(chunk: object, run_id: str) -> Chunk:
    """A replayed chunk, as if this run's model had sent it."""
    out = coerce_chunk(chunk)
    if out.__class__ is DataChunk:
        return out
    return structs.replace(out, run_id=run_id, from_=AGENT)  # chunks are frozen


async def model(run: Run) -> Literal[LoopNode.PROCESS_OUTPUT_STREAM]:
    """Start the model call (an ``APICallError`` here goes to ``process_api_error``)."""
    cfg, step = run.config, run.step
    schema = cfg.structured_schema if step.structured_output is cfg.structured_output else \
        schema_of(step.structured_output)
    # ``tool_choice="none"`` sends no tools (Mastra strips them: some providers reject tools
    # with "none"); the hooks above still saw the step's tool set.
    specs = [] if step.tool_choice == "none" else \
        [t.spec for t in step.tools.values() if isinstance(t, Tool)]
    step.request = ModelRequest(
        prompt=step.prompt, tools=specs,
        tool_choice=step.tool_choice, model_settings=step.model_settings,
        provider_options=step.provider_options, structured_output=schema, run_id=run.run_id,
        step_number=run.state.step_number)
    step.source = step.model.stream(step.request)
    return node.PROCESS_OUTPUT_STREAM


async def process_output_stream(run: Run) -> Stream[Literal[LoopNode.COLLECT]]:
    """Stream one step: ``step-start`` (queued, so it goes first), then the model's chunks (or
    the replay) driven through the fused chain; the model's ``finish`` is kept for ``collect``."""
    st, step = run.state, run.step
    # Every chunk is kept only for ``process_llm_response``, which receives them.
    rec = step.recorder = StepRecorder(
        keep_chunks=node.PROCESS_LLM_RESPONSE in run.graph.busy,
        partial=PartialJSON() if step.structured_output is not None else None)
    st.delivered.append(rec)
    run.emit(_own(StepStart, StepStartPayload(message_id=run.run_id, request={}, warnings=[],
                                              started_at=int(time.time() * 1000)), run),
             Origin.STEP)
    step.streamed = True
    source = step.replay if step.replay is not None else step.source
    if source is None:
        raise StreamkitError("streamkit bug: a step streamed before its model was called")
    if run.runtime.probe is not None:  # an observer wants each model chunk (``events``)
        source = run.runtime.probe.model(source, st.step_number)
        if step.replay is None:
            step.source = source  # closing the step's source closes the model's through it

    def hold(chunk: Chunk) -> None:
        if chunk.__class__ is Finish:
            step.finish = chunk
        elif chunk.__class__ is ResponseMetadata:  # the step-end payloads' ``metadata``
            step.response_metadata = chunk

    if not run.config.output_specs and not isinstance(source, (list, tuple)):
        # No output processors: ``Run.events`` iterates the model's stream itself (``Stream``).
        return Stream(source, then=node.COLLECT, hold=hold, held=_HELD)
    return Stream(run.chain.drive(source, pending=run.outbox.live, held=_HELD, on_held=hold,
                                  on_close=run.close_source), then=node.COLLECT)


async def collect(run: Run) -> Literal[LoopNode.PROCESS_LLM_RESPONSE]:
    """What the step left: usage, reason, text, tool calls, and its assistant message."""
    st, step = run.state, run.step
    if step.finish is None:
        raise APICallError(
            f"model {getattr(step.model, 'model_id', step.model)!r} ended its stream without a "
            f"finish chunk", is_retryable=True)
    rec = step.recorder
    if rec is None:
        raise StreamkitError("streamkit bug: collect without a recorded stream")
    step.usage = usage_of(step.finish)
    step.finish_reason = reason_of(step.finish)
    step.text, step.reasoning = rec.text(), rec.reasoning()
    step.tool_calls = rec.tool_calls
    parts = rec.parts()
    if parts:
        st.message_list.add(Message(role="assistant", content=MessageContent(
            parts=[StepStartPart(), *parts] if st.step_number or st.steps else parts)),
            "response")
    return node.PROCESS_LLM_RESPONSE


async def process_api_error(run: Run) -> Literal[LoopNode.PROCESS_LLM_REQUEST, LoopNode.FAIL]:
    cfg, st, step = run.config, run.state, run.step
    error = step.api_error
    if error is None:
        raise StreamkitError("streamkit bug: process_api_error without an error")
    await run.close_source()
    unique: list[ProcessorSpec] = []
    seen: set[int] = set()
    for spec in (*cfg.input_specs, *cfg.output_specs, *cfg.error_specs):
        if id(spec.processor) not in seen:  # a processor in several lanes handles it once
            seen.add(id(spec.processor))
            unique.append(spec)
    # The failed attempt's partial output is rolled back first, so handlers see (and mutate)
    # the list the retried call will be built from.
    st.message_list.rollback(step.checkpoint)
    args = _base_args(run)
    args["error"] = error
    before = fingerprint(st.message_list) if node.PROCESS_INPUT in run.graph.busy else None
    retried_by = await run_api_error(run.runtime, unique, st.message_list, args,
                                     step=st.step_number)
    if before is not None:  # what the handlers added passes the input guards (``_shown``)
        await guard_changed(run.runtime, cfg.input_specs, st.message_list, before,
                            {"retry_count": st.retry_count,
                             "request_context": run.runtime.request_context})
    st.usage = st.usage + step.usage
    cap = cfg.error_retry_cap
    if retried_by is not None and cap is not None and st.retry_count < cap:
        if step.streamed:
            # Closed like a processor-requested retry (Mastra: step-finish(retry), step-start).
            _withdraw(run, reason=(await run.show(error)).text, processor_id=retried_by,
                      usage=step.usage)
        st.steps.append(StepResult(step_number=st.step_number, finish_reason="retry",
                                   usage=step.usage, retry_count=st.retry_count))
        st.retry_count += 1
        run.chain.retry_count = st.retry_count
        # A fresh attempt at the same step: new checkpoint, same overrides.
        step.checkpoint = st.message_list.checkpoint()
        step.recorder = None
        step.finish = None
        step.response_metadata = None
        step.api_error = None
        step.streamed = False
        return node.PROCESS_LLM_REQUEST
    st.error = error
    return node.FAIL


def _withdraw(run: Run, *, reason: str, processor_id: str | None, usage: Usage) -> None:
    """Withdraw the streamed attempt of this step: tell the client to take back what it showed
    (``data-step-retry``: transient, never stored, naming the processor that asked for the
    retry), then close the attempt with a ``step-finish`` of reason ``retry``."""
    st, step = run.state, run.step
    st.delivered = [rec for rec in st.delivered if rec is not step.recorder]
    run.emit(DataChunk(type="data-step-retry", transient=True, data={
        "stepNumber": st.step_number, "reason": reason, "processorId": processor_id,
        "retryCount": st.retry_count + 1}), Origin.RUN)
    run.emit(_own(StepFinish, _step_finish_payload(run, "retry", True, "", [], usage,
                                                   is_accepted=False), run), Origin.RUN)


def _step_finish_payload(run: Run, reason: str, continued: bool, text: str,
                         tool_calls: list[StepToolCall], usage: Usage, *,
                         is_accepted: bool = True) -> StepFinishPayload:
    """This step's ``step-finish`` payload (its metadata and the run's snapshot: per step)."""
    st, step = run.state, run.step
    return st.step_end.step_finish(
        reason=reason, continued=continued, text=text, tool_calls=tool_calls, usage=usage,
        message_id=run.run_id, metadata=response_metadata(step.model, step.response_metadata)
        if run.config.step_snapshots else None,
        raw_usage=raw_usage_of(step.finish), message_list=st.message_list,
        retry_count=st.retry_count, is_accepted=is_accepted)


async def process_llm_response(run: Run) -> Literal[LoopNode.PROCESS_OUTPUT_STEP]:
    if node.PROCESS_LLM_RESPONSE not in run.graph.busy:
        return node.PROCESS_OUTPUT_STEP
    step = run.step
    args = _base_args(run)
    # As in Mastra, the chunks end with the model's own finish (usage, reason), which the
    # consumer never sees; a cache can store and replay it.
    rec = step.recorder
    chunks: list[Chunk] = list(rec.chunks) if rec is not None and rec.chunks is not None else []
    if step.finish is not None:
        chunks.append(step.finish)
    args.update(chunks=chunks, warnings=[], request=step.request, raw_response=None,
                from_cache=step.replay is not None)
    await run_llm_response(run.runtime, run.config.input_specs, args,
                           step=run.state.step_number)
    return node.PROCESS_OUTPUT_STEP


async def process_output_step(run: Run) -> Literal[LoopNode.TOOLS, LoopNode.STEP_FINISH]:
    step = run.step
    if node.PROCESS_OUTPUT_STEP not in run.graph.busy:
        return node.TOOLS if step.tool_calls else node.STEP_FINISH
    args = _base_args(run)
    args.update(finish_reason=step.finish_reason, provider_metadata=None,
                tool_calls=list(step.tool_calls) or None, text=step.text,
                usage=step.usage)
    await run_message_hook(run.runtime, run.config.output_specs, "process_output_step",
                           run.state.message_list, args, default_source="response",
                           step=run.state.step_number)
    return node.TOOLS if step.tool_calls else node.STEP_FINISH


# ----------------------------------------------------------------------------- tools


async def _call_tool(run: Run, call: StepToolCall) -> ToolOutcome:
    """Run one tool call; a failing tool is reported to the model, not raised, and to the
    developer (``report_failure``: the ``streamkit.tools`` log, and a ``result.trace`` record
    with hook ``execute_tool``, outcome ``error`` and the traceback as its detail)."""
    step = run.step
    name, cid = call.tool_name, call.tool_call_id
    tool = step.tools.get(name)
    started = time.perf_counter()
    try:
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; available: {sorted(step.tools)}",
                            tool_name=name)
        with run.tracer.tool_context(cid):  # spans the tool makes nest in
            return ToolOutcome(call, True, await tool.run(
                call.args if call.args is not None else {}, timeout=run.config.tool_timeout,
                writer=run.tool_writer, request_context=run.runtime.request_context,
                tool_call_id=cid, abort_signal=None))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
        told = report_failure(name, cid, exc)
        # Straight into the trace, not through ``runtime.record``: the tracer's record hook
        # makes processor spans, and the tool has its own ``execute_tool`` span.
        run.runtime.trace.append(TraceRecord(name, "execute_tool", run.state.step_number,
                                             time.perf_counter() - started, "error",
                                             detail=told))
        return ToolOutcome(call, False, exc)


#: Seconds tool tasks get to finish cancelling when a run is cancelled during its tool calls.
_CANCEL_GRACE = 5.0


async def tools(run: Run) -> Stream[Literal[LoopNode.PROCESS_TOOL_RESULT]]:
    """Run the step's tool calls concurrently; what they write streams live."""
    return Stream(_tool_chunks(run), then=node.PROCESS_TOOL_RESULT)


async def _tool_chunks(run: Run) -> AsyncGenerator[Chunk, None]:
    step = run.step
    outbox = run.outbox
    arrived = outbox.arrived = asyncio.Event()
    tasks = [asyncio.ensure_future(_call_tool(run, c)) for c in step.tool_calls]
    pending = set(tasks)
    waiter: asyncio.Future[Literal[True]] | None = None
    try:
        while pending:
            waiter = asyncio.ensure_future(arrived.wait())
            done, _ = await asyncio.wait(pending | {waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            arrived.clear()
            pending -= done
            if outbox:
                await outbox.drain(run.chain)
                for chunk in outbox.take():
                    yield chunk
    finally:
        # Cancelled or closed mid-way: cancel what still runs (the waiter too) and let it
        # finish cancelling, so no task outlives the run ("Task was destroyed but it is
        # pending!"); bounded, for a tool that ignores its cancellation.
        leftover = [t for t in (*pending, waiter) if t is not None and not t.done()]
        for t in leftover:
            t.cancel()
        if leftover:
            await asyncio.wait(leftover, timeout=_CANCEL_GRACE)
        outbox.arrived = None
    step.tool_outcomes = [t.result() for t in tasks]


async def process_tool_result(run: Run) -> Literal[LoopNode.STEP_FINISH]:
    """``process_tool_result`` per tool that returned; then a ``tool-result`` (or ``tool-error``)
    chunk per call. The message list gets each outcome now (the next step's prompt needs it
    even if a processor drops the chunk); ``Run.deliver`` writes it again from the chunk the
    consumer received, so what is stored is what was streamed (a guard may redact it)."""
    st, step = run.state, run.step
    ml = st.message_list
    for outcome in step.tool_outcomes:
        call, value = outcome.call, outcome.value
        cid, name, targs = call.tool_call_id, call.tool_name, call.args
        if not outcome.ok:
            ml.update_tool_invocation(ToolInvocationPart.failed(
                cid, name, error_text(type(value).__name__, str(value)), targs))
            run.emit(ToolErrorChunk(tool_call_id=cid, tool_name=name, args=targs,
                                    error={"name": type(value).__name__, "message": str(value)},
                                    run_id=run.run_id, from_=AGENT), Origin.STEP)
            continue
        run.tracer.tool_hooks(cid)
        args = _base_args(run)
        args.update(tool_name=name, tool_call_id=cid, args=targs, result=value,
                    provider_executed=False)
        await run_message_hook(run.runtime, run.config.output_specs, "process_tool_result", ml,
                               args, default_source="response", step=st.step_number)
        result = _invocation_result(ml, cid)
        if result is _NOT_SET:
            ml.update_tool_invocation(ToolInvocationPart.returned(cid, name, value, targs))
            result = value
        run.emit(ToolResult(tool_call_id=cid, tool_name=name, args=targs, result=result,
                            run_id=run.run_id, from_=AGENT), Origin.STEP)
    return node.STEP_FINISH


_NOT_SET = object()


def _invocation_result(ml: MessageList, tool_call_id: str) -> object:
    """The result a ``process_tool_result`` hook wrote with ``update_tool_invocation``, if any."""
    for msg in reversed(ml.get.response.db()):
        for part in msg.content.parts:
            if isinstance(part, ToolInvocationPart) and part.tool_call_id == tool_call_id:
                if part.state == "result":
                    return part.tool_invocation.result
                return _NOT_SET
    return _NOT_SET


# ----------------------------------------------------------------------------- end of a step


async def step_finish(
        run: Run) -> Literal[LoopNode.PROCESS_INPUT_STEP, LoopNode.PROCESS_OUTPUT_RESULT]:
    cfg, st, step = run.config, run.state, run.step
    continued = bool(step.tool_calls) and st.step_number + 1 < cfg.max_steps
    if step.structured_output is not None and not step.tool_calls:
        # The answer step's object, as Mastra places it: after the step's text-end (and what
        # the step's hooks wrote), before its step-finish. Read from the text the consumer
        # received, after process_output_step accepted it (a guard may still retry the step).
        run.emit(ObjectResult(object=parse_object(step.structured_output, step.text),
                              run_id=run.run_id, from_=AGENT), Origin.RUN)
    run.emit(_own(StepFinish, _step_finish_payload(
        run, step.finish_reason, continued, step.text, step.tool_calls, step.usage), run),
        Origin.STEP)
    st.steps.append(StepResult(
        step_number=st.step_number, text=step.text, reasoning=step.reasoning,
        tool_calls=step.tool_calls, tool_results=step.tool_results,
        finish_reason=step.finish_reason, usage=step.usage, retry_count=st.retry_count,
        from_cache=step.replay is not None))
    st.usage = st.usage + step.usage
    st.finish_reason = step.finish_reason
    # The step's trace closes once its step-finish has passed the stream processors.
    await run.outbox.drain(run.chain)
    run.chain.record(st.step_number)
    st.retry_count = 0
    st.feedback.clear()
    st.step_number += 1
    return node.PROCESS_INPUT_STEP if continued else node.PROCESS_OUTPUT_RESULT


async def retry(run: Run) -> Literal[LoopNode.PROCESS_INPUT_STEP]:
    st, step = run.state, run.step
    info = st.pending_tripwire
    if info is None:
        raise StreamkitError("streamkit bug: retry without a tripwire")
    await run.close_source()
    st.message_list.rollback(step.checkpoint)
    if step.streamed:
        _withdraw(run, reason=info.reason, processor_id=info.processor_id, usage=step.usage)
    st.steps.append(StepResult(step_number=st.step_number, finish_reason="retry",
                               usage=step.usage, tripwire=info, retry_count=st.retry_count))
    st.usage = st.usage + step.usage
    feedback = FEEDBACK_TEMPLATE.format(reason=info.reason)
    if feedback not in st.feedback:
        st.feedback.append(feedback)
    st.retry_count += 1
    st.pending_tripwire = None
    return node.PROCESS_INPUT_STEP


# ----------------------------------------------------------------------------- end of the run


async def process_output_result(run: Run) -> Literal[LoopNode.FINISH]:
    """``process_output_result``, then the run's two texts (as Mastra's): ``result.text``
    joins the text of every accepted step (``getFullOutput().text``), ``stream.text`` is the
    final step's text alone (narration before tool calls excluded). A hook that edits the
    response text changes both: ``result.text`` is re-read from the list, ``stream.text``
    becomes the text of the last assistant message (Mastra's ``resolveProcessedOutputText``)."""
    st = run.state
    final = st.steps[-1].text if st.steps else ""
    if node.PROCESS_OUTPUT_RESULT not in run.graph.busy:
        st.text = _response_text(st.message_list)
        st.final_text = final
        st.has_result_text = True
        return node.FINISH
    before = _assistant_texts(st.message_list)
    result = {"text": "".join(before), "usage": st.usage,
              "finish_reason": st.finish_reason, "steps": list(st.steps)}
    await run_message_hook(run.runtime, run.config.output_specs, "process_output_result",
                           st.message_list, {"result": result, "retry_count": 0,
                                             "writer": run.result_writer,
                                             "request_context": run.runtime.request_context},
                           default_source="response")
    after = _assistant_texts(st.message_list)
    st.text = "".join(after)
    st.final_text = final if after == before else (after[-1] if after else "")
    st.has_result_text = True
    return node.FINISH


def _assistant_texts(ml: MessageList) -> list[str]:
    """The text of each step of the response's assistant messages, in order: a message is cut
    at its ``step-start`` parts (one message holds the steps of a turn, as in Mastra, whose
    provider form splits it there too). Messages that hold only ``data-*`` parts (stored on
    their own, not an answer) are left out; a message without text parts gives its
    ``content.content`` (``get_text``)."""
    texts: list[str] = []
    for m in ml.get.response.db():
        parts = m.content.parts
        if m.role != "assistant" or (parts and all(p.__class__ is DataPart for p in parts)):
            continue
        if not any(p.__class__ is TextPart for p in parts):
            texts.append(get_text(m))
            continue
        texts.append("")
        is_empty = True  # the current step has no part yet (a leading step-start opens none)
        for p in parts:
            if p.__class__ is StepStartPart:
                if not is_empty:
                    texts.append("")
                    is_empty = True
                continue
            is_empty = False
            if p.__class__ is TextPart:
                texts[-1] += p.text
    return texts


def _response_text(ml: MessageList) -> str:
    return "".join(get_text(m) for m in ml.get.response.db() if m.role == "assistant")


#: The hooks that run between a run's last step-finish and its finish (the stream processors
#: see the step-finish chunk; then ``process_output_result``): when neither node has a
#: processor, the messages are as the last step-finish's snapshot saw them.
_AFTER_STEP_FINISH = frozenset((node.PROCESS_OUTPUT_STREAM, node.PROCESS_OUTPUT_RESULT))


async def finish(run: Run) -> Literal[LoopNode.END]:
    cfg, st = run.config, run.state
    # The last object-result the consumer received from an accepted attempt: the answer
    # step's (``step_finish``), or one a processor produced (e.g. a structuring guard).
    for rec in st.delivered:
        if rec.objects:
            st.object = rec.objects[-1]
    if cfg.memory is not None and cfg.thread_id is not None:
        await cfg.memory.remember(cfg.thread_id, cfg.resource_id, st.message_list)
    payload = st.step_end.finish(reason=st.finish_reason, text=st.text, usage=st.usage,
                                 message_id=run.run_id, model=cfg.model,
                                 message_list=st.message_list, thread_id=cfg.thread_id,
                                 resource_id=cfg.resource_id,
                                 unchanged=run.graph.busy.isdisjoint(_AFTER_STEP_FINISH),
                                 snapshots=cfg.step_snapshots)
    run.emit(_own(Finish, payload, run), Origin.RUN)
    return node.END


async def tripwire(run: Run) -> Literal[LoopNode.END]:
    st = run.state
    info = st.pending_tripwire
    if info is None:
        raise StreamkitError("streamkit bug: tripwire node without a tripwire")
    st.tripwire = info
    st.finish_reason = "other"
    st.text = ""
    st.has_result_text = False  # stream.text: what the consumer received before the block
    run.emit(TripwireChunk(reason=info.reason, retry=info.retry,
                           metadata=info.metadata if info.metadata is not None else UNSET,
                           processor_id=info.processor_id or UNSET,
                           run_id=run.run_id, from_=AGENT), Origin.RUN)
    return node.END


async def fail(run: Run) -> Literal[LoopNode.END]:
    st = run.state
    err = st.error
    if err is None:
        raise StreamkitError("streamkit bug: fail without an error")
    # The error chunk has passed the output processors (``Run.show``); result.error holds the
    # text they let out, as every other way the error leaves does.
    shown = await run.show(err)
    st.error = shown.error
    st.finish_reason = "error"
    run.emit(shown.chunk, Origin.RUN)
    return node.END


#: Every node's function (``_loop_nodes.LOOP`` has a row for each; checked below).
NODES: Mapping[LoopNode, NodeFn] = {
    LoopNode.START: start, LoopNode.PROCESS_INPUT: process_input,
    LoopNode.PROCESS_INPUT_STEP: process_input_step, LoopNode.PREPARE_STEP: prepare_step,
    LoopNode.PROCESS_LLM_REQUEST: process_llm_request, LoopNode.MODEL: model,
    LoopNode.PROCESS_OUTPUT_STREAM: process_output_stream, LoopNode.COLLECT: collect,
    LoopNode.PROCESS_API_ERROR: process_api_error,
    LoopNode.PROCESS_LLM_RESPONSE: process_llm_response,
    LoopNode.PROCESS_OUTPUT_STEP: process_output_step, LoopNode.TOOLS: tools,
    LoopNode.PROCESS_TOOL_RESULT: process_tool_result, LoopNode.STEP_FINISH: step_finish,
    LoopNode.RETRY: retry, LoopNode.PROCESS_OUTPUT_RESULT: process_output_result,
    LoopNode.FINISH: finish, LoopNode.TRIPWIRE: tripwire, LoopNode.FAIL: fail,
}

# Each function's return annotation names exactly its row's returned edges: checked at import.
check_node_functions(NODES)
