"""Build the notebooks in this folder from their sources in ``_src/`` (outputs left empty).

Each ``_src/NN_name.py`` is in the "percent" format (as jupytext writes it): ``# %%`` starts a
code cell, ``# %% [markdown]`` a Markdown cell whose lines are ``# ``-commented. The sources are
what reviewers read and edit; the ``.ipynb`` files are generated, deterministic (fixed cell ids,
no outputs, no execution counts) and committed so Jupyter users can open them directly.

Usage::

    python notebooks/_build.py            # rewrite notebooks/*.ipynb
    python notebooks/_build.py --check    # exit 1 if a committed notebook is out of date

The test suite runs the ``--check`` comparison and executes every notebook.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "_src"

_KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def parse_cells(source: str) -> list[tuple[str, str]]:
    """Split percent-format ``source`` into ``(kind, text)`` cells, ``kind`` in
    ``{"code", "markdown"}``. Text before the first marker is ignored."""
    cells: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
            cells.append((kind, []))
        elif cells:
            kind, lines = cells[-1]
            if kind == "markdown":
                if line and not line.startswith("#"):
                    raise ValueError(f"markdown line without '#': {line!r}")
                line = line[2:] if line.startswith("# ") else line[1:]
            lines.append(line)
    out = []
    for kind, lines in cells:
        text = "\n".join(lines).strip("\n")
        if text:
            out.append((kind, text))
    return out


def build(path: Path) -> nbformat.NotebookNode:
    """The notebook for one source file."""
    nb = new_notebook()
    nb.metadata = {"kernelspec": dict(_KERNELSPEC),
                   "language_info": {"name": "python", "pygments_lexer": "ipython3"}}
    for i, (kind, text) in enumerate(parse_cells(path.read_text(encoding="utf-8"))):
        cell = new_code_cell(text) if kind == "code" else new_markdown_cell(text)
        cell.id = f"{path.stem[:2]}-{i:02d}"     # stable ids keep diffs reviewable
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(path: Path) -> str:
    """The exact ``.ipynb`` text written for one source file."""
    return nbformat.writes(build(path)) + "\n"


def sources() -> list[Path]:
    return sorted(SOURCES.glob("[0-9][0-9]_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="report notebooks that differ from their source; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for src in sources():
        target = HERE / f"{src.stem}.ipynb"
        text = render(src)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        stale.append(target.name)
        if not args.check:
            target.write_text(text, encoding="utf-8")
    verb = "out of date" if args.check else "written"
    for name in stale:
        print(f"{name}: {verb}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
