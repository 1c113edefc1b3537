"""The fast developer loop beside the full suite (README "Set-up").

``.ci/quick`` runs ``pytest -m "not slow"``; ``tests/conftest.py`` marks as slow every test that
needs Node, a browser, Ray, PostgreSQL or Redis, starts a process or an HTTP server, or runs a
whole tool (mypy, mkdocs, notebooks, benchmarks, wheel builds). ``.ci/run`` stays the full suite.
"""

from __future__ import annotations

import re
import subprocess
import sys

from . import conftest
from .conftest import REPO


def _readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (REPO / "README.md").read_text())


def test_the_readme_gives_the_quick_loop_beside_the_full_suite() -> None:
    commands = _readme_commands()
    assert ".ci/quick" in commands, "the README's set-up gives no fast loop"
    quick = (REPO / ".ci" / "quick").read_text()
    assert '-m "not slow"' in quick
    ci = (REPO / ".ci" / "run").read_text()
    assert "not slow" not in ci and "python -m pytest" in ci  # CI runs everything


def test_every_named_slow_module_and_folder_exists() -> None:
    """A renamed module would silently come back into the quick loop: names must exist."""
    modules = {p.stem for p in (REPO / "tests").rglob("test_*.py")}
    assert not conftest.SLOW_MODULES - modules, conftest.SLOW_MODULES - modules
    folders = {p.name for p in (REPO / "tests").iterdir() if p.is_dir()}
    assert not conftest.SLOW_FOLDERS - folders
    for name in conftest.SLOW_TESTS:
        module, *names = name.split("::")
        [path] = (REPO / "tests").rglob(module)
        for part in names:
            assert re.search(rf"^\s*(?:class|def|async def) {part}\b", path.read_text(),
                             re.MULTILINE), f"{name} no longer exists"


def test_the_quick_selection_leaves_out_node_browser_ray_and_servers() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:randomly", "-m", "not slow"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    files = {i.split("::")[0] for i in ids}
    left_out = {"tests/serve/test_node_clients.py",      # Node
                "tests/serve/test_chat_page.py",         # a browser
                "tests/test_replay.py",                  # Ray, worker processes
                "tests/test_install.py",                 # wheel builds, fresh venvs
                "tests/test_typecheck.py", "tests/test_notebooks.py"}
    assert not files & left_out, sorted(files & left_out)
    servers = [i for i in ids if re.search(r"[\[-](postgres|redis)[\]-]", i)]
    assert not servers, servers[:10]
    ray = [i for i in ids if re.search(r"(^|_)ray(_|\b)", i.split("::")[-1].split("[")[0])]
    assert not ray, ray
    # The engine stays in: chunks, wire, operators, processors, the agent, the guards.
    kept = {"tests/test_chunks.py", "tests/test_wire.py", "tests/test_ops.py",
            "tests/test_processors.py", "tests/test_agent.py", "tests/operators/test_pii.py",
            "tests/test_lint.py", "tests/test_readme.py"}
    assert kept <= files, sorted(kept - files)
