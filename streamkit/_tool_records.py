"""A step's tool calls, their results and their outcomes, as named structs.

``StepToolCall`` is what the model asked for (``StepState.tool_calls``, ``StepResult.tool_calls``,
the ``tool_calls`` a ``process_output_step`` hook receives); ``StepToolResult`` what the consumer
received for it (``StepResult.tool_results``); ``ToolOutcome`` what running the tool gave
(``StepState.tool_outcomes``: the call, whether it returned, its value or exception).

Decided here (issue 32 point 1): the records were plain dicts (and the outcome a bare
``tuple``) until 0.x; hooks and user code that read them as ``call["tool_name"]`` keep working
through a **read-only mapping view**: ``record[key]``, ``record.get(key, default)``,
``record.keys()`` and ``key in record`` take the old dict keys (the field names), and
``dict(record)`` gives the old dict. The view is a few lines on the struct (no copy is made), and
mypy types ``call["tool_name"]`` as ``str`` and rejects an unknown key. Writing through it
(``call["args"] = ...``) is an error: the records are frozen, as the run shares them between the
step, its result and the hooks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, overload

import msgspec

__all__ = ["StepToolCall", "StepToolResult", "ToolOutcome"]


class _MappingView(msgspec.Struct, frozen=True):
    """The read-only dict view of a record (keys: its field names)."""

    def _read(self, key: str) -> object:
        if key in self.__struct_fields__:
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: object = None) -> Any:
        """``record[key]``, or ``default`` for a key the record does not have."""
        return getattr(self, key) if key in self.__struct_fields__ else default

    def keys(self) -> tuple[str, ...]:
        """The old dict's keys: the field names, in order."""
        return self.__struct_fields__

    def __contains__(self, key: object) -> bool:
        return key in self.__struct_fields__

    def __iter__(self) -> Iterator[str]:
        return iter(self.__struct_fields__)

    def __len__(self) -> int:
        return len(self.__struct_fields__)


class StepToolCall(_MappingView, frozen=True):
    """One tool call the model made in a step.

    Attributes:
        tool_call_id: the provider's id of the call.
        tool_name: the tool called.
        args: the parsed arguments (usually a JSON object; ``None`` when the model sent none).

    Example:
        >>> call = StepToolCall(tool_call_id="c1", tool_name="lookup", args={"q": "x"})
        >>> call.tool_name, call["tool_name"], dict(call)["args"]
        ('lookup', 'lookup', {'q': 'x'})
    """

    tool_call_id: str
    tool_name: str
    args: Any = None

    @overload
    def __getitem__(self, key: Literal["tool_call_id", "tool_name"]) -> str: ...
    @overload
    def __getitem__(self, key: Literal["args"]) -> Any: ...
    def __getitem__(self, key: str) -> object:
        return self._read(key)


class StepToolResult(_MappingView, frozen=True):
    """What the consumer received for one tool call (its ``tool-result`` or ``tool-error``).

    Attributes:
        tool_call_id, tool_name, args: as in the call (``args`` as delivered).
        result: the tool's value, or the error text for a failed call.
        is_error: the call failed (a ``tool-error`` was delivered).
    """

    tool_call_id: str
    tool_name: str
    args: Any = None
    result: Any = None
    is_error: bool = False

    @overload
    def __getitem__(self, key: Literal["tool_call_id", "tool_name"]) -> str: ...
    @overload
    def __getitem__(self, key: Literal["is_error"]) -> bool: ...
    @overload
    def __getitem__(self, key: Literal["args", "result"]) -> Any: ...
    def __getitem__(self, key: str) -> object:
        return self._read(key)


class ToolOutcome(msgspec.Struct, frozen=True):
    """What running one tool call gave: the ``call``, whether it returned (``ok``), and its
    ``value`` (the return value, or the exception it raised)."""

    call: StepToolCall
    ok: bool
    value: object
