"""``python -m streamkit serve --workers N`` serves from N processes (issue 28, 4)."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import json
import os
import re
import socket
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


# ------------------------------------------------------------------ connections spread evenly

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="SO_REUSEPORT spreads connections on Linux only")
BURST = 40  # keep-alive connections opened at once


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].rstrip("/"))


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the sockets listening on ``port`` (``/proc/net/tcp``, state 0A)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                cols = row.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    found.add(cols[9])
    return found


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                out.add(target[len("socket:["):-1])
    return out


@linux_only
def test_each_worker_listens_on_a_socket_of_its_own() -> None:
    # One socket shared by all workers lets the first to wake accept every waiting connection
    # (docs/serving.md, "Several workers"); with a socket each, the kernel spreads them.
    with serving("tests.serve._pid_agent:agent", "--workers", "2") as url:
        clients = _one_client_per_worker(url)
        try:
            listening = _listening_inodes(_port_of(url))
            held = {pid: _socket_inodes(pid) & listening for _, pid in clients}
        finally:
            for client, _ in clients:
                client.close()
    assert len(listening) == 2, listening
    assert all(len(inodes) == 1 for inodes in held.values()), held
    assert set.union(*held.values()) == listening, (held, listening)


def _request(body: bytes) -> bytes:
    return (b"POST /api/agents/pid/generate HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body))


def _pid_of_reply(sock: socket.socket) -> int:
    data = b""
    while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + int(
            re.search(rb"content-length: (\d+)", data, re.I).group(1)):  # type: ignore[union-attr]
        more = sock.recv(65536)
        assert more, data
        data += more
    found = re.search(rb'"text":"pid (\d+)"', data)
    assert found, data[:400]
    return int(found.group(1))


@linux_only
def test_a_burst_of_keep_alive_connections_spreads_over_the_workers() -> None:
    # 40 clients connect at once, then each asks which worker holds its connection. With one
    # shared socket this split 46/4 and 49/1 (50 clients); by the kernel's hash each worker
    # gets about half (binomial: fewer than 6 of 40 on one is ~1e-6).
    with serving("tests.serve._pid_agent:agent", "--workers", "2") as url:
        port = _port_of(url)
        socks = [socket.create_connection(("127.0.0.1", port), timeout=WAIT)
                 for _ in range(BURST)]
        try:
            for sock in socks:
                sock.sendall(_request(b'{"messages": "which?"}'))
            pids = collections.Counter(_pid_of_reply(sock) for sock in socks)
        finally:
            for sock in socks:
                sock.close()
    assert len(pids) == 2 and min(pids.values()) >= 6, pids


def test_a_port_another_process_listens_on_is_refused_with_several_workers(
        tmp_path: object) -> None:
    # The port is checked alone first: joining another process's SO_REUSEPORT group would
    # silently take half of its connections.
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with other:
        if hasattr(socket, "SO_REUSEPORT"):
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        port = other.getsockname()[1]
        with pytest.raises(InvalidArgument, match=f"cannot listen on 127.0.0.1:{port}"):
            serve([], demo=True, memory_path=f"{tmp_path}/m.sqlite3", workers=2, port=port)
