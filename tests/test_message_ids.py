"""Message ids and timestamps: random version-4 UUIDs drawn in batches (unique across threads
and forked processes) and whole-millisecond UTC timestamps, as JavaScript writes them."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from streamkit._message_model import _new_id
from streamkit.messages import Message


def test_new_ids_are_random_version_4_uuids_in_canonical_text() -> None:
    ids = [_new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text  # lower-case hex, dashes where uuid puts them
    # every variant digit (8, 9, a, b) occurs: the two random bits under it are kept
    assert {text[19] for text in ids} == set("89ab")


def test_new_ids_drawn_in_batches_are_unique_across_threads() -> None:
    # Ids come from a shared batch; two threads must never be handed the same one.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        batches = list(pool.map(lambda _: [_new_id() for _ in range(500)], range(8)))
    ids = [i for batch in batches for i in batch]
    assert len(set(ids)) == len(ids) == 4000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is not available here")
def test_a_forked_child_does_not_hand_out_its_parents_next_ids() -> None:
    _new_id()  # the batch now holds ids the parent has not used yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next ids and leave at once
        os.write(write, "\n".join(_new_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split("\n"))
    os.waitpid(pid, 0)
    parent = {_new_id() for _ in range(8)}
    assert len(child) == 8 and not child & parent


def test_message_timestamps_are_whole_milliseconds_of_utc_now() -> None:
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    stamp = Message.user("x").created_at
    after = datetime.now(UTC)
    assert stamp.tzinfo is not None and stamp.utcoffset() == timedelta(0)
    assert stamp.microsecond % 1000 == 0
    assert before <= stamp <= after
