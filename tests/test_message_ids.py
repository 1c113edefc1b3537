"""Message ids and timestamps: random version-4 UUIDs drawn in batches (unique across threads
and forked processes) and whole-millisecond UTC timestamps, as JavaScript writes them."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit._message_model import _IDS_PER_DRAW, _new_id, _v4_texts
from streamkit.messages import Message, format_timestamp


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


@given(st.lists(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                             timezones=st.one_of(st.none(), st.just(UTC), st.timezones())),
                max_size=40))
def test_format_timestamp_remembers_nothing_that_changes_its_answer(
        values: list[datetime]) -> None:
    # UTC times are kept once formatted (a bounded dict): asked again, in any order, each
    # answer is still the rule's, and the dict never grows past its bound.
    from streamkit import _message_model

    for value in values + values[::-1]:
        utc = value.astimezone(UTC)
        spec = "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
        assert format_timestamp(value) == utc.replace(tzinfo=None).isoformat(
            timespec=spec) + "Z"
    assert len(_message_model._stamps) <= _message_model._STAMPS_KEPT


def test_a_naive_timestamp_follows_the_local_zone_when_it_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A naive time is local time, so it is never kept: the same value formats anew after the
    # zone changes.
    import time

    value = datetime(2026, 6, 1, 12, 0, 0)
    try:
        monkeypatch.setenv("TZ", "UTC")
        time.tzset()
        first = format_timestamp(value)
        monkeypatch.setenv("TZ", "Asia/Tokyo")
        time.tzset()
        second = format_timestamp(value)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert (first, second) == ("2026-06-01T12:00:00.000Z", "2026-06-01T03:00:00.000Z")


@given(st.binary(min_size=16 * _IDS_PER_DRAW, max_size=16 * _IDS_PER_DRAW))
def test_a_draw_formats_as_uuid4_of_the_same_bytes(draw: bytes) -> None:
    # The bits are set on the whole draw at once and the text cut by a regex: each id must be
    # exactly what uuid makes of its 16 bytes as a version 4 UUID.
    expected = [str(uuid.UUID(bytes=draw[i:i + 16], version=4))
                for i in range(0, len(draw), 16)]
    assert list(_v4_texts(draw)) == expected
