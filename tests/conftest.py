"""Shared test helpers: sync/async parametrisation, a duck-typed processor, leak checks."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import re
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent
from streamkit.errors import InvalidArgument, InvalidType, StreamkitError

from ._backends import pg_dsn, pg_schema, redis_prefix, redis_url  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[1]

# The demo's models stream at full speed in tests (and in the servers they start); a test that
# wants the paced demo passes --pace-ms / pace= itself.
os.environ.setdefault("STREAMKIT_DEMO_PACE_MS", "0")


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """Run the test once with sync hooks and once with async hooks."""
    return request.param


def as_mode(fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
    """``fn`` itself for ``"sync"``; an ``async def`` with the same signature for ``"async"``
    (it yields to the loop once, so a missing ``await`` would show)."""
    if mode == "sync":
        return fn

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return fn(*args, **kwargs)

    return wrapper


class P:
    """A duck-typed processor: ``P("id", process_output_stream=fn, process_data_parts=True)``."""

    def __init__(self, id: str, **attrs: Any) -> None:
        self.id = id
        for key, value in attrs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"P({self.id!r})"


def hook(mode: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    return as_mode(fn, mode)


class AsyncGenTracker:
    """Records every async generator first iterated while installed."""

    def __init__(self) -> None:
        self.gens: list[weakref.ref[Any]] = []

    def open(self) -> list[Any]:
        alive = [g() for g in self.gens]
        return [g for g in alive if g is not None and g.ag_frame is not None]


@pytest.fixture
async def asyncgens() -> Any:
    """Track async generators created during the test; ``asyncgens.open()`` lists those not
    closed (a generator whose frame is gone has finished or been closed)."""
    tracker = AsyncGenTracker()
    old = sys.get_asyncgen_hooks()

    def firstiter(gen: Any) -> None:
        tracker.gens.append(weakref.ref(gen))
        if old.firstiter is not None:
            old.firstiter(gen)

    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=old.finalizer)
    try:
        yield tracker
    finally:
        sys.set_asyncgen_hooks(*old)


def assert_misuse(call: Callable[[], Any], error: type[Exception], words: str) -> None:
    """``call()`` raises ``error`` (a ``streamkit.errors`` class) whose message contains
    ``words``; ``InvalidArgument`` is also a ``ValueError`` and ``InvalidType`` a ``TypeError``."""
    with pytest.raises(error, match=re.escape(words)) as info:
        call()
    assert isinstance(info.value, StreamkitError)
    if isinstance(info.value, InvalidArgument):
        assert isinstance(info.value, ValueError)
    if isinstance(info.value, InvalidType):
        assert isinstance(info.value, TypeError)


def types(chunks: list[Any]) -> list[str]:
    """The wire type of each chunk."""
    return [c.type for c in chunks]


async def run_stream(agent: Agent, prompt: str = "hi", **kw: Any) -> tuple[list[Any], Any]:
    """Every chunk the consumer got, and the result (or the error that ended the run)."""
    stream = agent.stream(prompt, **kw)
    chunks = [c async for c in stream]
    try:
        result = await stream.result()
    except StreamkitError as exc:
        result = exc
    return chunks, result


# -- the fast developer loop ------------------------------------------------------------------
# `.ci/quick` (README "Set-up") runs `pytest -m "not slow"`: what is left out is marked here, in
# one place, by what a test needs rather than by hand in each file. `.ci/run` runs everything.

#: Fixtures that bring in Node (npm ci), a browser (chromium), Ray, or a PostgreSQL or Redis
#: server: every test using one (directly or through another fixture) is slow.
SLOW_FIXTURES = frozenset({"node22", "chromium", "page_url", "local_ray",
                           "pg_dsn", "pg_schema", "redis_url", "redis_prefix"})
#: A backend fixture parametrised with one of these (``params=["sqlite", "postgres"]``) asks for
#: the server with ``request.getfixturevalue``, which collection cannot see: that case is slow.
SERVER_PARAMS = frozenset({"postgres", "redis"})
#: A test that imports one of these itself (``pytest.importorskip("ray")``) is slow too.
SLOW_IMPORTS = re.compile(r"""importorskip\(\s*["'](?:ray|playwright)\b""")
#: Whole modules that build, install, type-check, render or run for long (measured: see the
#: README's set-up table); each costs seconds to minutes where the rest cost milliseconds.
SLOW_MODULES = frozenset({
    "test_install",            # builds both wheels, installs two fresh venvs
    "test_typecheck",          # mypy --strict over the library
    "test_user_typing",        # mypy --strict over the user programs
    "test_docs",               # mkdocs build --strict
    "test_notebooks",          # every notebook on a fresh Jupyter kernel
    "test_benchmarks_smoke",   # the benchmark harness, instruction counts
    "test_serve_load_smoke",   # the serving load generator
    "test_pii_linear",         # instruction counts under valgrind over growing inputs
    "test_replay",             # worker processes over 10,000 streams, and Ray
    "test_replay_hostile",     # worker processes, signals, deadlines, and Ray
    "test_replay_survive",     # worker processes killed mid-stream, and Ray Data jobs
    "test_hostile_providers",  # fuzzed provider streams over real HTTP
    "test_hostile_http",       # servers that drip and stall: waits out deadlines
    "test_imports",            # the import graph of every module
    "test_misuse",             # every module's source, scanned for raises
})
#: Single tests (``module.py::Class`` or ``module.py::test``, every parametrisation) that sweep
#: every shape or rule: each takes seconds of CPU. ``tests/test_quick_loop.py`` checks they exist.
SLOW_TESTS = frozenset({
    "test_fused.py::TestShapeSweep",
    "test_fused.py::TestTemplateCoverage",
    "test_guard_leaks.py::test_consumer_text_is_stored_text_is_one_shot_redaction",
})
#: Test folders left out whole: ``tests/serve`` starts a real HTTP server (uvicorn) per test.
SLOW_FOLDERS = frozenset({"serve"})
#: A test whose own source starts another Python process or a pool of them costs a second or
#: more of interpreter start-up each: slow.
SPAWNS = re.compile(r"\bsubprocess\.|\bmultiprocessing\b|ProcessPool|\bsys\.executable\b")
#: A property test drawing this many examples or more is slow; smaller ones stay in the loop.
MANY_EXAMPLES = 50


def is_slow(item: pytest.Item) -> bool:
    """Whether ``item`` stays out of the fast loop (see ``SLOW_FIXTURES`` and friends)."""
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and SERVER_PARAMS & {v for v in callspec.params.values()
                                                  if isinstance(v, str)}:
        return True
    module = getattr(item, "module", None)
    if module is not None and module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
        return True
    tests = REPO / "tests"
    if tests in item.path.parents and SLOW_FOLDERS & set(item.path.relative_to(tests).parts):
        return True
    parts = item.nodeid.split("[", 1)[0].split("::")
    if any("::".join([item.path.name, *parts[1:n]]) in SLOW_TESTS for n in (2, 3)):
        return True
    function = getattr(item, "function", None)
    settings = getattr(function, "_hypothesis_internal_use_settings", None)
    if settings is not None and settings.max_examples >= MANY_EXAMPLES:
        return True
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return bool(SLOW_IMPORTS.search(source) or SPAWNS.search(source))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
