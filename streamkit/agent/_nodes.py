"""The node functions of the agent loop (see ``_loop.build_graph`` for how they connect).

Control nodes are ``async def node(cfg, st) -> next_node_name``; streaming nodes are async
generators that yield chunks for the consumer and leave the next node in ``st.next_node``.
Chunks a node produces for the consumer go through ``emit`` (the fused output-stream chain) or
``emit_direct`` (bypassing processors: the loop's own framing chunks).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from msgspec import UNSET

from ..chunks import (DataChunk, ErrorChunk, Finish, ObjectResult, ResponseMetadata, Start,
                      StepFinish, StepStart, TextDelta, ToolErrorChunk, ToolResult, TripwireChunk,
                      coerce_chunk)
from ..errors import APICallError, ToolError
from ..messages import DataPart, Message, MessageContent, StepStartPart, ToolInvocationPart, get_text
from ..models import ModelRequest, resolve_model
from ..processors import (StepOverrides, run_api_error, run_input_step, run_llm_request,
                          run_llm_response, run_message_hook)
from ._build import (StepRecorder, parse_object, reason_of, schema_of, step_end_payload,
                     usage_of)
from ._result import StepResult
from ._state import FEEDBACK_TEMPLATE, RunConfig, RunState, StepState

AGENT = "AGENT"


def take_next(st: RunState) -> str:
    """The node a streaming node chose when it finished."""
    name, st.next_node = st.next_node, ""
    return name


def _set_next(st: RunState, name: str) -> None:
    st.next_node = name


def _step(st: RunState) -> StepState:
    step = st.step
    if step is None:  # the graph only reaches step nodes after process_input_step
        raise RuntimeError("streamkit bug: a step node ran outside a step")
    return step


# ----------------------------------------------------------------------------- emitting


async def emit(st: RunState, chunk: Any) -> None:
    """Push ``chunk`` through the output-stream processors; queue what comes out."""
    chain = st.chain
    out = await chain.push(chunk) if chain.is_async else chain.push(chunk)
    _take_direct(st)
    if out is None:
        return
    if out.__class__ is list:
        for o in out:
            _keep(st, o)
    else:
        _keep(st, out)


def _keep(st: RunState, chunk: Any) -> None:
    st.out.append(chunk)
    if chunk.__class__ is DataChunk:
        _persist_data(st, chunk)


def _take_direct(st: RunState) -> None:
    if st.direct:
        for c in st.direct:
            _keep(st, c)
        st.direct.clear()


def _persist_data(st: RunState, chunk: Any) -> None:
    """A non-transient ``data-*`` chunk becomes a part of the turn's assistant message."""
    if chunk.transient is True or not chunk.type.startswith("data-"):
        return
    part = DataPart(type=chunk.type, data=chunk.data)
    if chunk.id is not None and chunk.id is not UNSET:
        part.id = chunk.id
    st.message_list.add(Message(role="assistant", content=MessageContent(parts=[part])),
                        "response")


async def drain_routed(cfg: RunConfig, st: RunState) -> None:
    """Chunks written by tools and by hooks with a routed writer go through the processors that
    opted in to data parts (``emit`` applies the gate), then to the consumer."""
    while st.routed:
        batch = list(st.routed)
        st.routed.clear()
        for chunk in batch:
            await emit(st, chunk)


def emit_direct(st: RunState, chunk: Any) -> None:
    st.out.append(chunk)


async def close_step(st: RunState) -> None:
    step = st.step
    if step is not None and step.source is not None:
        closer = getattr(step.source, "aclose", None)
        step.source = None
        if closer is not None:
            try:
                await closer()
            except Exception:  # noqa: BLE001 - closing a model stream must not mask the outcome
                pass


# ----------------------------------------------------------------------------- helpers


def _base_args(cfg: RunConfig, st: RunState, *, writer: bool = True) -> dict[str, Any]:
    step = st.step
    args: dict[str, Any] = {
        "message_list": st.message_list, "retry_count": st.retry_count,
        "request_context": st.runtime.request_context, "steps": list(st.steps),
        "step_number": st.step_number, "abort_signal": None,
    }
    if writer:
        args["writer"] = st.routed_writer
    if step is not None:
        args["model"] = step.model
    return args


# ----------------------------------------------------------------------------- nodes


async def start(cfg: RunConfig, st: RunState) -> str:
    """Remembered history (source ``memory``), then the caller's input (source ``input``)."""
    ml = st.message_list
    if cfg.memory is not None and cfg.thread_id is not None:
        history = await cfg.memory.recall(cfg.thread_id, cfg.resource_id)
        if history:
            ml.add(history, "memory")
    if st.input_messages is not None:
        ml.add(st.input_messages, "input")
    return "process_input"


async def process_input(cfg: RunConfig, st: RunState) -> str:
    await run_message_hook(st.runtime, cfg.input_specs, "process_input", st.message_list,
                           {"retry_count": 0, "request_context": st.runtime.request_context},
                           default_source="input")
    emit_direct(st, Start(id=cfg.agent_id, message_id=st.run_id, run_id=st.run_id, from_=AGENT))
    return "process_input_step"


async def process_input_step(cfg: RunConfig, st: RunState) -> str:
    # Every attempt starts from the agent's own untagged system messages (edits last one call).
    st.message_list.restore_system(st.system_snapshot)
    step = st.step = StepState(number=st.step_number, retry_count=st.retry_count)
    step.checkpoint = st.message_list.checkpoint()
    step.model = cfg.model
    step.tools = {name: t for name, t in cfg.tools.items()
                  if cfg.active_tools is None or name in cfg.active_tools}
    step.tool_choice = cfg.tool_choice
    step.model_settings = dict(cfg.model_settings)
    step.provider_options = dict(cfg.provider_options)
    step.structured_output = cfg.structured_output
    st.chain.retry_count = st.retry_count
    overrides = await run_input_step(st.runtime, cfg.input_specs, st.message_list,
                                     _step_args(cfg, st), step=st.step_number)
    _apply_overrides(cfg, step, overrides)
    return "prepare_step"


def _step_args(cfg: RunConfig, st: RunState) -> dict[str, Any]:
    step = _step(st)
    args = _base_args(cfg, st)
    args.update(model=step.model, tools=dict(step.tools), tool_choice=step.tool_choice,
                active_tools=list(step.tools), provider_options=step.provider_options,
                model_settings=step.model_settings, structured_output=step.structured_output)
    return args


def _apply_overrides(cfg: RunConfig, step: StepState, ov: StepOverrides) -> None:
    if ov.model is not None:
        step.model = resolve_model(ov.model)
    if ov.tools is not None:
        from .agent import tools_by_name

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


async def prepare_step(cfg: RunConfig, st: RunState) -> str:
    if cfg.prepare_step is not None:
        overrides = await run_input_step(st.runtime, (cfg.prepare_step,), st.message_list,
                                         _step_args(cfg, st), step=st.step_number)
        _apply_overrides(cfg, _step(st), overrides)
    return "process_llm_request"


def _prompt(st: RunState) -> list[dict[str, Any]]:
    prompt = st.message_list.prompt()
    for text in st.feedback:
        prompt.append({"role": "system", "content": text})
    return prompt


async def process_llm_request(cfg: RunConfig, st: RunState) -> str:
    step = _step(st)
    args = _base_args(cfg, st)
    args.update(prompt=_prompt(st), tools=dict(step.tools), tool_choice=step.tool_choice,
                model_settings=step.model_settings, provider_options=step.provider_options)
    prompt, replay = await run_llm_request(st.runtime, cfg.input_specs, args,
                                           step=st.step_number)
    step.prompt = prompt
    if replay is not None:
        step.replay = [_reenvelope(c, st.run_id) for c in replay]
        return "process_output_stream"
    return "model"


def _reenvelope(chunk: Any, run_id: str) -> Any:
    chunk = coerce_chunk(chunk)
    if chunk.__class__ is not DataChunk:
        chunk.run_id = run_id
        chunk.from_ = AGENT
    return chunk


async def model(cfg: RunConfig, st: RunState) -> str:
    step = _step(st)
    from ..tools import Tool

    schema = cfg.structured_schema if step.structured_output is cfg.structured_output else \
        schema_of(step.structured_output)
    step.request = ModelRequest(
        prompt=step.prompt, tools=[t.spec for t in step.tools.values() if isinstance(t, Tool)],
        tool_choice=step.tool_choice, model_settings=step.model_settings,
        provider_options=step.provider_options, structured_output=schema, run_id=st.run_id,
        step_number=st.step_number)
    try:
        step.source = step.model.stream(step.request)
    except APICallError as exc:
        step.api_error = exc
        return "process_api_error"
    return "process_output_stream"


async def _replay(chunks: list[Any]) -> AsyncIterator[Any]:
    for c in chunks:
        yield c


async def process_output_stream(cfg: RunConfig, st: RunState) -> AsyncIterator[Any]:
    """Stream one step: ``step-start``, then every model chunk through the fused chain."""
    step = _step(st)
    from_cache = step.replay is not None
    source = _replay(step.replay or []) if from_cache else step.source
    step.source = source
    chain, direct = st.chain, st.direct
    rec = step.recorder = StepRecorder(keep_chunks=cfg.keeps_chunks)
    st.delivered.append(rec)
    add, keep = rec.add, rec.chunks
    push, is_async = chain.push, chain.is_async
    step.message_id = st.run_id
    await emit(st, StepStart(message_id=st.run_id, request={}, warnings=[],
                             run_id=st.run_id, from_=AGENT))
    step.streamed = True
    for c in st.out:
        add(c)
        yield c
    st.out.clear()
    text_cls = TextDelta
    text_id: Any = None
    text_buf: list[str] = []
    try:
        async for chunk in source:
            cls = chunk.__class__
            if cls is Finish:
                step.finish = chunk
                continue
            if cls is ResponseMetadata:
                continue
            out = await push(chunk) if is_async else push(chunk)
            if direct:
                for d in direct:
                    if d.__class__ is DataChunk:
                        _persist_data(st, d)
                    yield d
                direct.clear()
            if out is None:
                continue
            if out.__class__ is text_cls:
                # The hot path: a text delta is recorded by appending its text to its buffer.
                p = out.payload
                if p.id != text_id:
                    text_id = p.id
                    text_buf = rec.open_text(text_id)
                text_buf.append(p.text)
                if keep is not None:
                    keep.append(out)
                yield out
            elif out.__class__ is list:
                for o in out:
                    add(o)
                    yield o
            else:
                add(out)
                yield out
        for o in await chain.flush():
            add(o)
            yield o
    except APICallError as exc:
        step.api_error = exc
        _set_next(st, "process_api_error")
        return
    finally:
        step.source = None
        closer = getattr(source, "aclose", None)
        if closer is not None:
            await closer()
    if step.finish is None:
        step.api_error = APICallError(
            f"model {getattr(step.model, 'model_id', step.model)!r} ended its stream without a "
            f"finish chunk", is_retryable=True)
        _set_next(st, "process_api_error")
        return
    step.usage = usage_of(step.finish)
    step.finish_reason = reason_of(step.finish)
    step.text, step.reasoning = rec.text(), rec.reasoning()
    step.tool_calls = rec.tool_calls
    parts = rec.parts()
    if parts:
        st.message_list.add(Message(role="assistant", content=MessageContent(
            parts=[StepStartPart(), *parts] if st.step_number or st.steps else parts)),
            "response")
    _set_next(st, "process_llm_response")


async def process_api_error(cfg: RunConfig, st: RunState) -> str:
    step = _step(st)
    error = step.api_error
    if error is None:
        raise RuntimeError("streamkit bug: process_api_error without an error")
    cap = cfg.error_retry_cap
    specs = (*cfg.input_specs, *cfg.output_specs, *cfg.error_specs)
    unique: list[Any] = []
    seen: set[int] = set()
    for spec in specs:  # a processor in several lanes handles each failure once
        if id(spec.processor) not in seen:
            seen.add(id(spec.processor))
            unique.append(spec)
    # The failed attempt's partial output is rolled back first, so handlers see (and mutate)
    # the list the retried call will be built from.
    st.message_list.rollback(step.checkpoint)
    args = _base_args(cfg, st)
    args["error"] = error
    retry = await run_api_error(st.runtime, unique, st.message_list, args, step=st.step_number)
    st.usage = st.usage + step.usage
    if retry and cap is not None and st.retry_count < cap:
        if step.streamed:
            _announce_retry(st, reason=str(error), processor_id=None)
        st.steps.append(StepResult(step_number=st.step_number, finish_reason="retry",
                                   usage=step.usage, retry_count=st.retry_count))
        st.retry_count += 1
        st.chain.retry_count = st.retry_count
        # a fresh attempt at the same step: new checkpoint, same overrides
        step.checkpoint = st.message_list.checkpoint()
        step.recorder = None
        step.finish = None
        step.api_error = None
        step.streamed = False
        return "process_llm_request"
    st.error = error
    return "fail"


def _rollback(cfg: RunConfig, st: RunState, *, reason: str, processor_id: str | None) -> None:
    step = _step(st)
    st.message_list.rollback(step.checkpoint)
    if step.streamed:
        _announce_retry(st, reason=reason, processor_id=processor_id)


def _announce_retry(st: RunState, *, reason: str, processor_id: str | None) -> None:
    """Tell the client to withdraw what it showed of this step (transient, never stored)."""
    step = _step(st)
    st.delivered = [rec for rec in st.delivered if rec is not step.recorder]
    emit_direct(st, DataChunk(type="data-step-retry", transient=True, data={
        "stepNumber": st.step_number, "reason": reason, "processorId": processor_id,
        "retryCount": st.retry_count + 1}))


async def process_llm_response(cfg: RunConfig, st: RunState) -> str:
    step = _step(st)
    args = _base_args(cfg, st)
    # As in Mastra, the chunks end with the model's own finish (usage, reason), which the
    # consumer never sees; a cache can store and replay it.
    rec = step.recorder
    chunks = list(rec.chunks) if rec is not None and rec.chunks is not None else []
    if step.finish is not None:
        chunks.append(step.finish)
    args.update(chunks=chunks, warnings=[], request=step.request, raw_response=None,
                from_cache=step.replay is not None)
    await run_llm_response(st.runtime, cfg.input_specs, args, step=st.step_number)
    return "process_output_step"


async def process_output_step(cfg: RunConfig, st: RunState) -> str:
    step = _step(st)
    args = _base_args(cfg, st)
    args.update(finish_reason=step.finish_reason, provider_metadata=None,
                tool_calls=[dict(c) for c in step.tool_calls] or None, text=step.text,
                usage=step.usage)
    await run_message_hook(st.runtime, cfg.output_specs, "process_output_step", st.message_list,
                           args, default_source="response", step=st.step_number)
    return "tools" if step.tool_calls else "step_finish"


async def _call_tool(cfg: RunConfig, st: RunState, call: dict[str, Any]) -> tuple[bool, Any]:
    step = _step(st)
    name = call["tool_name"]
    tool = step.tools.get(name)
    if tool is None:
        raise ToolError(f"unknown tool {name!r}; available: {sorted(step.tools)}",
                        tool_name=name)
    return True, await tool.run(call["args"] if call["args"] is not None else {},
                                writer=st.routed_writer,
                                request_context=st.runtime.request_context,
                                tool_call_id=call["tool_call_id"], abort_signal=None)


async def _guarded(cfg: RunConfig, st: RunState, call: dict[str, Any]) -> tuple[bool, Any]:
    try:
        return await _call_tool(cfg, st, call)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
        return False, exc


async def tools(cfg: RunConfig, st: RunState) -> AsyncIterator[Any]:
    """Run the step's tool calls concurrently; data chunks they write stream live."""
    step = _step(st)
    event = st.data_event = asyncio.Event()
    tasks = [asyncio.ensure_future(_guarded(cfg, st, c)) for c in step.tool_calls]
    pending = set(tasks)
    try:
        while pending:
            waiter = asyncio.ensure_future(event.wait())
            done, _ = await asyncio.wait(pending | {waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            event.clear()
            pending -= done
            if st.routed:
                await drain_routed(cfg, st)
                for c in st.out:
                    yield c
                st.out.clear()
    finally:
        for t in pending:
            t.cancel()
        st.data_event = None
    step.tool_outcomes = [(call, *t.result()) for call, t in zip(step.tool_calls, tasks)]
    _set_next(st, "process_tool_result")


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, ToolError) else str(exc)


async def process_tool_result(cfg: RunConfig, st: RunState) -> str:
    step = _step(st)
    ml = st.message_list
    for call, ok, value in step.tool_outcomes:
        cid, name, targs = call["tool_call_id"], call["tool_name"], call["args"]
        if not ok:
            text = _error_text(value)
            ml.update_tool_invocation(ToolInvocationPart.failed(cid, name, text, targs))
            step.tool_results.append({"tool_call_id": cid, "tool_name": name, "args": targs,
                                      "result": text, "is_error": True})
            await emit(st, ToolErrorChunk(tool_call_id=cid, tool_name=name, args=targs,
                                          error={"name": type(value).__name__,
                                                 "message": str(value)},
                                          run_id=st.run_id, from_=AGENT))
            continue
        args = _base_args(cfg, st)
        args.update(tool_name=name, tool_call_id=cid, args=targs, result=value,
                    provider_executed=False)
        await run_message_hook(st.runtime, cfg.output_specs, "process_tool_result", ml, args,
                               default_source="response", step=st.step_number)
        result = _invocation_result(ml, cid)
        if result is _NOT_SET:
            ml.update_tool_invocation(ToolInvocationPart.returned(cid, name, value, targs))
            result = value
        step.tool_results.append({"tool_call_id": cid, "tool_name": name, "args": targs,
                                  "result": result, "is_error": False})
        await emit(st, ToolResult(tool_call_id=cid, tool_name=name, args=targs, result=result,
                                  run_id=st.run_id, from_=AGENT))
    return "step_finish"


_NOT_SET = object()


def _invocation_result(ml: Any, tool_call_id: str) -> Any:
    """The result a ``process_tool_result`` hook wrote with ``update_tool_invocation``, if any."""
    for msg in reversed(ml.get.response.db()):
        for part in msg.content.parts:
            if isinstance(part, ToolInvocationPart) and part.tool_call_id == tool_call_id:
                if part.state == "result":
                    return part.tool_invocation.result
                return _NOT_SET
    return _NOT_SET


async def step_finish(cfg: RunConfig, st: RunState) -> str:
    step = _step(st)
    continued = bool(step.tool_calls) and st.step_number + 1 < cfg.max_steps
    await emit(st, StepFinish(payload=step_end_payload(
        "step-finish", step.finish_reason, continued, step.text, step.tool_calls, step.usage,
        st.run_id), run_id=st.run_id, from_=AGENT))
    st.steps.append(StepResult(
        step_number=st.step_number, text=step.text, reasoning=step.reasoning,
        tool_calls=step.tool_calls, tool_results=step.tool_results,
        finish_reason=step.finish_reason, usage=step.usage, retry_count=st.retry_count,
        from_cache=step.replay is not None))
    st.usage = st.usage + step.usage
    st.finish_reason = step.finish_reason
    st.chain.record(st.step_number)
    st.retry_count = 0
    st.feedback.clear()
    st.step_number += 1
    return "process_input_step" if continued else "process_output_result"


async def retry(cfg: RunConfig, st: RunState) -> str:
    info = st.pending_tripwire
    step = _step(st)
    if info is None:
        raise RuntimeError("streamkit bug: retry without a tripwire")
    _rollback(cfg, st, reason=info.reason, processor_id=info.processor_id)
    if step.streamed:
        emit_direct(st, StepFinish(payload=step_end_payload(
            "step-finish", "retry", True, "", [], step.usage, st.run_id),
            run_id=st.run_id, from_=AGENT))
    st.steps.append(StepResult(step_number=st.step_number, finish_reason="retry",
                               usage=step.usage, tripwire=info, retry_count=st.retry_count))
    st.usage = st.usage + step.usage
    feedback = FEEDBACK_TEMPLATE.format(reason=info.reason)
    if feedback not in st.feedback:
        st.feedback.append(feedback)
    st.retry_count += 1
    st.pending_tripwire = None
    return "process_input_step"


async def process_output_result(cfg: RunConfig, st: RunState) -> str:
    result = {"text": _response_text(st), "usage": st.usage, "finish_reason": st.finish_reason,
              "steps": list(st.steps)}
    await run_message_hook(st.runtime, cfg.output_specs, "process_output_result",
                           st.message_list, {"result": result, "retry_count": 0,
                                             "writer": st.direct_writer,
                                             "request_context": st.runtime.request_context},
                           default_source="response")
    _take_direct(st)
    st.text = _response_text(st)
    return "finish"


def _response_text(st: RunState) -> str:
    return "".join(get_text(m) for m in st.message_list.get.response.db()
                   if m.role == "assistant")


async def finish(cfg: RunConfig, st: RunState) -> str:
    if cfg.structured_output is not None:
        st.object = parse_object(cfg, st.text)
        emit_direct(st, ObjectResult(object=st.object, run_id=st.run_id, from_=AGENT))
    else:
        # A processor (e.g. a structuring guard) may have produced the object itself.
        for rec in st.delivered:
            if rec.objects:
                st.object = rec.objects[-1]
    if cfg.memory is not None and cfg.thread_id is not None:
        await cfg.memory.remember(cfg.thread_id, cfg.resource_id, st.message_list)
    payload = step_end_payload("finish", st.finish_reason, False, st.text, [], st.usage,
                                st.run_id)
    emit_direct(st, Finish(payload=payload, run_id=st.run_id, from_=AGENT))
    return "end"


async def abort(cfg: RunConfig, st: RunState) -> str:
    info = st.pending_tripwire
    if info is None:
        raise RuntimeError("streamkit bug: abort without a tripwire")
    st.tripwire = info
    st.finish_reason = "other"
    st.text = ""
    emit_direct(st, TripwireChunk(reason=info.reason, retry=info.retry,
                                  metadata=info.metadata if info.metadata is not None
                                  else UNSET,
                                  processor_id=info.processor_id or UNSET,
                                  run_id=st.run_id, from_=AGENT))
    return "end"


async def fail(cfg: RunConfig, st: RunState) -> str:
    err = st.error
    if err is None:
        raise RuntimeError("streamkit bug: fail without an error")
    body: dict[str, Any] = {"name": type(err).__name__, "message": str(err)}
    if isinstance(err, APICallError):
        body.update(statusCode=err.status_code, isRetryable=err.is_retryable)
    st.finish_reason = "error"
    emit_direct(st, ErrorChunk(error=body, run_id=st.run_id, from_=AGENT))
    return "end"
