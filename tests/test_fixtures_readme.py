"""A fresh clone carries its own fixtures: nothing is read from beside the repository.

``tests/fixtures/README.md`` says where each recording came from; these tests keep the folder
and the note in step and catch a test or benchmark that reaches outside the clone.
"""

from __future__ import annotations

import re

import pytest

from .conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"
# A string literal naming a path beside the clone or on one developer's machine.
OUTSIDE = re.compile(r"""["'](?:\.\./|/work/|/home/|/Users/)[^"']*["']""")


def test_every_fixture_folder_is_described_in_the_readme() -> None:
    readme = (FIXTURES / "README.md").read_text()
    folders = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    assert folders, "tests/fixtures has no recordings"
    missing = [name for name in folders if f"`{name}/`" not in readme]
    assert not missing, f"tests/fixtures/README.md does not say where {missing} came from"


@pytest.mark.parametrize("folder", ["tests", "benchmarks", "notebooks/_src"])
def test_no_code_reads_a_path_outside_the_repository(folder: str) -> None:
    offenders = []
    for path in sorted((REPO / folder).rglob("*.py")):
        if path.name == "test_fixtures_readme.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "reads outside the clone:\n" + "\n".join(offenders)
