"""``python -m streamkit serve --workers N`` serves from N processes (issue 28, 4)."""

from __future__ import annotations

import concurrent.futures
import json
import re
import subprocess
import sys

import httpx
import pytest

from streamkit.errors import InvalidArgument, InvalidType
from streamkit.serve._cli import serve

from ._spawn import serving

WAIT = 20.0
BATCHES = 25  # bounded: 25 batches of 8 concurrent requests


def _pid_of(url: str) -> int:
    # A connection of its own per request (no keep-alive), so the kernel may hand each to
    # either worker.
    reply = httpx.post(f"{url}/api/agents/pid/generate", json={"messages": "which?"},
                       headers={"connection": "close"}, timeout=WAIT)
    assert reply.status_code == 200, reply.text[:300]
    found = re.fullmatch(r"pid (\d+)", reply.json()["text"])
    assert found, reply.json()["text"]
    return int(found.group(1))


def test_two_workers_both_serve_requests(tmp_path: object) -> None:
    with serving("tests.serve._pid_agent:agent", "--workers", "2") as url:
        pids: set[int] = set()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for _ in range(BATCHES):
                pids.update(pool.map(_pid_of, [url] * 8))
                if len(pids) == 2:
                    break
    assert len(pids) == 2, pids


def test_workers_share_a_sqlite_file_memory(tmp_path: object) -> None:
    # A thread made through one request is seen by every later one, whichever worker
    # answers it.
    path = f"{tmp_path}/workers.sqlite3"
    with serving("--demo", "--memory", path, "--workers", "2") as url:
        made = httpx.post(f"{url}/api/memory/threads", json={"resourceId": "u1",
                                                               "threadId": "shared"},
                          timeout=WAIT)
        assert made.status_code == 200, made.text
        for _ in range(10):
            got = httpx.get(f"{url}/api/memory/threads/shared", params={"resourceId": "u1"},
                            headers={"connection": "close"}, timeout=WAIT)
            assert got.status_code == 200, got.text


def test_several_workers_over_an_in_memory_store_are_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"':memory:' store \(support\).*SQLite file"):
        serve([], demo=True, memory_path=":memory:", workers=2, port=0)


@pytest.mark.parametrize("workers, error", [(0, InvalidArgument), (-1, InvalidArgument),
                                             (True, InvalidType), (1.5, InvalidType)])
def test_workers_must_be_a_positive_int(workers: object, error: type) -> None:
    with pytest.raises(error, match="workers must be an int >= 1"):
        serve([], demo=True, workers=workers, port=0)  # type: ignore[arg-type]


def test_the_command_line_refuses_workers_over_memory_with_a_clear_error() -> None:
    done = subprocess.run([sys.executable, "-m", "streamkit", "serve", "--demo", "--memory",
                           ":memory:", "--workers", "2", "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "error: --workers 2 with a SQLite ':memory:' store" in done.stderr


# ------------------------------------------------------------------ workers over shared backends

CONNECTION_TRIES = 40  # keep-alive connections opened, at most, to meet both workers


def _pid_over(client: httpx.Client) -> int:
    reply = client.post("/api/agents/pid/generate", json={"messages": "which?"})
    assert reply.status_code == 200, reply.text[:300]
    found = re.fullmatch(r"pid (\d+)", reply.json()["text"])
    assert found, reply.json()["text"]
    return int(found.group(1))


def _one_client_per_worker(url: str) -> list[tuple[httpx.Client, int]]:
    """Two keep-alive clients (one connection each) held by two different workers; the others
    opened on the way are closed. A connection stays with the worker that accepted it, which
    each client checks again on its second request."""
    found: dict[int, httpx.Client] = {}
    for _ in range(CONNECTION_TRIES):
        client = httpx.Client(base_url=url, timeout=WAIT,
                              limits=httpx.Limits(max_connections=1))
        pid = _pid_over(client)
        if pid in found:
            client.close()
            continue
        assert _pid_over(client) == pid  # the same connection, the same worker
        found[pid] = client
        if len(found) == 2:
            return list((c, p) for p, c in found.items())
    for client in found.values():
        client.close()
    raise AssertionError(f"{CONNECTION_TRIES} connections all went to worker(s) "
                         f"{sorted(found)}")


def test_two_workers_share_postgres_memory_and_redis_cache_and_budget(
        pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 28, 4: several workers serve as one server when the memory is in PostgreSQL and the
    # ResponseCache / CostGuard backends are in Redis. With per-process state (SQLite
    # ":memory:", InMemoryCache, InMemoryUsageStore) each assertion below fails: the second
    # worker would recall nothing, compute its own answer and find the budget untouched.
    monkeypatch.setenv("SK_TEST_PG_DSN", pg_dsn)
    monkeypatch.setenv("SK_TEST_PG_SCHEMA", pg_schema)
    monkeypatch.setenv("SK_TEST_REDIS_URL", redis_url)
    monkeypatch.setenv("SK_TEST_PREFIX", redis_prefix)
    with serving("tests.serve._shared_agents:agents", "--workers", "2") as url:
        (a, pid_a), (b, pid_b) = _one_client_per_worker(url)
        try:
            assert pid_a != pid_b
            # Memory: a turn stored through worker A is recalled through worker B.
            turn = {"threadId": "t-shared", "resourceId": "u1"}
            first = a.post("/api/agents/mem/generate", json={"messages": "banana", **turn})
            assert first.status_code == 200, first.text[:300]
            assert first.json()["text"] == f"pid {pid_a} recalled: "
            second = b.post("/api/agents/mem/stream", json={"messages": "cherry", **turn})
            assert second.status_code == 200, second.text[:300]
            said = "".join(json.loads(line[6:])["payload"]["text"]
                           for line in second.text.split("\n\n")
                           if line.startswith('data: {"type":"text-delta"'))
            assert said == f"pid {pid_b} recalled: banana"
            listed = a.get("/api/memory/threads/t-shared/messages",
                           params={"resourceId": "u1"})
            assert listed.status_code == 200, listed.text[:300]
            texts = [json.dumps(m["content"]) for m in listed.json()["messages"]]
            assert sum("cherry" in t for t in texts) == 1  # B's turn, read through A
            # ResponseCache: the answer computed on worker A is replayed on worker B.
            ask = {"messages": "opening hours?", "resourceId": "u2"}
            computed = a.post("/api/agents/cached/generate", json=ask)
            replayed = b.post("/api/agents/cached/generate", json=ask)
            assert computed.json()["text"] == f"pid {pid_a} computed"
            assert replayed.json()["text"] == f"pid {pid_a} computed"
            # CostGuard: the 40-token budget spent on worker A is spent on worker B too.
            spend = {"messages": "go", "resourceId": "u3"}
            spent = a.post("/api/agents/budget/generate", json=spend)
            assert spent.status_code == 200, spent.text[:300]
            assert "tripwire" not in spent.json() and spent.json()["text"].count("word") == 60
            refused = b.post("/api/agents/budget/generate", json=spend)
            assert refused.status_code == 200, refused.text[:300]
            assert refused.json()["tripwire"]["processorId"] == "cost-guard", refused.json()
            assert refused.json()["text"] == ""
        finally:
            a.close()
            b.close()
