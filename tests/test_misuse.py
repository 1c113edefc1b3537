"""Misuse of streamkit's public API raises a ``streamkit.errors`` class that says what was wrong.

STYLE (Errors): "a builtin exception escaping to a user is a bug". Every case below calls the
public API wrongly and checks three things: the streamkit class, that ``InvalidArgument`` /
``InvalidType`` are still the ``ValueError`` / ``TypeError`` older callers catch, and the part of
the message a user needs to fix the call. The last tests scan the source so a new bare
``raise ValueError(...)`` cannot slip back in.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamkit import display, ops, wire
from streamkit.chunks import (
    ChunkBase,
    DataChunk,
    ObjectChunk,
    PayloadBase,
    Stamper,
    TextDelta,
    TextDeltaPayload,
)
from streamkit.errors import InvalidArgument, InvalidType, StreamkitError
from streamkit.testing import FunctionModel, ScriptedModel, text, tool_call

from .conftest import REPO, assert_misuse


async def _async_key(part: Any) -> Any:
    return part


def _two_payloads_in_one_field() -> None:
    # Annotations spelled as dicts: this module's ``from __future__ import annotations`` would
    # turn them into strings, which the chunk metaclass does not resolve.
    class A(PayloadBase, kw_only=True, frozen=True):
        __annotations__ = {"a": int}
        a = 0

    class B(PayloadBase, kw_only=True, frozen=True):
        __annotations__ = {"b": int}
        b = 0

    class Both(PayloadBase, kw_only=True, frozen=True):
        __annotations__ = {"inner": A | B | msgspec.UnsetType}
        inner = msgspec.UNSET

    class Odd(ChunkBase, kw_only=True, frozen=True):
        __annotations__ = {"payload": Both}
        type = "odd-misuse-test"


MISUSES = [
    # -- chunks and the wire -------------------------------------------------------------------
    pytest.param(lambda: TextDelta(id="t", text="hi", colour=1), InvalidType,
                 "TextDelta() got unexpected keyword argument(s) colour",
                 id="a-chunk-given-an-unknown-field-names-it-and-the-valid-ones"),
    pytest.param(lambda: TextDelta(id="t"), InvalidType, "TextDelta(): ",
                 id="a-chunk-missing-a-required-field-says-which-chunk"),
    pytest.param(lambda: TextDelta(payload=TextDeltaPayload(id="t", text="a"), text="b"),
                 InvalidType, "pass payload= or the payload's fields (text), not both",
                 id="a-chunk-given-payload-and-its-fields-says-pick-one"),
    pytest.param(lambda: ObjectChunk(objekt={}), InvalidType, "valid: chunk fields",
                 id="a-chunk-without-payload-struct-lists-its-fields"),
    pytest.param(lambda: DataChunk("progress", {}), InvalidArgument,
                 "DataChunk(type='progress'): a data chunk's type must start with 'data-'",
                 id="a-data-chunk-type-without-the-data-prefix-is-rejected"),
    pytest.param(lambda: DataChunk(5, {}), InvalidType,  # type: ignore[arg-type]
                 "takes a str such as 'data-progress', got int",
                 id="a-data-chunk-type-that-is-not-a-str-is-rejected"),
    pytest.param(lambda: Stamper(DataChunk, run_id="r"), InvalidType,  # type: ignore[arg-type]
                 "Stamper needs a chunk class with a payload",
                 id="a-stamper-for-a-class-without-payload-is-rejected"),
    pytest.param(_two_payloads_in_one_field, InvalidType,
                 "Both.inner: a field may hold one payload class, not ['A', 'B']",
                 id="a-payload-field-holding-two-payload-classes-is-rejected-at-definition"),
    pytest.param(lambda: wire.encode({"type": "text-delta"}), InvalidType,  # type: ignore
                 "expected a chunk, got dict", id="encoding-a-dict-says-a-chunk-was-expected"),
    pytest.param(lambda: wire.encode_msgpack("hi"), InvalidType,  # type: ignore[arg-type]
                 "expected a chunk, got str",
                 id="msgpack-encoding-a-str-says-a-chunk-was-expected"),
    # -- ops ----------------------------------------------------------------------------------
    pytest.param(lambda: ops.map(42), InvalidType,  # type: ignore[arg-type]
                 "ops.map expects a function, got int", id="an-operator-needs-a-function"),
    pytest.param(lambda: ops.filter(lambda c: True, types="text_delta"), InvalidArgument,
                 "did you mean 'text-delta'", id="a-misspelled-chunk-type-gets-a-suggestion"),
    pytest.param(lambda: ops.batch(), InvalidArgument, "needs count=, sentence=True or interval=",
                 id="batch-without-any-trigger-lists-the-triggers"),
    pytest.param(lambda: ops.batch(0), InvalidArgument, "count must be None or an int >= 1, got 0",
                 id="batch-with-a-zero-count-is-rejected"),
    pytest.param(lambda: ops.batch(interval=-1), InvalidArgument,
                 "interval must be None or a number of seconds > 0, got -1",
                 id="batch-with-a-negative-interval"),
    pytest.param(lambda: ops.take(-1), InvalidArgument, "ops.take takes a count >= 0, got -1",
                 id="take-with-a-negative-count-is-rejected"),
    pytest.param(lambda: ops.skip("3"), InvalidType,  # type: ignore[arg-type]
                 "ops.skip takes an int count >= 0, got str '3'",
                 id="skip-with-a-str-count-is-a-type-error"),
    pytest.param(lambda: ops.distinct_until_changed(_async_key), InvalidType,
                 "takes a sync key function", id="distinct-until-changed-refuses-an-async-key"),
    # -- scripted models, display --------------------------------------------------------------
    pytest.param(lambda: text(5), InvalidType,  # type: ignore[arg-type]
                 "text() takes a str, got int", id="a-scripted-text-step-needs-a-str"),
    pytest.param(lambda: FunctionModel("echo"), InvalidType,  # type: ignore[arg-type]
                 "FunctionModel takes a function, got str", id="function-model-needs-a-function"),
    pytest.param(lambda: display.bar_chart(["a", "b"], [1.0]), InvalidArgument,
                 "2 labels but 1 values; give one value per label",
                 id="a-bar-chart-needs-one-value-per-label"),
]


@pytest.mark.parametrize("call, error, words", MISUSES)
def test_misuse_raises_a_streamkit_error_naming_the_problem(
        call: Callable[[], Any], error: type[StreamkitError], words: str) -> None:
    assert_misuse(call, error, words)


def test_decoding_a_data_chunk_with_a_bad_type_is_still_a_decode_error() -> None:
    # DataChunk's check raises InvalidArgument; msgspec must still turn that into a
    # ValidationError while decoding, because InvalidArgument is a ValueError.
    with pytest.raises(msgspec.ValidationError, match="must start with 'data-'"):
        msgspec.convert({"type": "progress"}, DataChunk)


async def test_the_demo_tool_reports_an_unknown_customer_as_a_tool_error() -> None:
    from streamkit._demo import build_agent

    model = ScriptedModel([tool_call("lookup_customer", {"customer_id": "C-1"}), text("sorry")])
    result = await build_agent(model).generate("where is my order?")
    outcome = result.steps[0].tool_results[0]
    assert outcome["is_error"] is True
    assert outcome["result"] == "no customer 'C-1'; known ids: C-42"  # no "KeyError:" prefix


# -- the source scan -------------------------------------------------------------------------

#: Builtins a user must never see raised at them (STYLE: Errors).
BUILTIN_ERRORS = frozenset({"ValueError", "TypeError", "RuntimeError", "KeyError",
                            "AssertionError"})


#: Builtin raises a user cannot reach: ``(path, function, exception) -> why``. Internal
#: invariants only; anything a caller's input can trigger gets a ``streamkit.errors`` class.
BUILTIN_RAISE_ALLOWLIST: dict[tuple[str, str, str], str] = {
    ("streamkit/_tool_records.py", "_read", "KeyError"):
        "the old-dict view of a tool call/result: the mapping protocol's missing key "
        "(dict(record), record.get) is a KeyError",
}


def builtin_raises(path: Path, rel: str) -> list[tuple[str, str, str, int]]:
    """``(rel, enclosing function, exception name, line)`` for each ``raise <builtin>`` and
    ``raise <builtin>(...)`` in ``path``, and ``(rel, function, "assert", line)`` for each
    ``assert`` statement (validation must ``raise``)."""
    found: list[tuple[str, str, str, int]] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                name = exc.id if isinstance(exc, ast.Name) else None
                if name in BUILTIN_ERRORS:
                    found.append((rel, scope, name, child.lineno))
            elif isinstance(child, ast.Assert):
                found.append((rel, scope, "assert", child.lineno))
            visit(child, scope)

    visit(ast.parse(path.read_text(), filename=str(path)), "<module>")
    return found


def scanned_files() -> list[tuple[Path, str]]:
    roots = [REPO / "streamkit", REPO / "operators" / "streamkit_operators"]
    files = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            files.append((path, path.relative_to(REPO).as_posix()))
    return files


def test_the_scan_finds_builtin_raises_and_asserts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(x):\n    if x:\n        raise ValueError('no')\n    raise KeyError\n"
                   "async def g(x):\n    assert x, 'x'\n    raise InvalidArgument('fine')\n"
                   "raise RuntimeError('at import')\n")
    assert builtin_raises(bad, "bad.py") == [
        ("bad.py", "f", "ValueError", 3), ("bad.py", "f", "KeyError", 4),
        ("bad.py", "g", "assert", 6), ("bad.py", "<module>", "RuntimeError", 8)]


def test_the_scan_covers_the_library_and_the_operators() -> None:
    scanned = {rel for _, rel in scanned_files()}
    assert "streamkit/ops.py" in scanned
    assert "operators/streamkit_operators/_pii.py" in scanned
    assert "streamkit/agent/_run.py" in scanned


def test_no_builtin_exception_is_raised_at_users() -> None:
    offenders = [f"{rel}:{line} {name} in {scope}()"
                 for path, rel in scanned_files()
                 for rel, scope, name, line in builtin_raises(path, rel)
                 if (rel, scope, name) not in BUILTIN_RAISE_ALLOWLIST]
    assert not offenders, (
        "raise a streamkit.errors class instead (InvalidArgument for a bad value, InvalidType "
        "for a wrong type, or a more specific one), or, for an invariant no caller can reach, "
        "add it to BUILTIN_RAISE_ALLOWLIST with the reason:\n" + "\n".join(offenders))


def test_every_allowlist_entry_still_exists() -> None:
    # Entries under an excluded path are kept for when the exclusion goes; they are checked
    # only once their file is scanned.
    present = {(rel, scope, name) for path, rel in scanned_files()
               for rel, scope, name, _ in builtin_raises(path, rel)}
    scanned = {rel for _, rel in scanned_files()}
    stale = [key for key in BUILTIN_RAISE_ALLOWLIST if key[0] in scanned and key not in present]
    assert not stale, f"allowlist entries that no longer match a raise: {stale}"


def test_apply_rejects_a_source_that_is_not_iterable_at_the_call() -> None:
    from streamkit import ops
    from streamkit.errors import InvalidType

    with pytest.raises(InvalidType, match="async iterable, an iterable or a reactivex") as info:
        ops.apply(42, ops.map(lambda c: c))
    assert isinstance(info.value, TypeError)
