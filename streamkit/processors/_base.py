"""The ``Processor`` base class, ``Pipeline`` (processors composed with ``|``, itself a processor)
and typing helpers.

A processor is any object with a string ``id`` and at least one hook; subclassing ``Processor`` is
the usual way. The base class defines *no* hook: a hook exists only where a subclass writes it, so
a misspelled hook is caught at registration instead of silently never running.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._chain import StreamChain
from ._runtime import RequestRuntime, Writer
from ._spec import ProcessorSpec, register

if TYPE_CHECKING:
    from ..chunks import Chunk

__all__ = [
    "Processor", "Pipeline", "InputProcessor", "OutputProcessor", "ErrorProcessor",
    "flatten_processors",
]


class Processor:
    """Base class for processors.

    Subclasses set ``id`` and write any of the nine hooks (``process_input``,
    ``process_input_step``, ``process_llm_request``, ``process_llm_response``,
    ``process_api_error``, ``process_output_stream``, ``process_output_step``,
    ``process_tool_result``, ``process_output_result``), each ``def`` or ``async def``. A hook
    receives, by keyword, only the parameters it names. Hook names are snake_case; a method
    named in camelCase (``processOutputStream``) is a ``ProcessorDefinitionError`` naming the
    hook meant.

    ``state`` is one dict per processor per request, shared by all its hooks; it lives for the
    whole request, not per attempt: a retried step starts with what the rejected attempt left
    there. A hook that keeps something per attempt (a text buffer) asks for ``retry_count``
    (``0`` on a first attempt, ``n`` on the n-th retry, ``0`` again after an accepted step) and
    resets when it changes. ``streamkit.Abort`` is the type of ``abort``, for annotations.

    Attributes:
        id: identity; keys the per-request ``state`` and names the processor in tripwires.
        name: display name; reads as ``id`` until one is set (as Mastra documents it), so
            ``Processor("guard").name == "guard"``. A subclass may also set ``name = "..."``.
        description: display text.
        processor_index: set by the runtime to the position in its combined list.
        process_data_parts: when True, ``data-*`` chunks reach ``process_output_stream``.
        multi_emit: when True, ``process_output_stream`` may return a list of chunks; each goes on
            through the rest of the chain in order (used by batching and redaction operators).
        sees_final_request: when True, ``process_llm_request`` runs after every other
            processor's of the lane, so it sees the prompt exactly as the model will receive
            it, wherever it is in the list (used by ``ResponseCache``, whose key is that
            prompt). Among processors that set it, the list order holds.

    Example:
        >>> class WordCounter(Processor):
        ...     id = "word-counter"
        ...     def process_output_stream(self, part, state):
        ...         if part.type == "text-delta":
        ...             state["words"] = state.get("words", 0) + len(part.payload.text.split())
        ...         return part
    """

    id: str = ""
    _name: str | None = None
    description: str | None = None
    processor_index: int | None = None
    process_data_parts: bool = False
    multi_emit: bool = False
    sees_final_request: bool = False

    def __init__(self, id: str | None = None, *, name: str | None = None,
                 description: str | None = None) -> None:
        if id is not None:
            self.id = id
        if name is not None:
            self.name = name
        if description is not None:
            self.description = description

    @property
    def name(self) -> str:
        """The display name: the one set, else ``id``."""
        return self._name if self._name is not None else self.id

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    @property
    def display_name(self) -> str:
        return self.name or self.id or type(self).__name__

    def __or__(self, other: object) -> Pipeline:
        return Pipeline(self, other)

    def __ror__(self, other: object) -> Pipeline:
        return Pipeline(other, self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} id={self.id!r}>"


class _ChainKey:
    """The key a pipeline keeps its per-request chain under in its ``state``: not a ``str``, so
    it never collides with a member's id."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<pipeline chain>"


_CHAIN = _ChainKey()


class Pipeline(Processor):
    """Processors composed with ``|``: ``ops.map(f) | Redactor() | ops.filter(g)`` — itself a
    processor, usable wherever one is.

    **In a processor list** (``output_processors=[pipe]``, ``ops.apply(source, pipe)``, any
    lane) the pipeline is flattened at registration: each member is registered on its own, so
    it keeps its own id, ``state`` (``result.states[member.id]``), trace record and
    ``on_violation``, all its hooks run (not only the stream hook), a tripwire names the member
    that tripped, and the stream hooks stay fused into one pass per chunk with the rest of the
    list. This is what streamkit's runners do.

    **As one processor** (called directly, or handed to code that knows only the processor
    interface) it has an ``id`` (the members' ids joined by ``" | "``, unless given),
    ``process_output_stream`` and, when a member has one, ``flush_output_stream``: each chunk
    goes through the members in order, fused as in a list. Its ``state`` holds each member's
    state under the member's id (and, under a private non-``str`` key, the request's fused
    chain), so one state dict is one request. The hook is ``async`` when any member's stream
    hook is, else a plain function (decided on first use); ``flush_output_stream`` is always
    ``async``. ``process_data_parts``/``multi_emit`` are true when a member's is (a data chunk
    still reaches only members that asked for it). Its caller records it as one processor; a
    member's ``on_violation`` is left to the caller too (the TripWire names the member).

    Args:
        *members: processors, operators or pipelines (flattened).
        id: the pipeline's id; defaults to the members' ids joined by ``" | "``.

    Marble::

        --a--b--c--|   map(upper) | drop(is_b)   --A-----C--|

    Example:
        >>> from streamkit import ops
        >>> from streamkit.chunks import TextDelta
        >>> pipe = ops.map(lambda c: c, id="same") | ops.drop(lambda c: False, id="none")
        >>> pipe.id
        'same | none'
        >>> state = {}
        >>> pipe.process_output_stream(part=TextDelta(id="t", text="hi"), state=state).payload.text
        'hi'
    """

    def __init__(self, *members: object, id: str | None = None) -> None:
        flat: list[object] = []
        for member in members:
            if isinstance(member, Pipeline):
                flat.extend(member.members)
            else:
                flat.append(member)
        self.members: tuple[object, ...] = tuple(flat)
        super().__init__(id if id is not None else
                         " | ".join(str(getattr(m, "id", "?")) for m in self.members))
        # Read as registration reads them, so the flags match the members' specs.
        self.process_data_parts = any(bool(getattr(m, "process_data_parts", False))
                                      for m in self.members)
        self.multi_emit = any(bool(getattr(m, "multi_emit", False)) for m in self.members)
        self._hook: Callable[..., object] | None = None
        self._specs: list[ProcessorSpec] | None = None

    # -- the composite's own flags and hooks (see the class docstring) -------------------------

    def _member_specs(self) -> list[ProcessorSpec]:
        if self._specs is None:
            self._specs = [register(m) for m in self.members]
        return self._specs

    @property
    def process_output_stream(self) -> Callable[..., object] | None:
        """The members' stream hooks as one (``None`` when no member has one)."""
        if self._hook is None:
            streams = [s for s in self._member_specs() if "process_output_stream" in s.hooks]
            if not streams:
                return None
            is_async = any(s.hooks["process_output_stream"].is_async for s in streams)
            self._hook = self._push_async if is_async else self._push
        return self._hook

    @property
    def flush_output_stream(self) -> Callable[..., object] | None:
        """Flush every member in order (``None`` when no member flushes)."""
        return self._flush if any(s.flush for s in self._member_specs()) else None

    # Any: the state holds the members' states under their ids and the chain under _CHAIN.
    def _chain(self, state: dict[Any, Any], writer: Writer | None, message_list: object,
               request_context: object, retry_count: int) -> StreamChain:
        chain = state.get(_CHAIN)
        if chain is None:
            runtime = RequestRuntime(request_context, timed=False)
            runtime.states = state  # each member's state, under its id, in the pipeline's
            chain = state[_CHAIN] = StreamChain(self._member_specs(), runtime, writer=writer,
                                                message_list=message_list)
        chain.retry_count = retry_count
        return chain

    def _push(self, part: Chunk, state: dict[object, object], writer: Writer | None = None,
              message_list: object = None, request_context: object = None, retry_count: int = 0
              ) -> object:
        return self._chain(state, writer, message_list, request_context, retry_count).push(part)

    async def _push_async(self, part: Chunk, state: dict[object, object],
                          writer: Writer | None = None,
                          message_list: object = None, request_context: object = None,
                          retry_count: int = 0) -> object:
        return await self._chain(state, writer, message_list, request_context,
                                 retry_count).push(part)

    async def _flush(self, state: dict[object, object], writer: Writer | None = None,
                     message_list: object = None, request_context: object = None,
                     retry_count: int = 0) -> list[object]:
        chain = self._chain(state, writer, message_list, request_context, retry_count)
        return await chain.flush()

    # -- a sequence of members ------------------------------------------------------------------

    def __or__(self, other: object) -> Pipeline:
        return Pipeline(self, other)

    def __ror__(self, other: object) -> Pipeline:
        return Pipeline(other, self)

    def __iter__(self) -> Iterator[object]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        return f"Pipeline({', '.join(repr(m) for m in self.members)})"


def flatten_processors(processors: object) -> list[object]:
    """Flatten a processor, a ``Pipeline`` or an iterable of them into a plain list."""
    if processors is None:
        return []
    if isinstance(processors, Pipeline):
        return list(processors.members)
    if isinstance(processors, (list, tuple)):
        out: list[object] = []
        for p in processors:
            out.extend(flatten_processors(p) if isinstance(p, (Pipeline, list, tuple)) else [p])
        return out
    if isinstance(processors, Iterable) and not hasattr(processors, "id"):
        return flatten_processors(list(processors))
    return [processors]


@runtime_checkable
class InputProcessor(Protocol):
    """Typing helper: a processor for ``input_processors`` (``process_input``,
    ``process_input_step``, ``process_llm_request`` or ``process_llm_response``)."""

    id: str


@runtime_checkable
class OutputProcessor(Protocol):
    """Typing helper: a processor for ``output_processors`` (``process_output_stream``,
    ``process_output_step``, ``process_tool_result`` or ``process_output_result``)."""

    id: str


@runtime_checkable
class ErrorProcessor(Protocol):
    """Typing helper: a processor for ``error_processors`` (``process_api_error``)."""

    id: str
