"""Every error streamkit raises, in one tree.

Bad input always gets one of these, with a message that says what was wrong and what was
expected. ``TripWire`` is *not* here: it is a control-flow signal (see ``streamkit.tripwire``),
kept outside the tree so ``except StreamkitError`` never swallows an abort.

::

    StreamkitError
    ├── ProcessorDefinitionError   a processor is malformed (unknown hook, unknown parameter, no id)
    ├── ProcessorError             a processor misbehaved at run time (bad return value, raised)
    ├── ChunkDecodeError           bytes/JSON that are not a valid chunk (unknown type, bad field)
    ├── MessageError               a message or message part that cannot be normalised
    ├── APICallError               a model provider call failed (HTTP status, timeout, bad stream)
    ├── ToolError                  a tool is malformed, unknown, or got invalid arguments
    ├── MaxStepsExceeded           the agent loop wanted more steps than ``max_steps``
    ├── ScriptExhausted            a ``ScriptedModel`` was called more times than it has steps
    ├── GraphError                 the agent loop graph is invalid (dangling edge, unknown node)
    ├── MemoryStoreError           the memory store failed (locked, corrupted, unreadable)
    └── UsageError                 the library was called wrongly (bad option, bad argument)
        ├── InvalidArgument        ... with a value that is out of range / malformed (ValueError)
        └── InvalidType            ... with a value of the wrong type (TypeError)

Exceptions are plain data: they never log, and they pickle (their ``__reduce__`` keeps the
keyword attributes).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "StreamkitError",
    "ProcessorDefinitionError",
    "ProcessorError",
    "ChunkDecodeError",
    "MessageError",
    "APICallError",
    "ToolError",
    "MaxStepsExceeded",
    "ScriptExhausted",
    "GraphError",
    "MemoryStoreError",
    "UsageError",
    "InvalidArgument",
    "InvalidType",
]


class StreamkitError(Exception):
    """Base class of every error streamkit raises."""

    def __init__(self, message: str, **attrs: object) -> None:
        super().__init__(message)
        self.message = message
        self._attrs = attrs
        for key, value in attrs.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self._attrs))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[StreamkitError], message: str, attrs: dict[str, object]) -> StreamkitError:
    err = cls.__new__(cls)
    StreamkitError.__init__(err, message, **attrs)
    return err


class ProcessorDefinitionError(StreamkitError):
    """A processor cannot be registered: no ``id``, no hook, an unknown ``process_*`` method, or a
    hook parameter that the runtime never passes. The message names the closest valid name."""


class ProcessorError(StreamkitError):
    """A processor misbehaved while running: it returned a value of the wrong shape (for example a
    *different* ``MessageList``) or raised. ``processor_id`` and ``hook`` say where."""

    processor_id: str | None
    hook: str | None

    def __init__(self, message: str, *, processor_id: str | None = None, hook: str | None = None,
                 **attrs: object) -> None:
        super().__init__(message, processor_id=processor_id, hook=hook, **attrs)


class ChunkDecodeError(StreamkitError):
    """Input is not a valid chunk: malformed JSON, an unknown ``type``, a field of the wrong type,
    or a truncated SSE frame. ``chunk_type`` and ``position`` say where, when known."""

    chunk_type: str | None
    position: int | None

    def __init__(self, message: str, *, chunk_type: str | None = None,
                 position: int | None = None, **attrs: object) -> None:
        super().__init__(message, chunk_type=chunk_type, position=position, **attrs)


class MessageError(StreamkitError):
    """A message or message part cannot be normalised (unknown role, unknown part type, ...)."""


class APICallError(StreamkitError):
    """A model provider call failed.

    Attributes:
        status_code: HTTP status, or ``None`` for timeouts, connection failures and broken streams.
        body: the response body as text (or ``None``).
        is_retryable: whether retrying the same request may succeed (429, 5xx, timeouts,
            connection resets, a stream cut mid-way).
        url: the URL that was called, when there was one.
        retry_after: seconds the server asked us to wait (``Retry-After``), when it said so.
    """

    status_code: int | None
    body: str | None
    is_retryable: bool
    url: str | None
    retry_after: float | None

    def __init__(self, message: str, *, status_code: int | None = None, body: str | None = None,
                 is_retryable: bool | None = None, url: str | None = None,
                 retry_after: float | None = None, **attrs: object) -> None:
        if is_retryable is None:
            is_retryable = status_code is None or status_code == 408 or status_code == 409 \
                or status_code == 429 or status_code >= 500
        super().__init__(message, status_code=status_code, body=body, is_retryable=is_retryable,
                         url=url, retry_after=retry_after, **attrs)


class ToolError(StreamkitError):
    """A tool is malformed (no usable signature), unknown to the agent, or got invalid arguments.
    ``tool_name`` says which."""

    tool_name: str | None

    def __init__(self, message: str, *, tool_name: str | None = None, **attrs: object) -> None:
        super().__init__(message, tool_name=tool_name, **attrs)


class MaxStepsExceeded(StreamkitError):
    """Raised only where a caller asks for it; the agent loop normally just stops at
    ``max_steps`` with ``finish_reason`` of the last step."""


class ScriptExhausted(StreamkitError):
    """A ``ScriptedModel`` was called more times than it has scripted steps."""


class GraphError(StreamkitError):
    """The pipeline graph is invalid: an edge names an unknown node, or a node is unreachable."""


class MemoryStoreError(StreamkitError):
    """The memory store failed: the database is locked, corrupted or unreadable. The turn that
    was being saved is named in the message; nothing is silently lost."""


class UsageError(StreamkitError):
    """The library was called wrongly: an unknown option, an argument out of range or of the
    wrong type, an operator given a predicate that is not callable. The message names what was
    given and what is expected. Raised at the call that was wrong, never later inside a run.

    Catch ``StreamkitError`` for everything streamkit raises; the two subclasses below are also
    the builtin ``ValueError``/``TypeError`` so code written against those keeps working.
    """


class InvalidArgument(UsageError, ValueError):
    """An argument has the right type but a wrong value (a negative count, an unknown name, an
    empty id). Also a ``ValueError``.

    Example:
        >>> try:
        ...     raise InvalidArgument("take(count=-1): count must be >= 0")
        ... except ValueError as exc:
        ...     print(exc)
        take(count=-1): count must be >= 0
    """


class InvalidType(UsageError, TypeError):
    """An argument has the wrong type (a dict where a chunk is expected, a string where a
    callable is). Also a ``TypeError``."""
