"""Targets for ``python -m streamkit serve --workers 2`` over shared backends (the workers
test): ``tests.serve._shared_agents:agents``. Every answer names the process that ran it.

Read at import, from the environment the test sets:
    SK_TEST_PG_DSN, SK_TEST_PG_SCHEMA   the memory's PostgreSQL database and schema
    SK_TEST_REDIS_URL, SK_TEST_PREFIX   the Redis server and this test's key prefix

Agents:
    ``pid``     answers ``pid <pid>`` (which worker holds a connection)
    ``mem``     memory in PostgreSQL; answers ``pid <pid> recalled: <earlier user texts>``
    ``cached``  a ``ResponseCache`` in Redis shared by everyone; answers ``pid <pid> computed``
    ``budget``  a ``CostGuard`` ledger in Redis: 40 tokens per resource, an answer of 60 words
"""

from __future__ import annotations

import os
from typing import Any

from streamkit import Agent
from streamkit.memory import Memory, PostgresStore
from streamkit.testing import FunctionModel, text
from streamkit_operators import CostGuard, RedisCache, RedisUsageStore, ResponseCache

PG_DSN = os.environ["SK_TEST_PG_DSN"]
PG_SCHEMA = os.environ["SK_TEST_PG_SCHEMA"]
REDIS_URL = os.environ["SK_TEST_REDIS_URL"]
PREFIX = os.environ["SK_TEST_PREFIX"]


def _user_texts(request: Any) -> list[str]:
    return [m["content"] for m in request.prompt
            if m.get("role") == "user" and isinstance(m.get("content"), str)]


agents = [
    Agent(id="pid", model=FunctionModel(lambda request: text(f"pid {os.getpid()}"))),
    Agent(id="mem", model=FunctionModel(lambda request: text(
        f"pid {os.getpid()} recalled: {' | '.join(_user_texts(request)[:-1])}")),
          memory=Memory(PostgresStore(PG_DSN, schema=PG_SCHEMA), last_messages=20)),
    Agent(id="cached", model=FunctionModel(lambda request: text(f"pid {os.getpid()} computed")),
          input_processors=[ResponseCache(RedisCache(REDIS_URL, prefix=PREFIX + "cache:"),
                                          scope=None)]),
    Agent(id="budget", model=FunctionModel(lambda request: text(" ".join(["word"] * 60))),
          input_processors=[CostGuard(max_tokens=40, scope="resource", name="shared",
                                      store=RedisUsageStore(REDIS_URL,
                                                            prefix=PREFIX + "usage:"))]),
]
