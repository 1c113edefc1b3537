"""Imports point one way and sit at module top (STYLE: Dependencies point one way; Learned).

Two checks read the source with ``ast`` (nothing is imported):

* the module-level import graph of the ``streamkit`` package has no cycle. An edge is a
  *runtime* import executed while the module loads: statements in the module body, including
  under ``if``/``try``/``with`` and in class bodies, but not under ``if TYPE_CHECKING:`` and not
  inside functions. Implicit imports of parent packages (``import a.b`` runs ``a/__init__``)
  are not edges, or every package would be a cycle with its own ``__init__``.
* an import inside a function is allowed only when ``FUNCTION_IMPORTS_ALLOWED`` says why.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from .conftest import REPO

PACKAGES = {"streamkit": REPO / "streamkit",
            "streamkit_operators": REPO / "operators" / "streamkit_operators"}


# (file relative to the repository, imported module) → why the import waits for the call.
FUNCTION_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {
    ("streamkit/display/_live.py", "IPython"):
        "optional: IPython is not a dependency; live() falls back to the terminal without it",
    ("streamkit/display/_live.py", "IPython.display"):
        "optional: only reached inside a running Jupyter kernel",
    ("streamkit/graph.py", "streamkit.display"):
        "display is the presentation layer above the runtime (it imports ops and processors); "
        "Graph reaches it only when Jupyter asks for HTML, so the generic graph stays below it",
    ("streamkit/agent/_result.py", "streamkit.display"):
        "display is the presentation layer above the agent (it renders results and streams); "
        "AgentResult/AgentStream reach it only when Jupyter asks for HTML or show() is called",
    ("streamkit/models/_resolve.py", "streamkit.models._router"):
        "heavy: the router imports the HTTP providers and httpx (a slow import); only a router id "
        "string needs them",
    ("streamkit/__main__.py", "streamkit.serve"):
        "optional: Starlette and uvicorn come with the serve extra; `python -m streamkit demo` "
        "works without them",
    ("streamkit/tokens.py", "tiktoken"):
        "heavy: `import streamkit` imports tokens; tiktoken's native extension loads on first "
        "count",
    ("streamkit/memory/_postgres.py", "psycopg"):
        "optional and heavy: the postgres extra; `import streamkit` imports memory, and should "
        "not pay a fifth of a second for a store it may never make",
    ("streamkit/memory/_postgres.py", "psycopg.types.json"):
        "optional and heavy: as psycopg",
    ("streamkit/memory/_postgres.py", "psycopg_pool"):
        "optional and heavy: as psycopg",
    ("operators/streamkit_operators/_redis.py", "redis.asyncio"):
        "optional and heavy: the redis extra; importing streamkit_operators should not pay for "
        "a backend it may never make",
    ("operators/streamkit_operators/_redis.py", "redis.exceptions"):
        "optional and heavy: as redis.asyncio",
    ("operators/streamkit_operators/_redis.py", "redis.asyncio.retry"):
        "optional and heavy: as redis.asyncio (the no-retry policy of clients made from a URL)",
    ("operators/streamkit_operators/_redis.py", "redis.backoff"):
        "optional and heavy: as redis.asyncio.retry",
    ("streamkit/replay/_execute.py", "ray"):
        "optional and heavy: the ray extra takes seconds to import; only a replay with ray= "
        "needs it",
    ("streamkit/replay/_execute.py", "ray.data"):
        "optional and heavy: as ray",
    ("streamkit/replay/_ray.py", "pyarrow"):
        "optional and heavy: Arrow comes with the ray extra; only a replay with ray= needs it",
    ("streamkit/replay/_ray.py", "pyarrow.fs"):
        "optional and heavy: as pyarrow (listing a corpus or a URI for a Ray replay)",
    ("streamkit/replay/_ray.py", "ray._private.runtime_env.py_modules"):
        "optional and heavy: as ray; Ray's own upload of py_modules, the one ray.init runs, "
        "for a pipeline module a replay ships to a cluster that is already running",
    ("streamkit/tracing/_settings.py", "streamkit.tracing._spans"):
        "optional: _spans imports opentelemetry; it loads on the first run traced (the "
        "application has loaded opentelemetry.trace by then) or in instrument(), so `import "
        "streamkit` never pays opentelemetry's import and works without it",
    ("streamkit/tokens.py", "tiktoken.model"):
        "heavy: as tiktoken, only when a model id is mapped to its encoding",
}


def _modules(package: str) -> dict[str, Path]:
    """Dotted module name → file, for every module of ``package``."""
    root = PACKAGES[package]
    found: dict[str, Path] = {}
    for path in sorted(root.glob("**/*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run while the module loads (see the module docstring)."""
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            yield stmt
        elif isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                yield from _load_time_imports(stmt.body)
            yield from _load_time_imports(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse,
                          stmt.finalbody):
                yield from _load_time_imports(block)
        elif isinstance(stmt, (ast.With, ast.ClassDef)):
            yield from _load_time_imports(stmt.body)


def _function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements anywhere inside a function or method body, in source order."""
    found: dict[int, ast.Import | ast.ImportFrom] = {}
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found[id(node)] = node  # a nested function is walked twice: count it once
    return sorted(found.values(), key=lambda node: node.lineno)


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom,
             modules: Iterable[str]) -> list[str]:
    """The modules an import statement loads by name: ``from pkg import mod`` names the
    submodule ``pkg.mod``; ``from pkg import name`` names ``pkg``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _resolve(module, is_package, node)
    known = set(modules)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in node.names]


def import_graph(package: str) -> dict[str, set[str]]:
    """Module → the package modules it imports at load time (engine modules left out)."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = {target for node in _load_time_imports(tree.body)
                   for target in _targets(name, path.name == "__init__.py", node, modules)}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or ``None`` when the graph is acyclic."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            for child in children:
                if child in on_path:
                    return [*path[path.index(child):], child]
                if child not in done:
                    stack.append((child, iter(sorted(graph[child]))))
                    path.append(child)
                    on_path.add(child)
                    break
            else:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
    return None


def test_find_cycle_reports_the_loop() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_graph_sees_relative_and_conditional_imports() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "from . import b\n"
                     "if TYPE_CHECKING:\n    from .c import C\n"
                     "try:\n    from .d import D\nexcept ImportError:\n    pass\n"
                     "def f():\n    from .e import E\n")
    imports = list(_load_time_imports(tree.body))
    assert [getattr(n, "module", None) for n in imports] == ["typing", None, "d"]
    assert _targets("pkg.a", False, imports[1], ["pkg", "pkg.b"]) == ["pkg.b"]
    assert _targets("pkg.a", False, imports[1], ["pkg"]) == ["pkg"]
    assert _targets("pkg", True, imports[2], ["pkg.d"]) == ["pkg.d"]
    assert [getattr(n, "module", None) for n in _function_imports(tree)] == ["e"]


def test_streamkit_has_no_import_cycle() -> None:
    graph = import_graph("streamkit")
    assert len(graph) > 10, "no modules found"
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_operators_have_no_import_cycle() -> None:
    cycle = find_cycle(import_graph("streamkit_operators"))
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_imports_inside_functions_are_allowlisted() -> None:
    found: dict[tuple[str, str], list[int]] = {}
    for package in PACKAGES:
        modules = _modules(package)
        for name, path in modules.items():
            tree = ast.parse(path.read_text(), filename=str(path))
            rel = path.relative_to(REPO).as_posix()
            for node in _function_imports(tree):
                for target in _targets(name, path.name == "__init__.py", node, modules):
                    found.setdefault((rel, target), []).append(node.lineno)
    unexplained = {f"{rel}:{lines} imports {target}"
                   for (rel, target), lines in found.items()
                   if (rel, target) not in FUNCTION_IMPORTS_ALLOWED}
    assert not unexplained, ("move these imports to module top, or add them to "
                             f"FUNCTION_IMPORTS_ALLOWED with a reason: {sorted(unexplained)}")
    stale = set(FUNCTION_IMPORTS_ALLOWED) - set(found)
    assert not stale, f"FUNCTION_IMPORTS_ALLOWED lists imports that are gone: {sorted(stale)}"
