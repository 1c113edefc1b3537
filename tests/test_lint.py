"""ruff (configured in pyproject.toml: line length 100, E/F/W/I/B/UP) is clean over the code.

After merging branches, ``ruff check --fix streamkit operators tests benchmarks docs/hooks``
repairs import order and the other mechanical findings; what remains is for a person.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from .conftest import REPO

TARGETS = ["streamkit", "operators", "tests", "benchmarks", "docs/hooks"]


def ruff() -> list[str]:
    # The ruff of this interpreter's environment (the test extra), not whichever is on PATH.
    pytest.importorskip("ruff", reason="ruff is in the test extra: pip install -e '.[test]'")
    return [sys.executable, "-m", "ruff"]


def test_ruff_is_configured_as_agreed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]
    assert config["line-length"] == 100 and config["target-version"] == "py311"
    assert set(config["lint"]["select"]) >= {"E", "F", "W", "I", "B", "UP"}


def test_ruff_check_is_clean() -> None:
    done = subprocess.run([*ruff(), "check", "--no-cache", "--output-format", "concise",
                           *TARGETS], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"ruff found problems:\n{done.stdout}{done.stderr}"
