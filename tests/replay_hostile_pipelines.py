"""Processors that misbehave on one record, for ``tests/test_replay_hostile.py`` (named as
``tests.replay_hostile_pipelines:ATTRIBUTE`` so worker processes can import them)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from typing import Any

#: The text of the one chunk the processors below hang on.
POISON = "poison"


def _is_poison(part: Any) -> bool:
    return getattr(getattr(part, "payload", None), "text", None) == POISON


class Spin:
    """A plain ``def`` hook that loops for ever on the poisoned chunk (holds the event loop)."""

    id = "spin"

    def process_output_stream(self, part: Any) -> Any:
        while _is_poison(part):
            pass
        return part


class Wait:
    """An ``async def`` hook that waits for ever on the poisoned chunk (the loop stays free)."""

    id = "wait"

    async def process_output_stream(self, part: Any) -> Any:
        if _is_poison(part):
            await asyncio.Event().wait()
        return part


class Slow:
    """Every chunk takes half a second: a replay that is still running when it is stopped."""

    id = "slow"

    def process_output_stream(self, part: Any) -> Any:
        time.sleep(0.5)
        return part


SPIN = [Spin()]
WAIT = [Wait()]
SLOW = [Slow()]


class Backtrack:
    """A regular expression that backtracks for ever (well, for 2**40 steps) on the poisoned
    chunk: a C call that holds the event loop, as a bad guard pattern does."""

    id = "backtrack"

    def process_output_stream(self, part: Any) -> Any:
        if _is_poison(part):
            re.match(r"(a+)+$", "a" * 40 + "!")
        return part


class Sleep:
    """``time.sleep`` for an hour on the poisoned chunk: a blocking call in a plain ``def``."""

    id = "sleep"

    def process_output_stream(self, part: Any) -> Any:
        if _is_poison(part):
            time.sleep(3600)
        return part


BACKTRACK = [Backtrack()]
SLEEP = [Sleep()]


class Exit:
    """``os._exit(3)`` on the poisoned chunk: a processor that ends its process."""

    id = "exit"

    def process_output_stream(self, part: Any) -> Any:
        if _is_poison(part):
            os._exit(3)
        return part


class Kill:
    """``SIGKILL`` to its own process on the poisoned chunk: what the kernel's OOM killer
    does to a stream that takes all the memory."""

    id = "kill"

    def process_output_stream(self, part: Any) -> Any:
        if _is_poison(part):
            os.kill(os.getpid(), signal.SIGKILL)
        return part


class Flaky:
    """Ends its process on the poisoned chunk the first time only (the file named by
    ``$STREAMKIT_TEST_FLAKY`` records that it did): a worker lost once, by bad luck."""

    id = "flaky"

    def process_output_stream(self, part: Any) -> Any:
        marker = os.environ.get("STREAMKIT_TEST_FLAKY", "")
        if _is_poison(part) and marker and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write("died once\n")
            os._exit(3)
        return part


class Deaf:
    """Retries for ever on the poisoned chunk, swallowing every exception — the deadline's
    too: no signal ends it, only a kill of its process does."""

    id = "deaf"

    def process_output_stream(self, part: Any) -> Any:
        while _is_poison(part):
            try:
                time.sleep(0.05)
            except BaseException:  # noqa: BLE001, S112 - the point of this processor
                continue
        return part


EXIT = [Exit()]
KILL = [Kill()]
FLAKY = [Flaky()]
DEAF = [Deaf()]
