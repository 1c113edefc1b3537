"""The 16 call options are written once (``CallOptions``, issue 32): a user's ``mypy --strict``
still checks each keyword of ``Agent.stream``/``generate`` by name and type."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .test_user_typing import PROGRAMS, strict_mypy


def test_call_options_are_checked_by_name_and_type(tmp_path: Path) -> None:
    program = PROGRAMS / "call_options_program.py"
    expected = {(number, m.group(1))
                for number, line in enumerate(program.read_text().splitlines(), 1)
                if (m := re.search(r"# E: ([\w-]+)$", line))}
    assert len(expected) == 4
    found = set()
    limit = sys.getrecursionlimit()
    try:
        said = strict_mypy(program, tmp_path)
    finally:  # mypy raises the interpreter's recursion limit; later tests rely on the default
        sys.setrecursionlimit(limit)
    for line in said:
        if ": note: " in line:
            continue
        m = re.match(r".*?:(\d+): error: .*\[([\w-]+)\]$", line)
        assert m, line
        found.add((int(m.group(1)), m.group(2)))
    assert found == expected
