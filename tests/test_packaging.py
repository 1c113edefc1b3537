"""Both packages declare what they import, ship ``py.typed``, and keep their version in one place;
the distribution is ``streamkit-agents`` everywhere a user is told to install it.

Run against the sources and the installed metadata, as a user's ``pip install`` would see them
(``tests/test_install.py`` builds the wheels and installs them into a fresh venv).
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
    pytest.param(REPO / "pyproject.toml", REPO / "streamkit", streamkit, id="streamkit-agents"),
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
    """hatchling puts every file of the package that git does not ignore in the wheel
    (``tests/test_install.py`` checks a built wheel file by file)."""
    assert (package_dir / "py.typed").is_file()
    tool = tomllib.loads(pyproject_path.read_text())["tool"]
    assert tool["hatch"]["build"]["targets"]["wheel"]["packages"] == [package_dir.name]


@pytest.mark.parametrize("pyproject_path, package_dir, module", PACKAGES)
def test_editable_installs_are_path_entries(pyproject_path: Path, package_dir: Path,
                                            module: object) -> None:
    """hatchling's editable install is a .pth path entry, which mypy follows; setuptools'
    (an import hook) left a user's ``mypy --strict`` with ``import-not-found``
    (``tests/test_install.py`` type-checks a program against an editable install)."""
    system = tomllib.loads(pyproject_path.read_text())["build-system"]
    assert system["build-backend"] == "hatchling.build"
    hatch = tomllib.loads(pyproject_path.read_text())["tool"]["hatch"]
    assert not hatch["build"]["targets"]["wheel"].get("dev-mode-exact"), "an import hook again"


def test_the_distribution_name_is_free_of_the_pypi_stranger() -> None:
    """``streamkit`` on PyPI is an unrelated pub-sub SDK: ours is ``streamkit-agents`` and the
    operators depend on that name (docs/install.md says how the name was checked)."""
    core = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    operators = tomllib.loads((REPO / "operators" / "pyproject.toml").read_text())["project"]
    assert core["name"] == "streamkit-agents" and operators["name"] == "streamkit-operators"
    names = {re.split(r"[\s<>=!~\[;]", d, maxsplit=1)[0] for d in operators["dependencies"]}
    assert "streamkit-agents" in names and "streamkit" not in names


#: ``pip install`` of the bare name (with or without extras, quoted or not): the stranger.
BARE_INSTALL = re.compile(r"pip install\b[^\n`&;|]*?(?<![\w./-])(?<!-m )['\"]?streamkit"
                          r"(?:\[|['\"\s`)]|$)", re.MULTILINE)
#: Everything a user reads an install line in: the README, docs, notebooks, CI, and the library's
#: own messages ("pip install 'streamkit-agents[otel]'").
INSTALL_TEXTS = ["README.md", "docs/**/*.md", "notebooks/*.md", "notebooks/*.ipynb",
                 "notebooks/_src/*.py", ".ci/*", "streamkit/**/*.py",
                 "operators/streamkit_operators/**/*.py", "benchmarks/**/*.md"]


def test_every_install_line_uses_the_distribution_name() -> None:
    offenders = []
    for pattern in INSTALL_TEXTS:
        for path in sorted(REPO.glob(pattern)):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if BARE_INSTALL.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "installs PyPI's unrelated 'streamkit':\n" + "\n".join(offenders)


@pytest.mark.parametrize("line, bare", [
    ("pip install 'streamkit[postgres,redis]' ./operators", True),
    ("pip install streamkit", True),
    ('(``pip install "streamkit[otel]"``)', True),
    ("pip install 'streamkit-agents[postgres,redis]' ./operators", False),
    ("pip install -e '.[test]' -e ./operators", False),
    ("pip install streamkit-operators", False),
    ("pip install -q -e . && .venv/bin/python -m streamkit demo", False),
])
def test_the_bare_name_pattern(line: str, bare: bool) -> None:
    assert bool(BARE_INSTALL.search(line)) is bare


@pytest.mark.parametrize("pyproject_path, package_dir, module", PACKAGES)
def test_the_version_has_one_source(pyproject_path: Path, package_dir: Path,
                                    module: object) -> None:
    config = tomllib.loads(pyproject_path.read_text())
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    path = config["tool"]["hatch"]["version"]["path"]
    assert path == f"{package_dir.name}/__init__.py"
    version = module.__version__
    assert importlib.metadata.version(config["project"]["name"]) == version
    mentions = [p for p in package_dir.rglob("*.py")
                if p.name != "__init__.py" and f'"{version}"' in p.read_text()]
    assert not mentions, f"the version is written again in {mentions}"
