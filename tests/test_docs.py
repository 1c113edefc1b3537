"""The API reference builds with warnings as errors, its tables come from the code, and the
examples on its pages run.

``mkdocs build --strict`` (mkdocs + mkdocstrings, in the test extra) renders every docstring of
the public modules; a docstring Griffe cannot read, a broken link or a missing page fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import msgspec
import pytest

from streamkit.agent._routing import ROUTES
from streamkit.chunks import Chunk, DataChunk
from streamkit.processors._spec import HOOK_PARAMS

from ._codeblocks import NO_RUN, bad_fences, python_blocks, run_in_order
from .conftest import REPO

pytest.importorskip("mkdocs", reason="mkdocs is in the test extra: pip install -e '.[test]'")
pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is in the "
                                                           "test extra")

DOCS = REPO / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "DESIGN.md")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    return out


def test_the_site_builds_strict_with_chunk_and_processor_pages(site: Path) -> None:
    for page in ("chunks", "processors", "reference/chunks", "reference/ops",
                 "reference/operators"):
        assert (site / page / "index.html").is_file(), f"no {page} page"
    assert "<!-- streamkit:" not in (site / "chunks" / "index.html").read_text()


def test_the_chunks_page_lists_every_type_and_payload_field(site: Path) -> None:
    html = (site / "chunks" / "index.html").read_text()
    for cls in get_args(Chunk):
        if cls is DataChunk:
            assert "<code>data-*</code>" in html
            continue
        assert f"<code>{cls.type}</code>" in html and f"<code>{cls.__name__}</code>" in html
        payload = getattr(cls, "_payload_cls", None)
        for f in msgspec.structs.fields(payload) if payload else ():
            if f.name != "extra":
                assert f"<code>{f.name}" in html, f"{cls.__name__}: field {f.name} missing"


def test_the_processors_page_lists_every_hook_argument_and_route(site: Path) -> None:
    html = (site / "processors" / "index.html").read_text()
    for hook, params in HOOK_PARAMS.items():
        assert f"<code>{hook}</code>" in html
        for param in params:
            assert f"<code>{param}</code>" in html, f"{hook}: argument {param} missing"
    for origin in ROUTES:
        assert f"<code>{origin.name}</code>" in html


def test_the_api_reference_renders_docstrings(site: Path) -> None:
    ops = (site / "reference" / "ops" / "index.html").read_text()
    assert "map_text" in ops and "fused_source" in ops and "Marble" in ops
    agent = (site / "reference" / "agent" / "index.html").read_text()
    assert "text_stream" in agent


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name) for p in PAGES])
async def test_the_examples_on_each_page_run(page: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    blocks = python_blocks(page)
    assert not bad_fences(blocks), f"use ```python or ```python {NO_RUN}"
    for block in blocks:
        block.compiled()
    await run_in_order(blocks, monkeypatch, caplog, tmp_path)


def _parameter_rows(html: str) -> list[tuple[str, bool]]:
    """``(name, rendered as required)`` for every row of the parameter tables of a page."""
    rows = re.findall(r'<tr class="doc-section-item">(.*?)</tr>', html, re.S)
    out = []
    for row in rows:
        name = re.search(r"<code>(.*?)</code>", row, re.S)
        if name:  # an attribute's name comes wrapped in a <span> (CallOptions' options)
            text = re.sub(r"<[^>]+>", "", name.group(1))
            out.append((text if text.isidentifier() else name.group(1),
                        "<em>required</em>" in row))
    return out


def test_grouped_parameters_render_one_row_each_with_their_defaults(site: Path) -> None:
    """A docstring entry for several parameters (``thread_id, resource_id:``) renders as one
    row per parameter with its type and default (``docs/hooks/griffe_params.py``), never as
    one **required** row named ``a / b``."""
    for page in sorted((site / "reference").glob("*/index.html")):
        for name, _ in _parameter_rows(page.read_text()):
            assert not re.search(r"\w\s*(/|,)\s*\w", name), f"{page.parent.name}: row {name!r}"
    rows = _parameter_rows((site / "reference" / "agent" / "index.html").read_text())
    for name in ("input_processors", "output_processors", "error_processors", "thread_id",
                 "resource_id", "tool_choice", "prepare_step"):
        assert (name, False) in rows and (name, True) not in rows, name


def test_the_grouped_entry_splitter_keeps_other_sections_alone() -> None:
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        from griffe_params import split_grouped_parameters
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    doc = ("Args:\n    a / b: both,\n        two lines.\n    c (int): one.\n\n"
           "Returns:\n    x, y: not parameters.\n")
    assert split_grouped_parameters(doc) == (
        "Args:\n    a: both,\n        two lines.\n    b: both,\n        two lines.\n"
        "    c (int): one.\n\nReturns:\n    x, y: not parameters.\n")


GUIDES = ["getting-started", "memory", "protocols", "serving", "tracing", "replay", "redis", "cli",
          "mastra-fidelity", "reference/serve", "reference/tracing", "reference/replay"]


@pytest.mark.parametrize("page", GUIDES)
def test_each_area_has_a_page(site: Path, page: str) -> None:
    html = site / page / "index.html"
    assert html.is_file(), f"no {page} page"
    # A ```python no-run fence renders as code (docs/hooks/fences.py): no stray fence text.
    assert "```" not in html.read_text()


def test_headings_after_a_no_run_block_are_headings(site: Path) -> None:
    html = (site / "serving" / "index.html").read_text()
    for anchor in ("trust-boundary", "tenancy-rules", "limits-and-their-defaults",
                   "memory-stores"):
        assert f'id="{anchor}"' in html, anchor


def test_the_index_starts_with_getting_started_not_the_readme() -> None:
    index = (DOCS / "index.md").read_text()
    assert "(getting-started.md)" in index and "README" not in index


@pytest.mark.parametrize("command", ["demo", "serve", "replay"])
def test_the_cli_page_lists_every_option(command: str) -> None:
    done = subprocess.run([sys.executable, "-m", "streamkit", command, "--help"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", done.stdout)) - {"--help"}
    page = (DOCS / "cli.md").read_text()
    section = page[page.index(f"## {command}"):]
    section = section[:section.index("\n## ")] if "\n## " in section else section
    missing = sorted(f for f in flags if f"`{f}" not in section)
    assert flags and not missing, f"docs/cli.md, {command}: no row for {missing}"
