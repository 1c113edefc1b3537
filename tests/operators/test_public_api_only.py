"""streamkit_operators is built on streamkit's public API only, and keeps its own surface honest."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from ..conftest import REPO

PACKAGE = REPO / "operators" / "streamkit_operators"


def _private_imports(path: Path) -> list[str]:
    """Every import in ``path`` of a private streamkit module (``streamkit._x``,
    ``streamkit.x._y``) or of a private name from streamkit (``from streamkit.x import _y``)."""
    found: list[str] = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        modules: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.Import):
            modules = [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [alias.name for alias in node.names])]
        for module, names in modules:
            parts = module.split(".")
            if parts[0] != "streamkit":
                continue
            if any(p.startswith("_") for p in parts[1:]):
                found.append(f"{path.name}:{node.lineno} imports {module}")
            found.extend(f"{path.name}:{node.lineno} imports {module}.{name}"
                         for name in names if name.startswith("_"))
    return found


def test_the_scan_catches_private_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import streamkit._payloads\nfrom streamkit.processors._spec import register\n"
                   "from streamkit.tokens import _as_text\nfrom streamkit import Agent\n"
                   "from ._model_check import ask_json\n")
    assert [f.split(" imports ")[1] for f in _private_imports(bad)] == [
        "streamkit._payloads", "streamkit.processors._spec", "streamkit.tokens._as_text"]


def test_operators_import_only_public_streamkit_api() -> None:
    files = sorted(PACKAGE.glob("**/*.py"))
    assert files, f"no modules found under {PACKAGE}"
    offenders = [hit for path in files for hit in _private_imports(path)]
    assert offenders == [], "import only streamkit's public API: " + "; ".join(offenders)


def test_all_is_honest() -> None:
    package = importlib.import_module("streamkit_operators")
    names = package.__all__
    assert len(names) == len(set(names)), "duplicate names in __all__"
    missing = [n for n in names if not hasattr(package, n)]
    assert missing == []


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("**/*.py")), ids=lambda p: p.name)
def test_modules_are_small_and_documented(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) < 600, f"{path.name}: split it by purpose"
    assert ast.get_docstring(ast.parse(text)), f"{path.name} has no module docstring"
