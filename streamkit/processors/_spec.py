"""Hook names, the parameters each hook can receive, and registration of a processor.

Registration happens once per processor object: it validates the hook names and parameter names
(``ProcessorDefinitionError`` with the closest valid name), decides sync vs async for each hook,
and records which parameters each hook asks for. Nothing here runs per chunk.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ProcessorDefinitionError

__all__ = ["HOOKS", "HOOK_PARAMS", "HookSpec", "ProcessorSpec", "register", "is_async_callable"]

_COMMON = ("state", "abort", "retry_count", "request_context", "tracing_context")

#: Every hook and the parameters the runtime passes it (snake_case of the document's names).
HOOK_PARAMS: dict[str, frozenset[str]] = {
    "process_input": frozenset(_COMMON + ("messages", "system_messages", "message_list")),
    "process_input_step": frozenset(_COMMON + (
        "messages", "message_list", "system_messages", "step_number", "steps", "model", "tools",
        "tool_choice", "active_tools", "provider_options", "model_settings", "structured_output",
        "writer", "abort_signal")),
    "process_llm_request": frozenset(_COMMON + (
        "prompt", "model", "message_list", "step_number", "steps", "writer", "abort_signal",
        "tools", "tool_choice", "model_settings", "provider_options", "structured_output")),
    "process_llm_response": frozenset(_COMMON + (
        "chunks", "model", "step_number", "steps", "warnings", "request", "raw_response",
        "from_cache", "message_list", "writer", "abort_signal")),
    "process_api_error": frozenset(_COMMON + (
        "error", "messages", "message_list", "step_number", "steps", "writer", "abort_signal")),
    "process_output_stream": frozenset(_COMMON + (
        "part", "stream_parts", "message_list", "writer")),
    "process_output_step": frozenset(_COMMON + (
        "messages", "message_list", "step_number", "finish_reason", "provider_metadata",
        "tool_calls", "text", "usage", "system_messages", "steps", "writer", "abort_signal")),
    "process_tool_result": frozenset(_COMMON + (
        "messages", "message_list", "step_number", "tool_name", "tool_call_id", "args", "result",
        "provider_executed", "system_messages", "steps", "writer", "abort_signal")),
    "process_output_result": frozenset(_COMMON + (
        "messages", "message_list", "result", "writer", "system_messages")),
}

#: The nine hooks, in the order one run calls them.
HOOKS: tuple[str, ...] = (
    "process_input", "process_input_step", "process_llm_request", "process_llm_response",
    "process_api_error", "process_output_stream", "process_output_step", "process_tool_result",
    "process_output_result",
)

#: Optional non-hook method of stream processors: called when a chunk source ends, may return
#: chunks still held back (a batch, a redaction tail). Its parameters come from this set.
FLUSH_METHOD = "flush_output_stream"
FLUSH_PARAMS = frozenset(("state", "abort", "writer", "message_list", "request_context",
                          "retry_count", "tracing_context"))

_ALL_PARAMS = frozenset().union(*HOOK_PARAMS.values())
_NOT_HOOKS = frozenset(("process_data_parts",))


def is_async_callable(fn: object) -> bool:
    """True when calling ``fn`` returns an awaitable coroutine (functions, partials, callables)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or (
        # Calling an object runs its class's __call__ (an instance attribute is never used).
        callable(fn) and inspect.iscoroutinefunction(type(fn).__call__))


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One hook of one processor, decided at registration.

    Attributes:
        name: the hook name (``"process_output_stream"``).
        fn: the bound callable.
        is_async: whether it must be awaited (decided once, never per call).
        params: the parameter names it asks for, in signature order.
        wants_all: it has ``**kwargs`` and receives every argument of its hook.
        positional: every named parameter can be passed positionally in ``params`` order.
    """

    name: str
    fn: Callable[..., Any]
    is_async: bool
    params: tuple[str, ...]
    wants_all: bool
    positional: bool

    def wants(self, param: str) -> bool:
        """Whether this hook receives ``param``."""
        return self.wants_all or param in self.params

    def call_kwargs(self, available: dict[str, object]) -> dict[str, object]:
        """Select the keyword arguments this hook asks for from everything ``available``."""
        if self.wants_all:
            return available
        return {name: available[name] for name in self.params if name in available}


@dataclass(frozen=True, slots=True)
class ProcessorSpec:
    """A registered processor: its id, hooks, and flags.

    Attributes:
        processor: the user's object.
        id: its string id (state key, tripwire ``processorId``).
        hooks: hook name → ``HookSpec`` for each hook it implements.
        flush: the optional ``flush_output_stream`` as a ``HookSpec``.
        process_data_parts: whether ``data-*`` chunks reach its ``process_output_stream``.
        multi_emit: whether its stream hook may return a list of chunks.
        on_violation: its ``on_violation`` callable, if any.
        sees_final_request: its ``process_llm_request`` runs after every other processor's
            of its lane (``llm_request_order``), so it sees the prompt the model will get.
    """

    processor: Any
    id: str
    hooks: dict[str, HookSpec]
    flush: HookSpec | None
    process_data_parts: bool
    multi_emit: bool
    on_violation: Callable[..., Any] | None
    sees_final_request: bool = False

    def has(self, hook: str) -> bool:
        return hook in self.hooks


#: Names people reach for, mapped to the parameter they mean.
_ALIASES = {
    "chunk": "part", "c": "part", "p": "part", "event": "part", "delta": "part",
    "chunks_so_far": "stream_parts", "parts": "stream_parts", "msgs": "messages",
    "history": "messages", "ml": "message_list", "messagelist": "message_list",
    "ctx": "request_context", "context": "request_context", "requestcontext": "request_context",
    "system": "system_messages", "system_prompt": "system_messages", "err": "error",
    "exc": "error", "exception": "error", "step": "step_number", "stepnumber": "step_number",
    "retries": "retry_count", "retrycount": "retry_count", "output": "result",
    "toolname": "tool_name", "toolcallid": "tool_call_id", "arguments": "args",
    "finishreason": "finish_reason", "toolcalls": "tool_calls", "settings": "model_settings",
}


def _snake(name: str) -> str:
    """``processOutputStream`` → ``process_output_stream`` (Mastra's names, written in Python)."""
    return "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in name).lstrip("_")


#: Methods the runtime looks up by name besides the hooks: a camelCase spelling of one is a typo.
_OTHER_METHODS = frozenset((FLUSH_METHOD, "on_violation"))


def _misnamed_hook(name: str) -> bool:
    """Whether a method called ``name`` reads as a hook spelled wrong: ``process_*`` that is not
    a hook, or a camelCase name (``processOutputStream``, ``flushOutputStream``) whose snake_case
    is a hook or begins like one. Checked once per processor class, at registration."""
    if name.startswith("process_"):
        return name not in HOOK_PARAMS and name not in _NOT_HOOKS
    if name.startswith("_") or name.islower():
        return False
    snake = _snake(name)
    return snake in _OTHER_METHODS or (snake.startswith("process_") and snake not in _NOT_HOOKS)


def _closest(name: str, choices: Iterable[str]) -> str:
    pool: list[str] = sorted(choices)
    alias = _ALIASES.get(name.lower().replace("-", "_")) or \
        _ALIASES.get(name.lower().replace("_", "").replace("-", ""))
    if alias is not None and alias in pool:
        return alias
    snake = _snake(name)
    if snake in pool:
        return snake
    match = difflib.get_close_matches(snake, pool, n=1, cutoff=0.5)
    if match:
        return match[0]
    match = difflib.get_close_matches(snake, pool, n=1, cutoff=0.0)
    return match[0] if match else ""


def _hook_spec(owner: str, hook: str, fn: object, allowed: frozenset[str]) -> HookSpec:
    if not callable(fn):
        raise ProcessorDefinitionError(
            f"processor {owner!r}: {hook} must be a function or method, got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ProcessorDefinitionError(
            f"processor {owner!r}: cannot read the signature of {hook}: {exc}") from exc
    params: list[str] = []
    wants_all = False
    positional = True
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            wants_all = True
            continue
        if p.kind is p.VAR_POSITIONAL:
            raise ProcessorDefinitionError(
                f"processor {owner!r}: {hook} takes *{p.name}; hooks receive keyword arguments "
                f"only — name the ones you need (e.g. {sorted(allowed)[:4]}) or use **kwargs")
        if p.kind is p.POSITIONAL_ONLY:
            raise ProcessorDefinitionError(
                f"processor {owner!r}: parameter {p.name!r} of {hook} is positional-only; "
                f"hooks receive keyword arguments, remove the '/'")
        if p.name not in allowed:
            hint = _closest(p.name, allowed)
            elsewhere = [h for h, ps in HOOK_PARAMS.items() if p.name in ps]
            extra = f" ({p.name!r} is passed to {', '.join(elsewhere)} only)" if elsewhere else ""
            raise ProcessorDefinitionError(
                f"processor {owner!r}: {hook} asks for parameter {p.name!r}, which it never "
                f"receives{extra}; did you mean {hint!r}? "
                f"Valid names: {', '.join(sorted(allowed))}")
        if p.kind is p.KEYWORD_ONLY:
            positional = False
        params.append(p.name)
    return HookSpec(hook, fn, is_async_callable(fn), tuple(params), wants_all, positional)


def _lookup(obj: object, name: str) -> Any:
    return getattr(obj, name, None)


_CACHE: weakref.WeakKeyDictionary[Any, ProcessorSpec] = weakref.WeakKeyDictionary()


def register(processor: object) -> ProcessorSpec:
    """Validate ``processor`` and decide, once, how each of its hooks is called.

    Raises:
        ProcessorDefinitionError: no string ``id``, no hook at all, a method named
            ``process_*`` that is not a hook, or a hook parameter the hook never receives.
    """
    try:
        cached = _CACHE.get(processor)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    pid = getattr(processor, "id", None)
    if not isinstance(pid, str) or not pid:
        raise ProcessorDefinitionError(
            f"{type(processor).__name__} has no string 'id'; every processor needs one "
            f"(it keys the per-request state and names the processor in tripwires), "
            f"e.g. class {type(processor).__name__}(Processor): id = 'my-processor'")
    names = set(dir(type(processor)))
    names.update(getattr(processor, "__dict__", {}).keys())
    for name in sorted(names):
        if _misnamed_hook(name) and callable(_lookup(processor, name)):
            meant = _snake(name)
            hint = meant if meant in _OTHER_METHODS else _closest(name, HOOK_PARAMS)
            what = "which streamkit never calls" if hint in _OTHER_METHODS else \
                "which is not a hook"
            case = " (names are snake_case)" if name != meant else ""
            raise ProcessorDefinitionError(
                f"processor {pid!r} defines {name}, {what}{case}; did you mean {hint!r}? "
                f"Hooks: {', '.join(HOOKS)}")
    hooks: dict[str, HookSpec] = {}
    declared_params = getattr(processor, "stream_params", None)
    for hook in HOOKS:
        fn = _lookup(processor, hook)
        if fn is not None and not (hook == "process_output_stream" and declared_params):
            hooks[hook] = _hook_spec(pid, hook, fn, HOOK_PARAMS[hook])
        elif fn is not None:
            hooks[hook] = HookSpec(hook, fn, False, (), False, True)  # replaced just below
    declared = getattr(processor, "stream_params", None)
    if declared is not None and "process_output_stream" in hooks:
        # Operators wrap a user function whose own parameter may be named anything; they
        # declare the positional order it is called with instead of being inspected.
        bad = [p for p in declared if p not in HOOK_PARAMS["process_output_stream"]]
        if bad:
            raise ProcessorDefinitionError(
                f"processor {pid!r}: stream_params names {bad}, which process_output_stream "
                f"never receives")
        fn = hooks["process_output_stream"].fn
        hooks["process_output_stream"] = HookSpec("process_output_stream", fn,
                                                  is_async_callable(fn), tuple(declared),
                                                  False, True)
    flush_fn = _lookup(processor, FLUSH_METHOD)
    flush = _hook_spec(pid, FLUSH_METHOD, flush_fn, FLUSH_PARAMS) if flush_fn is not None else None
    if not hooks:
        raise ProcessorDefinitionError(
            f"processor {pid!r} implements no hook; define at least one of: {', '.join(HOOKS)}")
    on_violation = _lookup(processor, "on_violation")
    if on_violation is not None and not callable(on_violation):
        raise ProcessorDefinitionError(
            f"processor {pid!r}: on_violation must be callable, got {type(on_violation).__name__}")
    spec = ProcessorSpec(
        processor=processor, id=pid, hooks=hooks, flush=flush,
        process_data_parts=bool(getattr(processor, "process_data_parts", False)),
        multi_emit=bool(getattr(processor, "multi_emit", False)),
        on_violation=on_violation,
        sees_final_request=bool(getattr(processor, "sees_final_request", False)),
    )
    try:
        _CACHE[processor] = spec
    except TypeError:  # not weak-referenceable: registration is cheap enough to redo
        pass
    return spec
