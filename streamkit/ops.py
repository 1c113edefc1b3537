"""Stream operators: processors built from a function, and running pipelines without an agent.

Every operator here is a ``Processor`` with ``process_output_stream``: it can sit in an agent's
``output_processors``, compose with other processors using ``|``, and run standalone through
``apply(source, pipeline)`` over an async iterable, a list, or a reactivex ``Observable``.
``fn``/``pred`` may be sync or async; which one is decided once, when the operator is built.

Marble diagrams read left to right; ``|`` ends the stream, ``X`` is a tripwire::

    --a--b--c--|   map(upper)         --A--B--C--|
    --a--b--c--|   filter(not b)      --a-----c--|
    --a--b--c--|   abort(is b)        --a--X|

Standalone running and the reactivex/aiostream bridges live in ``streamkit._apply`` and are
re-exported here. What does not belong here: the per-chunk engine
(``streamkit.processors._stream``) and the agent.
aiostream and reactivex are used at the edges only (merging sources, Observable bridges), never
as the per-chunk engine.
"""

from __future__ import annotations

import difflib
import operator
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypedDict, TypeVar, cast

import msgspec

from ._apply import AppliedStream, apply, from_observable, fused_source, merge, to_observable
from .chunks import CHUNK_TYPES, Chunk, DataChunk, ReasoningDelta, TextDelta
from .errors import InvalidArgument, InvalidType
from .processors import Pipeline, Processor, TripWire, is_async_callable
from .validate import is_int, optional_int_at_least, optional_seconds

__all__ = [
    "map", "filter", "drop", "abort", "tap", "scan", "batch", "take", "skip", "take_while",
    "distinct_until_changed", "start_with", "flat_map", "map_text", "with_text", "apply",
    "AppliedStream", "fused_source",
    "to_observable", "from_observable", "merge",
]

_counter = iter(range(1, 1 << 62))

# Users' functions are typed on the chunk class they handle: ``def up(c: TextDelta) ->
# TextDelta`` is accepted by ``ops.map(up, types="text-delta")`` because the parameter is a
# TypeVar bounded by ``Chunk`` (a ``Callable[[Chunk], ...]`` would reject it: parameters are
# contravariant), while ``def f(s: str)`` is still an error. A result may be plain or awaitable
# (``async def``): the bounds below say which results an operator accepts.
C = TypeVar("C", bound=Chunk)
#: What ``ops.map``'s function returns: a chunk, ``None`` (drop it), or an awaitable of either.
MapResult = TypeVar("MapResult", bound="Chunk | None | Awaitable[Chunk | None]")
#: What ``ops.flat_map``'s function returns: chunks, or an awaitable of them.
FlatResult = TypeVar("FlatResult", bound="Iterable[Chunk] | Awaitable[Iterable[Chunk]]")
#: ``ops.scan``'s accumulator.
Acc = TypeVar("Acc")
#: The chunks ``with_text`` copies: the two whose payload has ``text``.
Delta = TypeVar("Delta", TextDelta, ReasoningDelta)

#: A stream hook as the runner calls it, the user's function with its chunk type erased (the
#: ``types=`` gate, not the type checker, is what keeps other chunk classes away from it).
Hook = Callable[[Chunk], object]
AsyncHook = Callable[[Chunk], Awaitable[object]]


_replace = msgspec.structs.replace


def with_text(part: Delta, text: str) -> Delta:
    """A copy of a ``text-delta`` (or ``reasoning-delta``) chunk with new text; the envelope,
    ids, provider metadata and unknown payload keys are kept. ~0.2 µs (no keyword handling).

    Example:
        >>> with_text(TextDelta(id="t", text="hi"), "HI").payload.text
        'HI'
    """
    return _replace(part, payload=_replace(part.payload, text=text))


def _op_id(kind: str, fn: object = None, id: str | None = None) -> str:
    if id:
        return id
    name = getattr(fn, "__name__", None)
    suffix = f":{name}" if name and name != "<lambda>" else ""
    return f"{kind}{suffix}#{next(_counter)}"


class _TypeSet:
    """The chunk types an operator applies to, checked by class (``part.__class__ in classes``
    costs less than reading ``part.type``); ``data-*`` names are matched by string."""

    __slots__ = ("classes", "data", "names")

    def __init__(self, types: Iterable[str] | str) -> None:
        names = frozenset([types] if isinstance(types, str) else types)
        unknown = sorted(t for t in names if t not in CHUNK_TYPES and not t.startswith("data-"))
        if unknown:
            hint = difflib.get_close_matches(unknown[0], sorted(CHUNK_TYPES), n=1)
            raise InvalidArgument(f"unknown chunk type(s) {unknown} in types=; "
                                  f"{'did you mean ' + repr(hint[0]) + '? ' if hint else ''}"
                                  f"expected wire types like 'text-delta' or 'data-<name>'")
        self.names = names
        self.classes = frozenset(CHUNK_TYPES[t] for t in names if t in CHUNK_TYPES)
        self.data = frozenset(t for t in names if t.startswith("data-"))

    def __contains__(self, part: Chunk) -> bool:
        cls = part.__class__
        return cls in self.classes or (cls is DataChunk and part.type in self.data)


def _types(types: Iterable[str] | str | None) -> _TypeSet | None:
    return None if types is None else _TypeSet(types)


class _Operator(Processor):
    """Base of the function-built operators: a hook made from ``fn`` at construction."""

    kind = "op"

    def __init__(self, fn: Callable[..., object] | None, *, id: str | None = None,
                 types: Iterable[str] | str | None = None, data: bool = False) -> None:
        if fn is not None and not callable(fn):
            raise InvalidType(f"ops.{self.kind} expects a function, got {type(fn).__name__}")
        super().__init__(_op_id(self.kind, fn, id))
        self.fn = fn
        self.types = _types(types)
        self.process_data_parts = data
        self.is_async = is_async_callable(fn) if fn is not None else False

    def __repr__(self) -> str:
        return f"ops.{self.kind}({getattr(self.fn, '__name__', self.fn)!r}, id={self.id!r})"


def _gate(types: _TypeSet | None, hook: Callable[[C], object], is_async: bool) -> Hook:
    """Restrict ``hook`` to chunks of ``types`` (others pass untouched)."""
    erased = cast(Hook, hook)  # the gate below is what keeps other chunk classes out
    if types is None:
        return erased
    classes = types.classes
    if is_async:
        awaited = cast(AsyncHook, hook)

        async def gated_async(part: Chunk) -> object:
            return await awaited(part) if part.__class__ in classes or part in types else part
        return gated_async

    def gated(part: Chunk) -> object:
        return erased(part) if part.__class__ in classes or part in types else part
    return gated


def _awaiting(fn: Callable[[C], object]) -> AsyncHook:
    """``fn`` (found to be async when the operator was built) as the awaitable-returning hook it
    is; its chunk type erased as in ``Hook``."""
    return cast(AsyncHook, fn)


class map(_Operator):  # noqa: A001 - the operator vocabulary users expect (ops.map)
    """Transform each chunk with ``fn(chunk) -> chunk`` (return ``None`` to drop it).

    ``types`` restricts it to chunks of those wire types; ``data=True`` lets ``data-*`` chunks in.
    ``fn`` may be typed on the one chunk class ``types`` lets through (``def up(c: TextDelta)``):
    a type checker accepts it, and rejects a function that takes no chunk or returns no chunk.

    Marble::

        --a--b--c--|   map(upper)   --A--B--C--|

    Example:
        >>> def upper(c: TextDelta) -> TextDelta:
        ...     return ops.with_text(c, c.payload.text.upper())
        >>> shout = ops.map(upper, types="text-delta")
    """

    kind = "map"
    stream_params = ("part",)

    def __init__(self, fn: Callable[[C], MapResult], *, id: str | None = None,
                 types: Iterable[str] | str | None = None, data: bool = False) -> None:
        super().__init__(fn, id=id, types=types, data=data)
        self.process_output_stream = _gate(self.types, fn, self.is_async)


class filter(_Operator):  # noqa: A001
    """Keep the chunks for which ``pred(chunk)`` is true; drop the others.

    Marble::

        --a--b--c--|   filter(not b)   --a-----c--|
    """

    kind = "filter"
    stream_params = ("part",)
    _keep_when = True

    def __init__(self, pred: Callable[[C], object], *, id: str | None = None,
                 types: Iterable[str] | str | None = None, data: bool = False) -> None:
        super().__init__(pred, id=id, types=types, data=data)
        keep = self._keep_when
        if self.is_async:
            apred = _awaiting(pred)

            async def hook_async(part: Chunk) -> Chunk | None:
                return part if bool(await apred(part)) is keep else None
            hook: Callable[[Chunk], object] = hook_async
        else:
            spred = cast(Hook, pred)

            def hook(part: Chunk) -> Chunk | None:
                return part if bool(spred(part)) is keep else None
        self.process_output_stream = _gate(self.types, hook, self.is_async)


class drop(filter):
    """Drop the chunks for which ``pred(chunk)`` is true.

    Marble::

        --a--b--c--|   drop(is b)   --a-----c--|
    """

    kind = "drop"
    _keep_when = False


class abort(_Operator):
    """Trip the wire when ``pred(chunk)`` is true: the chunk is dropped and the run stops (or, with
    ``retry=True`` inside an agent step, the step is re-run with ``reason`` as feedback).

    Marble::

        --a--b--c--|   abort(is b)   --a--X|
    """

    kind = "abort"
    stream_params = ("part",)

    def __init__(self, pred: Callable[[C], object], reason: str | None = None, *,
                 retry: bool = False, metadata: object = None, id: str | None = None,
                 types: Iterable[str] | str | None = None, data: bool = False) -> None:
        super().__init__(pred, id=id, types=types, data=data)
        pid = self.id

        def trip() -> TripWire:
            return TripWire(reason, retry=retry, metadata=metadata, processor_id=pid).fill(pid)

        if self.is_async:
            apred = _awaiting(pred)

            async def hook_async(part: Chunk) -> Chunk:
                if await apred(part):
                    raise trip()
                return part
            hook: Callable[[Chunk], object] = hook_async
        else:
            spred = cast(Hook, pred)

            def hook(part: Chunk) -> Chunk:
                if spred(part):
                    raise trip()
                return part
        self.process_output_stream = _gate(self.types, hook, self.is_async)


class tap(_Operator):
    """Call ``fn(chunk)`` for its side effect; the chunk passes unchanged.

    Marble::

        --a--b--|   tap(print)   --a--b--|   (prints a, b)
    """

    kind = "tap"
    stream_params = ("part",)

    def __init__(self, fn: Callable[[C], object], *, id: str | None = None,
                 types: Iterable[str] | str | None = None, data: bool = False) -> None:
        super().__init__(fn, id=id, types=types, data=data)
        if self.is_async:
            afn = _awaiting(fn)

            async def hook_async(part: Chunk) -> Chunk:
                await afn(part)
                return part
            hook: Callable[[Chunk], object] = hook_async
        else:
            sfn = cast(Hook, fn)

            def hook(part: Chunk) -> Chunk:
                sfn(part)
                return part
        self.process_output_stream = _gate(self.types, hook, self.is_async)


class scan(_Operator):
    """Fold every chunk into an accumulator kept in this request's ``state[key]``.

    ``fn(acc, chunk) -> acc``; ``seed`` starts it. Chunks pass unchanged; read the value from
    ``applied.state(op.id)[key]`` (standalone) or in any hook of the same processor.

    Marble::

        --a--b--c--|   scan(count, 0)   --a--b--c--|   state: 1, 2, 3
    """

    kind = "scan"
    stream_params = ("part", "state")

    def __init__(self, fn: Callable[[Acc, C], Acc | Awaitable[Acc]], seed: Acc | None = None,
                 *, key: str = "acc", id: str | None = None,
                 types: Iterable[str] | str | None = None, data: bool = False) -> None:
        super().__init__(fn, id=id, types=types, data=data)
        types_ = self.types
        # The accumulator starts as ``seed`` (``None`` when none is given) and the ``types=``
        # gate keeps other chunk classes away: erased here, as in ``Hook``.
        if self.is_async:
            afold = cast("Callable[[Acc | None, Chunk], Awaitable[Acc]]", fn)

            async def hook_async(part: Chunk, state: dict[str, Acc | None]) -> Chunk:
                if types_ is None or part.__class__ in types_.classes or part in types_:
                    state[key] = await afold(state.get(key, seed), part)
                return part
            self.process_output_stream: Callable[[Chunk, dict[str, Acc | None]], object] = \
                hook_async
        else:
            fold = cast("Callable[[Acc | None, Chunk], Acc]", fn)

            def hook(part: Chunk, state: dict[str, Acc | None]) -> Chunk:
                if types_ is None or part.__class__ in types_.classes or part in types_:
                    state[key] = fold(state.get(key, seed), part)
                return part
            self.process_output_stream = hook


_SENTENCE_END = re.compile(r"[.!?。！？](?:[\"')\]]*)(?:\s|$)")


class _BatchState(TypedDict, total=False):
    """``ops.batch``'s per-request state: the text deltas held, and when the batch started."""

    held: list[TextDelta]
    started: float


class batch(Processor):
    """Group consecutive text deltas into one, by count, by sentence, or by time.

    A batch is emitted when it holds ``count`` deltas, when its text ends a sentence
    (``sentence=True``), when a delta arrives ``interval`` seconds or more after the batch
    started (that delta opens the next batch; the check runs as chunks arrive, so a stalled
    source does not flush on its own), before any non-text chunk (which follows
    it), when the text id changes, and at the end of the source. Nothing is lost or reordered.

    Marble::

        --h--e--l--l--o--|--   batch(count=2)   -----he----ll--o|
    """

    multi_emit = True
    kind = "batch"

    def __init__(self, count: int | None = None, *, sentence: bool = False,
                 interval: float | None = None, id: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if count is None and not sentence and interval is None:
            raise InvalidArgument("ops.batch needs count=, sentence=True or interval= "
                                  "(seconds); got none of them")
        optional_int_at_least(count, "ops.batch count", 1)
        optional_seconds(interval, "ops.batch interval")
        super().__init__(id or _op_id("batch"))
        self.count, self.sentence, self.interval, self.clock = count, sentence, interval, clock

    def _merged(self, held: list[TextDelta]) -> TextDelta:
        first = held[0]
        if len(held) == 1:
            return first
        return with_text(first, "".join(c.payload.text for c in held))

    def process_output_stream(self, part: Chunk, state: _BatchState
                              ) -> Chunk | list[Chunk] | None:
        held = state.setdefault("held", [])
        if part.__class__ is not TextDelta:
            if not held:
                return part
            out = [self._merged(held), part]
            held.clear()
            return out
        out_list: list[Chunk] = []
        # A chunk that arrives after the window closed belongs to the next window.
        if held and (held[0].payload.id != part.payload.id or (
                self.interval is not None
                and self.clock() - state["started"] >= self.interval)):
            out_list.append(self._merged(held))
            held.clear()
        if not held:
            state["started"] = self.clock()
        held.append(part)
        full = (self.count is not None and len(held) >= self.count) \
            or (self.sentence and _SENTENCE_END.search(part.payload.text) is not None)
        if full:
            out_list.append(self._merged(held))
            held.clear()
        return out_list or None

    def flush_output_stream(self, state: _BatchState) -> list[Chunk] | None:
        held = state.get("held")
        if not held:
            return None
        merged = self._merged(held)
        held.clear()
        return [merged]


class _Counted(Processor):
    """``take``/``skip``: count the chunks (of ``types``) in the request's state and keep those
    for which ``keeps(count, n)`` holds; chunks of other types pass."""

    stream_params = ("part", "state")

    def __init__(self, kind: str, keeps: Callable[[int, int], bool], n: int, *,
                 id: str | None, types: Iterable[str] | str | None) -> None:
        if not is_int(n):
            raise InvalidType(f"ops.{kind} takes an int count >= 0, got {type(n).__name__} "
                              f"{n!r}")
        if n < 0:
            raise InvalidArgument(f"ops.{kind} takes a count >= 0, got {n!r}")
        super().__init__(id or _op_id(kind))
        types_ = _types(types)

        def hook(part: Chunk, state: dict[str, int]) -> Chunk | None:
            if types_ is not None and part not in types_:
                return part
            seen = state.get("seen", 0) + 1
            state["seen"] = seen
            return part if keeps(seen, n) else None
        self.process_output_stream = hook


class take(_Counted):
    """Pass the first ``n`` chunks (of ``types``, if given), drop the rest.

    Marble::

        --a--b--c--|   take(2)   --a--b-----|
    """

    def __init__(self, n: int, *, id: str | None = None,
                 types: Iterable[str] | str | None = None) -> None:
        super().__init__("take", operator.le, n, id=id, types=types)  # count <= n


class skip(_Counted):
    """Drop the first ``n`` chunks (of ``types``, if given), pass the rest.

    Marble::

        --a--b--c--|   skip(2)   --------c--|
    """

    def __init__(self, n: int, *, id: str | None = None,
                 types: Iterable[str] | str | None = None) -> None:
        super().__init__("skip", operator.gt, n, id=id, types=types)  # count > n


class take_while(_Operator):
    """Pass chunks while ``pred(chunk)`` holds; from the first failure on, drop everything.

    Marble::

        --1--2--5--1--|   take_while(<3)   --1--2--------|
    """

    kind = "take_while"
    stream_params = ("part", "state")

    def __init__(self, pred: Callable[[C], object], *, id: str | None = None) -> None:
        super().__init__(pred, id=id)
        if self.is_async:
            apred = _awaiting(pred)

            async def hook_async(part: Chunk, state: dict[str, bool]) -> Chunk | None:
                if state.get("done") or not await apred(part):
                    state["done"] = True
                    return None
                return part
            self.process_output_stream: Callable[[Chunk, dict[str, bool]], object] = hook_async
        else:
            spred = cast(Hook, pred)

            def hook(part: Chunk, state: dict[str, bool]) -> Chunk | None:
                if state.get("done") or not spred(part):
                    state["done"] = True
                    return None
                return part
            self.process_output_stream = hook


class distinct_until_changed(_Operator):
    """Drop a chunk whose ``key(chunk)`` equals the previous chunk's (default: the chunk itself).

    Marble::

        --a--a--b--a--|   distinct_until_changed()   --a-----b--a--|
    """

    kind = "distinct_until_changed"
    stream_params = ("part", "state")

    def __init__(self, key: Callable[[C], object] | None = None, *,
                 id: str | None = None) -> None:
        super().__init__(key, id=id)
        if self.is_async:
            raise InvalidType(f"ops.distinct_until_changed takes a sync key function, got the "
                              f"async function {key!r}")
        keyfn = cast(Hook, key) if key is not None else (lambda part: part)
        missing = object()

        def hook(part: Chunk, state: dict[str, object]) -> Chunk | None:
            k = keyfn(part)
            if state.get("last", missing) == k:
                return None
            state["last"] = k
            return part
        self.process_output_stream = hook


class start_with(Processor):
    """Emit ``chunks`` before the first chunk of the stream.

    Marble::

        -----a--b--|   start_with(x)   --x--a--b--|
    """

    multi_emit = True
    stream_params = ("part", "state")

    def __init__(self, *chunks: object, id: str | None = None) -> None:
        super().__init__(id or _op_id("start_with"))
        first = list(chunks)

        def hook(part: Chunk, state: dict[str, bool]) -> object:
            if state.get("started"):
                return part
            state["started"] = True
            return [*first, part]
        self.process_output_stream = hook


class flat_map(_Operator):
    """Replace each chunk by the list ``fn(chunk)`` returns (empty list drops it).

    Marble::

        --a--b--|   flat_map(twice)   --aa--bb--|
    """

    kind = "flat_map"
    multi_emit = True
    stream_params = ("part",)

    def __init__(self, fn: Callable[[C], FlatResult], *, id: str | None = None,
                 types: Iterable[str] | str | None = None, data: bool = False) -> None:
        super().__init__(fn, id=id, types=types, data=data)
        if self.is_async:
            afn = cast("Callable[[Chunk], Awaitable[Iterable[Chunk]]]", fn)

            async def hook_async(part: Chunk) -> list[Chunk]:
                return list(await afn(part))
            hook: Callable[[Chunk], object] = hook_async
        else:
            sfn = cast("Callable[[Chunk], Iterable[Chunk]]", fn)

            def hook(part: Chunk) -> list[Chunk]:
                return list(sfn(part))
        self.process_output_stream = _gate(self.types, hook, self.is_async)


class map_text(_Operator):
    """Transform the text of every ``text-delta`` with ``fn(text) -> text``; other chunks pass.

    Marble::

        --"hi"--tool--"yo"--|   map_text(str.upper)   --"HI"--tool--"YO"--|
    """

    kind = "map_text"
    stream_params = ("part",)

    def __init__(self, fn: Callable[[str], str | Awaitable[str]], *,
                 id: str | None = None) -> None:
        super().__init__(fn, id=id)
        if self.is_async:
            afn = cast("Callable[[str], Awaitable[str]]", fn)

            async def hook_async(part: Chunk) -> Chunk:
                if part.__class__ is TextDelta:
                    return with_text(part, await afn(part.payload.text))
                return part
            self.process_output_stream: Callable[[Chunk], object] = hook_async
        else:
            delta, replace = TextDelta, _replace
            sfn = cast("Callable[[str], str]", fn)

            def hook(part: Chunk) -> Chunk:
                if part.__class__ is delta:
                    p = part.payload  # with_text, inlined: this is the per-chunk path
                    return replace(part, payload=replace(p, text=sfn(p.text)))
                return part
            self.process_output_stream = hook


def compose(*processors: object) -> Pipeline:
    """``compose(a, b, c)`` is ``a | b | c``."""
    return Pipeline(*processors)

