"""The ``Processor`` base class, ``Pipeline`` (processors composed with ``|``) and typing helpers.

A processor is any object with a string ``id`` and at least one hook; subclassing ``Processor`` is
the usual way. The base class defines *no* hook: a hook exists only where a subclass writes it, so
a misspelled hook is caught at registration instead of silently never running.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Protocol, runtime_checkable

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
    receives, by keyword, only the parameters it names.

    Attributes:
        id: identity; keys the per-request ``state`` and names the processor in tripwires.
        name: display name (defaults to ``id``).
        description: display text.
        processor_index: set by the runtime to the position in its combined list.
        process_data_parts: when True, ``data-*`` chunks reach ``process_output_stream``.
        multi_emit: when True, ``process_output_stream`` may return a list of chunks; each goes on
            through the rest of the chain in order (used by batching and redaction operators).

    Example:
        >>> class WordCounter(Processor):
        ...     id = "word-counter"
        ...     def process_output_stream(self, part, state):
        ...         if part.type == "text-delta":
        ...             state["words"] = state.get("words", 0) + len(part.payload.text.split())
        ...         return part
    """

    id: str = ""
    name: str | None = None
    description: str | None = None
    processor_index: int | None = None
    process_data_parts: bool = False
    multi_emit: bool = False

    def __init__(self, id: str | None = None, *, name: str | None = None,
                 description: str | None = None) -> None:
        if id is not None:
            self.id = id
        if name is not None:
            self.name = name
        if description is not None:
            self.description = description

    @property
    def display_name(self) -> str:
        return self.name or self.id or type(self).__name__

    def __or__(self, other: Any) -> Pipeline:
        return Pipeline(self, other)

    def __ror__(self, other: Any) -> Pipeline:
        return Pipeline(other, self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} id={self.id!r}>"


class Pipeline:
    """Processors composed with ``|``: ``ops.map(f) | Redactor() | ops.filter(g)``.

    A pipeline is itself usable wherever a processor list is (``output_processors=[pipe]``,
    ``ops.apply(source, pipe)``); it is flattened at registration so each member keeps its own
    id, state and hooks, and stream hooks stay fused into one pass per chunk.

    Marble::

        --a--b--c--|   map(upper) | drop(is_b)   --A-----C--|
    """

    def __init__(self, *members: Any) -> None:
        flat: list[Any] = []
        for member in members:
            if isinstance(member, Pipeline):
                flat.extend(member.members)
            else:
                flat.append(member)
        self.members: tuple[Any, ...] = tuple(flat)

    @property
    def id(self) -> str:
        return " | ".join(str(getattr(m, "id", "?")) for m in self.members)

    def __or__(self, other: Any) -> Pipeline:
        return Pipeline(self, other)

    def __ror__(self, other: Any) -> Pipeline:
        return Pipeline(other, self)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        return f"Pipeline({', '.join(repr(m) for m in self.members)})"


def flatten_processors(processors: Any) -> list[Any]:
    """Flatten a processor, a ``Pipeline`` or an iterable of them into a plain list."""
    if processors is None:
        return []
    if isinstance(processors, Pipeline):
        return list(processors.members)
    if isinstance(processors, (list, tuple)):
        out: list[Any] = []
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
