"""Tools: ``@tool`` on a typed function, or ``Tool(id, description, input_schema, execute)``.

The JSON schema a model sees is built from the type hints with msgspec, and arguments are
validated with msgspec before ``execute`` runs (``ToolError`` says which argument is wrong and
what was expected). A tool may be ``def`` or ``async def``; it may ask for ``writer`` (to emit
``data-*`` chunks), ``request_context``, ``tool_call_id`` or ``abort_signal`` by naming them; those
are injected and never appear in the schema.

Arguments the tool does not declare are dropped before the call, as Mastra's object schemas
strip unknown keys: OpenAI-compatible servers (a LiteLLM proxy, LLMock) send extras such as
``unit`` to a ``get_weather(city)``, and the call should still run. A function with
``**kwargs`` receives them instead (validated against its hint). Each drop is logged on the
``streamkit.tools`` logger, and the ``tool-call``/``tool-result`` chunks keep the arguments as the
model sent them. A missing or ill-typed declared argument is still a ``ToolError``.

What a tool returns must be JSON-encodable (it is sent to the model, streamed and stored):
``Tool.run`` encodes it once when the tool returns, so a value that cannot be (an arbitrary
object, text with a lone surrogate, nesting past msgspec's depth limit) is a ``ToolError`` the
model sees as a ``tool-error`` at once, not a failure when the turn is stored.

Timeouts: ``Tool(timeout=)``/``@tool(timeout=)`` bound one tool, ``Agent(tool_timeout=)`` (300 s
by default, ``None``: off) every tool of an agent; a tool's own timeout wins. A tool that does not
return in time is reported to the model as a ``tool-error`` (``ToolError`` with ``timeout`` set).

Decisions (a plain ``def`` cannot be interrupted while it runs on the event loop):

* An ``async def`` tool is cancelled at its timeout.
* A plain ``def`` tool with its own ``timeout=`` runs in a worker thread (``asyncio.to_thread``),
  so the loop stays free and the timeout can end the *wait* for it: the model gets its
  ``tool-error`` at once. Python cannot stop a thread, so the function itself runs on to its end
  in the background; its result is discarded, and what it writes after its timeout is dropped.
  Its ``writer`` is thread-safe (writes are handed to the event loop).
* A plain ``def`` tool without its own ``timeout=`` runs inline on the event loop, as before
  (no thread-safety surprises for tools written for that); the agent's ``tool_timeout`` cannot
  interrupt it, so an overrun is reported instead: a warning on the ``streamkit.tools`` logger
  naming the tool, the time it took and the limit, once it returns.

Parameter types: anything msgspec knows (builtins, msgspec Structs, dataclasses, TypedDicts,
enums, ``Literal``, unions and containers of these) and, when pydantic is installed, pydantic
models (alone or inside containers; their schema and validation are pydantic's own). Each
parameter's ``description`` comes from the docstring's ``Args:`` (Google), ``Parameters``
(NumPy) or ``:param name:`` (reST) entry (``streamkit._docstrings``).

Typing: ``@tool`` returns a ``Tool[P, R]`` carrying the function's signature, so calling the
decorated object directly (``lookup_customer("C-42")``) is checked like calling the function.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, cast, get_type_hints, overload

import msgspec
from typing_extensions import ParamSpec, TypeVar

from ._docstrings import parse_docstring
from .errors import ToolError
from .models._base import ToolSpec
from .processors._runtime import Writer
from .processors._spec import is_async_callable
from .validate import is_number

__all__ = ["Tool", "tool", "json_schema"]

#: Seconds a tool call may take when neither the tool nor the agent says (``Agent(tool_timeout=)``).
DEFAULT_TOOL_TIMEOUT = 300.0

#: Parameters the runtime injects instead of taking them from the model's arguments.
INJECTED = frozenset(("writer", "request_context", "tool_call_id", "abort_signal"))

_MISSING = object()

log = logging.getLogger("streamkit.tools")


def report_failure(tool_name: str, tool_call_id: str, exc: BaseException) -> str:
    """Tell the developer that tool call ``tool_call_id`` of ``tool_name`` failed, and return
    what was told (for ``result.trace``).

    The model is given only the exception's message (``agent._build.error_text``); the
    developer gets the rest here. An exception the tool's own code raised is logged on the
    ``streamkit.tools`` logger at ERROR with its full traceback, naming the tool and the call.
    Decision: a ``ToolError`` (streamkit's own verdict: unknown tool, invalid arguments, a
    timeout, an unencodable result; or a tool that raised one to speak to the model) is a
    WARNING with its message only, since its traceback would point into streamkit, not at
    the developer's code.

    Example:
        >>> try:
        ...     raise RuntimeError("service unavailable")
        ... except RuntimeError as exc:
        ...     told = report_failure("lookup", "call_1", exc)
        >>> told.splitlines()[0]
        "tool 'lookup' (call call_1) raised RuntimeError: service unavailable"
        >>> told.splitlines()[-1]
        'RuntimeError: service unavailable'
    """
    head = f"tool {tool_name!r} (call {tool_call_id}) raised {type(exc).__name__}: {exc}"
    if isinstance(exc, ToolError):
        log.warning("%s", head)
        return head
    log.error("%s", head, exc_info=(type(exc), exc, exc.__traceback__))
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{head}\n{trace.rstrip()}"


def _log_dropped(name: str, dropped: set[str], known: set[str]) -> None:
    log.info("tool %r: dropped undeclared argument(s) %s; it declares %s", name,
             sorted(dropped), sorted(known))


_encode = msgspec.json.Encoder().encode
# What msgspec raises for a value it cannot encode (RecursionError: nested past its limit).
_UNENCODABLE = (TypeError, ValueError, RecursionError, OverflowError)


def check_timeout(owner: str, value: object) -> float | None:
    """``value`` as a timeout in seconds (``None``: no timeout).

    Raises:
        ToolError: not ``None`` and not a number of seconds > 0.
    """
    if value is None:
        return None
    if not is_number(value) or not value > 0:
        raise ToolError(f"{owner}: timeout must be None or a number of seconds > 0, got "
                        f"{value!r}")
    return float(value)


#: The decorated function's parameters and return type; a ``Tool`` built by hand is
#: ``Tool[..., Any]`` (what a bare ``Tool`` annotation means).
P = ParamSpec("P", default=...)
R = TypeVar("R", default=Any, covariant=True)


def json_schema(tp: object) -> dict[str, Any]:
    """The JSON schema of a type (msgspec Struct, dataclass, TypedDict, ...) as providers want
    it: an object schema at the top, not a ``$ref`` into ``$defs``. A dict is taken as a schema.

    Example:
        >>> class Answer(msgspec.Struct):
        ...     name: str
        >>> json_schema(Answer)["required"]
        ['name']
    """
    if isinstance(tp, dict):
        return tp
    try:
        schema = msgspec.json.schema(tp)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"{tp!r} has no JSON schema: {exc}") from exc
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        defs = dict(schema.get("$defs", {}))
        top = dict(defs.pop(ref.rsplit("/", 1)[1]))
        if defs:
            top["$defs"] = defs
        return top
    return schema


class Tool(Generic[P, R]):
    """A tool the model can call.

    ``Tool[P, R]`` is generic in the signature of ``execute``: ``@tool`` on
    ``def f(x: str) -> int`` gives ``Tool[[str], int]``, and calling it is type-checked.

    Args:
        id: the name the model calls it by.
        description: what it does, for the model.
        input_schema: JSON schema of its arguments (an object schema).
        execute: ``fn(args: dict, **injected)`` or, for ``@tool`` tools, the typed function.
        validate: ``fn(args: dict) -> dict`` returning validated arguments or raising ``ToolError``.
        timeout: seconds the tool may take (``None``: the agent's ``tool_timeout``). A plain
            ``def`` tool with a timeout runs in a worker thread (see the module docstring).

    Without ``validate``, keys ``input_schema`` does not list under ``properties`` are dropped
    before ``execute`` unless the schema allows more (``additionalProperties`` true or a schema);
    a schema with no ``properties`` takes any object.
    """

    def __init__(self, id: str, description: str, input_schema: dict[str, Any],
                 execute: Callable[P, R], *,
                 validate: Callable[[dict[str, object]], Mapping[str, object]] | None = None,
                 injected: tuple[str, ...] = (), spread_args: bool = False,
                 timeout: float | None = None) -> None:
        if not isinstance(id, str) or not id:
            raise ToolError("a tool needs a non-empty string id (the name the model calls)",
                            tool_name=None)
        if not callable(execute):
            raise ToolError(f"tool {id!r}: execute must be callable", tool_name=id)
        if not isinstance(input_schema, dict):
            raise ToolError(f"tool {id!r}: input_schema must be a JSON schema dict, got "
                            f"{type(input_schema).__name__}", tool_name=id)
        self.id = id
        self.description = description
        self.input_schema = input_schema
        self.execute = execute
        self._call: Callable[..., object] = execute
        self.is_async = is_async_callable(execute)
        self._validate = validate
        self.injected = injected
        self.spread_args = spread_args
        self.timeout = check_timeout(f"tool {id!r}", timeout)
        #: A plain ``def`` with its own timeout runs in a worker thread, where it can be waited
        #: for with a bound; without one it runs inline on the event loop.
        self.in_thread = self.timeout is not None and not self.is_async
        self._spec: ToolSpec | None = None

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model sees it, made once and made again only when ``id``,
        ``description`` or ``input_schema`` was reassigned (every step of every run asks; a
        frozen dataclass is ~1 µs to build)."""
        spec = self._spec
        if spec is None or spec.name is not self.id or spec.description is not \
                self.description or spec.parameters is not self.input_schema:
            spec = self._spec = ToolSpec(self.id, self.description, self.input_schema)
        return spec

    def validate(self, args: object) -> Mapping[str, object]:
        """Check ``args`` against the tool's signature; returns the validated arguments."""
        if not isinstance(args, dict):
            raise ToolError(f"tool {self.id!r} expects a JSON object of arguments, got "
                            f"{type(args).__name__}: {args!r:.80}", tool_name=self.id)
        if self._validate is None:
            return self._declared(args)
        return self._validate(args)

    def _declared(self, args: dict[str, object]) -> dict[str, object]:
        """``args`` without the keys the JSON schema does not declare (see the class doc)."""
        props = self.input_schema.get("properties")
        extra = self.input_schema.get("additionalProperties", False)
        if not isinstance(props, dict) or (extra is not False and extra is not None):
            return args
        dropped = set(args) - set(props)
        if not dropped:
            return args
        _log_dropped(self.id, dropped, set(props))
        return {k: v for k, v in args.items() if k in props}

    async def run(self, args: object, *, timeout: float | None = None, **injected: object
                  ) -> object:
        """Validate ``args`` and call the tool, injecting what it asks for.

        Args:
            args: the model's arguments.
            timeout: the agent's ``tool_timeout`` (the tool's own ``timeout`` wins).

        Raises:
            ToolError: invalid arguments, the tool did not return within its timeout, or it
                returned a value that cannot be encoded as JSON.
        """
        valid = self.validate(args)
        extra = {k: v for k, v in injected.items() if k in self.injected}
        limit = self.timeout if self.timeout is not None else timeout
        out: object
        if self.is_async:
            # is_async_callable found it async when the tool was made: it returns an awaitable.
            call = cast("Callable[..., Awaitable[object]]", self._call)
            pending = call(**valid, **extra) if self.spread_args else call(valid, **extra)
            out = await (pending if limit is None else self._bounded(pending, limit))
        elif self.in_thread:
            out = await self._in_thread(valid, extra, limit)
        else:
            started = time.monotonic()
            out = self._call(**valid, **extra) if self.spread_args else self._call(valid, **extra)
            took = time.monotonic() - started
            if limit is not None and took > limit:
                log.warning("tool %r (a plain def, run on the event loop) took %.1f s, past its "
                            "timeout of %g s, and blocked every other request meanwhile; give it "
                            "timeout= to run it in a worker thread, or make it async", self.id,
                            took, limit)
        try:
            _encode(out)
        except _UNENCODABLE as exc:
            raise ToolError(f"tool {self.id!r} returned a value that cannot be encoded as "
                            f"JSON ({type(exc).__name__}: {exc}); return JSON-like data (dict, "
                            f"list, str, numbers, bool, None, msgspec Structs, dataclasses)",
                            tool_name=self.id) from exc
        return out

    async def _bounded(self, awaitable: Awaitable[object], limit: float) -> object:
        """``await awaitable``, cancelled after ``limit`` seconds (a ``ToolError``)."""
        try:
            async with asyncio.timeout(limit) as scope:
                return await awaitable
        except TimeoutError as exc:
            if not scope.expired():
                raise  # the tool's own TimeoutError: reported like any other error
            raise self._timed_out(limit, "it was cancelled") from exc

    async def _in_thread(self, valid: Mapping[str, object], extra: dict[str, object],
                         limit: float | None) -> object:
        """Call a plain ``def`` tool in a worker thread; stop waiting for it after ``limit``."""
        writer = extra.get("writer")
        if isinstance(writer, Writer):
            writer = extra["writer"] = writer.threadsafe(asyncio.get_running_loop())
        if self.spread_args:
            call = asyncio.to_thread(self._call, **valid, **extra)
        else:
            call = asyncio.to_thread(self._call, valid, **extra)
        try:
            if limit is None:
                return await call
            async with asyncio.timeout(limit) as scope:
                return await call
        except TimeoutError as exc:
            if limit is None or not scope.expired():
                raise  # the tool's own TimeoutError: reported like any other error
            raise self._timed_out(limit, "it runs on in its thread; its result and later "
                                  "writes are discarded") from exc
        finally:
            if isinstance(writer, Writer):
                writer.close()

    def _timed_out(self, limit: float, what: str) -> ToolError:
        return ToolError(f"tool {self.id!r} did not return within {limit:g} s; {what}",
                         tool_name=self.id, timeout=limit)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the underlying function directly (handy in tests)."""
        return self.execute(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.id!r})"


Convert = Callable[[object], object]
"""Turns one JSON argument into the parameter's type; raises ``ValueError`` when it cannot."""


def _validator(name: str, params: list[tuple[str, Convert, object]],
               rest: Convert | None = None) -> Callable[[dict[str, object]], dict[str, object]]:
    """Validate declared arguments; undeclared ones go to ``**kwargs`` (typed ``rest``) when the
    function has it, else they are dropped. Injected names are never taken from the model."""
    known = {p[0] for p in params}

    def validate(args: Mapping[str, object]) -> dict[str, object]:
        unknown = set(args) - known
        out: dict[str, object] = {}
        if unknown and rest is not None:
            for key in sorted(unknown - INJECTED):
                try:
                    out[key] = rest(args[key])
                except ValueError as exc:  # msgspec's and pydantic's ValidationError alike
                    raise ToolError(f"tool {name!r}, extra argument {key!r}: {exc} "
                                    f"(got {args[key]!r:.60})", tool_name=name) from exc
            unknown &= INJECTED
        if unknown:
            _log_dropped(name, unknown, known)
        for pname, convert, default in params:
            if pname not in args:
                if default is _MISSING:
                    raise ToolError(f"tool {name!r} is missing required argument {pname!r}",
                                    tool_name=name)
                continue
            try:
                out[pname] = convert(args[pname])
            except ValueError as exc:  # msgspec's and pydantic's ValidationError alike
                raise ToolError(f"tool {name!r}, argument {pname!r}: {exc} "
                                f"(got {args[pname]!r:.60})", tool_name=name) from exc
        return out

    return validate


def _msgspec_convert(hint: object) -> Convert:
    def convert(value: object) -> object:
        return msgspec.convert(value, type=hint, strict=False)
    return convert


class _Adapter(Protocol):
    """What is used of a ``pydantic.TypeAdapter`` (pydantic is optional, found at run time)."""

    def json_schema(self, *, ref_template: str) -> dict[str, object]: ...

    def validate_python(self, value: object, /) -> object: ...


def _pydantic_adapter(tool_name: str, pname: str, hint: object, reason: Exception) -> _Adapter:
    """A ``pydantic.TypeAdapter`` for a hint msgspec has no schema for (it names a pydantic
    model), or the ``ToolError`` explaining why the hint cannot be a parameter type."""
    pydantic = sys.modules.get("pydantic")  # a pydantic model in a hint means it is imported
    if pydantic is not None:
        try:
            adapter: _Adapter = pydantic.TypeAdapter(hint)
            return adapter
        except Exception:  # noqa: BLE001 - pydantic has no schema for it either: report msgspec's
            pass
    why = str(reason).strip().splitlines()[-1] if str(reason).strip() else type(reason).__name__
    raise ToolError(f"tool {tool_name!r}: parameter {pname!r} has no JSON schema ({why}); "
                    f"expected builtins, msgspec Structs, dataclasses, TypedDicts or pydantic "
                    f"models (or containers of them)", tool_name=tool_name) from reason


def _parameter_schemas(tool_name: str, params: list[tuple[str, object, object]]
                       ) -> tuple[list[dict[str, object]], list[Convert], dict[str, object]]:
    """Each parameter's JSON schema and converter, and the shared ``$defs``."""
    native: list[int] = []
    adapters: dict[int, _Adapter] = {}
    for i, (pname, hint, _) in enumerate(params):
        try:
            msgspec.json.schema(hint)
            native.append(i)
        except (TypeError, ValueError) as exc:
            adapters[i] = _pydantic_adapter(tool_name, pname, hint, exc)
    found, defs = msgspec.json.schema_components([params[i][1] for i in native],
                                                 ref_template="#/$defs/{name}")
    schemas: dict[int, dict[str, object]] = dict(zip(native, found))
    converters: dict[int, Convert] = {i: _msgspec_convert(params[i][1]) for i in native}
    for i, adapter in adapters.items():
        schema = dict(adapter.json_schema(ref_template="#/$defs/{model}"))
        its_defs = schema.pop("$defs", {})
        for key, value in (its_defs.items() if isinstance(its_defs, dict) else ()):
            if defs.setdefault(key, value) != value:
                raise ToolError(f"tool {tool_name!r}: two different types are both named "
                                f"{key!r} in its parameters; rename one", tool_name=tool_name)
        schemas[i] = schema
        converters[i] = adapter.validate_python
    return ([schemas[i] for i in range(len(params))],
            [converters[i] for i in range(len(params))], dict(defs))


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(*, name: str | None = None, description: str | None = None,
         timeout: float | None = None) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
def tool(fn: Callable[..., object] | None = None, /, *, name: str | None = None,
         description: str | None = None, timeout: float | None = None
         ) -> Tool[..., object] | Callable[[Callable[..., object]], Tool[..., object]]:
    """Make a ``Tool`` from a typed function (``timeout``: see ``Tool``).

    The schema comes from the type hints (a JSON schema for each parameter; parameters with
    defaults are optional), each parameter's ``description`` from its entry in the docstring
    (Google ``Args:``, NumPy ``Parameters``, reST ``:param name:``), the tool's description
    from ``description`` or the docstring's prose before its first section. ``writer``,
    ``request_context``, ``tool_call_id`` and ``abort_signal`` are injected. The returned
    ``Tool[P, R]`` keeps the function's signature for type checkers. Arguments the function
    does not declare are dropped before the call, unless it takes ``**kwargs``, which then
    receives them (checked against its hint; the schema's ``additionalProperties`` says so to
    the model).

    Example:
        >>> @tool
        ... def lookup_customer(customer_id: str) -> dict:
        ...     '''Look up a customer by id.
        ...
        ...     Args:
        ...         customer_id: the id, such as "C-42".
        ...     '''
        ...     return {"id": customer_id, "email": "ada@example.com"}
        >>> lookup_customer.input_schema["required"]
        ['customer_id']
        >>> lookup_customer.input_schema["properties"]["customer_id"]["description"]
        'the id, such as "C-42".'
    """

    def build(f: Callable[..., object]) -> Tool[..., object]:
        tool_name: str = name if name else str(getattr(f, "__name__", ""))
        try:
            hints = get_type_hints(f, include_extras=True)  # keep Meta(...) constraints
        except Exception as exc:  # noqa: BLE001 - surfaced as a definition error
            raise ToolError(f"tool {tool_name!r}: cannot read its type hints: {exc}",
                            tool_name=tool_name) from exc
        sig = inspect.signature(f)
        params: list[tuple[str, object, object]] = []
        injected: list[str] = []
        rest: object = _MISSING
        for p in sig.parameters.values():
            if p.kind is p.VAR_KEYWORD:
                rest = hints.get(p.name, Any)  # receives the arguments it does not declare
                continue
            if p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY):
                raise ToolError(f"tool {tool_name!r}: parameter {p.name!r} must be a named "
                                f"parameter or **kwargs (no *args or '/')", tool_name=tool_name)
            if p.name in INJECTED:
                injected.append(p.name)
                continue
            if p.name not in hints:
                raise ToolError(f"tool {tool_name!r}: parameter {p.name!r} has no type hint; "
                                f"the model's JSON schema is built from the hints",
                                tool_name=tool_name)
            default = _MISSING if p.default is p.empty else p.default
            params.append((p.name, hints[p.name], default))
        extras = [] if rest is _MISSING else [("**kwargs", rest, _MISSING)]
        schemas, converters, components = _parameter_schemas(tool_name, params + extras)
        doc = parse_docstring(inspect.getdoc(f))
        properties: dict[str, object] = {}
        for (pname, _, default), schema in zip(params, schemas):
            prop = dict(schema)
            if pname in doc.params:
                prop.setdefault("description", doc.params[pname])
            if default is not _MISSING and default is not None:
                try:
                    prop["default"] = msgspec.to_builtins(default)
                except TypeError:
                    pass
            properties[pname] = prop
        schema_obj: dict[str, object] = {
            "type": "object", "properties": properties,
            "required": [p for p, _, d in params if d is _MISSING],
            # With **kwargs, the extras' schema ({} for Any: anything goes).
            "additionalProperties": False if rest is _MISSING else (schemas[-1] or True),
        }
        if components:
            schema_obj["$defs"] = components
        desc: str = description if description is not None else doc.summary
        checks = [(pname, convert, default)
                  for (pname, _, default), convert in zip(params, converters)]
        rest_convert = None if rest is _MISSING else converters[-1]
        return Tool(tool_name, desc or tool_name, schema_obj, f,
                    validate=_validator(tool_name, checks, rest_convert),
                    injected=tuple(injected), spread_args=True, timeout=timeout)

    if fn is not None:
        return build(fn)
    return build


def tools_by_name(tools: Iterable[object] | Mapping[str, object] | None) -> dict[str, Tool]:
    """Normalise ``tools`` (a list of ``Tool``/``@tool`` functions or typed functions, or a dict)
    to ``{name: Tool}``; what ``Agent(tools=...)`` and a ``tools`` override accept.

    Raises:
        ToolError: an entry that is not a tool, or two tools with the same name.
    """
    if tools is None:
        return {}
    items = list(tools.values()) if isinstance(tools, dict) else list(tools)
    out: dict[str, Tool] = {}
    for t in items:
        if not isinstance(t, Tool):
            if not callable(t):
                raise ToolError(f"tools must be Tool objects or typed functions, got "
                                f"{type(t).__name__}")
            t = tool(t)
        if t.id in out:
            raise ToolError(f"two tools are named {t.id!r}; tool names must be unique",
                            tool_name=t.id)
        out[t.id] = t
    return out
