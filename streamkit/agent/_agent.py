"""``Agent``: configuration, per-call resolution (including ``Override``), ``generate``/``stream``.

The agent itself holds configuration only; each call resolves it into a frozen ``RunConfig``,
creates a fresh ``RunState`` (new state dicts, new trace) and walks the loop graph
(``streamkit.agent._loop``). Nothing per call is stored on the agent, so any number of concurrent
calls on one agent never share state.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterable, Sequence

from ..errors import ProcessorDefinitionError, StreamkitError, ToolError
from ..graph import Graph
from ..messages import MessageList
from ..models import resolve_model
from ..processors import (Pipeline, ProcessorSpec, RequestRuntime, StreamChain, Writer,
                          flatten_processors, register)
from ..tools import Tool
from ._loop import build_graph, drive
from ._result import AgentResult, AgentStream
from ._state import RunConfig, RunState

__all__ = ["Agent", "Override", "tools_by_name"]

_UNSET: Any = object()
log = logging.getLogger("streamkit.agent")


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
    add: Sequence[Any] = ()
    replace: dict[str, Any] = field(default_factory=dict)
    before: str | None = None
    after: str | None = None

    def apply(self, base: list[Any], lane: str) -> list[Any]:
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


def tools_by_name(tools: Any) -> dict[str, Tool]:
    """Normalise ``tools`` (a list of ``Tool``/``@tool`` functions, or a dict) to ``{name: Tool}``.

    Raises:
        ToolError: an entry that is not a tool, or two tools with the same name.
    """
    if tools is None:
        return {}
    items = list(tools.values()) if isinstance(tools, dict) else list(tools)
    out: dict[str, Tool] = {}
    for t in items:
        if not isinstance(t, Tool):
            if callable(t):
                from ..tools import tool as make_tool

                t = make_tool(t)
            else:
                raise ToolError(f"tools must be Tool objects or typed functions, got "
                                f"{type(t).__name__}")
        if t.id in out:
            raise ToolError(f"two tools are named {t.id!r}; tool names must be unique",
                            tool_name=t.id)
        out[t.id] = t
    return out


def _is_dynamic(value: Any) -> bool:
    """A processor list given as a function of ``request_context``."""
    return callable(value) and not hasattr(value, "id") \
        and not isinstance(value, (list, tuple, Pipeline))


def _resolve_list(value: Any, request_context: Any, lane: str) -> list[Any]:
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


def _identities(processors: Iterable[Any]) -> set[int]:
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

    def __init__(self, fn: Callable[..., Any]) -> None:
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
        default options: ``tool_choice``, ``active_tools``, ``model_settings``,
            ``provider_options``, ``structured_output``, ``prepare_step`` — per-call values win.

    Example:
        >>> agent = Agent(id="support", instructions="Be brief.", model=ScriptedModel([text("Hi")]))
        >>> (await agent.generate("Hello")).text
        'Hi'
    """

    def __init__(self, *, id: str, instructions: str | Sequence[str] = "", model: Any = None,
                 name: str | None = None, tools: Any = None, input_processors: Any = None,
                 output_processors: Any = None, error_processors: Any = None,
                 max_processor_retries: int | None = None, max_steps: int = 5,
                 memory: Any = None, tool_choice: Any = None,
                 active_tools: Sequence[str] | None = None,
                 model_settings: dict[str, Any] | None = None,
                 provider_options: dict[str, Any] | None = None,
                 structured_output: Any = None, prepare_step: Callable[..., Any] | None = None
                 ) -> None:
        if not isinstance(id, str) or not id:
            raise StreamkitError("Agent needs a non-empty string id")
        if max_steps < 1:
            raise StreamkitError(f"max_steps must be >= 1, got {max_steps}")
        if max_processor_retries is not None and max_processor_retries < 0:
            raise StreamkitError(f"max_processor_retries must be >= 0, got "
                                 f"{max_processor_retries}")
        self.id = id
        self.name = name or id
        self.instructions = (instructions,) if isinstance(instructions, str) \
            else tuple(instructions)
        # A router id is resolved once, so every call shares one model (and its HTTP client).
        self.model = resolve_model(model) if model is not None else None
        self.tools = tools_by_name(tools)
        self.input_processors = input_processors
        self.output_processors = output_processors
        self.error_processors = error_processors
        self.max_processor_retries = max_processor_retries
        self.max_steps = max_steps
        self.memory = memory
        self._graphs: dict[tuple[Any, ...], Graph] = {}
        self.defaults = {"tool_choice": tool_choice, "active_tools": active_tools,
                         "model_settings": model_settings, "provider_options": provider_options,
                         "structured_output": structured_output, "prepare_step": prepare_step}
        # Fail at construction, not at the first request, on malformed processors.
        static = {lane: _resolve_list(getattr(self, lane), {}, lane)
                  for lane in LANE_HOOKS if not _is_dynamic(getattr(self, lane))}
        members = {lane: _identities(procs) for lane, procs in static.items()}
        for lane, procs in static.items():
            _specs(procs, lane, members)

    def __repr__(self) -> str:
        return f"Agent(id={self.id!r}, model={getattr(self.model, 'model_id', self.model)!r})"

    # ------------------------------------------------------------------ resolution

    def _lane(self, lane: str, override: Any, request_context: Any) -> tuple[ProcessorSpec, ...]:
        base = _resolve_list(getattr(self, lane), request_context, lane)
        if override is _UNSET or override is None:
            chosen = base
        elif isinstance(override, Override):
            chosen = override.apply(base, lane)
        else:
            chosen = _resolve_list(override, request_context, lane)
        return _specs(chosen, lane)

    def _config(self, opts: dict[str, Any]) -> RunConfig:
        rc = opts.get("request_context")
        rc = rc if rc is not None else {}
        model = opts.get("model") or self.model
        if model is None:
            raise StreamkitError(f"agent {self.id!r} has no model; pass model= to Agent(...) or "
                                 f"to the call")
        d = {k: (opts[k] if opts.get(k) is not None else v) for k, v in self.defaults.items()}
        structured = d["structured_output"]
        schema = None
        if structured is not None:
            from ._build import schema_of

            schema = schema_of(structured)
        active = d["active_tools"]
        if active is not None:
            unknown = [t for t in active if t not in self.tools]
            if unknown:
                raise ToolError(f"active_tools names unknown tool(s) {unknown}; this agent has "
                                f"{sorted(self.tools)}", tool_name=unknown[0])
        retries = opts.get("max_processor_retries", _UNSET)
        prepare = d["prepare_step"]
        return RunConfig(
            agent_id=self.id, instructions=self.instructions, model=resolve_model(model),
            tools=self.tools,
            input_specs=self._lane("input_processors", opts.get("input_processors", _UNSET), rc),
            output_specs=self._lane("output_processors", opts.get("output_processors", _UNSET),
                                    rc),
            error_specs=self._lane("error_processors", opts.get("error_processors", _UNSET), rc),
            prepare_step=register(_PrepareStep(prepare)) if prepare is not None else None,
            max_processor_retries=self.max_processor_retries if retries is _UNSET else retries,
            max_steps=opts.get("max_steps") or self.max_steps,
            tool_choice=d["tool_choice"],
            active_tools=tuple(active) if active is not None else None,
            model_settings=dict(d["model_settings"] or {}),
            provider_options=dict(d["provider_options"] or {}),
            structured_output=structured, structured_schema=schema, memory=self.memory,
            thread_id=opts.get("thread_id"), resource_id=opts.get("resource_id"),
            timed=opts.get("trace", True) is not False)

    def graph(self, **options: Any) -> Graph:
        """The loop this agent runs, with the processors at each node (per-call options apply)."""
        return self._graph(self._config(options))

    def _graph(self, cfg: RunConfig) -> Graph:
        """The loop graph for ``cfg``, built once per shape of processor lists (building and
        validating it per call cost more than a short request's chunks)."""
        key = tuple(tuple((s.id, tuple(s.hooks)) for s in specs) for specs in (
            cfg.input_specs, cfg.output_specs, cfg.error_specs)) + (
            cfg.prepare_step is not None, cfg.memory is not None)
        graph = self._graphs.get(key)
        if graph is None:
            if len(self._graphs) >= 64:  # lists built from request_context can vary a lot
                self._graphs.clear()
            graph = self._graphs[key] = build_graph(cfg, title=f"agent {self.id}")
        return graph

    # ------------------------------------------------------------------ running

    async def _prepare(self, cfg: RunConfig, messages: Any, opts: dict[str, Any]) -> RunState:
        run_id = str(uuid.uuid4())
        runtime = RequestRuntime(opts.get("request_context"), run_id=run_id, timed=cfg.timed)
        ml = MessageList(thread_id=cfg.thread_id, resource_id=cfg.resource_id)
        for text in cfg.instructions:
            if text:
                ml.add_system(text)
        # Remembered history and the input are added by the graph's ``start`` node, so that a
        # memory failure ends the run like any other error (an error chunk on a stream).
        direct: list[Any] = []
        routed: list[Any] = []
        st_holder: dict[str, RunState] = {}

        def route(chunk: Any) -> None:
            routed.append(chunk)
            st = st_holder.get("st")
            if st is not None and st.data_event is not None:
                st.data_event.set()

        routed_writer = Writer(route)
        direct_writer = Writer(direct.append)
        chain = StreamChain(cfg.output_specs, runtime, writer=direct_writer, message_list=ml)
        st = RunState(run_id=run_id, runtime=runtime, message_list=ml, chain=chain,
                      system_snapshot=ml.snapshot_system(), routed=routed, direct=direct,
                      routed_writer=routed_writer, direct_writer=direct_writer,
                      input_messages=messages)
        st_holder["st"] = st
        return st

    def _result(self, st: RunState) -> AgentResult:
        return AgentResult(
            text=st.text, usage=st.usage, finish_reason=st.finish_reason, steps=st.steps,
            tripwire=st.tripwire, messages=st.message_list.get.response.db(), object=st.object,
            run_id=st.run_id, trace=st.runtime.trace, error=st.error,
            states=st.runtime.states)

    def stream(self, messages: Any = None, **options: Any) -> AgentStream:
        """Run the agent and stream every chunk (``start``, ``step-start``, …, ``finish``).

        Options: ``input_processors``, ``output_processors``, ``error_processors`` (a list that
        replaces the agent's for this call, or an ``Override``), ``max_processor_retries``,
        ``request_context``, ``thread_id``, ``resource_id``, ``max_steps``, ``prepare_step``,
        ``tool_choice``, ``active_tools``, ``model_settings``, ``provider_options``,
        ``structured_output``, ``model``, ``trace`` (``False`` skips per-chunk timing).

        Raises:
            StreamkitError: an unknown option (with the valid names), or a malformed processor.
        """
        _check_options(options)
        cfg = self._config(options)
        holder: dict[str, RunState] = {}

        async def prepare() -> RunState:
            st = holder["st"] = await self._prepare(cfg, messages, options)
            return st

        def run() -> AsyncIterator[Any]:
            return drive(cfg, prepare, self._graph(cfg))

        def finish() -> AgentResult:
            st = holder.get("st")
            if st is None:
                raise StreamkitError("the stream was closed before it started")
            return self._result(st)

        def delivered() -> str:
            st = holder.get("st")
            return "" if st is None else st.delivered_text()

        return AgentStream(run, finish, delivered)

    async def generate(self, messages: Any = None, **options: Any) -> AgentResult:
        """Run the agent to completion and return its ``AgentResult`` (same options as
        ``stream``). A tripwire does not raise: check ``result.tripwire``.

        Raises:
            APICallError: the model failed and no error processor recovered.
            ProcessorError: a processor raised or returned a value of the wrong shape.
        """
        stream = self.stream(messages, **options)
        return await stream.result()


_OPTIONS = frozenset((
    "input_processors", "output_processors", "error_processors", "max_processor_retries",
    "request_context", "thread_id", "resource_id", "max_steps", "prepare_step", "tool_choice",
    "active_tools", "model_settings", "provider_options", "structured_output", "model", "trace",
))


def _check_options(options: dict[str, Any]) -> None:
    unknown = set(options) - _OPTIONS
    if unknown:
        import difflib

        name = sorted(unknown)[0]
        close = difflib.get_close_matches(name, sorted(_OPTIONS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise StreamkitError(f"unknown option {name!r}{hint} Valid options: "
                             f"{', '.join(sorted(_OPTIONS))}")

