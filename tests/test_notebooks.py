"""Every notebook runs top to bottom on a fresh kernel; committed notebooks carry no outputs.

The kernel is this interpreter (``sys.executable``): a kernelspec for it is installed into a
temporary directory that ``JUPYTER_PATH`` points at, so the test never depends on which
``python3`` kernel a machine happens to have registered (or on none being registered at all).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernelspec = pytest.importorskip("ipykernel.kernelspec")

NOTEBOOKS = REPO / "notebooks"
KERNEL = "streamkit-tests"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
EXPECTED = ["01_chunks_and_wire", "02_operators", "03_writing_processors", "04_agent_loop",
            "05_guardrails", "06_throughput", "07_try_a_guard"]
WIDGET = "application/vnd.jupyter.widget-view+json"


def load_builder() -> Any:
    spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOKS / "_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kernelspec for this interpreter, visible through ``JUPYTER_PATH`` for this module."""
    prefix = tmp_path_factory.mktemp("jupyter")
    kernelspec.install(kernel_name=KERNEL, prefix=str(prefix), display_name="streamkit tests")
    spec = json.loads((prefix / "share" / "jupyter" / "kernels" / KERNEL / "kernel.json")
                      .read_text())
    assert spec["argv"][0] == sys.executable
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", os.pathsep.join(
            [str(prefix / "share" / "jupyter"), os.environ.get("JUPYTER_PATH", "")]).rstrip(
            os.pathsep))
        # The kernel imports this checkout (and its streamkit_operators) even when they are
        # not installed.
        mp.setenv("PYTHONPATH", os.pathsep.join(
            [str(REPO), str(REPO / "operators"), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep))
        yield KERNEL


def test_every_notebook_is_there() -> None:
    assert [p.stem for p in PATHS] == EXPECTED


def test_committed_notebooks_are_built_from_their_sources_without_outputs() -> None:
    builder = load_builder()
    for src in builder.sources():
        target = NOTEBOOKS / f"{src.stem}.ipynb"
        assert target.read_text(encoding="utf-8") == builder.render(src), (
            f"{target.name} is out of date: run python notebooks/_build.py")
    for path in PATHS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, (
                    f"{path.name} cell {cell.id} has outputs; strip them")


def _outputs(nb: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(cell.id, out) for cell in nb.cells if cell.cell_type == "code"
            for out in cell.outputs]


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>")


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs_on_a_fresh_kernel(path: Path, kernel_name: str) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=kernel_name, timeout=60,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()          # raises CellExecutionError on the first failing cell
    html = []
    for cell_id, out in _outputs(nb):
        assert out.get("output_type") != "error", f"{path.name} cell {cell_id}: {out}"
        data = out.get("data", {})
        if "text/html" in data:
            html.append(data["text/html"])
        elif "text/plain" in data:
            assert not _OBJECT_REPR.search(data["text/plain"]), (
                f"{path.name} cell {cell_id} shows a bare object repr: {data['text/plain']}")
    assert html, f"{path.name} shows no rich output"
    if path.stem == "04_agent_loop":
        # the graph is drawn; the live view was updated in place through IPython's own
        # display handles (its first rendering says "streaming…", the final one "done")
        assert any('class="sk-graph"' in h for h in html)
        live = [h for h in html if "sk-live" in h]
        assert live and all("streaming…" not in h for h in live)
    if path.stem == "05_guardrails":
        live = [h for h in html if "sk-live" in h]
        assert not any("ada@example.com" in h or "1111 1111 1111 1111" in h
                       or "1111-1111-1111-1111" in h for h in live), "a redactor leaked"
        assert sum('class="sk-tripwire"' in h for h in live) == 2
        assert sum('class="sk-withdrawn"' in h for h in live) == 1
    widgets = [out["data"][WIDGET] for _, out in _outputs(nb) if WIDGET in out.get("data", {})]
    if path.stem == "06_throughput":
        # the sweep's progress bar (tqdm.notebook) is a widget, and ran headless to the end
        assert any("pipelines measured" in out["data"].get("text/plain", "")
                   for _, out in _outputs(nb) if WIDGET in out.get("data", {}))
    if path.stem == "07_try_a_guard":
        # the control is one widget; typing and clicking from code streamed through the guard
        assert len(widgets) == 1
        (guarded,) = [h for h in html if "sk-live" in h]
        for secret in ("ada.lovelace@example.com", "grace@example.org", "7946 0958",
                       "4111 1111 1111 1111"):
            assert secret not in guarded, f"the guard let {secret!r} through"
        assert "**** **** **** 1111" in guarded and "@*******.org" in guarded
        assert "done · " in guarded
