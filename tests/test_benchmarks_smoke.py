"""The benchmark suite runs and reports what it promises, at tiny sizes (no timing asserts).

``python -m benchmarks`` is measured on purpose outside the test run; here every row runs on a
handful of chunks so the table, the JSON file and the comparison keep their shape, and every
contender still returns the result it must (the harness checks that on each run).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.__main__ import main, run
from benchmarks.harness import (
    BenchmarkError,
    Case,
    Group,
    Outcome,
    Progress,
    Result,
    measure,
    planned_steps,
)
from benchmarks.instructions import _WORKLOADS, ROWS
from benchmarks.report import (
    SCHEMA,
    check_targets,
    format_compare,
    format_table,
    format_targets,
    load,
    machine,
    save,
)
from benchmarks.suite import SECTIONS, Sizes, build_suite

TINY = Sizes.tiny()


@pytest.fixture(scope="module")
def tiny_run() -> tuple[list[Result], dict[str, Any]]:
    return run(TINY, progress=False, mode="tiny")


def test_every_section_has_its_groups(tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run
    titles = list(dict.fromkeys(r.group for r in results))
    heads = [t.split(" ")[0] for t in titles]
    assert heads.count("wire") == 5
    assert {"wire · JSON", "wire · SSE", "wire · JSON lines",
            "wire · MessagePack", "wire · SSE long lines"} <= set(titles)
    runner = [t for t in titles if t.startswith("runner")]
    assert len(runner) == 9
    for k in (1, 3, 10):
        assert f"runner · {k} pass-through · sync" in runner
        assert f"runner · {k} pass-through · async" in runner
    assert {"runner · 0 processors", "runner · 3 transforms · sync",
            "runner · 3 transforms · async"} <= set(runner)
    assert sum(h.startswith("agent.stream") for h in heads) == 1
    assert sum(h == "tracing" for h in heads) == 1
    assert sum(h == "requests" for h in heads) == 1
    assert sum(h == "memory" for h in heads) == 1
    assert sum(h == "replay" for h in heads) == 1
    assert sum(t.startswith("chunks · building") for t in titles) == 1
    mirror = [t for t in titles if t.startswith("mastra mirror")]
    assert len(mirror) == 2


def test_the_mastra_mirror_runs_every_scenario(
        tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run
    names = [r.name for r in results if r.group.startswith("mastra mirror")]
    n = f"N={TINY.mastra_n:,}"
    assert names == [f"floor · model stream · {n}", f"a:no-processors · {n}",
                     *(f"b:pass-through · K={k} · {n}" for k in (1, 3, 10)),
                     f"c:transform · 3 processors · {n}",
                     "d0:requests-no-processors · sequential",
                     f"d0:requests-no-processors · {TINY.concurrency} concurrent",
                     "d:requests-in+result-processors · sequential",
                     f"d:requests-in+result-processors · {TINY.concurrency} concurrent"]


def test_mirror_words_and_expectations_follow_bench_mjs() -> None:
    from benchmarks.rows_mastra import VOCAB, expect_transform, word_at

    bench = (Path(__file__).resolve().parents[1] / "benchmarks" / "mastra-node" / "bench.mjs")
    source = bench.read_text()
    assert all(f" {w} " in " " + source.replace("'", " ") + " " for w in VOCAB)
    assert [word_at(i) for i in (0, 49, 50)] == ["alpha ", "amber ", "alpha "]
    text, words = expect_transform([word_at(i) for i in range(20)])
    assert words == 18 and text.startswith("ALPHA BETA ") and "KAPPA" not in text
    assert "UPSILON" not in text and text.endswith("TAU ")


def test_vs_mastra_pairs_rows_and_judges_the_goals(
        tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    from benchmarks.report import format_vs_mastra, vs_mastra

    results, _ = tiny_run
    n = TINY.mastra_n
    c = next(r for r in results if r.name.startswith("c:transform"))
    seq = next(r for r in results if r.name == "d0:requests-no-processors · sequential")
    mastra_rows = [
        {"scenario": "c:transform", "api": "stream", "N": n, "K": 3,
         "per_chunk_us": c.us_per_chunk * 40, "requests_per_s": 1.0},
        {"scenario": "d0:requests-no-processors", "api": "stream-sequential", "N": 100, "K": 0,
         "per_chunk_us": 1.0, "requests_per_s": (seq.requests_per_s or 0) / 10},
        {"scenario": "c:transform", "api": "generate", "N": n, "K": 3, "per_chunk_us": 1.0,
         "requests_per_s": 1.0},
    ]
    pairs, goals = vs_mastra(mastra_rows, results)
    assert [round(p[3]) for p in pairs] == [40, 10]
    assert [(g.name, g.met) for g in goals] == [
        ("c: agent.stream 3 transforms ≥ 30× Mastra", True),
        ("d0: 100-chunk requests ≥ 30× Mastra", False)]
    assert "40.0×" in format_vs_mastra(pairs, "@mastra/core 1.71.0")


def test_vs_mastra_without_npm_says_so_and_skips_the_mastra_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import mastra

    monkeypatch.setenv("STREAMKIT_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm on it
    assert "npm is not installed" in str(mastra.prepare())
    assert "lacks bench.mjs" in str(mastra.prepare(tmp_path))
    out = io.StringIO()
    assert main(["--tiny", "--vs-mastra", "--no-progress"], stdout=out,
                stderr=io.StringIO()) == 0
    text = out.getvalue()
    assert "Mastra rows skipped: npm is not installed" in text
    assert "mastra mirror · agent.stream" in text and "wire ·" not in text


def test_rows_compare_to_a_baseline_of_their_own_group(
        tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run
    by_group: dict[str, dict[str, Result]] = {}
    for r in results:
        by_group.setdefault(r.group, {})[r.name] = r
    for group, rows in by_group.items():
        assert any(r.baseline is None for r in rows.values()), group
        for r in rows.values():
            repeat = TINY.repeat_micro if group.startswith(("wire", "runner")) else TINY.repeat
            if group.startswith("tracing"):
                repeat *= 3  # ratios near 1: more runs (benchmarks/suite.py)
            assert len(r.times) == repeat and all(t > 0 for t in r.times)
            assert r.chunks > 0 and r.chunks_per_s > 0 and r.us_per_chunk > 0
            if r.baseline is None:
                assert r.ratio is None
            else:
                assert r.baseline in rows and r.ratio is not None and r.ratio > 0


def test_runner_groups_hold_every_contender(
        tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run
    sync = {r.name for r in results if r.group == "runner · 3 transforms · sync"}
    goal_rows = {"for loop · same functions", "ops.apply into a list"}
    assert sync == {"hand loop", "StreamChain.push loop", "hand async gen", "ops.apply",
                    "reactivex", "aiostream"} | goal_rows
    asynchronous = {r.name for r in results if r.group == "runner · 3 pass-through · async"}
    assert asynchronous == sync - {"reactivex"} - goal_rows


def test_agent_rows_cover_both_lengths_and_report_flatness(
        tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run
    agent = [r for r in results if r.group.startswith("agent.stream")]
    short, long = f"{TINY.agent_short}", "1k"
    for n in ("0 processors", "1 pass-through", "3 pass-through", "10 pass-through",
              "3 transforms"):
        assert any(r.name == f"agent · {n} · {short}" for r in agent)
        twin = next(r for r in agent if r.name == f"agent · {n} · {long}")
        assert twin.baseline == f"agent · {n} · {short}"
        assert {"early_us", "late_us", "first_ms", "tail_ms"} <= set(twin.metrics)
    memory = [r for r in results if r.group.startswith("memory")]
    assert all(r.bytes_per_request is not None and r.bytes_per_request > 0 for r in memory)
    requests = [r for r in results if r.group.startswith("requests")]
    assert len(requests) == 4 and all(r.requests_per_s for r in requests)


def test_tracing_rows_measure_each_state_against_its_own_baseline(
        tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run
    rows = {r.name.rsplit(" · ", 1)[0]: r for r in results if r.group.startswith("tracing")}
    assert {name: r.baseline and r.baseline.rsplit(" · ", 1)[0] for name, r in rows.items()} == {
        "otel absent": None, "otel installed, unconfigured": "otel absent",
        "tracing on": "otel installed, unconfigured",
        "tracing on · content capture": "otel installed, unconfigured"}
    names = {t.name for t in check_targets(results)}
    assert {"otel unconfigured ≤ 1.1× absent", "tracing on ≤ 1.1× off"} <= names


def test_table_has_one_line_per_row(tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, info = tiny_run
    table = format_table(results, info)
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("row"))
    for column in ("chunks/s", "µs/chunk", "req/s", "×base", "baseline", "peak mem"):
        assert column in header
    for title in {r.group for r in results}:
        assert any(line.startswith(title) for line in lines)
    rows = [line for line in lines if line.startswith("  ") and ("base" in line or "×" in line)]
    assert len(rows) == len(results)
    assert info["machine"]["cpus"] and info["machine"]["python"]


def test_json_round_trip_and_compare(tiny_run: tuple[list[Result], dict[str, Any]],
                                     tmp_path: Path) -> None:
    results, info = tiny_run
    path = tmp_path / "run.json"
    save(path, results, info)
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA and doc["mode"] == "tiny"
    assert set(doc["machine"]) >= {"cpu", "cpus", "python", "os", "streamkit", "commit"}
    assert doc["sizes"]["agent_long"] == TINY.agent_long
    row = doc["results"][0]
    assert set(row) >= {"group", "name", "baseline", "chunks", "median_s", "times_s", "ratio",
                        "chunks_per_s", "us_per_chunk", "peak_bytes", "metrics"}
    assert {t["name"] for t in doc["targets"]} >= {"wire encode ≤ 1.2× raw msgspec",
                                                   "runner sync ≤ 1.3× hand loop"}
    loaded, rest = load(path)
    assert [(r.group, r.name, r.times) for r in loaded] == \
        [(r.group, r.name, r.times) for r in results]
    assert rest["machine"] == info["machine"]
    text = format_compare(loaded, results, "a", "b")
    assert all(r.name[:56] in text for r in results)


def test_command_line_writes_json_and_compares(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    path = tmp_path / "wire.json"
    assert main(["--tiny", "--only", "wire", "--json", str(path)], stdout=out, stderr=err) == 0
    text = out.getvalue()
    assert "wire · MessagePack" in text and "runner ·" not in text
    # A tiny run shows the targets' values but judges none of them.
    assert "targets (not judged: a tiny run's inputs are too small" in text
    assert "MISSED" not in text and "[   met]" not in text and " met\n" not in text
    assert err.getvalue()  # the progress went to stderr, not into the table
    compare = io.StringIO()
    assert main(["--compare", str(path), str(path)], stdout=compare) == 0
    assert "+0.0%" in compare.getvalue()


def test_only_a_full_run_is_judged(tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    targets = check_targets(tiny_run[0])
    assert targets
    full = format_targets(targets, mode="full")
    assert full.startswith("targets:\n") and f"/{len(targets)} met" in full
    assert sum(("[   met]" in line or "[MISSED]" in line) for line in full.splitlines()) \
        == len(targets)
    quick = format_targets(targets, mode="quick")
    assert "not judged" in quick and "MISSED" not in quick and "met" not in quick.split(":", 1)[1]


def test_only_selects_sections_and_title_parts() -> None:
    assert {g.title.split(" ")[0] for g in build_suite(TINY, ["wire"])} == {"wire"}
    titles = [g.title for g in build_suite(TINY, ["transforms"])]
    assert titles == ["runner · 3 transforms · sync", "runner · 3 transforms · async"]
    assert len(build_suite(TINY)) == sum(len(build_suite(TINY, [s])) for s in SECTIONS)


def test_a_contender_that_returns_something_else_fails_loudly() -> None:
    calls = iter([1, 1, 2])
    group = Group("g", [Case("base", lambda: 1, 10, expect=1),
                        Case("liar", lambda: next(calls), 10, baseline="base")], repeat=2)
    with pytest.raises(BenchmarkError, match="runs disagree"):
        measure(group)
    wrong = Group("g", [Case("base", lambda: 2, 10, expect=1)], repeat=1)
    with pytest.raises(BenchmarkError, match="expected 1"):
        measure(wrong)


def test_harness_interleaves_and_reports_metrics() -> None:
    order: list[str] = []

    def case(name: str) -> Case:
        def fn() -> Outcome:
            order.append(name)
            return Outcome(0, {"m": float(len(order))})
        return Case(name, fn, 5, memory=False)

    group = Group("g", [case("a"), case("b"), case("c")], repeat=3)
    results = measure(group)
    assert order[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert all("m" in r.metrics for r in results)
    assert planned_steps([group]) == 3 * (1 + 3)


def test_progress_bar_draws_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = Progress(4, stream=stream, width=8)
    bar.step("row", "group")
    bar.step("row", "group")
    assert "[####----]  50%  2/4" in stream.getvalue()
    bar.close()


def test_targets_are_judged_from_rows_present(
        tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run
    names = {t.name for t in check_targets(results)}
    assert names == {"wire encode ≤ 1.2× raw msgspec", "wire encode ≥ 4× faster than json",
                     "runner sync ≤ 1.3× hand loop", "runner sync faster than reactivex",
                     "agent.stream 3 transforms ≥ 500k chunks/s",
                     "per-chunk cost flat (long ≤ 1.2× short)",
                     "SSE parsing linear (ratio to floor flat)",
                     "otel unconfigured ≤ 1.1× absent", "tracing on ≤ 1.1× off",
                     "building a chunk ≤ 2× plain msgspec Structs",
                     "mirror c: 3 transforms ≈ 1 µs/chunk (30× Mastra's ~30)",
                     "ops.apply 3 transforms ≤ 1.3× for loop, same fns"}
    assert machine()["cpus"]


def test_hand_written_uppercase_builds_the_same_chunks_as_ops_map_text() -> None:
    from benchmarks.workloads import text_chunks, transforms, upper_chunk

    hook = transforms()[0].process_output_stream
    chunks = text_chunks(30)
    assert [hook(c) for c in chunks] == [upper_chunk(c) for c in chunks]
    assert all(upper_chunk(c).payload.text == c.payload.text.upper() for c in chunks)


def test_every_instruction_count_workload_runs_at_its_small_size(tmp_path: Path) -> None:
    # ``python -m benchmarks.instructions`` runs these under callgrind (outside the suite); here
    # each one runs once, plainly, at the small size of its rows, so none of them rots.
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=f"{repo}{os.pathsep}{repo / 'operators'}")
    sizes = {name: (k, small) for name, k, small, _, _ in ROWS}
    assert set(sizes) == set(_WORKLOADS)  # every workload has a row, every row a workload
    for name, (k, small) in sizes.items():
        script = tmp_path / "workload.py"
        script.write_text(_WORKLOADS[name])
        done = subprocess.run([sys.executable, str(script), str(k), str(small + 2)], cwd=repo,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"
