"""``python -m streamkit serve --workers N`` serves from N processes (issue 28, 4)."""

from __future__ import annotations

import concurrent.futures
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
