"""The serving load test (``benchmarks/serve_load.py``) runs and reports what it promises, on a
few small streams (no timing asserts: speed lives in ``python -m benchmarks --serve``)."""

from __future__ import annotations

import io
from pathlib import Path

from benchmarks import serve_load
from benchmarks.__main__ import main


def test_both_sides_run_and_report_every_column(tmp_path: Path) -> None:
    rows = serve_load.run(streams=4, chunks=20, tmp=tmp_path)
    assert [r["name"] for r in rows] == ["HTTP (uvicorn, 127.0.0.1)", "in-process (no HTTP)"]
    for row in rows:
        assert row["streams"] == 4 and row["chunks"] == 20
        for key in ("wall_s", "requests_per_s", "chunks_per_s", "ttfc_p50_ms", "ttfc_p99_ms",
                    "kib_per_stream"):
            assert isinstance(row[key], (int, float)) and row[key] >= 0, key
        assert row["ttfc_p50_ms"] <= row["ttfc_p99_ms"]
    table = serve_load.format_table(rows)
    assert "TTFC p99 ms" in table and "HTTP / in-process throughput" in table


def test_python_m_benchmarks_serve_flag() -> None:
    out = io.StringIO()
    assert main(["--only", "serve", "--serve", "--quick", "--no-progress"], stdout=out) == 0
    assert "HTTP (uvicorn, 127.0.0.1)" in out.getvalue()
