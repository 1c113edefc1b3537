"""Both packages declare what they import, ship ``py.typed``, and keep their version in one place.

Run against the sources and the installed metadata, as a user's ``pip install`` would see them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

import streamkit
import streamkit_operators

from .conftest import REPO

PACKAGES = [
    pytest.param(REPO / "pyproject.toml", REPO / "streamkit", streamkit, id="streamkit"),
    pytest.param(REPO / "operators" / "pyproject.toml",
                 REPO / "operators" / "streamkit_operators", streamkit_operators,
                 id="streamkit-operators"),
]


def third_party_imports(package_dir: Path) -> set[str]:
    """Top-level modules imported at module level or in functions, minus stdlib and ourselves."""
    found: set[str] = set()
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    own = {"streamkit", "streamkit_operators"}
    return {m for m in found if m not in sys.stdlib_module_names and m not in own}


def declared(pyproject: dict[str, object]) -> set[str]:
    project = pyproject["project"]
    assert isinstance(project, dict)
    names = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        names.extend(extra)
    return {re.split(r"[\s<>=!~\[;]", n, maxsplit=1)[0].lower().replace("_", "-")
            for n in names}


#: Imported only where it is already there: ``IPython`` inside a running Jupyter kernel (the
#: display helpers). Nothing else may be missing from the declared dependencies.
OPTIONAL = {"IPython"}


@pytest.mark.parametrize("pyproject_path, package_dir, module", PACKAGES)
def test_every_third_party_import_is_a_declared_dependency(pyproject_path: Path,
                                                           package_dir: Path,
                                                           module: object) -> None:
    config = tomllib.loads(pyproject_path.read_text())
    wanted = declared(config)
    dists = importlib.metadata.packages_distributions()
    missing = []
    for name in sorted(third_party_imports(package_dir)):
        providers = {d.lower().replace("_", "-") for d in dists.get(name, [name])}
        if not providers & wanted and name not in OPTIONAL:
            missing.append(f"{name} (from {sorted(providers)})")
    assert not missing, f"{pyproject_path.relative_to(REPO)} does not declare: {missing}"


@pytest.mark.parametrize("pyproject_path, package_dir, module", PACKAGES)
def test_py_typed_is_shipped(pyproject_path: Path, package_dir: Path, module: object) -> None:
    assert (package_dir / "py.typed").is_file()
    data = tomllib.loads(pyproject_path.read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data[package_dir.name]


@pytest.mark.parametrize("pyproject_path, package_dir, module", PACKAGES)
def test_the_version_has_one_source(pyproject_path: Path, package_dir: Path,
                                    module: object) -> None:
    config = tomllib.loads(pyproject_path.read_text())
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    attr = config["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == f"{package_dir.name}.__version__"
    version = module.__version__
    assert importlib.metadata.version(config["project"]["name"]) == version
    mentions = [p for p in package_dir.rglob("*.py")
                if p.name != "__init__.py" and f'"{version}"' in p.read_text()]
    assert not mentions, f"the version is written again in {mentions}"
