"""Fixtures for the real servers: PostgreSQL and Redis, each skipped with a printed reason when
it cannot be reached, each test in its own schema / key prefix, dropped afterwards.

Other suites (other checkouts) may use the same servers at the same time, so every name made
here carries this session's prefix (``streamkit_t<pid>_<random>``), and the session's end drops
whatever is left with that prefix.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import redis

PG_DSN = os.environ.get("STREAMKIT_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("STREAMKIT_REDIS_URL", "redis://127.0.0.1:6379/0")
SESSION = f"streamkit_t{os.getpid()}_{secrets.token_hex(3)}"

_counter = iter(range(1, 1_000_000))


def error_text(exc: BaseException, limit: int = 300) -> str:
    """An error's message on one line for a skip reason: whitespace runs (psycopg's messages
    span lines) become one space, and a message over ``limit`` characters is cut at a word
    boundary, never mid-word, with `` …`` saying that more was left out."""
    text = " ".join(str(exc).split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[:cut if cut > 0 else limit] + " …"


def _drop_schemas(dsn: str, like: str) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                            (like,)).fetchall()
        for (name,) in rows:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """The PostgreSQL DSN (``STREAMKIT_PG_DSN``, default the local test server); skips the test
    with the connection error when the server cannot be reached."""
    try:
        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL not reachable at {PG_DSN} ({type(exc).__name__}: "
                    f"{error_text(exc)}); set STREAMKIT_PG_DSN")
    yield PG_DSN
    _drop_schemas(PG_DSN, SESSION + "%")


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A schema name for this test alone; the schema (tables and all) is dropped afterwards."""
    name = f"{SESSION}_{next(_counter)}"
    yield name
    _drop_schemas(pg_dsn, name)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The Redis URL (``STREAMKIT_REDIS_URL``, default the local server); skips with the error
    when it cannot be reached. The session's keys are deleted at the end."""
    client: Any = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis not reachable at {REDIS_URL} ({type(exc).__name__}: "
                    f"{error_text(exc)}); set STREAMKIT_REDIS_URL")
    yield REDIS_URL
    for key in client.scan_iter(match=f"{SESSION}*", count=500):
        client.delete(key)
    client.close()


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix for this test alone; its keys are deleted afterwards."""
    prefix = f"{SESSION}:{next(_counter)}:"
    yield prefix
    client: Any = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"{prefix}*", count=500):
        client.delete(key)
    client.close()
