"""The machinery under the chunk classes: ``ChunkBase``, ``PayloadBase`` and unknown payload keys.

What belongs here: the two base classes, the metaclass that gives chunks their flattened
constructors, and the helpers that move unknown payload keys in and out of ``payload.extra``.
What does not: the concrete chunk and payload classes (``streamkit.chunks``,
``streamkit._model_chunks``, ``streamkit._payloads``) and bytes (``streamkit.wire``). Import the
public names from ``streamkit.chunks``; this module is private.

How unknown keys survive a round trip (Mastra's payloads carry keys streamkit does not model):

* Every payload struct has ``extra: dict[str, Any]`` holding the unknown keys, wire names as keys.
* Payload structs are ``forbid_unknown_fields=True`` and ``extra`` is annotated so that *no* JSON
  value can ever decode into it. A payload made only of known keys therefore decodes straight
  through msgspec; any unknown key (including a literal ``"extra"`` key) makes msgspec fail, and
  the caller falls back to :func:`split_extra_keys`, ``msgspec.convert`` and
  :func:`assign_extra_keys`.
* ``omit_defaults=True`` leaves an empty ``extra`` out of the encoding, so the common case encodes
  straight through msgspec too. Every other payload field defaults to ``UNSET`` (or is required),
  so ``omit_defaults`` never drops a real value such as ``retry=False``.
* When some ``extra`` is not empty, ``streamkit.wire`` encodes ``msgspec.to_builtins(chunk)``
  after :func:`merge_extra_keys` has put the keys back beside the modelled ones.
"""

import types
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    NamedTuple,
    NoReturn,
    Self,
    TypedDict,
    Union,
    get_args,
    get_origin,
)

import msgspec
from msgspec import UNSET, Meta, UnsetType, field

from ._chunk_init import NOT_GIVEN, make_call
from .errors import InvalidType

if TYPE_CHECKING:
    from msgspec import StructMeta
else:
    # Public as ``msgspec.StructMeta`` only since msgspec 0.19; the runtime class is the same.
    StructMeta = type(msgspec.Struct)

__all__ = ["PayloadBase", "ChunkBase", "JSONObject", "split_extra_keys", "assign_extra_keys",
           "has_extra_keys", "merge_extra_keys"]

# ``min_length=1`` and ``max_length=0`` cannot both hold, so msgspec rejects every value under
# this key on decode: unknown keys always take the slow path, which fills ``extra`` itself.
_ExtraKeys = Annotated[dict[str, Any], Meta(min_length=1, max_length=0)]

JSONObject = dict[str, Any]
"""A JSON object as msgspec decodes it."""


class PayloadBase(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True,
                  repr_omit_defaults=True, kw_only=True, gc=False, frozen=True):
    """Base class of every payload struct.

    Attributes:
        extra: payload keys streamkit does not model, by wire name. They are kept on decode and
            written back, beside the modelled keys, on encode. A modelled field wins over an
            ``extra`` key of the same wire name.

    Example:
        >>> from streamkit.chunks import TextDeltaPayload
        >>> p = TextDeltaPayload(id="t1", text="hi", extra={"providerHint": 1})
        >>> p.extra
        {'providerHint': 1}
    """

    extra: _ExtraKeys = field(default_factory=dict)

    def has_extra_keys(self) -> bool:
        """Whether this payload, or a payload struct inside it, has ``extra`` keys to write back."""
        return has_extra_keys(self)


# --- where unknown keys live -----------------------------------------------------------------


class _Layout(NamedTuple):
    """Where unknown keys can live in one struct class."""

    is_open: bool                                # has an ``extra`` field of its own
    known: frozenset[str]                        # wire names of the modelled fields
    nested: tuple[tuple[str, str, type], ...]    # (attribute, wire name, payload class)


_LAYOUTS: dict[type, _Layout] = {}


def _payload_types_in(tp: object) -> list[type]:
    """The payload classes a field annotation may hold directly (``X``, ``X | UnsetType``)."""
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    members = get_args(tp) if get_origin(tp) in (Union, types.UnionType) else (tp,)
    return [m for m in members if isinstance(m, type) and issubclass(m, PayloadBase)]


def _layout(cls: type) -> _Layout:
    layout = _LAYOUTS.get(cls)
    if layout is None:
        fields = msgspec.structs.fields(cls)
        nested = []
        for f in fields:
            found = _payload_types_in(f.type)
            if len(found) > 1:
                raise InvalidType(f"{cls.__name__}.{f.name}: a field may hold one payload class, "
                                  f"not {[c.__name__ for c in found]}")
            if found:
                nested.append((f.name, f.encode_name, found[0]))
        is_open = issubclass(cls, PayloadBase)
        known = frozenset(f.encode_name for f in fields if not (is_open and f.name == "extra"))
        layout = _Layout(is_open, known, tuple(nested))
        _LAYOUTS[cls] = layout
    return layout


# --- moving unknown keys in and out of ``extra`` ---------------------------------------------


_Found = list[tuple[tuple[str, ...], dict[str, Any]]]
"""Unknown keys found in a value: ``(attribute path, {wire key: value})`` pairs."""


def split_extra_keys(cls: type, obj: object) -> tuple[Any, _Found]:
    """Split unknown keys out of the builtins form of a ``cls`` value.

    Args:
        cls: the struct class ``obj`` should become (a chunk or payload class).
        obj: its decoded JSON/MessagePack form; left untouched.

    Returns:
        ``(known, found)``: a copy of ``obj`` holding only modelled keys, ready for
        ``msgspec.convert(known, cls)``, and ``(attribute path, unknown keys)`` pairs to assign
        to ``.extra`` of the converted value (see :func:`assign_extra_keys`). Values that are not
        objects are returned as they are, so ``msgspec.convert`` reports them with their path.
    """
    found: _Found = []
    return _split(cls, obj, (), found), found


def _split(cls: type, obj: object, path: tuple[str, ...], found: _Found) -> object:
    if type(obj) is not dict:
        return obj
    layout = _layout(cls)
    if layout.is_open:
        known_names = layout.known
        unknown = {k: v for k, v in obj.items() if k not in known_names}
        if unknown:
            found.append((path, unknown))
            obj = {k: v for k, v in obj.items() if k in known_names}
    if layout.nested:
        obj = dict(obj)
        for attr, wire, sub in layout.nested:
            if wire in obj:
                obj[wire] = _split(sub, obj[wire], path + (attr,), found)
    return obj


def assign_extra_keys(value: Any, found: _Found) -> None:
    """Store unknown keys found by :func:`split_extra_keys` in ``.extra`` of ``value``'s parts."""
    for path, unknown in found:
        target = value
        for attr in path:
            target = getattr(target, attr)
        # Payloads are frozen; a decoded payload's ``extra`` is its own new dict, filled here.
        target.extra.update(unknown)


def has_extra_keys(value: Any) -> bool:
    """Whether ``value`` (a chunk or payload) or a payload struct inside it has ``extra`` keys."""
    layout = _layout(type(value))
    if layout.is_open and value.extra:
        return True
    for attr, _wire, _sub in layout.nested:
        sub = getattr(value, attr)
        if isinstance(sub, PayloadBase) and has_extra_keys(sub):
            return True
    return False


def merge_extra_keys(value: msgspec.Struct, builtins: dict[str, Any]) -> dict[str, Any]:
    """Put ``extra`` keys back beside the modelled keys in ``msgspec.to_builtins(value)``.

    Args:
        value: the struct that was converted.
        builtins: its ``msgspec.to_builtins`` form; changed in place.

    Returns:
        ``builtins``, where every ``"extra"`` entry of a payload struct has been replaced by its
        keys. A modelled key wins over an ``extra`` key of the same name.
    """
    layout = _layout(type(value))
    for attr, wire, _sub in layout.nested:
        sub = getattr(value, attr)
        inner = builtins.get(wire)
        if isinstance(sub, PayloadBase) and type(inner) is dict:
            merge_extra_keys(sub, inner)
    if layout.is_open:
        unknown = builtins.pop("extra", None)
        if unknown:
            for key, item in unknown.items():
                builtins.setdefault(key, item)
    return builtins


# --- chunks ----------------------------------------------------------------------------------


class _EnvelopeKeywords(TypedDict, total=False):
    """The envelope keywords every chunk constructor takes (for type checkers)."""

    run_id: str | UnsetType
    from_: str | UnsetType
    metadata: dict[str, Any] | UnsetType


class _RunKeywords(TypedDict, total=False):
    """The envelope keywords of a flattened constructor whose payload has its own ``metadata``."""

    run_id: str | UnsetType
    from_: str | UnsetType


_struct_call = StructMeta.__call__


class _ChunkMeta(StructMeta):
    """Metaclass of the chunk classes.

    At class creation it takes the msgspec tag from the ``type`` class attribute, records the
    payload class and gives the class its generated constructor (``streamkit._chunk_init``);
    the generic ``__call__`` here is the fallback. At call time it builds the payload from
    flattened keywords. Decoding never
    calls the class, so it stays on msgspec's fast path. (Chunk classes are declared
    ``kw_only=True`` so the envelope fields encode before the payload, as Mastra writes them.)
    """

    _payload_cls: type[PayloadBase] | None
    _payload_fields: frozenset[str]
    _envelope_fields: frozenset[str]
    _flat_payload: bool
    _nested_payload: bool

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                **kwargs: Any) -> Any:
        wire_type = namespace.get("type")
        if isinstance(wire_type, str):
            kwargs.setdefault("tag", wire_type)
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        payload_cls = namespace.get("__annotations__", {}).get("payload",
                                                               getattr(cls, "_payload_cls", None))
        if not (isinstance(payload_cls, type) and issubclass(payload_cls, PayloadBase)):
            payload_cls = None
        cls._payload_cls = payload_cls
        # Where ``streamkit.wire`` looks for ``extra`` keys: ``payload.extra`` only (flat), or
        # ``payload.has_extra_keys()`` (nested: the step ends); two booleans test fastest.
        nested = payload_cls is not None and bool(_layout(payload_cls).nested)
        cls._flat_payload = payload_cls is not None and not nested
        cls._nested_payload = nested
        cls._payload_fields = frozenset(payload_cls.__struct_fields__ if payload_cls else ())
        cls._envelope_fields = frozenset(cls.__struct_fields__)
        # Each chunk class gets a metaclass of its own whose ``__call__`` is generated for its
        # fields (``streamkit._chunk_init``: ~4× faster than the generic ``__call__`` below).
        call = make_call(cls, payload_cls, _struct_call, _constructor_errors)
        if call is not None:
            cls.__class__ = type(f"{name}Meta", (mcls,), {"__call__": call,
                                                        "__module__": mcls.__module__})
        return cls

    def __call__(cls, *args: object, **kwargs: object) -> Any:
        if "payload" in kwargs or args:
            try:
                return _struct_call(cls, *args, **kwargs)
            except TypeError as exc:
                raise InvalidType(cls._explain(exc, kwargs)) from None
        payload_cls = cls._payload_cls
        if payload_cls is None:
            try:
                return _struct_call(cls, **kwargs)
            except TypeError as exc:
                raise InvalidType(cls._explain(exc, kwargs)) from None
        payload_kwargs: dict[str, Any] = {}
        envelope: dict[str, Any] = {}
        for key, value in kwargs.items():
            if key in cls._payload_fields:
                payload_kwargs[key] = value
            elif key in cls._envelope_fields:
                envelope[key] = value
            else:
                raise InvalidType(cls._explain(None, kwargs))
        try:
            payload = payload_cls(**payload_kwargs)
        except TypeError as exc:
            raise InvalidType(f"{cls.__name__}(): {exc}") from None
        return _struct_call(cls, payload=payload, **envelope)

    def _explain(cls, exc: TypeError | None, kwargs: dict[str, Any]) -> str:
        valid = cls._payload_fields | cls._envelope_fields
        unknown = sorted(k for k in kwargs if k not in valid)
        both = sorted(k for k in kwargs if k not in cls._envelope_fields and k in valid)
        if "payload" in kwargs and both:
            return (f"{cls.__name__}(): pass payload= or the payload's fields "
                    f"({', '.join(both)}), not both")
        if not unknown:
            return f"{cls.__name__}(): {exc}"
        payload_part = ""
        if cls._payload_cls is not None:
            payload_part = f"payload fields {', '.join(cls._payload_cls.__struct_fields__)}; "
        return (f"{cls.__name__}() got unexpected keyword argument(s) {', '.join(unknown)}; "
                f"valid: {payload_part}chunk fields {', '.join(cls.__struct_fields__)}")


def _constructor_errors(cls: Any, args: tuple[object, ...], unknown: dict[str, Any],
                        given: dict[str, Any]) -> NoReturn:
    """Raise what a generated chunk constructor was called wrongly with (``InvalidType``)."""
    if args:
        raise InvalidType(f"{cls.__name__}() takes keyword arguments only, got {len(args)} "
                          f"positional argument(s)")
    kwargs = {k: v for k, v in given.items() if v is not NOT_GIVEN}
    kwargs.update(unknown)
    if unknown or "payload" in kwargs:
        raise InvalidType(cls._explain(None, kwargs))
    required = [f.name for f in msgspec.structs.fields(cls._payload_cls or cls)
                if f.required and f.name not in kwargs]
    raise InvalidType(f"{cls.__name__}(): missing required field(s) {', '.join(required)}; "
                      f"pass them, or payload=")


class ChunkBase(msgspec.Struct, metaclass=_ChunkMeta, tag_field="type", kw_only=True,
                forbid_unknown_fields=True, repr_omit_defaults=True, gc=False, frozen=True):
    """Base class of every chunk except ``DataChunk``.

    Attributes:
        type: the wire type (class attribute), e.g. ``"text-delta"``.
        run_id: the run this chunk belongs to (wire ``runId``); ``UNSET`` when absent.
        from_: who produced it (wire ``from``), ``"AGENT"`` for everything in an agent run.
        metadata: optional envelope metadata.

    Example:
        >>> from streamkit.chunks import AbortChunk
        >>> chunk = AbortChunk(run_id="r1", from_="AGENT")
        >>> chunk.type, chunk.run_id
        ('abort', 'r1')
    """

    type: ClassVar[str]
    _flat_payload: ClassVar[bool] = False     # set by the metaclass, read by streamkit.wire
    _nested_payload: ClassVar[bool] = False

    run_id: str | UnsetType = field(default=UNSET, name="runId")
    from_: str | UnsetType = field(default=UNSET, name="from")
    metadata: dict[str, Any] | UnsetType = UNSET

    def replace(self, **changes: object) -> Self:
        """A copy of this chunk with ``changes``: chunks are frozen, so return a new one.

        Takes what the constructor takes: envelope fields (``run_id``, ``from_``, ``metadata``,
        ``payload``) and the payload's fields flattened (``text=``, ``tool_call_id=``...), which
        replace fields of a copy of the payload. Everything not named is kept, unknown payload
        keys (``payload.extra``) included. (A keyword naming a payload field goes to the
        payload, as in the constructor.) About 1 µs; a hot loop can call
        ``msgspec.structs.replace`` on the chunk and its payload directly (~0.2 µs).

        Raises:
            InvalidType: a keyword that is neither a payload nor an envelope field.

        Example:
            >>> from streamkit.chunks import TextDelta
            >>> TextDelta(id="t1", text="hi", run_id="r1").replace(text="HI")
            TextDelta(run_id='r1', payload=TextDeltaPayload(id='t1', text='HI'))
        """
        cls = type(self)
        payload_changes: dict[str, Any] = {}
        envelope: dict[str, Any] = {}
        for key, value in changes.items():
            if key in cls._payload_fields:
                payload_changes[key] = value
            elif key in cls._envelope_fields:
                envelope[key] = value
            else:
                raise InvalidType(cls._explain(None, changes).replace("()", ".replace()", 1))
        if payload_changes:
            # ChunkBase declares no payload (each subclass does): getattr keeps mypy honest
            payload = envelope.get("payload", getattr(self, "payload"))  # noqa: B009
            envelope["payload"] = msgspec.structs.replace(payload, **payload_changes)
        return msgspec.structs.replace(self, **envelope)
