"""Argument checks in one place (public: processors and operators validate their own options
with it): every one raises ``InvalidArgument`` (a wrong value) or
``InvalidType`` (a wrong type), with a message saying what was given and what is expected.

What belongs here: the checks the public constructors and calls repeat (counts, seconds, names
out of a fixed set, types). What does not: checks whose error is a different class on purpose
(``ToolError`` for a tool's options, ``ChunkDecodeError`` for wire input); those use the two
predicates ``is_int``/``is_number`` so that "an int that is not a bool" is written once.

Decisions: ``bool`` is never accepted as a number (``True`` is an ``int`` in Python, but
``max_steps=True`` is a mistake); a value of the wrong type is an ``InvalidType`` (also a
``TypeError``) and a value of the right type out of range an ``InvalidArgument`` (also a
``ValueError``), as ``streamkit.errors`` documents. Messages read ``"<name> must be <expected>,
got <repr>"`` (``got <type> <repr>`` for a wrong type); keyword attributes (``field=...``) are
passed on to the error.

Example:
    >>> int_at_least(3, "max_steps", 1)
    3
    >>> int_at_least(0, "max_steps", 1)
    Traceback (most recent call last):
    ...
    streamkit.errors.InvalidArgument: max_steps must be an int >= 1, got 0
    >>> seconds(True, "deadline")
    Traceback (most recent call last):
    ...
    streamkit.errors.InvalidType: deadline must be a number of seconds > 0, got bool True
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeGuard, TypeVar

from .errors import InvalidArgument, InvalidType

__all__ = ["is_int", "is_number", "int_at_least", "optional_int_at_least", "seconds",
           "optional_seconds", "one_of", "instance_of", "non_empty_str"]

T = TypeVar("T")


def _typed(value: object) -> str:
    """What a value of the wrong type was: its type's name and its (shortened) repr."""
    return f"{type(value).__name__} {value!r:.80}"


def is_int(value: object) -> TypeGuard[int]:
    """``value`` is an ``int`` and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """``value`` is an ``int`` or a ``float`` and not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def int_at_least(value: object, name: str, minimum: int, **attrs: object) -> int:
    """``value`` when it is an int ``>= minimum``.

    Raises:
        InvalidType: not an int (a bool is not one).
        InvalidArgument: below ``minimum``.
    """
    if not is_int(value):
        raise InvalidType(f"{name} must be an int >= {minimum}, got {_typed(value)}", **attrs)
    if value < minimum:
        raise InvalidArgument(f"{name} must be an int >= {minimum}, got {value!r}", **attrs)
    return value


def optional_int_at_least(value: object, name: str, minimum: int, **attrs: object) -> int | None:
    """``None``, or an int ``>= minimum`` (as ``int_at_least``, the message says ``or None``)."""
    if value is None:
        return None
    if not is_int(value):
        raise InvalidType(f"{name} must be None or an int >= {minimum}, got {_typed(value)}",
                          **attrs)
    if value < minimum:
        raise InvalidArgument(f"{name} must be None or an int >= {minimum}, got {value!r}",
                              **attrs)
    return value


def seconds(value: object, name: str, *, allow_zero: bool = False, **attrs: object) -> float:
    """``value`` as a float when it is a number of seconds ``> 0`` (``>= 0`` with
    ``allow_zero``). NaN is refused (it compares false with everything).

    Raises:
        InvalidType: not an int or float (a bool is not one).
        InvalidArgument: negative, zero (unless allowed) or NaN.
    """
    what = f"a number of seconds {'>=' if allow_zero else '>'} 0"
    if not is_number(value):
        raise InvalidType(f"{name} must be {what}, got {_typed(value)}", **attrs)
    if not (value >= 0 if allow_zero else value > 0):
        raise InvalidArgument(f"{name} must be {what}, got {value!r}", **attrs)
    return float(value)


def optional_seconds(value: object, name: str, *, allow_zero: bool = False,
                     **attrs: object) -> float | None:
    """``None``, or a number of seconds as ``seconds`` checks it (the message says ``None
    or``)."""
    if value is None:
        return None
    what = f"None or a number of seconds {'>=' if allow_zero else '>'} 0"
    if not is_number(value):
        raise InvalidType(f"{name} must be {what}, got {_typed(value)}", **attrs)
    if not (value >= 0 if allow_zero else value > 0):
        raise InvalidArgument(f"{name} must be {what}, got {value!r}", **attrs)
    return float(value)


def one_of(value: object, name: str, choices: Collection[T], **attrs: object) -> T:
    """``value`` when it is one of ``choices`` (compared with ``==``).

    Raises:
        InvalidArgument: any other value; the message lists the choices (``"mode must be one
            of 'a', 'b'; got 'c'"``).
    """
    for choice in choices:
        if type(value) is type(choice) and value == choice:
            return choice
    shown = ", ".join(repr(c) for c in choices)
    raise InvalidArgument(f"{name} must be one of {shown}; got {value!r}", **attrs)


def instance_of(value: object, name: str, kind: type[T], expected: str, **attrs: object) -> T:
    """``value`` when it is an instance of ``kind``.

    Raises:
        InvalidType: anything else; the message says ``expected`` and the type given.
    """
    if not isinstance(value, kind):
        raise InvalidType(f"{name} must be {expected}, got {type(value).__name__}", **attrs)
    return value


def non_empty_str(value: object, name: str, **attrs: object) -> str:
    """``value`` when it is a non-empty ``str``.

    Raises:
        InvalidType: not a str.
        InvalidArgument: the empty string.
    """
    if not isinstance(value, str):
        raise InvalidType(f"{name} must be a non-empty string, got {_typed(value)}", **attrs)
    if not value:
        raise InvalidArgument(f"{name} must be a non-empty string, got ''", **attrs)
    return value
