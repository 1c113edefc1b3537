"""Replay on real recordings and real workers: a generated dataset of 10,000 recorded streams
replayed on every core and on a local Ray instance (2 CPUs) with identical counts, which match
what the generator put in; files of several streams, SSE, memory threads, the command line, and
the measuring rules themselves.

One Ray instance serves the module (starting Ray takes seconds); it is shut down at the end and
no Ray process may be left behind.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit import Agent, ops
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.memory import Memory, PostgresStore, SQLiteStore
from streamkit.replay import MemorySource, RecordedStream, read_streams, replay
from streamkit.replay._run import replay_all
from streamkit.testing import ScriptedModel, text
from streamkit.wire import decode, encode_sse

from .conftest import REPO, as_mode
from .replay_pipelines import FORBIDDEN, guards

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")

PIPELINE = "tests.replay_pipelines:guards"
N_STREAMS = 10_000


# ------------------------------------------------------------------------------- the dataset


@dataclass
class Dataset:
    root: Path
    streams: int = 0
    reasoning: int = 0      # reasoning deltas (dropped by drop-reasoning)
    colour: int = 0         # deltas with "colour" (rewritten by american)
    emails: int = 0         # e-mail addresses (redacted by pii)
    forbidden: int = 0      # streams with the forbidden word (tripped)
    chunks: int = 0
    ids: list[str] = field(default_factory=list)


def _stream(rng: random.Random, n: int, data: Dataset) -> list[dict[str, Any]]:
    """One small recorded stream; ``data`` counts what the pipeline should find in it."""
    run = {"runId": f"run-{n}", "from": "AGENT"}
    chunks: list[dict[str, Any]] = [
        {"type": "start", **run, "payload": {"id": "support", "messageId": f"m-{n}"}}]
    if rng.random() < 0.3:
        chunks.append({"type": "reasoning-delta", **run,
                       "payload": {"id": "rs-0", "text": "Look it up."}})
        data.reasoning += 1
    words = ["Your", "order", "ships", "today."]
    if rng.random() < 0.4:
        words.insert(1, "colour")
        data.colour += 1
    if rng.random() < 0.25:
        words.append(f"Write to user{n}@example.com please.")
        data.emails += 1
    trips = rng.random() < 0.1
    if trips:
        words.append(FORBIDDEN)
        data.forbidden += 1
    chunks += [{"type": "text-delta", **run, "payload": {"id": "txt-0", "text": w + " "}}
               for w in words]
    chunks.append({"type": "finish", **run, "payload": {
        "messageId": f"m-{n}", "stepResult": {"reason": "stop", "isContinued": False},
        "metadata": {}, "output": {"usage": {}},
        "messages": {"all": [], "user": [], "nonUser": []}}})
    data.streams += 1
    data.chunks += len(chunks)
    return chunks


def make_dataset(root: Path, n: int, *, files: int = 20, sse_every: int = 5) -> Dataset:
    """``n`` streams over ``files`` files, several streams back to back in each; every
    ``sse_every``-th file is SSE (ending each stream with ``[DONE]``), the rest JSON lines."""
    rng = random.Random(20)
    data = Dataset(root)
    root.mkdir(parents=True, exist_ok=True)
    per_file = -(-n // files)
    made = 0
    for f in range(files):
        count = min(per_file, n - made)
        streams = [_stream(rng, made + k, data) for k in range(count)]
        made += count
        if f % sse_every == sse_every - 1:
            path = root / f"part-{f:03d}.sse"
            body = b"".join(
                b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in s)
                + b"data: [DONE]\n\n" for s in streams)
        else:
            path = root / f"part-{f:03d}.jsonl"
            body = b"".join(json.dumps(c).encode() + b"\n" for s in streams for c in s)
        path.write_bytes(body)
        data.ids += [f"{path}#{k}" for k in range(count)]
    return data


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("recordings"), N_STREAMS)


@pytest.fixture(scope="module")
def local_report(dataset: Dataset) -> Any:
    """The dataset replayed on every core (worker processes), once for the module."""
    return replay([dataset.root], PIPELINE, batch_size=500)


def _ray_processes() -> dict[int, str]:
    """This test process's descendants (Ray's gcs, raylet, workers...), pid → command line."""
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            found[child.pid] = " ".join(child.cmdline())[:120]
        except psutil.Error:  # exited meanwhile
            pass
    return found


def _alive(pids: dict[int, str]) -> dict[int, str]:
    alive = {}
    for pid, cmd in pids.items():
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive[pid] = cmd
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """One local Ray instance (2 CPUs) for the module; shut down after it, leaving no Ray
    process behind: every process Ray started for us (gcs, raylet, workers — recorded while
    it ran, so one that outlives its parent is still seen) must be gone."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    before = set(_ray_processes())
    # No token authentication for this private test cluster: the token lives in a file every
    # Ray started on this host rewrites, so the command line below could read another's.
    auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                 [str(REPO), *(p for p in sys.path if p)])}})
    started = {pid: cmd for pid, cmd in _ray_processes().items() if pid not in before}
    try:
        yield ray
    finally:
        started.update({pid: cmd for pid, cmd in _ray_processes().items()
                        if pid not in before})
        ray.shutdown()
        if auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth
        left = _alive(started)
        for _ in range(400):  # bounded: Ray's processes exit moments after shutdown()
            if not left:
                break
            time.sleep(0.05)
            left = _alive(started)
        assert started and left == {}, f"Ray processes left behind: {left}"


# ------------------------------------------------------------------------------- 10,000 streams


class TestTenThousandStreams:
    def test_every_core_finds_what_the_generator_put_in(self, dataset: Dataset,
                                                        local_report: Any) -> None:
        r = local_report
        assert (r.mode, r.workers) == ("processes", min(os.cpu_count() or 1, 20))
        assert (r.streams, r.chunks, r.errors) == (N_STREAMS, dataset.chunks, 0)
        p = r.processors
        assert list(p) == ["drop-reasoning", "american", "pii", "forbidden"]
        assert p["drop-reasoning"].dropped == dataset.reasoning
        assert p["american"].rewritten == dataset.colour
        assert p["pii"].redactions == dataset.emails
        assert p["forbidden"].tripwires == r.tripped == dataset.forbidden
        # each processor sees what the one before let out
        assert p["american"].chunks_in == p["drop-reasoning"].chunks_out
        assert p["pii"].chunks_in == p["american"].chunks_out
        assert p["forbidden"].chunks_in == p["pii"].chunks_out

    def test_ray_gives_identical_counts(self, dataset: Dataset, local_report: Any,
                                        local_ray: Any) -> None:
        on_ray = replay([dataset.root], PIPELINE, ray=True, batch_size=500)
        assert (on_ray.mode, on_ray.workers) == ("ray", 2)
        assert on_ray.counts() == local_report.counts()
        assert local_ray.is_initialized()  # a Ray it found running is left running

    def test_stream_rows_are_the_same_everywhere(self, dataset: Dataset,
                                                 local_ray: Any) -> None:
        def rows(**kw: Any) -> dict[str, Any]:
            got: dict[str, Any] = {}
            replay(sources, PIPELINE, on_stream=lambda r: got.__setitem__(r["stream"], r),
                   batch_size=40, **kw)
            for row in got.values():
                for counts in row["processors"].values():
                    del counts["ns"]
            return got

        sources = sorted(dataset.root.glob("part-00[34].*"))  # one JSON-lines, one SSE file
        inline = rows(processes=1)
        assert set(inline) == {i for i in dataset.ids if Path(i.split("#")[0]) in sources}
        assert rows(processes=2) == inline
        assert rows(ray=True) == inline


# ------------------------------------------------------------------------------------ sources


def _chunks(*texts: str) -> list[dict[str, Any]]:
    run = {"runId": "r", "from": "AGENT"}
    return [{"type": "text-delta", **run, "payload": {"id": "t", "text": t}} for t in texts]


class TestSources:
    def test_start_chunks_split_a_file_and_a_file_without_one_is_one_stream(
            self, tmp_path: Path) -> None:
        data = make_dataset(tmp_path / "d", 7, files=1)
        single = tmp_path / "single.jsonl"
        single.write_text("\n".join(json.dumps(c) for c in _chunks("a", "b")) + "\n\n")
        streams = list(read_streams([tmp_path / "d", single]))
        assert [s.id for s in streams] == data.ids + [f"{single}#0"]
        assert [len(s.chunks) for s in streams][-1] == 2

    def test_sse_files_are_decoded_with_done_ending_a_stream(self, tmp_path: Path) -> None:
        path = tmp_path / "rec.sse"
        chunks = [decode(json.dumps(c)) for c in _chunks("x", "y")]
        path.write_bytes(b"".join(encode_sse(c) for c in chunks) + b"data: [DONE]\n\n"
                         + encode_sse(chunks[0]))
        assert [len(s.chunks) for s in read_streams([path])] == [2, 1]

    @pytest.mark.parametrize("source, error, match", [
        pytest.param("no/such/file.jsonl", InvalidArgument, "does not exist", id="missing"),
        pytest.param(42, InvalidType, "a replay source is a path", id="not-a-source"),
    ])
    def test_bad_sources_are_refused(self, source: Any, error: type[Exception],
                                     match: str) -> None:
        with pytest.raises(error, match=match):
            replay([source], PIPELINE, processes=1)

    @pytest.mark.parametrize("kind", ["sqlite", "postgres"])
    async def test_memory_threads_replay_their_assistant_messages(
            self, tmp_path: Path, kind: str, request: pytest.FixtureRequest) -> None:
        def new_store() -> Any:
            if kind == "sqlite":
                return SQLiteStore(tmp_path / "memory.db")
            return PostgresStore(request.getfixturevalue("pg_dsn"),
                                 schema=request.getfixturevalue("pg_schema"))

        async with Memory(new_store()) as memory:
            agent = Agent(id="a", model=ScriptedModel([
                text("Mail ada@example.com about the colour."), text(f"No. {FORBIDDEN}")]),
                memory=memory)
            await agent.generate("q1", thread_id="t1", resource_id="u1")
            await agent.generate("q2", thread_id="t1", resource_id="u1")
        source = MemorySource(new_store(), resource_ids=["u1"])
        streams = list(read_streams([source]))
        assert [s.id.split("/")[0] for s in streams] == ["t1", "t1"]
        report = replay(streams, PIPELINE, processes=1)
        assert report.counts()["processors"]["pii"]["redactions"] == 1
        assert report.processors["american"].rewritten == 1
        assert report.tripped == 1 and report.errors == 0

    def test_memory_source_needs_ids(self, tmp_path: Path) -> None:
        with pytest.raises(InvalidArgument, match="resource_ids"):
            MemorySource(SQLiteStore(tmp_path / "m.db"))


# ---------------------------------------------------------------------------- measuring rules


def _recorded(*texts: str, stream_id: str = "s") -> RecordedStream:
    return RecordedStream(stream_id, tuple(json.dumps(c).encode() for c in _chunks(*texts)))


class TestMeasuring:
    async def test_drop_rewrite_and_add_are_counted_per_processor(self, mode: str) -> None:
        def is_b(part: Any) -> bool:
            return part.payload.text == "b"

        def upper_c(text: str) -> str:
            return text.upper() if text == "c" else text

        def twice(part: Any) -> list[Any]:
            return [part, part] if part.payload.text == "d" else [part]

        pipeline = [ops.drop(as_mode(is_b, mode), id="drop-b"),
                    ops.map_text(as_mode(upper_c, mode), id="upper-c"),
                    ops.flat_map(as_mode(twice, mode), id="twice-d")]
        [row] = await replay_all(pipeline, [_recorded("a", "b", "c", "d")])
        counts = {pid: {k: v for k, v in c.items() if k != "ns"}
                  for pid, c in row["processors"].items()}
        zero = {"redactions": 0, "tripwires": 0}
        assert counts == {
            "drop-b": {"in": 4, "out": 3, "dropped": 1, "rewritten": 0, "added": 0, **zero},
            # map_text makes a new chunk for every delta; only a changed one is a rewrite
            "upper-c": {"in": 3, "out": 3, "dropped": 0, "rewritten": 1, "added": 0, **zero},
            "twice-d": {"in": 3, "out": 4, "dropped": 0, "rewritten": 0, "added": 1, **zero},
        }
        assert row["delivered"] == 4 and row["error"] is None

    async def test_a_tripwire_and_a_bad_chunk_are_reported_for_their_stream(self) -> None:
        bad = RecordedStream("bad", (b'{"type":"text-delta","payload":{}}',))
        rows = await replay_all(guards(), [
            _recorded("ok ", f"{FORBIDDEN} ", "never", stream_id="t"), bad])
        assert rows[0]["tripwire"] == {"processor": "forbidden", "reason": "forbidden word"}
        assert rows[0]["processors"]["forbidden"]["tripwires"] == 1
        assert rows[1]["error"].startswith("ChunkDecodeError")

    @settings(max_examples=40, deadline=None)
    @given(texts=st.lists(st.sampled_from(["a", "b", "colour", "x@y.io ", "d", " "]),
                          max_size=12))
    def test_counts_add_up_over_any_stream(self, texts: list[str]) -> None:
        def twice(part: Any) -> list[Any]:
            return [part, part] if part.payload.text == "d" else [part]

        pipeline = [ops.drop(lambda p: p.payload.text == "b", id="drop-b"),
                    ops.flat_map(twice, id="twice-d"),
                    guards()[2]]
        report = replay([_recorded(*texts)], pipeline, processes=1)
        previous_out = len(texts)
        for p in report.processors.values():
            c = p.counts()
            assert c["in"] == previous_out
            assert c["dropped"] + c["rewritten"] <= c["in"]
            assert c["rewritten"] + c["added"] <= c["out"]
            assert c["out"] - c["in"] == c["added"] - c["dropped"]
            previous_out = c["out"]
        assert report.delivered == previous_out


# --------------------------------------------------------------------------- API and the CLI


class TestApi:
    @pytest.mark.parametrize("kwargs, error, match", [
        pytest.param({"pipeline": "no_colon"}, InvalidArgument, "module:attribute",
                     id="pipeline-without-colon"),
        pytest.param({"pipeline": "tests.nope:X"}, InvalidArgument, "cannot be imported",
                     id="pipeline-module-missing"),
        pytest.param({"pipeline": "tests.replay_pipelines:NOPE"}, InvalidArgument,
                     "no attribute", id="pipeline-attribute-missing"),
        pytest.param({"batch_size": 0}, InvalidArgument, "batch_size", id="batch-size"),
        pytest.param({"processes": 0}, InvalidArgument, "processes", id="processes"),
        pytest.param({"ray": 3}, InvalidType, "ray must be", id="ray-type"),
    ])
    def test_bad_options_are_refused(self, kwargs: dict[str, Any], error: type[Exception],
                                     match: str) -> None:
        options = {"pipeline": PIPELINE, **kwargs}
        with pytest.raises(error, match=match):
            replay([_recorded("a")], options.pop("pipeline"), **options)

    def test_a_pipeline_that_cannot_be_pickled_is_refused_for_processes(self) -> None:
        local = [ops.drop(lambda p: False, id="never")]
        with pytest.raises(InvalidArgument, match="module:attribute"):
            replay([_recorded("a"), _recorded("b")], local, processes=2, batch_size=1)
        assert replay([_recorded("a")], local, processes=1).streams == 1

    def test_no_streams_is_an_empty_report(self, tmp_path: Path) -> None:
        report = replay([tmp_path], PIPELINE, ray=False)
        assert report.counts() == {
            "streams": 0, "chunks": 0, "delivered": 0, "tripped": 0, "errors": 0,
            "processors": {pid: dict.fromkeys(("in", "out", "dropped", "rewritten", "added",
                                               "redactions", "tripwires"), 0)
                           for pid in ("drop-reasoning", "american", "pii", "forbidden")}}

    def test_the_summary_table_names_every_processor(self) -> None:
        report = replay([_recorded("colour ")], PIPELINE, processes=1)
        table = report.summary()
        assert table.splitlines()[0].split()[:4] == ["processor", "in", "out", "dropped"]
        assert [line.split()[0] for line in table.splitlines()[2:6]] == [
            "drop-reasoning", "american", "pii", "forbidden"]
        assert "1 streams" in table.splitlines()[-1]


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "streamkit", "replay", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


class TestCommandLine:
    def test_json_lines_summary_table_and_progress(self, tmp_path: Path) -> None:
        data = make_dataset(tmp_path / "d", 300, files=3)
        out = tmp_path / "report.jsonl"
        done = _cli(str(tmp_path / "d"), "--pipeline", PIPELINE, "--json", str(out),
                    "--processes", "2", "--batch-size", "50")
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted(r["stream"] for r in lines[:-1]) == sorted(data.ids)
        summary = lines[-1]["summary"]
        assert summary["streams"] == 300 and summary["tripped"] == data.forbidden
        assert summary["processors"]["pii"]["redactions"] == data.emails
        assert "forbidden" in done.stdout and "300 streams" in done.stdout
        assert "300/300 streams 100%" in done.stderr

    def test_on_a_running_ray_cluster_by_address(self, tmp_path: Path, local_ray: Any) -> None:
        data = make_dataset(tmp_path / "d", 60, files=2)
        address = local_ray.get_runtime_context().gcs_address
        done = _cli(str(tmp_path / "d"), "--pipeline", PIPELINE, "--ray", address,
                    "--json", "-", "--no-progress")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.splitlines()[-1])["summary"]
        assert (summary["mode"], summary["streams"]) == ("ray", 60)
        assert summary["tripped"] == data.forbidden

    async def test_memory_threads_of_a_sqlite_file(self, tmp_path: Path) -> None:
        db = tmp_path / "memory.db"
        async with Memory(SQLiteStore(db)) as memory:
            agent = Agent(id="a", model=ScriptedModel([text("Write to ada@example.com.")]),
                          memory=memory)
            await agent.generate("q", thread_id="t1", resource_id="u1")
        done = _cli(f"sqlite:{db}", "--resource", "u1", "--pipeline", PIPELINE,
                    "--json", "-", "--no-progress", "--processes", "1")
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        assert rows[0]["stream"].startswith("t1/")
        assert rows[-1]["summary"]["processors"]["pii"]["redactions"] == 1

    def test_a_bad_pipeline_is_an_error_message_not_a_traceback(self, tmp_path: Path) -> None:
        done = _cli(str(tmp_path), "--pipeline", "nowhere:X")
        assert done.returncode == 2
        assert "error: pipeline 'nowhere:X'" in done.stderr and "Traceback" not in done.stderr
