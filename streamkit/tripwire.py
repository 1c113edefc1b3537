"""The abort signal: ``TripWire``, ``abort()`` (its type: ``Abort``) and the ``Violation`` record
given to ``on_violation``.

``TripWire`` is control flow, not an error: it sits outside the ``StreamkitError`` tree so that
``except StreamkitError`` never swallows an abort (the same choice as pydantic-ai's ``ModelRetry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, TypedDict

__all__ = ["Abort", "TripWire", "Violation"]


def default_reason(processor_id: str | None) -> str:
    """The reason used when ``abort()`` is called without one: ``Tripwire triggered by <id>``."""
    return f"Tripwire triggered by {processor_id or 'processor'}"


class TripWireDict(TypedDict):
    """``TripWire.to_dict()``: the blocking processor's reason, retry request and metadata."""

    reason: str | None
    retry: bool
    metadata: object
    processor_id: str | None


class TripWire(Exception):
    """Raised by ``abort()`` (or directly by a processor) to stop a run, or retry its step.

    Attributes:
        reason: why the processor tripped; defaults to ``Tripwire triggered by <processor id>``.
        retry: ask for the step to be re-run with ``reason`` fed back to the model.
        metadata: any JSON-able detail, carried to the tripwire chunk and ``result.tripwire``.
        processor_id: the processor that tripped; the runtime fills it in when missing.

    Example:
        >>> def process_output_stream(part, abort):
        ...     if "secret" in getattr(part.payload, "text", ""):
        ...         abort("leaked a secret", metadata={"kind": "secret"})
        ...     return part
    """

    def __init__(self, reason: str | None = None, *, retry: bool = False, metadata: object = None,
                 processor_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason: str | None = reason
        self.retry = bool(retry)
        self.metadata = metadata
        self.processor_id = processor_id

    def __str__(self) -> str:
        return self.reason or default_reason(self.processor_id)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.reason, self.retry, self.metadata, self.processor_id))

    def fill(self, processor_id: str) -> TripWire:
        """Fill in ``processor_id`` and the default reason where missing; returns ``self``."""
        if self.processor_id is None:
            self.processor_id = processor_id
        if not self.reason:
            self.reason = default_reason(self.processor_id)
        return self

    def to_dict(self) -> TripWireDict:
        """``{"reason", "retry", "metadata", "processor_id"}`` as given to results and traces."""
        return {"reason": self.reason, "retry": self.retry, "metadata": self.metadata,
                "processor_id": self.processor_id}


def _rebuild(reason: str | None, retry: bool, metadata: object, processor_id: str | None
             ) -> TripWire:
    return TripWire(reason, retry=retry, metadata=metadata, processor_id=processor_id)


@dataclass(frozen=True, slots=True)
class Violation:
    """What ``on_violation(violation)`` receives for every TripWire a processor raises.

    Attributes:
        processor_id: the processor that tripped.
        message: the tripwire's reason.
        detail: the tripwire's metadata.
        retry: whether the processor asked for a retry.
        hook: the hook that raised it (``"process_output_stream"``, ...).
    """

    processor_id: str
    message: str
    detail: Any = None
    retry: bool = False
    hook: str | None = None


class Abort(Protocol):
    """The type of the ``abort`` argument a hook receives, for annotations (as ``Writer`` is the
    type of ``writer``): ``abort(reason=None, *, retry=False, metadata=None)`` raises
    ``TripWire`` and never returns.

    Example:
        >>> from streamkit import Abort, Chunk
        >>> def process_output_stream(part: Chunk, abort: Abort) -> Chunk:
        ...     if part.type == "text-delta" and "secret" in part.payload.text:
        ...         abort("leaked a secret", retry=True)
        ...     return part
    """

    def __call__(self, reason: str | None = None, *, retry: bool = False,
                 metadata: object = None) -> NoReturn: ...


def make_abort(processor_id: str) -> Abort:
    """Build the ``abort(reason=None, *, retry=False, metadata=None)`` function given to hooks."""

    def abort(reason: str | None = None, *, retry: bool = False,
              metadata: object = None) -> NoReturn:
        raise TripWire(reason or default_reason(processor_id), retry=retry, metadata=metadata,
                       processor_id=processor_id)

    abort.__qualname__ = f"abort[{processor_id}]"
    return abort
