"""The way in, as a new user takes it: by the distribution name, from wheels, outside the clone.

Both wheels are built (``pip wheel --no-deps``), installed with their dependencies from the
configured package index into a fresh venv in a temporary directory, and used from there with no
source tree on ``sys.path``: the demo runs, ``tests/typing/first_program.py`` (an agent with a
guard, on a scripted model) runs and type-checks under ``mypy --strict``. A second venv holds an
editable install (``pip install -e``), which must be a plain path entry that mypy follows.

Every test here builds or installs, so the module is marked ``slow`` (not in ``.ci/quick``).
Skipped, with the reason printed, only when the package index cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.slow

DIST = "streamkit-agents"          # the import name stays `streamkit`
OPERATORS = "streamkit-operators"
PROGRAM = REPO / "tests" / "typing" / "first_program.py"
#: What pip prints when the index cannot be reached (then the test is skipped, not failed).
OFFLINE = re.compile(r"NewConnectionError|Temporary failure in name resolution|"
                     r"Network is unreachable|Could not fetch URL")


def _env() -> dict[str, str]:
    """This process's environment minus anything that would put a source tree or this venv on
    the path: the fresh venv must find streamkit through what it installed, nothing else."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONSAFEPATH"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _run(args: list[str | Path], cwd: Path, timeout: float = 600) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        if OFFLINE.search(output):
            pytest.skip(f"the package index cannot be reached: {output.strip()[-300:]}")
        raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n"
                             f"{output[-3000:]}")
    return proc.stdout


def _fresh_venv(path: Path, with_pip: bool = True) -> Path:
    """A new venv at ``path`` from the base interpreter; its python."""
    venv.EnvBuilder(with_pip=with_pip, clear=True).create(path)
    return path / "bin" / "python"


def _mypy_strict(program: Path, python: Path, cwd: Path) -> list[str]:
    """``mypy --strict`` on ``program`` resolving imports through ``python``'s site-packages,
    as a user with mypy installed there would see them (no project configuration)."""
    config = cwd / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nshow_error_codes = True\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config),
                           "--python-executable", str(python), "--no-error-summary",
                           "--cache-dir", str(cwd / ".mypy_cache"), str(program)],
                          cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1) and not proc.stderr, f"mypy did not run:\n{proc.stderr}"
    return [line for line in proc.stdout.splitlines() if line.strip()]


def _wheel_metadata(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return zf.read(name).decode().splitlines()


def _shipped(package_dir: Path) -> set[str]:
    """The files a wheel must carry for ``package_dir``: every file git tracks or would track
    (not ignored), .py or not, relative to the package's parent."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "--", package_dir.name], cwd=package_dir.parent,
                            capture_output=True, text=True, timeout=60)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout, so the shipped files cannot be listed: "
                    f"{listed.stderr.strip()}")
    return {line for line in listed.stdout.splitlines()
            if (package_dir.parent / line).is_file()}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, built from this checkout; distribution name → wheel file."""
    out = tmp_path_factory.mktemp("wheels")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, REPO,
          REPO / "operators"], cwd=out)
    built = {}
    for wheel in sorted(out.glob("*.whl")):
        name = next(line.split(": ", 1)[1] for line in _wheel_metadata(wheel)
                    if line.startswith("Name: "))
        built[name] = wheel
    assert set(built) == {DIST, OPERATORS}, f"built {sorted(built)}"
    return built


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory outside the repository holding a copy of the guard program."""
    where = tmp_path_factory.mktemp("user")
    assert REPO not in where.parents
    (where / "first_program.py").write_text(PROGRAM.read_text())
    return where


@pytest.fixture(scope="module")
def from_wheels(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with both wheels and their dependencies; its python."""
    python = _fresh_venv(tmp_path_factory.mktemp("venv") / "wheels")
    _run([python, "-m", "pip", "install", "-q", wheels[DIST], wheels[OPERATORS]],
         cwd=python.parent)
    return python


@pytest.fixture(scope="module")
def editable(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with both packages installed editable from this checkout; its python."""
    python = _fresh_venv(tmp_path_factory.mktemp("venv") / "editable")
    _run([python, "-m", "pip", "install", "-q", "-e", REPO, "-e", REPO / "operators"],
         cwd=python.parent)
    return python


def test_the_wheels_carry_the_new_name_and_depend_on_it(wheels: dict[str, Path]) -> None:
    assert wheels[DIST].name.startswith("streamkit_agents-")
    requires = [line.split(": ", 1)[1] for line in _wheel_metadata(wheels[OPERATORS])
                if line.startswith("Requires-Dist: ")]
    names = {re.split(r"[\s<>=!~\[;(]", r, maxsplit=1)[0].lower() for r in requires}
    assert DIST in names and "streamkit" not in names, requires


@pytest.mark.parametrize("dist, package_dir", [(DIST, REPO / "streamkit"),
                                               (OPERATORS, REPO / "operators" /
                                                "streamkit_operators")])
def test_each_wheel_ships_every_file_of_its_package(wheels: dict[str, Path], dist: str,
                                                    package_dir: Path) -> None:
    with zipfile.ZipFile(wheels[dist]) as zf:
        inside = {n for n in zf.namelist() if not n.split("/")[0].endswith(".dist-info")}
    expected = _shipped(package_dir)
    assert f"{package_dir.name}/py.typed" in inside
    if dist == DIST:
        assert "streamkit/serve/page.html" in inside
    assert inside == expected, (f"missing from the wheel: {sorted(expected - inside)}; "
                                f"not in the tree: {sorted(inside - expected)}")


def test_the_fresh_venv_imports_the_installed_wheels(from_wheels: Path, outside: Path) -> None:
    out = _run([from_wheels, "-c", "import importlib.metadata as m, json, sys, streamkit, "
                "streamkit_operators; print(json.dumps([streamkit.__file__, "
                "streamkit_operators.__file__, sys.path, m.version('streamkit-agents')]))"],
               cwd=outside)
    core, operators, path, version = json.loads(out)
    site = from_wheels.parent.parent
    assert Path(core).is_relative_to(site) and Path(operators).is_relative_to(site)
    assert not [p for p in path if p and Path(p).resolve().is_relative_to(REPO)], path
    assert version == _version(REPO / "streamkit" / "__init__.py")
    listed = _run([from_wheels, "-m", "pip", "list", "--format=freeze"], cwd=outside)
    dists = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert {DIST, OPERATORS} <= dists and "streamkit" not in dists


def test_the_demo_runs_from_the_wheels(from_wheels: Path, outside: Path) -> None:
    out = _run([from_wheels, "-m", "streamkit", "demo"], cwd=outside, timeout=120)
    assert "agent> " in out and "finish: stop" in out
    script = _run([from_wheels.parent / "streamkit", "demo"], cwd=outside, timeout=120)
    assert "finish: stop" in script


def test_a_guard_program_runs_and_type_checks_against_the_wheels(from_wheels: Path,
                                                                  outside: Path) -> None:
    out = _run([from_wheels, "first_program.py"], cwd=outside, timeout=120).splitlines()
    assert out == ["Write to a*a@*******.com for a new key.",
                   "retried: ['do not print API keys']", "tripwire: None"]
    problems = _mypy_strict(outside / "first_program.py", from_wheels, outside)
    assert not problems, "mypy --strict against the wheels:\n" + "\n".join(problems)


def test_mypy_resolves_imports_through_the_target_venv_only(outside: Path,
                                                             tmp_path: Path) -> None:
    """The control for the checks above: a venv without streamkit gives import-not-found, so a
    clean result means mypy found the installed package, not this checkout."""
    bare = _fresh_venv(tmp_path / "bare", with_pip=False)
    problems = _mypy_strict(outside / "first_program.py", bare, outside)
    assert any("[import-not-found]" in line and "streamkit" in line for line in problems), \
        problems


def test_an_editable_install_is_a_path_entry_mypy_follows(editable: Path, outside: Path) -> None:
    out = _run([editable, "-c", "import streamkit, streamkit_operators; "
                "print(streamkit.__file__); print(streamkit_operators.__file__)"], cwd=outside)
    core, operators = map(Path, out.splitlines())
    assert core == REPO / "streamkit" / "__init__.py"
    assert operators == REPO / "operators" / "streamkit_operators" / "__init__.py"
    site = next(editable.parent.parent.glob("lib/python*/site-packages"))
    entries = {line.strip() for pth in site.glob("*.pth") for line in pth.read_text().splitlines()}
    assert str(REPO) in entries and str(REPO / "operators") in entries, sorted(entries)
    assert not list(site.glob("__editable__*finder*.py")), "an import-hook editable install"
    problems = _mypy_strict(outside / "first_program.py", editable, outside)
    assert not problems, "mypy --strict against the editable install:\n" + "\n".join(problems)
    lines = _run([editable, "first_program.py"], cwd=outside, timeout=120).splitlines()
    assert lines[0] == "Write to a*a@*******.com for a new key."


def _version(init: Path) -> str:
    found = re.search(r'^__version__ = "([^"]+)"$', init.read_text(), re.MULTILINE)
    assert found, f"no __version__ in {init}"
    return found.group(1)
