"""One type checker runs over the library and the operators package (STYLE: Words)."""

from __future__ import annotations

import pytest

from .conftest import REPO

mypy_api = pytest.importorskip("mypy.api")


def test_mypy_is_clean() -> None:
    targets = [str(REPO / "streamkit")]
    operators = REPO / "operators" / "streamkit_operators"
    if operators.exists():
        targets.append(str(operators))
    stdout, stderr, status = mypy_api.run(
        ["--config-file", str(REPO / "pyproject.toml"), "--no-error-summary",
         "--cache-dir", str(REPO / ".mypy_cache"), *targets])
    assert status == 0, f"mypy found problems:\n{stdout}{stderr}"
