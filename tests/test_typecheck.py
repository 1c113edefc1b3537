"""One type checker runs over the library and the operators package (STYLE: Words).

The project config (``[tool.mypy]`` in pyproject.toml) is ``strict = true`` with no global
``ignore_missing_imports``, so a broken import of our own is an error, not a silent ``Any``.
"""

from __future__ import annotations

import tomllib

import pytest

from .conftest import REPO

mypy_api = pytest.importorskip("mypy.api")



def _relative(line: str) -> str:
    prefix = f"{REPO}/"
    return line[len(prefix):] if line.startswith(prefix) else line


def test_mypy_config_is_strict_and_scopes_missing_imports() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config.get("strict") is True
    assert "ignore_missing_imports" not in config, "scope it to one module in an override"
    for override in config.get("overrides", []):
        modules = override["module"]
        for module in [modules] if isinstance(modules, str) else modules:
            assert not module.startswith(("streamkit", "operators")), \
                f"our own module {module!r} must not escape type checking"


def test_mypy_is_clean() -> None:
    targets = [str(REPO / "streamkit")]
    operators = REPO / "operators" / "streamkit_operators"
    if operators.exists():
        targets.append(str(operators))
    stdout, stderr, status = mypy_api.run(
        ["--config-file", str(REPO / "pyproject.toml"), "--no-error-summary",
         "--cache-dir", str(REPO / ".mypy_cache"), *targets])
    assert status in (0, 1) and not stderr, f"mypy did not run:\n{stdout}{stderr}"
    problems = [line for line in map(_relative, stdout.splitlines()) if line]
    assert not problems, "mypy found problems:\n" + "\n".join(problems)
