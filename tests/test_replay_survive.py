"""A replay that scales and survives (issue 30, points 4-6), against real worker processes and a
real local Ray instance (2 CPUs; skipped with the reason printed when the ray extra is absent).

* A stream that kills its worker (``os._exit``, ``SIGKILL`` as the OOM killer sends it) is
  retried once, then named as a failed row (file and stream: ``<path>#<n>``); every other row
  is there, locally and on Ray. A worker lost once by bad luck costs nothing. A stream that no
  signal reaches is ended by killing its process at the deadline.
* On Ray the workers read the files (a directory, or a ``file://`` URI through pyarrow's
  filesystems), write the rows (JSON lines or Parquet) and sum them; a pipeline module the
  cluster does not have travels with the job.
* A corrupt ``start`` line neither merges two streams nor renumbers the rest of the file; a
  dangling symbolic link in a corpus is a failed row naming it; the README's Ray cluster does
  not take Redis's port.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.errors import InvalidArgument
from streamkit.replay import read_streams, replay

from .conftest import REPO
from .replay_hostile_pipelines import POISON
from .test_replay_hostile import stream_lines

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::UserWarning:ray.data")

HOSTILE = "tests.replay_hostile_pipelines"


def corpus(root: Path) -> tuple[Path, list[str]]:
    """Two files: the first holds a poisoned stream (``#1``) between two good ones."""
    root.mkdir(parents=True, exist_ok=True)
    poisoned = root / "a.jsonl"
    poisoned.write_bytes(b"\n".join([*stream_lines("r0", "a"), *stream_lines("r1", "b", POISON),
                                     *stream_lines("r2", "c", "d")]) + b"\n")
    good = root / "b.jsonl"
    good.write_bytes(b"\n".join([*stream_lines("r3", "e"), *stream_lines("r4", "f")]) + b"\n")
    return poisoned, [f"{poisoned}#0", f"{poisoned}#1", f"{poisoned}#2", f"{good}#0",
                      f"{good}#1"]


def rows_by_id(sources: list[Any], pipeline: Any, **kw: Any) -> tuple[Any, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    report = replay(sources, pipeline, on_stream=lambda r: rows.__setitem__(r["stream"], r),
                    **kw)
    for row in rows.values():
        for counts in row["processors"].values():
            counts.pop("ns", None)
    return report, rows


# ------------------------------------------------------------------- a stream that kills its worker


class TestWorkerDeath:
    @pytest.mark.parametrize(("name", "how"), [
        pytest.param("EXIT", "exited with code 3", id="os-exit"),
        pytest.param("KILL", "was killed by SIGKILL (the kernel's OOM killer", id="oom-kill")])
    # One batch for everything: the rows of streams that ended before the death but were not
    # sent yet are replayed again, not blamed.
    @pytest.mark.parametrize("batch_size", [2, 5])
    def test_the_poisoned_stream_is_named_and_every_other_row_is_there(
            self, tmp_path: Path, name: str, how: str, batch_size: int) -> None:
        poisoned, ids = corpus(tmp_path / "rec")
        report, rows = rows_by_id([tmp_path / "rec"], f"{HOSTILE}:{name}", processes=2,
                                  batch_size=batch_size)
        assert (report.mode, report.streams, report.errors) == ("processes", 5, 1)
        assert sorted(rows) == sorted(ids)
        failed = rows[f"{poisoned}#1"]["error"]
        assert failed.startswith(f"WorkerDied: the process replaying this stream {how}")
        assert "2 time(s)" in failed  # retried once, bounded
        assert [rows[i]["delivered"] for i in ids] == [2, 0, 3, 2, 2]
        assert report.error_samples == [f"{poisoned}#1: {failed}"]

    def test_a_worker_lost_once_costs_nothing(self, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
        marker = tmp_path / "died-once"
        monkeypatch.setenv("STREAMKIT_TEST_FLAKY", str(marker))
        _, ids = corpus(tmp_path / "rec")
        report, rows = rows_by_id([tmp_path / "rec"], f"{HOSTILE}:FLAKY", processes=2)
        assert marker.exists()  # it did die once
        assert (report.streams, report.errors) == (5, 0)
        assert [rows[i]["delivered"] for i in ids] == [2, 3, 3, 2, 2]

    def test_a_stream_no_signal_reaches_is_ended_by_a_kill(self, tmp_path: Path) -> None:
        poisoned, ids = corpus(tmp_path / "rec")
        report, rows = rows_by_id([tmp_path / "rec"], f"{HOSTILE}:DEAF", processes=2,
                                  deadline=0.2)
        assert (report.streams, report.errors) == (5, 1)
        failed = rows[f"{poisoned}#1"]["error"]
        assert failed.startswith("DeadlineExceeded: the stream did not finish within 0.2 s")
        assert "worker process was killed" in failed
        assert [rows[i]["delivered"] for i in ids] == [2, 0, 3, 2, 2]


# ------------------------------------------------------------------------ sources (point 6)


def _file(streams: list[list[bytes]]) -> bytes:
    return b"".join(line + b"\n" for s in streams for line in s)


class TestSourcesKeepIdsStable:
    @settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(victim=st.integers(1, 3), cut=st.integers(0, 60), data=st.data())
    def test_a_corrupt_start_line_fails_alone_and_no_id_moves(
            self, tmp_path: Path, victim: int, cut: int, data: st.DataObject) -> None:
        streams = [stream_lines(f"r{n}", *"ab"[: n % 2 + 1]) for n in range(4)]
        start = streams[victim][0]
        keep = len(b'{"type": "start"') + min(cut, len(start) - len(b'{"type": "start"') - 1)
        garbage = data.draw(st.sampled_from([b"", b"\x00\xff", b'}{"', b"]"]))
        broken = [list(s) for s in streams]
        broken[victim][0] = start[:keep] + garbage
        path = tmp_path / "corrupt.jsonl"
        path.write_bytes(_file(streams))
        before = {s.id: s.chunks for s in read_streams([path])}
        path.write_bytes(_file(broken))
        after = {s.id: s.chunks for s in read_streams([path])}
        assert list(after) == list(before) == [f"{path}#{n}" for n in range(4)]
        assert {k: v for k, v in after.items() if k != f"{path}#{victim}"} == \
            {k: v for k, v in before.items() if k != f"{path}#{victim}"}
        _, rows = rows_by_id([path], [], processes=1)
        assert rows[f"{path}#{victim}"]["error"].startswith("ChunkDecodeError")
        assert [rows[f"{path}#{n}"]["error"] is None for n in range(4)].count(False) == 1

    def test_a_dangling_symlink_is_a_failed_row_naming_it(self, tmp_path: Path) -> None:
        _, ids = corpus(tmp_path / "rec")
        link = tmp_path / "rec" / "gone.jsonl"
        link.symlink_to(tmp_path / "moved-away.jsonl")
        loop = tmp_path / "rec" / "sub"
        loop.symlink_to(loop)
        report, rows = rows_by_id([tmp_path / "rec"], [], processes=1)
        assert sorted(rows) == sorted([*ids, f"{link}#0", f"{loop}#0"])
        assert (report.streams, report.errors) == (7, 2)
        assert rows[f"{link}#0"]["error"] == (
            f"InvalidArgument: {str(link)!r} is a symbolic link to "
            f"{str(tmp_path / 'moved-away.jsonl')!r}, which does not exist (or is a loop of "
            f"links); nothing of it was replayed")
        single, single_rows = rows_by_id([link], [], processes=1)
        assert (single.streams, single.errors, list(single_rows)) == (1, 1, [f"{link}#0"])

    def test_the_readme_ray_cluster_does_not_take_the_redis_port(self) -> None:
        readme = (REPO / "README.md").read_text(encoding="utf-8")
        head = re.findall(r"ray start --head\b[^\n#]*", readme)
        join = re.findall(r"ray start --address\s+\S+", readme)
        assert head and join
        for line in head:
            port = re.search(r"--port[= ](\d+)", line)
            assert port is not None and port.group(1) != "6379", line
            assert all(j.endswith(f":{port.group(1)}") for j in join), join
        assert "6379" in readme  # the Redis of the same README keeps its port


# ---------------------------------------------------------------------------------------- Ray


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A local Ray (2 CPUs) whose workers see only what is installed: no PYTHONPATH, so a
    pipeline module of the tests must travel with the job."""
    try:
        import ray
    except ImportError:
        pytest.skip("the ray extra is not installed (pip install 'streamkit[ray]')")
    # No token authentication for this private test cluster: the token lives in a file every
    # Ray started on this host rewrites, so a command line started later could read another's.
    auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    saved = os.environ.pop("PYTHONPATH", None)
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        if saved is not None:
            os.environ["PYTHONPATH"] = saved
    try:
        yield ray
    finally:
        ray.shutdown()
        if auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth


def _read_rows(out: Path, fmt: str) -> list[dict[str, Any]]:
    if fmt == "json":
        return [json.loads(line) for f in sorted(out.iterdir())
                for line in f.read_text().splitlines()]
    import pyarrow.parquet as pq

    return [row for f in sorted(out.iterdir()) for row in pq.read_table(f).to_pylist()]


class TestRayJob:
    def test_a_poisoned_stream_is_named_and_the_job_completes(self, tmp_path: Path,
                                                              ray_cluster: Any) -> None:
        poisoned, ids = corpus(tmp_path / "rec")
        link = tmp_path / "rec" / "gone.jsonl"
        link.symlink_to(tmp_path / "nowhere")
        report, rows = rows_by_id([tmp_path / "rec"], f"{HOSTILE}:KILL", ray=True,
                                  batch_size=2)
        local, local_rows = rows_by_id([tmp_path / "rec"], f"{HOSTILE}:KILL", processes=2,
                                       batch_size=2)
        assert (report.mode, report.streams, report.errors) == ("ray", 6, 2)
        assert rows == local_rows and report.counts() == local.counts()
        assert rows[f"{poisoned}#1"]["error"].startswith(
            "WorkerDied: the process replaying this stream was killed by SIGKILL")
        assert "symbolic link" in rows[f"{link}#0"]["error"]
        assert sorted(rows) == sorted([*ids, f"{link}#0"])

    @pytest.mark.parametrize("name", ["SLEEP", "DEAF"])
    def test_the_deadline_holds_on_ray_workers(self, tmp_path: Path, ray_cluster: Any,
                                               name: str) -> None:
        poisoned, _ = corpus(tmp_path / "rec")
        report, rows = rows_by_id([tmp_path / "rec"], f"{HOSTILE}:{name}", ray=True,
                                  deadline=0.2)
        assert (report.streams, report.errors) == (5, 1)
        assert rows[f"{poisoned}#1"]["error"].startswith("DeadlineExceeded")

    @pytest.mark.parametrize("fmt", ["json", "parquet"])
    def test_workers_read_a_uri_write_the_rows_and_sum_them(
            self, tmp_path: Path, ray_cluster: Any, fmt: str,
            monkeypatch: pytest.MonkeyPatch) -> None:
        # A pipeline module the cluster does not have: only this driver's sys.path has it.
        shipped = tmp_path / "shipped"
        shipped.mkdir()
        (shipped / "replay_shipped_guard.py").write_text(textwrap.dedent('''
            from streamkit import ops
            def is_e(part):
                return getattr(getattr(part, "payload", None), "text", None) == "e"
            PIPELINE = [ops.drop(is_e, id="drop-e")]
        '''))
        monkeypatch.syspath_prepend(str(shipped))
        sys.modules.pop("replay_shipped_guard", None)
        _, ids = corpus(tmp_path / "rec")
        uri = (tmp_path / "rec").as_uri()  # file:///...: the pyarrow.fs path of s3:// gs://
        out = tmp_path / "rows"
        report = replay([uri], "replay_shipped_guard:PIPELINE", ray=True, output=out,
                        output_format=fmt, batch_size=2)
        local = replay([uri.removeprefix("file://")], "replay_shipped_guard:PIPELINE",
                       processes=1)
        assert report.counts() == local.counts()
        assert report.processors["drop-e"].dropped == 1 and report.streams == 5
        written = _read_rows(out, fmt)
        assert sorted(r["stream"] for r in written) == sorted(
            "file://" + i for i in ids)
        assert sum(r["processors"]["drop-e"]["dropped"] for r in written) == 1

    def test_output_must_be_new_or_empty_and_needs_ray(self, tmp_path: Path) -> None:
        (tmp_path / "old").mkdir()
        (tmp_path / "old" / "rows.json").write_text("{}\n")
        corpus(tmp_path / "rec")
        with pytest.raises(InvalidArgument, match="pass ray= too"):
            replay([tmp_path / "rec"], [], output=tmp_path / "new")
        pytest.importorskip("ray", reason="the ray extra is not installed")
        with pytest.raises(InvalidArgument, match="already exists and is not an empty"):
            replay([tmp_path / "rec"], [], ray=True, output=tmp_path / "old")

    def test_the_command_line_writes_the_rows_on_the_workers(self, tmp_path: Path,
                                                             ray_cluster: Any) -> None:
        # --output relative to the command's directory, not to a Ray worker's
        _, ids = corpus(tmp_path / "rec")
        out = tmp_path / "rows"
        address = ray_cluster.get_runtime_context().gcs_address
        done = subprocess.run(
            [sys.executable, "-m", "streamkit", "replay", str(tmp_path / "rec"), "--pipeline",
             f"{HOSTILE}:EXIT", "--ray", address, "--output", "rows", "--no-progress",
             "--batch-size", "2"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True, text=True, timeout=600)
        assert done.returncode == 1, done.stderr  # 1: a stream failed (the poisoned one)
        assert "5 streams" in done.stdout and "1 failed" in done.stdout
        written = _read_rows(out, "json")
        assert sorted(r["stream"] for r in written) == sorted(ids)
        [failed] = [r for r in written if r["error"]]
        assert failed["stream"] == ids[1] and failed["error"].startswith("WorkerDied")
