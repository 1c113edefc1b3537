"""The repository keeps its promises: README commands, CI, public surface, module sizes, demo."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import streamkit
from streamkit._demo import run_demo

from .conftest import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    demo, tests = readme_commands()[:2]
    assert "streamkit demo" in demo and "pytest" in tests
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert tests in ci


def test_public_names_in_contract_exist() -> None:
    for name in ["Processor", "TripWire", "Agent", "DataChunk", "Chunk", "Message", "MessageList",
                 "get_text", "tool", "Tool", "StreamkitError", "ProcessorDefinitionError",
                 "ProcessorError", "ChunkDecodeError", "APICallError", "ToolError",
                 "MaxStepsExceeded", "ScriptExhausted", "ops"]:
        assert name in streamkit.__all__


def test_modules_stay_small() -> None:
    big = {str(p.relative_to(REPO)): n for p in REPO.glob("**/*.py")
           if ".venv" not in p.parts and (n := len(p.read_text().splitlines())) > 1000}
    assert big == {}, f"split these modules by purpose: {big}"


async def test_demo_streams_and_prints_the_processor_table() -> None:
    out = io.StringIO()
    result = await run_demo(out=out)
    text = out.getvalue()
    assert "[email]" in text and "ada@example.com" not in text  # redacted before the model
    assert "redact-tool-pii" in text and "process_tool_result" in text
    assert "hide-reasoning dropped 13" in text
    assert result.finish_reason == "stop" and result.text.startswith("Hi Ada!")


def test_demo_command_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "streamkit", "demo"], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "agent> " in proc.stdout and "finish: stop" in proc.stdout
