"""Types for users: a strict user program type-checks with no ignores, and mistakes are caught.

``tests/typing/user_program.py`` narrows chunks with ``isinstance`` and ``match``, reads
``payload.text``, iterates ``agent.stream(...)`` and ``ops.apply(...)`` (both typed ``Chunk``)
and calls ``@tool`` functions directly (``Tool[P, R]`` keeps the signature).
``tests/typing/misuse_program.py`` holds mistakes, each marked with the error code mypy must give.
Both are checked the way a user's project would be: ``mypy --strict`` on the installed package,
not with this repository's configuration.
"""

from __future__ import annotations

import asyncio
import re
import runpy
from pathlib import Path

import pytest

from .conftest import REPO

mypy_api = pytest.importorskip("mypy.api")

PROGRAMS = REPO / "tests" / "typing"


def strict_mypy(program: Path, tmp_path: Path) -> list[str]:
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nshow_error_codes = True\n")
    stdout, stderr, status = mypy_api.run(
        ["--config-file", str(config), "--no-error-summary", "--hide-error-context",
         "--cache-dir", str(REPO / ".mypy_cache" / "user-programs"), str(program)])
    assert status in (0, 1) and not stderr, f"mypy did not run:\n{stdout}{stderr}"
    return [line for line in stdout.splitlines() if line.strip()]


def test_the_user_program_is_strict_clean_with_no_ignores(tmp_path: Path) -> None:
    source = (PROGRAMS / "user_program.py").read_text()
    assert "type: ignore" not in source and "cast(" not in source
    problems = strict_mypy(PROGRAMS / "user_program.py", tmp_path)
    assert not problems, "a strict user program does not type-check:\n" + "\n".join(problems)


def test_the_user_program_runs() -> None:
    namespace = runpy.run_path(str(PROGRAMS / "user_program.py"))
    lines = asyncio.run(namespace["main"]())
    assert "call lookup_customer({'customer_id': 'C-42'})" in lines
    assert "text ' gold'" in lines and "finish stop" in lines
    # The agent's reasoning chunk is streamed; ops.drop(is_reasoning) removes it in apply.
    assert lines.count("reasoning-delta") == 1
    assert lines[-2:] == ["text 'Hi there. '", "Yes."]


def marked_and_found(program: Path, tmp_path: Path) -> tuple[set[tuple[int, str]],
                                                               set[tuple[int, str]]]:
    """The ``(line, error code)`` pairs ``program`` marks with ``# E: code``, and those
    ``mypy --strict`` reports."""
    expected = {(number, m.group(1))
                for number, line in enumerate(program.read_text().splitlines(), 1)
                if (m := re.search(r"# E: ([\w-]+)$", line))}
    found = set()
    for line in strict_mypy(program, tmp_path):
        m = re.match(r".*?:(\d+): error: .*\[([\w-]+)\]$", line)
        if m:
            found.add((int(m.group(1)), m.group(2)))
    return expected, found


def assert_exactly_marked(expected: set[tuple[int, str]], found: set[tuple[int, str]]) -> None:
    """mypy reported every marked error, and nothing on a line that is not marked."""
    assert expected <= found, f"mypy missed {sorted(expected - found)}; it said {sorted(found)}"
    marked = {number for number, _ in expected}
    stray = sorted((number, code) for number, code in found if number not in marked)
    assert not stray, f"mypy reported lines that are right: {stray}"


def test_mistakes_are_reported_where_marked(tmp_path: Path) -> None:
    expected, found = marked_and_found(PROGRAMS / "misuse_program.py", tmp_path)
    assert len(expected) == 4
    assert expected <= found, f"mypy missed {sorted(expected - found)}; it said {sorted(found)}"


def test_data_mistakes_are_reported_where_marked_and_nowhere_else(tmp_path: Path) -> None:
    """Tool calls, tool results and step overrides are typed (issue 32): a misspelled field, an
    unknown old-dict key, a wrong value type and a write to a frozen record are mypy errors."""
    expected, found = marked_and_found(PROGRAMS / "data_misuse_program.py", tmp_path)
    assert len(expected) == 12
    assert_exactly_marked(expected, found)


def test_ops_take_functions_typed_on_one_chunk_class(tmp_path: Path) -> None:
    """``ops.map(up, types="text-delta")`` with ``def up(c: TextDelta) -> TextDelta`` (sync or
    async) type-checks; a function on ``str``, or returning what the operator does not take, is
    an error (issue 32: users' callables were ``Callable[[Any], Any]``)."""
    program = PROGRAMS / "ops_program.py"
    expected, found = marked_and_found(program, tmp_path)
    assert len(expected) == 7
    assert_exactly_marked(expected, found)
    namespace = runpy.run_path(str(program))
    assert asyncio.run(namespace["main"]()) == ["HI", "HI"]


def test_message_list_input_and_ui_dicts_are_typed(tmp_path: Path) -> None:
    """``MessageList.add`` takes messages, strs and dicts (not any object), and ``ui()`` gives
    ``UIMessage`` dicts whose keys mypy knows (issue 32: both were ``Any``)."""
    expected, found = marked_and_found(PROGRAMS / "messages_program.py", tmp_path)
    assert len(expected) == 4
    assert_exactly_marked(expected, found)


def test_records_users_read_back_are_typed(tmp_path: Path) -> None:
    """``EventLog.of(cls)`` is a list of ``cls``, a replay row is a ``ReplayRow``,
    ``display.live`` of an agent stream is its ``AgentResult``, and a scripted step is one of the
    scripted parts (issue 32: all four were ``Any``)."""
    expected, found = marked_and_found(PROGRAMS / "records_program.py", tmp_path)
    assert len(expected) == 3
    assert_exactly_marked(expected, found)
