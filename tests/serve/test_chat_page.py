"""The chat page in a real headless browser: playwright for Python driving Debian's chromium
(``apt-get install chromium`` by the fixture where ``/usr/bin/chromium`` is missing; playwright's
own browser download is never used). Type the demo question, see the tool call, the data part
and the streamed answer appear; a screenshot is saved under the test's tmp dir."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from streamkit._demo import QUESTION, build_serve_agent
from streamkit.memory import Memory
from streamkit.serve import create_app

from ._server import ServerThread

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
WAIT_MS = 30_000


def _install_chromium() -> str | None:
    """Install Debian's chromium; ``None`` when done, else why it could not be."""
    apt = shutil.which("apt-get")
    if apt is None:
        return "no apt-get to install Debian's chromium with"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "chromium"]):
        proc = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
        if proc.returncode != 0:
            return f"{' '.join(args[1:])} failed: {proc.stderr.strip()[-300:]}"
    return None


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        why = _install_chromium()
        if why is not None or not CHROMIUM.exists():
            reason = f"Debian's chromium is not installed and could not be: {why}"
            print(f"SKIP: {reason}")
            pytest.skip(reason)
    return CHROMIUM


@pytest.fixture
def page_url() -> Iterator[str]:
    memory = Memory()
    with ServerThread(create_app([build_serve_agent(memory)], memory=memory)) as url:
        yield url


def test_the_chat_page_streams_a_tool_turn(chromium: Path, page_url: str,
                                           tmp_path: Path) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 700})
            page.goto(page_url + "/")
            expect(page.locator("#agent option")).to_have_text(["Support"], timeout=WAIT_MS)
            page.fill("#input", QUESTION)
            page.click("#send")
            assistant = page.locator(".message.assistant").last
            tool = assistant.locator('[data-part="tool-lookup_customer"]')
            expect(tool).to_have_attribute("data-state", "output-available", timeout=WAIT_MS)
            expect(tool).to_contain_text('"customer_id":"C-42"')
            expect(tool).to_contain_text("Ada Lovelace")
            data = assistant.locator('[data-part="data-progress"]')
            expect(data).to_contain_text("Looking up C-42", timeout=WAIT_MS)
            answer = assistant.locator('[data-part="text"]')
            expect(answer).to_contain_text("chase them.", timeout=WAIT_MS)
            expect(answer).to_contain_text("Hi Ada! Your order ORD-1001")
            expect(page.locator("#status")).to_have_text("ready", timeout=WAIT_MS)
            page.fill("#input", "Thanks!")
            page.click("#send")
            expect(page.locator(".message.assistant").last.locator('[data-part="text"]')
                   ).to_contain_text("I looked up 1 customer record(s)", timeout=WAIT_MS)
            page.screenshot(path=str(tmp_path / "chat.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "chat.png").stat().st_size > 0


def test_the_chat_page_makes_no_request_that_fails(chromium: Path, page_url: str) -> None:
    """No 404 for a favicon (the page carries an inline icon) nor for anything else it loads."""
    failed: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=FLAGS, headless=True)
        try:
            page = browser.new_page()
            page.on("response", lambda r: failed.append(f"{r.status} {r.url}")
                    if r.status >= 400 else None)
            page.on("requestfailed", lambda r: failed.append(f"failed {r.url}"))
            page.goto(page_url + "/")
            expect(page.locator("#agent option")).to_have_text(["Support"], timeout=WAIT_MS)
            page.wait_for_load_state("networkidle", timeout=WAIT_MS)
            icon = page.evaluate("document.querySelector('link[rel=icon]')?.href ?? ''")
        finally:
            browser.close()
    assert not failed, f"the chat page made failing requests: {failed}"
    assert icon.startswith("data:image/svg+xml,")
