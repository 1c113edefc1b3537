"""Small things a first hour trips on (issue 29, point 7): error wording, ordinals, the CLI's
missing-key message, skip reasons, what git ignores, the chat page's icon."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit import Agent, ops
from streamkit.__main__ import cli_message
from streamkit.chunks import TextDelta
from streamkit.errors import ProcessorError, ScriptExhausted, StreamkitError
from streamkit.models._scripted import ordinal
from streamkit.testing import ScriptedModel, text

from ._backends import error_text
from .conftest import REPO, P, as_mode


async def test_a_stream_hook_returning_a_string_is_reported_in_plain_words(mode: str) -> None:
    procs = [P("shout", process_output_stream=as_mode(lambda part: "HI", mode))]
    with pytest.raises(ProcessorError) as info:
        async with asyncio.timeout(30):
            [c async for c in ops.apply([TextDelta(id="t", text="hi")], procs)]
    assert "process_output_stream: it returned str 'HI'; expected a chunk" in info.value.message


@pytest.mark.parametrize("n, expected", [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"),
                                         (11, "11th"), (12, "12th"), (13, "13th"), (21, "21st"),
                                         (22, "22nd"), (103, "103rd"), (111, "111th")])
def test_ordinals(n: int, expected: str) -> None:
    assert ordinal(n) == expected


@given(st.integers(min_value=1, max_value=10**6))
def test_an_ordinal_is_the_number_and_its_english_suffix(n: int) -> None:
    word = ordinal(n)
    assert word[:-2] == str(n)
    teen = n % 100 in (11, 12, 13)
    assert word[-2:] == ("th" if teen else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th"))


async def test_a_script_called_a_third_time_says_3rd() -> None:
    model = ScriptedModel([text("one"), text("two")])
    agent = Agent(id="a", model=model)
    await agent.generate("a")
    await agent.generate("b")
    with pytest.raises(ScriptExhausted, match="called a 3rd time"):
        await agent.generate("c")


def _demo(model: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                        "ANTHROPIC_BASE_URL")}
    return subprocess.run([sys.executable, "-m", "streamkit", "demo", "--model", model],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO)


@pytest.mark.parametrize("model, said", [
    pytest.param("openai/gpt-4o-mini", "no OpenAI API key", id="openai"),
    pytest.param("anthropic/claude-sonnet-4-5", "no Anthropic API key", id="anthropic"),
])
def test_the_cli_names_the_api_key_flag_once(model: str, said: str) -> None:
    done = _demo(model)
    both = done.stdout + done.stderr
    assert done.returncode == 1
    assert both.count(said) == 1, both
    assert "pass --api-key KEY" in done.stderr and "api_key=" not in both


def test_the_cli_names_the_base_url_flag() -> None:
    done = _demo("openai-compatible/llama3.1")
    assert done.returncode == 1 and "pass --base-url URL" in done.stderr, done.stderr
    assert "base_url=" not in done.stderr


def test_cli_message_maps_each_argument_to_its_flag() -> None:
    err = StreamkitError("a keyless request was refused: set OPENAI_API_KEY or pass api_key=")
    assert cli_message(err).endswith("or pass --api-key KEY")


def test_a_postgres_skip_reason_is_whole() -> None:
    message = ('connection failed: connection to server at "127.0.0.1", port 5432 failed: '
               'Connection refused\n\tIs the server running on that host and accepting TCP/IP '
               'connections?')
    assert error_text(Exception(message)) == " ".join(message.split())


@given(st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=30), min_size=1,
                max_size=60))
def test_a_long_skip_reason_is_cut_between_words(words: list[str]) -> None:
    message = " ".join(words)
    shown = error_text(Exception(message), limit=80)
    if len(message) <= 80:
        assert shown == message
    else:
        assert shown.endswith(" …") and len(shown) <= 82
        kept = shown[:-2]
        # Whole words only: what is kept is the message up to a space (or, for one long
        # word, the limit).
        assert message.startswith(kept) and (message[len(kept)] == " " or len(kept) == 80)


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                    reason="not a git checkout")
@pytest.mark.parametrize("path", ["chat.db", "site/index.html", "streamkit-demo.sqlite3",
                                  "docs/x.sqlite3"])
def test_what_the_demo_examples_and_docs_build_write_is_ignored(path: str) -> None:
    done = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO, timeout=30)
    assert done.returncode == 0, f"git does not ignore {path}"


def test_the_chat_page_has_an_inline_icon() -> None:
    """The browser then asks for no ``/favicon.ico`` (the browser test checks no request
    fails: ``tests/serve/test_chat_page.py``)."""
    page = (REPO / "streamkit" / "serve" / "page.html").read_text()
    assert '<link rel="icon" href="data:image/svg+xml,' in page
