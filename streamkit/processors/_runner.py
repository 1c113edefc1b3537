"""Runners for the eight non-stream hooks: chaining, return shapes, trace, violations.

These run once per request or per step (never per chunk), so clarity wins over speed here.

Decisions where Mastra has two behaviours (``docs/mastra-fidelity.md``, "Two execution paths, one
decision"):

* Each processor of a lane re-reads the list (Mastra's raw-runner path): ``process_input`` gets
  ``get.input.db()``, ``process_output_result`` gets ``get.response.db()``, every other message
  hook gets ``get.all.db()``.
* ``on_violation`` fires for every TripWire from every hook, ``process_tool_result`` included.
* ``system_messages`` is the untagged bucket everywhere except ``process_tool_result``, which gets
  every system message (as in Mastra).
* An exception (not a TripWire) in ``process_api_error`` is logged, recorded in the trace and
  ignored, so the original API error is what surfaces. Anywhere else it becomes ``ProcessorError``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from .._message_list import Source
from .._prompt import PromptMessage
from ..chunks import Chunk
from ..errors import ProcessorError
from ..messages import Message, MessageList
from ..tripwire import TripWire
from ._chain import bounded, hook_failure
from ._runtime import RequestRuntime, now
from ._spec import ProcessorSpec

if TYPE_CHECKING:
    from ..models import Model
    from ..models._base import ToolChoice

__all__ = ["StepOverrides", "MessagesUpdate", "LLMRequestUpdate", "APIErrorResult", "call_hook",
           "run_message_hook", "run_input_step", "run_llm_request", "run_llm_response",
           "run_api_error", "llm_request_order"]

log = logging.getLogger("streamkit.processors")


#: A message as a hook may hand one back: a ``Message``, a string (a user message) or a plain
#: dict (normalised as ``MessageList.add`` does).
MessageLike: TypeAlias = Message | str | Mapping[str, Any]

#: A ``tools`` override: ``Tool`` objects / ``@tool`` functions / typed functions, as a list or
#: as ``{name: tool}`` (what ``Agent(tools=...)`` accepts). Typed as callables, not ``Tool``:
#: ``streamkit.tools`` imports this package, so naming ``Tool`` here would close a circle.
ToolsOverride: TypeAlias = Sequence[Callable[..., object]] | Mapping[str, Callable[..., object]]


@dataclass(slots=True)
class StepOverrides:
    """What ``process_input_step`` (and ``prepare_step``) may change for one step.

    Every field left as ``None`` keeps its current value. Overrides chain: the next processor
    sees the values the previous one set, and they apply to this step only. Each field is
    typed (issue 32), so a misspelled field or a wrong value is a type checker's error:

    Attributes:
        model: a model object (anything with ``stream(request)``) or a router id string.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "tool",
            "toolName": name}``.
        active_tools: the names of the tools the model may call this step.
        tools: the tools of this step (a list, or ``{name: tool}``).
        messages, message_list, system_messages: as a message hook's result.
        provider_options, model_settings: replace the step's (``temperature``, ...).
        structured_output: a type or a JSON schema the answer must follow.
    """

    model: Model | str | None = None
    tool_choice: ToolChoice | None = None
    active_tools: Sequence[str] | None = None
    tools: ToolsOverride | None = None
    messages: Sequence[MessageLike] | None = None
    message_list: MessageList | None = None
    system_messages: Sequence[MessageLike] | None = None
    provider_options: Mapping[str, Any] | None = None
    model_settings: Mapping[str, Any] | None = None
    structured_output: type | Mapping[str, Any] | None = None

    def set_fields(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


_OVERRIDE_KEYS = frozenset(f.name for f in fields(StepOverrides))


@dataclass(frozen=True, slots=True)
class MessagesUpdate:
    """The typed form of a message hook's ``{"messages": ..., "system_messages": ...}`` result
    (``process_input``, ``process_input_step``, ``process_output_step``, ``process_tool_result``,
    ``process_output_result``); returning the dict works the same.

    Attributes:
        messages: the complete new set of the messages the hook was given (those missing are
            removed); ``None`` leaves them as they are.
        system_messages: replaces the untagged system messages (for this step when returned
            from ``process_input_step``); ``None`` leaves them.

    Example:
        >>> from streamkit.messages import get_text
        >>> def process_input(messages):
        ...     return MessagesUpdate(messages=[m for m in messages if get_text(m).strip()])
    """

    messages: Sequence[MessageLike] | None = None
    system_messages: Sequence[MessageLike] | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.messages is not None:
            out["messages"] = list(self.messages)
        if self.system_messages is not None:
            out["system_messages"] = list(self.system_messages)
        return out


@dataclass(frozen=True, slots=True)
class LLMRequestUpdate:
    """The typed form of ``process_llm_request``'s result; returning the dict works the same.

    Attributes:
        prompt: the provider-shaped messages to send instead, for this call only (never stored).
        response: chunks to replay instead of calling the model (a cache hit).

    Example:
        >>> def process_llm_request(prompt):
        ...     terse = {"role": "system", "content": "Be terse."}
        ...     return LLMRequestUpdate(prompt=[*prompt, terse])
    """

    prompt: list[PromptMessage] | None = None
    response: Sequence[Chunk] | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.prompt is not None:
            out["prompt"] = self.prompt
        if self.response is not None:
            out["response"] = list(self.response)
        return out


@dataclass(frozen=True, slots=True)
class APIErrorResult:
    """The typed form of ``process_api_error``'s ``{"retry": True}``.

    Example:
        >>> def process_api_error(error):
        ...     return APIErrorResult(retry=getattr(error, "status_code", None) == 429)
    """

    retry: bool = False


async def call_hook(runtime: RequestRuntime, spec: ProcessorSpec, hook: str,
                    available: dict[str, object], step: int | None) -> Any:
    """Call one hook with the arguments it asks for; record it in the trace.

    TripWire: its ``processor_id`` is filled in, ``on_violation`` is called, and it is re-raised.
    Any other exception is re-raised as ``ProcessorError`` naming processor and hook.
    """
    h = spec.hooks[hook]
    available["state"] = runtime.state(spec.id)
    available["abort"] = runtime.abort(spec.id)
    available.setdefault("request_context", runtime.request_context)
    available.setdefault("tracing_context", None)
    t0 = now()
    try:
        result = h.fn(**h.call_kwargs(available))
        if h.is_async:
            limit = runtime.hook_timeout
            result = await (result if limit is None else bounded(result, limit, spec.id, hook))
    except BaseException as exc:
        failure = hook_failure(spec.id, hook, exc)
        if isinstance(failure, TripWire):
            runtime.record(spec.id, hook, step, now() - t0,
                           "retry" if failure.retry else "tripwire",
                           failure.reason)
            await runtime.violation(spec, failure, hook)
        elif isinstance(failure, ProcessorError):
            runtime.record(spec.id, hook, step, now() - t0, "error", str(exc))
        raise failure from (None if failure is exc else exc)
    took = now() - t0
    runtime.record(spec.id, hook, step, took, "ok" if result is None else "changed")
    if not h.is_async and runtime.hook_timeout is not None and took > runtime.hook_timeout:
        # A sync hook cannot be interrupted (it runs on the event loop): report the overrun.
        log.warning("processor %r: %s (a sync hook, run on the event loop) took %.1f s, past "
                    "hook_timeout %g s, and blocked every other request meanwhile; make it "
                    "async (run blocking work with asyncio.to_thread)", spec.id, hook, took,
                    runtime.hook_timeout)
    return result


def _messages_for(hook: str, message_list: MessageList) -> list[Message]:
    if hook == "process_input":
        return message_list.get.input.db()
    if hook == "process_output_result":
        return message_list.get.response.db()
    return message_list.get.all.db()


def _system_for(hook: str, message_list: MessageList) -> list[Message]:
    if hook == "process_tool_result":
        return message_list.get_all_system_messages()
    return message_list.get_system_messages()


async def run_message_hook(runtime: RequestRuntime, specs: Sequence[ProcessorSpec], hook: str,
                           message_list: MessageList, available: Mapping[str, object], *,
                           default_source: Source,
                           step: int | None = None) -> None:
    """Run a message hook (``process_input``, ``process_output_step``, ``process_tool_result``,
    ``process_output_result``) over ``specs`` in order, applying each return value to
    ``message_list`` (None, same list, list of messages, or ``{"messages", "system_messages"}``)."""
    for spec in specs:
        if hook not in spec.hooks:
            continue
        given = _messages_for(hook, message_list)
        args = dict(available)
        args["messages"] = given
        args["message_list"] = message_list
        args["system_messages"] = _system_for(hook, message_list)
        probe = runtime.probe  # an observer wants what each processor changed (``events``)
        if probe is None:
            result = await call_hook(runtime, spec, hook, args, step)
            _apply(spec, hook, message_list, result, given, default_source)
        elif hook == "process_tool_result":  # the call's result before and after
            raw = available.get("result")
            before = probe.tool_result(available, message_list.get.response.db(), raw)
            result = await call_hook(runtime, spec, hook, args, step)
            _apply(spec, hook, message_list, result, given, default_source)
            probe.tool_hook(spec, available, before,
                            probe.tool_result(available, message_list.get.response.db(), raw))
        else:
            seen = probe.texts(given)
            result = await call_hook(runtime, spec, hook, args, step)
            _apply(spec, hook, message_list, result, given, default_source)
            probe.message_hook(spec, hook, seen, _messages_for(hook, message_list))


def _apply(spec: ProcessorSpec, hook: str, message_list: MessageList, result: object,
           given: list[Any], default_source: Source) -> None:
    if isinstance(result, MessagesUpdate):
        result = result.as_dict()
    try:
        message_list.apply_hook_result(result, given, default_source)
    except ProcessorError as exc:
        raise ProcessorError(f"processor {spec.id!r}, {hook}: {exc}", processor_id=spec.id,
                             hook=hook) from exc


async def run_input_step(runtime: RequestRuntime, specs: Sequence[ProcessorSpec],
                         message_list: MessageList, available: Mapping[str, object], *, step: int
                         ) -> StepOverrides:
    """Run ``process_input_step`` of every processor (then ``prepare_step``, which the agent
    appends as a processor). Returns the chained overrides for this step.

    ``available`` must hold the step's current ``model``, ``tools``, ``tool_choice``,
    ``active_tools``, ``provider_options``, ``model_settings`` and ``structured_output``; each
    processor sees the values left by the previous one.
    """
    overrides = StepOverrides()
    current = dict(available)
    for spec in specs:
        if "process_input_step" not in spec.hooks:
            continue
        given = message_list.get.all.db()
        args = dict(current)
        args["messages"] = given
        args["message_list"] = message_list
        args["system_messages"] = message_list.get_system_messages()
        result = await call_hook(runtime, spec, "process_input_step", args, step)
        if result is None or result is message_list:
            continue
        if isinstance(result, (list, tuple)):
            _apply(spec, "process_input_step", message_list, list(result), given, "input")
            continue
        if isinstance(result, StepOverrides):
            result = result.set_fields()
        elif isinstance(result, MessagesUpdate):
            result = result.as_dict()
        if not isinstance(result, dict):
            _apply(spec, "process_input_step", message_list, result, given, "input")
            continue
        unknown = set(result) - _OVERRIDE_KEYS
        if unknown:
            raise ProcessorError(
                f"processor {spec.id!r}, process_input_step returned unknown key(s) "
                f"{sorted(unknown)}; expected any of {sorted(_OVERRIDE_KEYS)}",
                processor_id=spec.id, hook="process_input_step")
        if "messages" in result and "message_list" in result:
            raise ProcessorError(
                f"processor {spec.id!r}, process_input_step returned both 'messages' and "
                f"'message_list'; return one of them", processor_id=spec.id,
                hook="process_input_step")
        if "message_list" in result and result["message_list"] is not message_list:
            _apply(spec, "process_input_step", message_list, result["message_list"], given, "input")
        msg_part = {k: result[k] for k in ("messages", "system_messages") if k in result}
        if msg_part:
            payload = msg_part if "system_messages" in msg_part else msg_part["messages"]
            if "system_messages" in msg_part and "messages" not in msg_part:
                payload = {"messages": given, "system_messages": msg_part["system_messages"]}
            _apply(spec, "process_input_step", message_list, payload, given, "input")
        for key, value in result.items():
            if key in ("messages", "message_list", "system_messages"):
                continue
            setattr(overrides, key, value)
            current[key] = value
    return overrides


def llm_request_order(specs: Sequence[ProcessorSpec]) -> list[ProcessorSpec]:
    """The processors whose ``process_llm_request`` runs, in the order it runs: the lane's order,
    except that those with ``sees_final_request`` come after all the others (in lane order
    among themselves).

    Why: a processor that must see the request exactly as the model receives it (a response
    cache keys its entries on it) would otherwise see only the edits of the processors before
    it, and which processors come after depends on how the lists were written (a call may
    replace a list; a list may be a function of the request). Moving a processor that only
    looks (or answers with ``{"response": ...}``) changes nothing for the others; one that also
    edits the prompt is, for the others, as if it had been listed last.
    """
    hooked = [s for s in specs if "process_llm_request" in s.hooks]
    if not any(s.sees_final_request for s in hooked):
        return hooked
    return ([s for s in hooked if not s.sees_final_request]
            + [s for s in hooked if s.sees_final_request])


async def run_llm_request(runtime: RequestRuntime, specs: Sequence[ProcessorSpec],
                          available: Mapping[str, object], *, step: int
                          ) -> tuple[list[PromptMessage], list[Chunk] | None]:
    """Run ``process_llm_request``: returns ``(prompt, response_chunks_or_None)``.

    ``{"prompt": p}`` replaces the prompt for the next processor and for this call only (never
    stored); ``{"response": chunks}`` short-circuits the model — the first processor to return a
    response wins, later processors still run. The order is ``llm_request_order``'s.
    """
    # cast: the caller puts the step's prompt under "prompt" (the docstring's contract).
    prompt = cast("list[PromptMessage]", available["prompt"])
    response: list[Chunk] | None = None
    for spec in llm_request_order(specs):
        args = dict(available)
        args["prompt"] = prompt
        result = await call_hook(runtime, spec, "process_llm_request", args, step)
        if isinstance(result, LLMRequestUpdate):
            result = result.as_dict()
        if result is None:
            continue
        if not isinstance(result, dict) or not set(result) <= {"prompt", "response"}:
            raise ProcessorError(
                f"processor {spec.id!r}, process_llm_request must return None, {{'prompt': ...}} "
                f"or {{'response': [chunks]}}; got {result!r:.120}",
                processor_id=spec.id, hook="process_llm_request")
        if "prompt" in result:
            if not isinstance(result["prompt"], list):
                raise ProcessorError(
                    f"processor {spec.id!r}, process_llm_request returned a prompt of type "
                    f"{type(result['prompt']).__name__}; expected a list of message dicts",
                    processor_id=spec.id, hook="process_llm_request")
            prompt = result["prompt"]
        if response is None and result.get("response") is not None:
            chunks = result["response"]
            if isinstance(chunks, dict) and "chunks" in chunks:
                chunks = chunks["chunks"]
            if not isinstance(chunks, (list, tuple)):
                raise ProcessorError(
                    f"processor {spec.id!r}, process_llm_request returned a response of type "
                    f"{type(chunks).__name__}; expected a list of chunks",
                    processor_id=spec.id, hook="process_llm_request")
            response = list(chunks)
    return prompt, response


async def run_llm_response(runtime: RequestRuntime, specs: Sequence[ProcessorSpec],
                           available: Mapping[str, object], *, step: int) -> None:
    """Run ``process_llm_response`` (return values are ignored)."""
    for spec in specs:
        if "process_llm_response" in spec.hooks:
            await call_hook(runtime, spec, "process_llm_response", dict(available), step)


async def run_api_error(runtime: RequestRuntime, specs: Sequence[ProcessorSpec],
                        message_list: MessageList, available: Mapping[str, object], *, step: int
                        ) -> str | None:
    """Run ``process_api_error`` in order until one returns ``{"retry": True}`` (it wins; later
    ones are not called). Returns the id of the processor that asked for the retry (it names
    the retry in ``data-step-retry``), or ``None`` when none did. TripWires propagate."""
    for spec in specs:
        if "process_api_error" not in spec.hooks:
            continue
        args = dict(available)
        args["messages"] = message_list.get.all.db()
        args["message_list"] = message_list
        try:
            result = await call_hook(runtime, spec, "process_api_error", args, step)
        except ProcessorError as exc:
            log.error("process_api_error of %r raised; ignored: %s", spec.id, exc)
            continue
        if isinstance(result, APIErrorResult):
            result = {"retry": result.retry}
        if result is None:
            continue
        if not isinstance(result, dict):
            log.error("process_api_error of %r returned %r; expected None, {'retry': bool} or "
                      "APIErrorResult", spec.id, result)
            continue
        if result.get("retry"):
            return spec.id
    return None
