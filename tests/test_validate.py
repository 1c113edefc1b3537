"""``streamkit.validate``: every argument check raises ``InvalidType`` (also a ``TypeError``) for
a value of the wrong type and ``InvalidArgument`` (also a ``ValueError``) for a value out of
range, with the name, what was expected and what was given in the message; a good value comes
back (as a float for seconds)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit import Agent, Memory, SQLiteStore
from streamkit.errors import InvalidArgument, InvalidType, StreamkitError, UsageError
from streamkit.models import resolve_model
from streamkit.tokens import TokenCounter
from streamkit.validate import (
    instance_of,
    int_at_least,
    is_int,
    is_number,
    non_empty_str,
    one_of,
    optional_int_at_least,
    optional_seconds,
    seconds,
)

ANY = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
       | st.lists(st.integers(), max_size=2) | st.builds(object))


def _outcome(check: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return check(*args, **kwargs)
    except StreamkitError as exc:
        assert isinstance(exc, UsageError)
        assert isinstance(exc, (InvalidArgument, InvalidType))
        assert "must be" in str(exc) and args[1] in str(exc)
        return exc


@given(ANY, st.integers(-3, 3))
def test_int_at_least(value: Any, minimum: int) -> None:
    out = _outcome(int_at_least, value, "count", minimum)
    if not is_int(value):
        assert type(out) is InvalidType and isinstance(out, TypeError)
        assert type(value).__name__ in str(out)
    elif value < minimum:
        assert type(out) is InvalidArgument and isinstance(out, ValueError)
        assert f">= {minimum}" in str(out)
    else:
        assert out == value


@given(ANY, st.integers(0, 2))
def test_optional_int_at_least(value: Any, minimum: int) -> None:
    out = _outcome(optional_int_at_least, value, "limit", minimum)
    if value is None:
        assert out is None
    elif not is_int(value):
        assert type(out) is InvalidType and "None or an int" in str(out)
    elif value < minimum:
        assert type(out) is InvalidArgument
    else:
        assert out == value


@given(ANY, st.booleans())
def test_seconds(value: Any, allow_zero: bool) -> None:
    out = _outcome(seconds, value, "timeout", allow_zero=allow_zero)
    if not is_number(value):
        assert type(out) is InvalidType
    elif math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
        assert type(out) is InvalidArgument
    else:
        assert out == float(value) and type(out) is float


@given(ANY)
def test_optional_seconds(value: Any) -> None:
    out = _outcome(optional_seconds, value, "deadline")
    if value is None:
        assert out is None
    elif not is_number(value):
        assert type(out) is InvalidType and "None or a number of seconds > 0" in str(out)
    elif math.isnan(value) or value <= 0:
        assert type(out) is InvalidArgument
    else:
        assert out == float(value)


@given(ANY)
def test_one_of(value: Any) -> None:
    out = _outcome(one_of, value, "mode", ("a", "b", 1))
    if type(value) in (str, int) and value in ("a", "b", 1):
        assert out == value
    else:
        assert type(out) is InvalidArgument and "'a', 'b', 1" in str(out)


@given(ANY)
def test_instance_of_and_non_empty_str(value: Any) -> None:
    out = _outcome(instance_of, value, "name", str, "a str")
    assert out == value if isinstance(value, str) else type(out) is InvalidType
    out = _outcome(non_empty_str, value, "id")
    if not isinstance(value, str):
        assert type(out) is InvalidType
    elif not value:
        assert type(out) is InvalidArgument
    else:
        assert out == value


def test_keyword_attributes_reach_the_error() -> None:
    with pytest.raises(InvalidArgument) as caught:
        int_at_least(0, "Limits.max_body_bytes", 1, field="max_body_bytes")
    assert caught.value.field == "max_body_bytes"  # type: ignore[attr-defined]
    assert str(caught.value) == "Limits.max_body_bytes must be an int >= 1, got 0"


@pytest.mark.parametrize("call, error, message", [
    (lambda: Agent(id="a", model="openai/x", max_steps=0),
     InvalidArgument, "max_steps must be an int >= 1, got 0"),
    (lambda: Agent(id="a", model="openai/x", max_steps="2"),
     InvalidType, "max_steps must be an int >= 1, got str '2'"),
    (lambda: Memory(last_messages=-1), InvalidArgument,
     "last_messages must be None or an int >= 0, got -1"),
    (lambda: SQLiteStore(busy_timeout="5"), InvalidType,
     "busy_timeout must be a number of seconds >= 0, got str '5'"),
    (lambda: resolve_model(
        "gemini/flash"), InvalidArgument, "unknown model provider 'gemini'"),
    (lambda: resolve_model(42),
     InvalidType, "model must be a model object"),
    (lambda: TokenCounter(
        encoding=3), InvalidType, "encoding must be a name or a tiktoken.Encoding, got int"),
], ids=["agent-max-steps-zero", "agent-max-steps-str", "memory-negative", "sqlite-timeout-str",
        "router-unknown-provider", "model-an-int", "token-encoding-int"])
def test_argument_errors_across_the_library_are_typed(call: Any, error: type,
                                                      message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        call()
    assert type(caught.value) is error
