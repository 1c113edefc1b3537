"""The page at ``/`` (the studio) with the demo agent in a real headless browser: playwright for
Python driving Debian's chromium (``tests/serve/_browser.py``). Type the demo question, see the
tool card, the progress bar and the streamed answer; a second turn of the same thread shows the
server remembered the first. A screenshot is saved as an artifact. The studio's own scenarios
(paced streaming, guards, retries, tripwires, threads) are in ``test_studio.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from streamkit._demo import QUESTION, build_serve_agent
from streamkit.memory import Memory
from streamkit.serve import create_app

from ._browser import FLAGS, WAIT_MS, artifacts_dir, chromium_path
from ._server import ServerThread


@pytest.fixture(scope="session")
def chromium() -> Path:
    return chromium_path()


@pytest.fixture
def page_url() -> Iterator[str]:
    memory = Memory()
    with ServerThread(create_app([build_serve_agent(memory)], memory=memory,
                                studio=True)) as url:
        yield url


def test_the_chat_page_streams_a_tool_turn(chromium: Path, page_url: str) -> None:
    shot = artifacts_dir() / "chat-demo.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 800})
            page.goto(page_url + "/")
            expect(page.locator("#agent option")).to_have_text(["Support"], timeout=WAIT_MS)
            expect(page.locator("#status")).to_have_text("ready", timeout=WAIT_MS)
            page.fill("#input", QUESTION)
            page.click("#send")
            assistant = page.locator(".message.assistant").last
            tool = assistant.locator('[data-part="tool-lookup_customer"]')
            expect(tool).to_have_attribute("data-state", "result", timeout=WAIT_MS)
            expect(tool).to_contain_text('"customer_id":"C-42"')
            expect(tool).to_contain_text("Ada Lovelace")
            data = assistant.locator('[data-part="data-progress"]')
            # One bar for the lookup (one id), updated in place from 50 % to done.
            expect(data).to_have_count(1)
            expect(data).to_contain_text("100% Found C-42", timeout=WAIT_MS)
            answer = assistant.locator('[data-part="text"]')
            expect(answer).to_contain_text("chase them.", timeout=WAIT_MS)
            expect(answer).to_contain_text("Hi Ada! Your order ORD-1001")
            expect(page.locator("#status")).to_have_text("ready", timeout=WAIT_MS)
            # The turn went into a thread of the page's resource, listed on the left.
            expect(page.locator("#threads li")).to_have_count(1, timeout=WAIT_MS)
            page.fill("#input", "Thanks!")
            page.click("#send")
            expect(page.locator(".message.assistant").last.locator('[data-part="text"]')
                   ).to_contain_text("I looked up 1 customer record(s)", timeout=WAIT_MS)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert shot.stat().st_size > 0


def test_the_chat_page_makes_no_request_that_fails(chromium: Path, page_url: str) -> None:
    """No 404 for a favicon (the page carries an inline icon) nor for anything else it loads
    (the studio routes included: ``create_app`` serves them)."""
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


def test_without_the_studio_routes_the_page_is_a_chat(chromium: Path) -> None:
    """``create_app(studio=False)``: the page falls back to the Mastra routes (``GET
    /api/agents``, ``POST /api/agents/{id}/stream``); the chat streams as before and the
    processor view says why it is empty."""
    memory = Memory()
    app = create_app([build_serve_agent(memory)], memory=memory, studio=False)
    with ServerThread(app) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 800})
            page.goto(url + "/")
            expect(page.locator("#status")).to_have_text("ready", timeout=WAIT_MS)
            page.fill("#input", QUESTION)
            page.click("#send")
            assistant = page.locator(".message.assistant").last
            expect(assistant.locator('[data-part="text"]')).to_contain_text(
                "Hi Ada! Your order ORD-1001", timeout=WAIT_MS)
            expect(assistant.locator('[data-part="tool-lookup_customer"]')).to_have_attribute(
                "data-state", "result")
            expect(page.locator("#inspect-body")).to_contain_text(
                "does not serve the studio routes")
            page.screenshot(path=str(artifacts_dir() / "chat-no-studio.png"))
        finally:
            browser.close()
