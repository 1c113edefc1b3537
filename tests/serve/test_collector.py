"""The ``serve`` command sets its processes' cyclic collector up for serving (``tune_collector``):
start-up objects frozen, the young generation collected after 10,000 new containers, not 700."""

from __future__ import annotations

import gc
import re
import subprocess
import sys

import httpx

from streamkit.serve._cli import YOUNG_COLLECTION_THRESHOLD

from ._spawn import serving


def _collector_of(url: str) -> tuple[int, int]:
    reply = httpx.post(f"{url}/api/agents/gc/generate", json={"messages": "how?"}, timeout=20)
    assert reply.status_code == 200, reply.text[:300]
    found = re.fullmatch(r"threshold (\d+) frozen (\d+)", reply.json()["text"])
    assert found, reply.json()["text"]
    return int(found.group(1)), int(found.group(2))


def test_served_process_collects_young_objects_less_often_and_froze_start_up() -> None:
    with serving("tests.serve._gc_agent:agent") as url:
        threshold, frozen = _collector_of(url)
    assert threshold == YOUNG_COLLECTION_THRESHOLD != gc.get_threshold()[0]
    assert frozen > 1000  # the modules and the app, at least


def test_each_worker_is_tuned() -> None:
    # The workers are forked after the tuning: each inherits it.
    with serving("tests.serve._gc_agent:agent", "--workers", "2") as url:
        answers = {_collector_of(url)[0] for _ in range(6)}
    assert answers == {YOUNG_COLLECTION_THRESHOLD}


def test_tuning_keeps_the_older_generations_thresholds() -> None:
    code = ("import gc; gc.set_threshold(700, 7, 9); from streamkit.serve._cli import "
            "tune_collector; tune_collector(); print(gc.get_threshold())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == f"({YOUNG_COLLECTION_THRESHOLD}, 7, 9)"
