"""The idle-cost benchmark (``benchmarks/idle_cost.py``) runs every case and reports what it
promises (no timing asserts: what it measures is the machine's, read in benchmarks/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import idle_cost


def test_every_case_is_measured_against_back_to_back() -> None:
    rows = idle_cost.run(requests=5, rounds=2)
    assert [r["case"] for r in rows] == [c.name for c in idle_cost.CASES]
    assert rows[0]["x_back_to_back"] == 1.0  # the baseline is its own reference, every round
    for row in rows:
        assert row["cpu_ms_per_request"] > 0 and row["x_back_to_back"] > 0
        assert row["rounds"] == 2 and row["requests"] == 5
    assert "x back to back" in idle_cost.format_table(rows)


def test_the_command_writes_its_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    assert idle_cost.main(["--requests", "3", "--rounds", "1", "--json", str(out)]) == 0
    assert "back to back" in capsys.readouterr().out
    assert len(json.loads(out.read_text())) == len(idle_cost.CASES)
