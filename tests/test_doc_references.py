"""Every file a reader is pointed to is in the repository (issue 29, point 6).

Docstrings, comments and pages once pointed at design notes that lived outside the repository
(``mastra-reference.md``, ``serving.md``, ``tracing.md``, ``STYLE.md``, a folder beside the
checkout): a reader of a clone could follow none of them. The project's own notes are in
``docs/`` now (``docs/mastra-fidelity.md``, ``docs/tracing.md``, ``docs/protocols.md``, ...).
This test finds every ``<name>.md`` mentioned in the library, the operators, the docs, the
README, the benchmarks and the tests, and checks that it resolves to a file of the repository
(relative to the mentioning file, as a Markdown link does, or to the repository root); that no
text points outside the repository; and that a section named after a ``docs/`` file
(``docs/serving.md``, "Trust boundary") is a heading of that file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import REPO

SCANNED = ["streamkit", "operators", "docs", "benchmarks", "tests", "README.md"]
SUFFIXES = {".py", ".md", ".html", ".yml", ".toml", ".mjs", ".js"}
SKIP_DIRS = {"node_modules", "__pycache__", ".venv", "site", "fixtures"}
SELF = Path(__file__).resolve()

MD_REF = re.compile(r"(?<![\w/.-])((?:\.{1,2}/)*[\w-][\w./-]*?\.md)(?![\w-])")
OUTSIDE = re.compile(r"\.\./shared|/work/|mastra-reference|processor-interface|peers\.md")
SECTION = re.compile(r"(docs/[\w-]+\.md)`{0,2},? \"([^\"]+)\"")


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        path = REPO / name
        if path.is_file():
            out.append(path)
            continue
        for f in sorted(path.rglob("*")):
            if f.is_file() and f.suffix in SUFFIXES and f.resolve() != SELF \
                    and not SKIP_DIRS & set(f.relative_to(REPO).parts):
                out.append(f)
    return out


FILES = _files()


def _prose(text: str, path: Path) -> str:
    """What a reader reads: all of a page or library file; of a test, its docstrings and
    comments (test code names files of its own, such as ``"x.md"``)."""
    if path.suffix == ".py" and path.relative_to(REPO).parts[0] == "tests":
        docstrings = re.findall(r'(?<![rR])"""(.*?)"""', text, re.S)
        return "\n".join(docstrings + re.findall(r"#(.*)$", text, re.M))
    return text


def _resolves(ref: str, where: Path) -> bool:
    target = ref.split("#")[0]
    return (where.parent / target).exists() or (REPO / target).exists()


def _headings(page: Path) -> set[str]:
    return {re.sub(r"[`*]", "", m.group(1)).strip()
            for m in re.finditer(r"^#+\s+(.*)$", page.read_text(encoding="utf-8"), re.M)}


def test_the_scan_finds_the_files_and_references() -> None:
    names = {f.relative_to(REPO).as_posix() for f in FILES}
    assert {"README.md", "docs/mastra-fidelity.md", "streamkit/agent/_routing.py"} <= names
    refs = [m.group(1) for m in MD_REF.finditer((REPO / "streamkit/agent/_routing.py")
                                                .read_text(encoding="utf-8"))]
    assert "docs/mastra-fidelity.md" in refs


@pytest.mark.parametrize("path", [pytest.param(f, id=f.relative_to(REPO).as_posix())
                                  for f in FILES])
def test_every_referenced_file_is_in_the_repository(path: Path) -> None:
    text = _prose(path.read_text(encoding="utf-8", errors="replace"), path)
    missing = sorted({m.group(1) for m in MD_REF.finditer(text)
                      if not _resolves(m.group(1), path)})
    outside = sorted({m.group(0) for m in OUTSIDE.finditer(text)})
    assert not missing, f"{path.relative_to(REPO)} points at files not in the repository: " \
                        f"{missing}"
    assert not outside, f"{path.relative_to(REPO)} points outside the repository: {outside}"
    for page, section in SECTION.findall(text):
        section = " ".join(section.replace("#:", " ").split())
        if (REPO / page).exists():
            assert any(h.startswith(section) for h in _headings(REPO / page)), \
                f"{path.relative_to(REPO)}: {page} has no section {section!r}"


@pytest.mark.parametrize("text, ok", [
    pytest.param("see ``mastra-reference.md`` §13", False, id="a-spec-outside"),
    pytest.param("see ``docs/tracing.md``", True, id="a-docs-page"),
    pytest.param("(``serving.md`` §1)", False, id="a-bare-page-name-from-the-library"),
    pytest.param("[guide](processors.md#routing)", True, id="a-relative-markdown-link"),
])
def test_the_check_tells_a_resolving_reference_from_one_that_does_not(text: str,
                                                                      ok: bool) -> None:
    where = REPO / "streamkit" / "x.py" if "docs/" in text or "serving" in text or \
        "mastra" in text else REPO / "docs" / "x.md"
    refs = [m.group(1) for m in MD_REF.finditer(text)]
    assert refs and all(_resolves(r, where) for r in refs) is ok
