"""The generated constructor of each chunk class: ``TextDelta(id=..., text=..., run_id=...)``.

What belongs here: rendering, compiling and installing one ``__call__`` per chunk class, with
the class's own keyword parameters (its payload's fields flattened, its envelope fields,
``payload=``). What does not: the metaclass that asks for it and the error messages it raises
(``streamkit._chunk_base``).

Why generated (callgrind instruction counts, CPython 3.11, ``TextDelta`` with four keywords): a
plain msgspec chunk struct with its payload builds in ~1,800 instructions; the one generic
``__call__`` of the chunk metaclass, which sorted ``**kwargs`` into payload and envelope in a
loop, took ~15,800 flat and ~8,200 with ``payload=``. Most of the difference is Python's
keyword handling, twice: a ``**kwargs`` dict, the loop, a second ``**`` call into msgspec. The
generated ``__call__`` names every keyword as a parameter (no dict, no loop), builds the payload
with one call of its class and the chunk by ``msgspec.structs.replace`` of a prototype (a C
call that takes keywords without building a dict). What remains is CPython's price for a
metaclass ``__call__`` written in Python (the call goes through ``slot_tp_call``, which packs
the keywords into a dict and unpacks them again: ~2,000 instructions that no Python code can
avoid).

Parameters default to a private sentinel, so the constructor can tell "not given" from any
value: a required payload field that is missing, ``payload=`` together with payload fields,
positional arguments and unknown keywords all go to ``errors`` (a ``_ChunkMeta`` method), which
raises ``InvalidType`` with the message the generic path gave.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["render_call", "make_call", "NOT_GIVEN"]


class _NotGiven:
    """The default of every generated parameter: "the caller did not pass it"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<not given>"


NOT_GIVEN: Any = _NotGiven()


def _field_specs(struct: type) -> list[tuple[str, str]]:
    """``(name, how)`` per field of ``struct``: how to fill it when not given — ``"required"``,
    ``"default"`` (the value ``d_<name>``) or ``"factory"`` (call ``f_<name>()``)."""
    out = []
    for f in msgspec.structs.fields(struct):
        if f.default is not msgspec.NODEFAULT:
            out.append((f.name, "default"))
        elif f.default_factory is not msgspec.NODEFAULT:
            out.append((f.name, "factory"))
        else:
            out.append((f.name, "required"))
    return out


def _value(name: str, how: str, prefix: str) -> str:
    if how == "default":
        return f"(_{prefix}d_{name} if {name} is _NO else {name})"
    if how == "factory":
        return f"(_{prefix}f_{name}() if {name} is _NO else {name})"
    return name


def render_call(envelope: list[tuple[str, str]], payload: list[tuple[str, str]] | None) -> str:
    """The source of ``_make(...)``, which returns the ``__call__`` for a chunk class whose
    envelope fields are ``envelope`` and whose payload fields are ``payload`` (``None``: the
    class has no payload struct, e.g. ``ObjectChunk``). Every name of the generated code
    starts with ``_``, so no field name (``args``, ``type``, ``id``...) can shadow one."""
    env = [(n, h) for n, h in envelope if payload is None or n != "payload"]
    flat = payload or []
    flat_names = [n for n, _ in flat]
    # A name in both (``metadata`` of TripwireChunk, StepFinish, Finish) is the payload's in the
    # flattened form and the envelope's next to ``payload=``, as documented in streamkit.chunks.
    shared = [n for n, _ in env if n in flat_names]
    names = list(dict.fromkeys(([] if payload is None else ["payload"]) + [n for n, _ in env]
                               + flat_names))
    given = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    fail = f"_errors(_cls, _args, _unknown, {given})"
    lines = [f"def __call__(_cls, *_args, {', '.join(f'{n}=_NO' for n in names)}, **_unknown):",
             "    if _args or _unknown:", f"        {fail}"]
    env_values = ", ".join(f"{n}={_value(n, h, 'e')}" for n, h in env)
    if payload is not None:
        lines += ["    if payload is not _NO:"]
        only_flat = [n for n in flat_names if n not in shared]
        if only_flat:
            lines += [f"        if {' or '.join(f'{n} is not _NO' for n in only_flat)}:",
                      f"            {fail}"]
        lines += [f"        return _rep(_proto, payload=payload{', ' if env else ''}{env_values})"]
    required = [n for n, h in env + flat if h == "required"]
    if required:
        lines += [f"    if {' or '.join(f'{n} is _NO' for n in required)}:", f"        {fail}"]
    flat_env = ", ".join(f"{n}={_value(n, h, 'e')}" for n, h in env if n not in shared)
    if payload is None:
        lines += [f"    return _rep(_proto, {flat_env})" if flat_env else "    return _rep(_proto)"]
    else:
        built = "_P(" + ", ".join(f"{n}={_value(n, h, 'p')}" for n, h in flat) + ")"
        lines += [f"    return _rep(_proto, payload={built}{', ' if flat_env else ''}{flat_env})"]
    body = "\n".join("    " + line for line in lines)
    return f"def _make(_NO, _rep, _proto, _P, _errors, _defaults):\n" \
           f"    globals().update(_defaults)\n{body}\n    return __call__\n"


_SERIAL = [0]


def make_call(cls: type, payload_cls: type | None, struct_call: Callable[..., object],
              errors: Callable[..., object]) -> Callable[..., Any] | None:
    """The generated ``__call__`` for ``cls``, or ``None`` when its prototype cannot be built
    (a subclass whose ``__post_init__`` rejects placeholder values keeps the generic path)."""
    envelope = _field_specs(cls)
    payload = _field_specs(payload_cls) if payload_cls is not None else None
    try:
        proto = struct_call(cls, **{n: None for n, how in envelope if how == "required"})
    except Exception:  # noqa: BLE001 - any failure means: use the generic constructor
        return None
    defaults: dict[str, object] = {}
    for prefix, struct, specs in (("e", cls, envelope), ("p", payload_cls, payload or [])):
        if struct is None:
            continue
        by_name = {f.name: f for f in msgspec.structs.fields(struct)}
        for name, how in specs:
            if how == "default":
                defaults[f"_{prefix}d_{name}"] = by_name[name].default
            elif how == "factory":
                defaults[f"_{prefix}f_{name}"] = by_name[name].default_factory
    source = render_call(envelope, payload)
    _SERIAL[0] += 1
    filename = f"<streamkit chunk constructor #{_SERIAL[0]}: {cls.__name__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - see module docstring
    call: Callable[..., Any] = namespace["_make"](NOT_GIVEN, msgspec.structs.replace, proto,
                                                 payload_cls, errors, defaults)
    return call
