"""``Agent``: configuration, per-call resolution (including ``Override``), ``generate``/``stream``.

The agent itself holds configuration only; each call resolves it into a frozen ``RunConfig`` and
creates a ``Run`` (new state dicts, new trace) that walks the loop graph (``_loop``); the
``AgentStream`` returned owns that run. Nothing per call is stored on the agent, so any number of
concurrent calls on one agent never share state.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    NoReturn,
    TypeAlias,
    TypedDict,
    TypeGuard,
    TypeVar,
    Union,
    Unpack,
)

from ..errors import InvalidArgument, InvalidType, ProcessorDefinitionError, ToolError, UsageError
from ..graph import Graph
from ..models import Model, resolve_model
from ..processors._base import Pipeline, flatten_processors
from ..processors._runtime import DEFAULT_HOOK_TIMEOUT
from ..processors._spec import ProcessorSpec, register
from ..tools import DEFAULT_TOOL_TIMEOUT, tools_by_name
from ..validate import instance_of, int_at_least, optional_int_at_least, optional_seconds
from ._build import schema_of
from ._loop import NODES, build_graph
from ._observe import check_observers
from ._result import AgentResult, AgentStream
from ._run import Run
from ._state import RunConfig, StructuredOutput, ToolChoice

if TYPE_CHECKING:
    from ..events import RunObserver
    from ..memory import Memory
    from ..messages import Message

__all__ = ["Agent", "Override", "CallOptions", "Processors", "MessageInput"]

log = logging.getLogger("streamkit.agent")

T = TypeVar("T")


#: A processor list: processors and ``Pipeline``s, or a function of ``request_context`` that
#: returns them.
Processors: TypeAlias = (Sequence[object] | Pipeline
                          | Callable[[Mapping[str, object]], Sequence[object]])

#: What ``generate``/``stream`` accept as input: a string, a message, a message dict, or a list.
MessageInput: TypeAlias = Union[str, "Message", Mapping[str, object],
                                Sequence[Union[str, "Message", Mapping[str, object]]]]


@dataclass(frozen=True, slots=True)
class Override:
    """Change one processor list for one call without restating it (beyond Mastra, whose
    per-call lists replace the agent's wholesale).

    Args:
        remove: ids to take out.
        add: processors to append (or insert: see ``before``/``after``).
        replace: ``{id: processor}`` swapped in at the same position.
        before: insert ``add`` before the processor with this id.
        after: insert ``add`` after the processor with this id.

    Raises:
        ProcessorDefinitionError: an id in ``remove``/``replace``/``before``/``after`` that is
            not in the list (a typo would otherwise silently keep a guard you meant to drop).

    Example:
        >>> agent.stream("hi", output_processors=Override(remove=["pii"], add=[Audit()]))
    """

    remove: Sequence[str] = ()
    add: Sequence[object] = ()
    replace: dict[str, object] = field(default_factory=dict)
    before: str | None = None
    after: str | None = None

    def apply(self, base: list[object], lane: str) -> list[object]:
        ids = [getattr(p, "id", None) for p in base]

        def need(pid: str, what: str) -> int:
            if pid not in ids:
                raise ProcessorDefinitionError(
                    f"Override({what}={pid!r}) for {lane}: no processor with that id; the list "
                    f"has {[i for i in ids if i]}")
            return ids.index(pid)

        for pid in self.remove:
            need(pid, "remove")
        for pid in self.replace:
            need(pid, "replace")
        removed = set(self.remove)
        out = [self.replace.get(str(getattr(p, "id", "")), p) for p in base
               if getattr(p, "id", None) not in removed]
        new_ids = [getattr(p, "id", None) for p in out]
        adds = flatten_processors(list(self.add))
        if self.before is not None or self.after is not None:
            anchor = self.before if self.before is not None else self.after
            need(anchor, "before" if self.before is not None else "after")  # type: ignore[arg-type]
            if anchor not in new_ids:
                raise ProcessorDefinitionError(
                    f"Override for {lane}: anchor {anchor!r} was removed in the same override")
            pos = new_ids.index(anchor) + (0 if self.before is not None else 1)
            return out[:pos] + adds + out[pos:]
        return out + adds


def _is_dynamic(value: object) -> TypeGuard[Callable[[object], object]]:
    """A processor list given as a function of ``request_context``."""
    return callable(value) and not hasattr(value, "id") \
        and not isinstance(value, (list, tuple, Pipeline))


def _resolve_list(value: object, request_context: object, lane: str) -> list[object]:
    if value is None:
        return []
    if _is_dynamic(value):
        value = value(request_context)
        if not isinstance(value, (list, tuple, Pipeline)):
            raise ProcessorDefinitionError(
                f"{lane} function returned {type(value).__name__}; expected a list of processors")
    return flatten_processors(value)


#: Which hooks run in which lane (``process_api_error`` runs in every lane, once per processor).
LANE_HOOKS = {
    "input_processors": frozenset(("process_input", "process_input_step", "process_llm_request",
                                   "process_llm_response", "process_api_error")),
    "output_processors": frozenset(("process_output_stream", "process_output_step",
                                    "process_tool_result", "process_output_result",
                                    "process_api_error")),
    "error_processors": frozenset(("process_api_error",)),
}


def _check_lane(spec: ProcessorSpec, lane: str, all_lanes: dict[str, set[int]] | None) -> None:
    """A processor whose hooks never run in its lane is a configuration mistake: raise. Hooks
    of another lane it is not registered in would silently never run: warn."""
    here = set(spec.hooks) & LANE_HOOKS[lane]
    if not here:
        where = sorted({other for other, hooks in LANE_HOOKS.items()
                        if set(spec.hooks) & hooks})
        raise ProcessorDefinitionError(
            f"processor {spec.id!r} is in {lane} but none of its hooks "
            f"({', '.join(sorted(spec.hooks))}) runs there; put it in {' or '.join(where)}. "
            f"{lane} runs {', '.join(sorted(LANE_HOOKS[lane]))}")
    if all_lanes is None:  # per-call lists: checked, not warned about on every call
        return
    for other, hooks in LANE_HOOKS.items():
        missing = (set(spec.hooks) & hooks) - LANE_HOOKS[lane]
        if other != lane and missing and id(spec.processor) not in all_lanes.get(other, set()):
            log.warning("processor %r has %s, which runs only in %s, but it is not registered "
                        "there; add it to %s as well or the hook never runs", spec.id,
                        ", ".join(sorted(missing)), other, other)


def _identities(processors: Iterable[object]) -> set[int]:
    return {id(p) for p in processors}


def _specs(processors: Iterable[Any], lane: str,
           all_lanes: dict[str, set[int]] | None = None) -> tuple[ProcessorSpec, ...]:
    specs = []
    for i, p in enumerate(processors):
        spec = register(p)
        _check_lane(spec, lane, all_lanes)
        try:
            p.processor_index = i
        except AttributeError:
            pass
        specs.append(spec)
    return tuple(specs)


class _PrepareStep:
    """``prepare_step`` as a processor (id ``prepare-step``) that runs after every input
    processor's ``process_input_step``; it receives what ``process_input_step`` receives."""

    id = "prepare-step"

    def __init__(self, fn: Callable[..., object]) -> None:
        self.process_input_step = fn


class Agent:
    """An agent: instructions, a model, tools and three processor lists.

    Args:
        id: the agent's id (``start`` chunk, traces).
        name: display name.
        instructions: the system prompt (a string or a list of strings; untagged system messages).
        model: a model object (``ScriptedModel``, ``OpenAIChatModel``...) or a router id such as
            ``"openai/gpt-4o-mini"``.
        tools: ``@tool`` functions or ``Tool`` objects.
        input_processors / output_processors / error_processors: lists of processors (or
            ``Pipeline``s), or functions ``(request_context) -> list``.
        max_processor_retries: how many consecutive retries processors may ask for; unset means
            none (10 for error processors when any are configured).
        max_steps: model calls that may follow tool calls (retries do not count). Default 5.
        memory: a ``streamkit.memory.Memory``; its loading and saving are loop nodes, so no
            per-call processor override can remove them.
        tool_choice/active_tools/model_settings/provider_options/structured_output/prepare_step:
            defaults for every call of ``generate``/``stream``; per-call values win.
        tool_timeout: seconds each tool call may take (a tool's own ``timeout`` wins); default
            300 s, ``None``: no limit. An ``async def`` tool that does not return in time is
            cancelled and the model gets a ``tool-error``. A plain ``def`` tool runs on the event
            loop and cannot be interrupted: give it its own ``timeout=`` to run it in a worker
            thread (then the wait for it ends on time), else an overrun is logged as a warning
            on ``streamkit.tools`` when it returns (see ``streamkit.tools``).
        hook_timeout: seconds each call of an ``async def`` processor hook may take (per chunk
            for ``process_output_stream``); default 120 s, ``None``: no limit. One that does not
            return in time is cancelled and the run fails with ``ProcessorError`` (an ``error``
            chunk; memory stores nothing of the turn). A sync hook runs on the event loop and
            cannot be interrupted: a sync message hook that overruns is logged as a warning on
            ``streamkit.processors``; a sync stream hook is not timed (its per-chunk path
            stays free of clock reads).

    Example:
        >>> agent = Agent(id="support", instructions="Be brief.", model=ScriptedModel([text("Hi")]))
        >>> (await agent.generate("Hello")).text
        'Hi'
    """

    def __init__(self, *, id: str, instructions: str | Sequence[str] = "",
                 model: Model | str | None = None, name: str | None = None,
                 tools: Sequence[object] | Mapping[str, object] | None = None,
                 input_processors: Processors | None = None,
                 output_processors: Processors | None = None,
                 error_processors: Processors | None = None,
                 max_processor_retries: int | None = None, max_steps: int = 5,
                 memory: Memory | None = None, tool_choice: ToolChoice | None = None,
                 active_tools: Sequence[str] | None = None,
                 model_settings: Mapping[str, object] | None = None,
                 provider_options: Mapping[str, object] | None = None,
                 structured_output: StructuredOutput | None = None,
                 prepare_step: Callable[..., object] | None = None,
                 tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
                 hook_timeout: float | None = DEFAULT_HOOK_TIMEOUT) -> None:
        if not isinstance(id, str) or not id:
            raise InvalidArgument(f"Agent needs a non-empty string id, got {id!r}")
        _check_counts(max_steps, max_processor_retries)
        self.tool_timeout = _check_seconds("tool_timeout", tool_timeout)
        self.hook_timeout = _check_seconds("hook_timeout", hook_timeout)
        self.id = id
        self.name = name or id
        self.instructions = (instructions,) if isinstance(instructions, str) \
            else tuple(instructions)
        # A router id is resolved once, so every call shares one model (and its HTTP client).
        self.model: Model | None = resolve_model(model) if model is not None else None
        self.tools = tools_by_name(tools)
        self.input_processors = input_processors
        self.output_processors = output_processors
        self.error_processors = error_processors
        self.max_processor_retries = max_processor_retries
        self.max_steps = max_steps
        self.memory = memory
        self.tool_choice = tool_choice
        self.active_tools = active_tools
        self.model_settings = model_settings
        self.provider_options = provider_options
        self.structured_output = structured_output
        self.prepare_step = prepare_step
        self._graphs: dict[tuple[object, ...], Graph] = {}
        # Fail at construction, not at the first request, on malformed processors.
        static = {lane: _resolve_list(getattr(self, lane), {}, lane)
                  for lane in LANE_HOOKS if not _is_dynamic(getattr(self, lane))}
        members = {lane: _identities(procs) for lane, procs in static.items()}
        for lane, procs in static.items():
            _specs(procs, lane, members)

    def __repr__(self) -> str:
        return f"Agent(id={self.id!r}, model={getattr(self.model, 'model_id', self.model)!r})"

    # ------------------------------------------------------------------ resolution

    def _lane(self, lane: str, override: Processors | Override | None,
              request_context: Mapping[str, object]) -> tuple[ProcessorSpec, ...]:
        value = getattr(self, lane)
        if value is None and override is None:
            return ()  # no processors in this lane (most agents' input and error lanes)
        base = _resolve_list(value, request_context, lane)
        if override is None:
            chosen = base
        elif isinstance(override, Override):
            chosen = override.apply(base, lane)
        else:
            chosen = _resolve_list(override, request_context, lane)
        return _specs(chosen, lane)

    def _config(self, call: CallOptions) -> RunConfig:
        # The caller's own dict, not a copy: processors may leave things in it for the caller.
        rc = call.get("request_context")
        if rc is None:
            rc = {}
        model = call.get("model")
        if model is None:
            model = self.model
        if model is None:
            raise UsageError(f"agent {self.id!r} has no model; pass model= to Agent(...) or "
                             f"to the call")
        max_steps = call.get("max_steps")
        if max_steps is None:
            max_steps = self.max_steps
        given_retries = "max_processor_retries" in call
        retries = call["max_processor_retries"] if given_retries else self.max_processor_retries
        _check_counts(max_steps, retries if given_retries else None)
        structured = _pick(call.get("structured_output"), self.structured_output)
        active = _pick(call.get("active_tools"), self.active_tools)
        if active is not None:
            unknown = [t for t in active if t not in self.tools]
            if unknown:
                raise ToolError(f"active_tools names unknown tool(s) {unknown}; this agent has "
                                f"{sorted(self.tools)}", tool_name=unknown[0])
        prepare = _pick(call.get("prepare_step"), self.prepare_step)
        output_specs = self._lane("output_processors", call.get("output_processors"), rc)
        return RunConfig(
            agent_id=self.id, instructions=self.instructions, model=resolve_model(model),
            tools=self.tools,
            input_specs=self._lane("input_processors", call.get("input_processors"), rc),
            output_specs=output_specs,
            error_specs=self._lane("error_processors", call.get("error_processors"), rc),
            prepare_step=register(_PrepareStep(prepare)) if prepare is not None else None,
            max_processor_retries=retries,
            max_steps=max_steps, tool_choice=_pick(call.get("tool_choice"), self.tool_choice),
            active_tools=tuple(active) if active is not None else None,
            model_settings=dict(_pick(call.get("model_settings"), self.model_settings) or {}),
            provider_options=dict(_pick(call.get("provider_options"), self.provider_options)
                                  or {}),
            structured_output=structured,
            structured_schema=schema_of(structured) if structured is not None else None,
            memory=self.memory, thread_id=_check_id("thread_id", call.get("thread_id")),
            resource_id=_check_id("resource_id", call.get("resource_id")),
            request_context=rc, timed=call.get("trace", True), tool_timeout=self.tool_timeout,
            hook_timeout=self.hook_timeout, agent_name=self.name,
            observers=check_observers(call.get("observers")),
            step_snapshots=instance_of(call.get("step_snapshots", True), "step_snapshots", bool,
                                       "True or False") or bool(output_specs))

    def graph(self, *, input_processors: Processors | Override | None = None,
              output_processors: Processors | Override | None = None,
              error_processors: Processors | Override | None = None,
              prepare_step: Callable[..., object] | None = None,
              request_context: dict[str, Any] | None = None) -> Graph:
        """The loop this agent runs, with the processors at each node (per-call lists apply)."""
        return self._graph(self._config(CallOptions(
            input_processors=input_processors, output_processors=output_processors,
            error_processors=error_processors, prepare_step=prepare_step,
            request_context=request_context)))

    def _graph(self, cfg: RunConfig) -> Graph:
        """The loop graph for ``cfg``, built once per shape of processor lists (building and
        validating it per call cost more than a short request's chunks)."""
        if cfg.input_specs or cfg.output_specs or cfg.error_specs:
            key: tuple[object, ...] = tuple(
                tuple((s.id, tuple(s.hooks)) for s in specs)
                for specs in (cfg.input_specs, cfg.output_specs, cfg.error_specs)) + (
                cfg.prepare_step is not None, cfg.memory is not None)
        else:  # no processors: two flags name the shape (a shorter key, never a longer one's)
            key = (cfg.prepare_step is not None, cfg.memory is not None)
        graph = self._graphs.get(key)
        if graph is None:
            if len(self._graphs) >= 64:  # lists built from request_context can vary a lot
                self._graphs.clear()
            graph = self._graphs[key] = build_graph(cfg, title=f"agent {self.id}")
        return graph

    # ------------------------------------------------------------------ running

    def stream(self, messages: MessageInput | None = None,
               **options: Unpack[CallOptions]) -> AgentStream:
        """Run the agent and stream every chunk (``start``, ``step-start``, …, ``finish``).

        Args:
            messages: the input: a string, a ``Message``, a message dict, or a list of them.
            **options: this call's options, each a keyword (``CallOptions`` lists them:
                processor lists, ``request_context``, ``thread_id``/``resource_id``,
                ``max_steps``, ``tool_choice``, ``model``, ``trace``...); an IDE completes
                them and mypy checks their names and types.

        Returns:
            An ``AgentStream``; the run starts when it is first iterated or awaited.

        Raises:
            UsageError: an unknown option (``InvalidType``, naming the closest valid one;
                mypy flags it too), a bad option value (``InvalidArgument``), no model.
            ProcessorDefinitionError: a malformed processor.
        """
        if not options.keys() <= _OPTIONS:
            _reject_unknown(options)
        cfg = self._config(options)
        return AgentStream(Run(cfg, self._graph(cfg), NODES, messages))

    async def generate(self, messages: MessageInput | None = None,
                       **options: Unpack[CallOptions]) -> AgentResult:
        """Run the agent to completion and return its ``AgentResult`` (the arguments are
        ``stream``'s). A tripwire does not raise: check ``result.tripwire``.

        Raises:
            APICallError: the model failed and no error processor recovered.
            ProcessorError: a processor raised or returned a value of the wrong shape.
        """
        return await self.stream(messages, **options).result()


class CallOptions(TypedDict, total=False):
    """The options of one ``Agent.stream``/``Agent.generate`` call, written once: both take
    ``**options: Unpack[CallOptions]``, so an IDE completes each keyword and mypy checks its name
    and type. Every option may be left out; ``None`` means "not given" (the agent's value is
    used), except for ``max_processor_retries``, where ``None`` means no retries.

    Attributes:
        input_processors: a list that replaces the agent's for this call, or an ``Override``
            that edits it. Memory is kept.
        output_processors: as ``input_processors``, for the output lane.
        error_processors: as ``input_processors``, for the error lane.
        max_processor_retries: replaces the agent's value (``None``: no retries).
        request_context: given to hooks and tools that ask for ``request_context`` (the
            caller's own dict: processors may leave things in it for the caller).
        thread_id: the memory thread of this turn.
        resource_id: the memory resource (owner) of this turn.
        max_steps: this call's step limit (wins over the agent's).
        prepare_step: this call's ``prepare_step`` function.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "tool",
            "toolName": name}``.
        active_tools: the names of the tools the model may call in this call.
        model_settings: the model's settings (``temperature``, ``maxOutputTokens``...).
        provider_options: options passed to the provider as given.
        structured_output: a type or a JSON Schema the answer must match.
        model: a model object or a router id such as ``"openai/gpt-4o-mini"``.
        trace: ``False`` skips per-chunk timing of stream hooks (default ``True``).
        observers: objects with ``on_event(event)`` that get this run's events
            (``streamkit.events``: its path through the loop, steps, hook calls, and, for an
            observer with ``chunk_detail = True``, what each stream processor did to each
            chunk), synchronously and in order. ``None``/empty: no cost at all.
        step_snapshots: ``False`` leaves out of the ``step-finish`` and ``finish`` payloads
            what is rebuilt from the whole conversation at each step end: ``messages`` (the
            ``{all, user, nonUser}`` snapshot), ``metadata``, ``output.steps`` and the
            ``finish``'s ``response`` (``uiMessages`` included). What stays: ``stepResult``
            (reason, ``isContinued``), ``output.text``/``usage``/``toolCalls``,
            ``messageId``. For a consumer that reads no more than that — the AI SDK chat
            route (``streamkit.serve``) sets it; it was ~15 % of a short served request.
            The run, its result, memory and tracing are the same either way. Default
            ``True``; ignored (snapshots built) when output processors run, since their
            stream hooks may read these chunks.
    """

    input_processors: Processors | Override | None
    output_processors: Processors | Override | None
    error_processors: Processors | Override | None
    max_processor_retries: int | None
    request_context: dict[str, Any] | None
    thread_id: str | None
    resource_id: str | None
    max_steps: int | None
    prepare_step: Callable[..., Any] | None
    tool_choice: ToolChoice | None
    active_tools: Sequence[str] | None
    model_settings: Mapping[str, Any] | None
    provider_options: Mapping[str, Any] | None
    structured_output: StructuredOutput | None
    model: Model | str | None
    trace: bool
    observers: Sequence[RunObserver] | None
    step_snapshots: bool


_OPTIONS = frozenset(CallOptions.__optional_keys__)


def _reject_unknown(unknown: Mapping[str, object]) -> NoReturn:
    name = sorted(unknown)[0]
    close = difflib.get_close_matches(name, sorted(_OPTIONS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise InvalidType(f"unknown option {name!r}{hint} Valid options: "
                      f"{', '.join(sorted(_OPTIONS))}")


def _pick(given: T | None, default: T) -> T:
    """A call's value where given, else the agent's."""
    return given if given is not None else default


def _check_seconds(name: str, value: object) -> float | None:
    return optional_seconds(value, name)


def _check_id(name: str, value: str | None) -> str | None:
    """A memory ``thread_id``/``resource_id`` as given, checked at the call: a string of valid
    Unicode (a lone surrogate, which ``json.loads`` makes of ``"\\ud800"``, cannot be stored)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidType(f"{name} must be a str or None, got {type(value).__name__}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgument(f"{name} {value!r} is not valid Unicode text (a lone "
                                  f"surrogate at position {exc.start}); expected a str that "
                                  f"encodes as UTF-8") from None
    return value


def _check_counts(max_steps: int, max_processor_retries: int | None) -> None:
    int_at_least(max_steps, "max_steps", 1)
    optional_int_at_least(max_processor_retries, "max_processor_retries", 0)
