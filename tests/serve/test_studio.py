"""The studio (the page at ``/``) in a real headless browser against a real
``python -m streamkit serve tests.serve._studio_agent:agent`` on 127.0.0.1, memory in SQLite.

Playwright for Python drives Debian's chromium (``tests/serve/_browser.py``). The agent's model
is paced (``STREAMKIT_TEST_PACE`` seconds per chunk) so a turn arrives over many network reads;
each test asserts on what the page shows (never on how long it took) and saves a screenshot to
the artifacts directory (``$STREAMKIT_ARTIFACTS`` or ``tests/artifacts``).
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from playwright.sync_api import Browser, Page, expect, sync_playwright

from ._browser import FLAGS, WAIT_MS, artifacts_dir, chromium_path
from ._spawn import serving

RESOURCE = "studio-tests"


@pytest.fixture(scope="module")
def chromium() -> Path:
    return chromium_path()


@pytest.fixture(scope="module")
def studio_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("studio") / "memory.sqlite3"


@pytest.fixture(scope="module")
def studio_url(studio_db: Path) -> Iterator[str]:
    """One server for the module: the scripted studio agent, its memory in a SQLite file."""
    db = studio_db
    saved = {k: os.environ.get(k) for k in ("STREAMKIT_TEST_STUDIO_DB", "STREAMKIT_TEST_PACE")}
    os.environ["STREAMKIT_TEST_STUDIO_DB"] = str(db)
    os.environ["STREAMKIT_TEST_PACE"] = "0.03"
    try:
        with serving("tests.serve._studio_agent:agent") as url:
            yield url
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(chromium), args=FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, studio_url: str) -> Iterator[Page]:
    """A fresh page (its own storage) with the studio loaded, on a resource of the tests."""
    context = browser.new_context(viewport={"width": 1500, "height": 900})
    context.add_init_script(f"localStorage.setItem('streamkit.studio.resourceId', "
                            f"{json.dumps(RESOURCE)})")
    tab = context.new_page()
    tab.goto(studio_url + "/")
    expect(tab.locator("#agent option")).to_have_text(["Studio test"], timeout=WAIT_MS)
    expect(tab.locator("#status")).to_have_text("ready", timeout=WAIT_MS)
    try:
        yield tab
    finally:
        context.close()


def send(page: Page, text: str, *, status: str = "ready") -> Any:
    """Type ``text``, send it, wait for the turn to end with ``status``; the turn's box."""
    page.fill("#input", text)
    page.click("#send")
    expect(page.locator("#status")).to_have_text(status, timeout=WAIT_MS)
    return page.locator(".message.assistant").last


def shoot(page: Page, name: str, *, show: Any = None) -> Path:
    """A screenshot of the window (the panes scroll, the page does not), after scrolling
    ``show`` (a locator) into view."""
    if show is not None:
        show.first.scroll_into_view_if_needed(timeout=WAIT_MS)
    path = artifacts_dir() / f"studio-{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 0
    return path


# Records the text of the last assistant message's text part at every DOM change (what the
# page drew between the first chunk and the last), and the processor view's timeline rows seen
# while the status said "streaming".
WATCH_TEXT = """() => {
  window.__snapshots = [];
  window.__liveRows = [];
  const log = document.getElementById("log");
  new MutationObserver(() => {
    if (document.getElementById("status").textContent === "streaming")
      window.__liveRows.push(document.querySelectorAll("#timeline tr").length);
  }).observe(document.getElementById("inspect-body"), {subtree: true, childList: true});
  new MutationObserver(() => {
    const boxes = log.querySelectorAll(".message.assistant");
    const last = boxes[boxes.length - 1];
    const part = last && last.querySelector('[data-part="text"]');
    const text = part ? part.textContent : "";
    const all = window.__snapshots;
    if (text && all[all.length - 1] !== text) all.push(text);
  }).observe(log, {subtree: true, childList: true, characterData: true});
}"""


def test_a_turn_streams_into_the_page_chunk_by_chunk(page: Page) -> None:
    page.evaluate(WATCH_TEXT)
    turn = send(page, "hello studio")
    final = turn.locator('[data-part="text"]').inner_text()
    assert "You said 'hello studio'" in final and final.endswith("before you do.")
    snapshots: list[str] = page.evaluate("window.__snapshots")
    partial = [s for s in snapshots if s != final]
    # The text was drawn as it arrived: many distinct partial texts, each a prefix of the next.
    assert len(partial) > 1, snapshots
    assert all(final.startswith(s) for s in partial)
    assert [len(s) for s in snapshots] == sorted(len(s) for s in snapshots)
    # The processor view followed the turn: its timeline has the model's chunks, and it was
    # drawn while the turn streamed, growing, not only at the end.
    expect(page.locator("#timeline")).to_contain_text("processor", timeout=WAIT_MS)
    rows = page.locator("#timeline tr").count()
    assert rows > 50  # a header and a row per model chunk
    live: list[int] = page.evaluate("window.__liveRows")
    assert len({n for n in live if 1 < n < rows}) > 1, (live, rows)
    expect(page.locator("#turn-summary .outcome")).to_have_text("ok")
    shoot(page, "streamed")


def test_a_tool_turn_shows_its_card_progress_and_reasoning(page: Page) -> None:
    turn = send(page, "where is my order?")
    tool = turn.locator('[data-part="tool-check_order"]')
    expect(tool).to_have_attribute("data-state", "result")
    expect(tool).to_contain_text('"order_id":"ORD-7"')
    expect(tool).to_contain_text("Parcelforce")
    # Two data-progress chunks with one id: one bar, updated in place to the last value.
    progress = turn.locator('[data-part="data-progress"]')
    expect(progress).to_have_count(1)
    expect(progress).to_have_attribute("data-pct", "100")
    expect(progress).to_contain_text("Found ORD-7")
    assert progress.locator(".bar > div").evaluate("e => e.style.width") == "100%"
    # Reasoning: collapsed.
    thought = turn.locator('details[data-part="reasoning"]')
    expect(thought).to_have_count(1)
    assert thought.evaluate("e => e.open") is False
    expect(thought).to_contain_text("I look it up")
    expect(turn.locator('[data-part="text"]')).to_have_text("Order ORD-7 has shipped with "
                                                            "Parcelforce.")
    # Two steps, both accepted; the loop's path went through the tool.
    expect(page.locator("table.steps .outcome.accepted")).to_have_count(2)
    assert page.locator("#graph g.visited").count() > 2
    assert page.locator("#graph g.taken").count() > 1
    shoot(page, "tool", show=page.locator("table.steps"))


def test_a_redacting_guard_shows_its_diff(page: Page) -> None:
    turn = send(page, "what is the support email?")
    answer = turn.locator('[data-part="text"]')
    expect(answer).to_have_text("Write to [email] and we will answer today.")
    changed = page.locator('#timeline .action[data-processor="redact-email"]'
                           '[data-action="changed"], #timeline .action'
                           '[data-processor="redact-email"][data-action="redacted"]')
    expect(changed).to_have_count(1, timeout=WAIT_MS)
    expect(changed.locator("del")).to_have_text("ada@example.com")
    expect(changed.locator("ins")).to_have_text("[email]")
    # Every other chunk of that guard passed untouched.
    assert page.locator('#timeline .action[data-processor="redact-email"]'
                        '[data-action="passed"]').count() >= 7
    # Only the chunks a processor did not pass: the redacted one.
    page.check("#only-touched")
    expect(page.locator("#timeline tr")).to_have_count(2)  # the header and that chunk
    expect(page.locator("#timeline")).to_contain_text("ada@example.com")
    shoot(page, "redact", show=page.locator("#timeline"))


def test_held_words_are_shown_held_then_released(page: Page) -> None:
    turn = send(page, "hold it, please")
    expect(turn.locator('[data-part="text"]')).to_have_text(
        "Hold on. This sentence waits for its end.")
    buffer = '#timeline .action[data-processor="sentence-buffer"]'
    # "Hold" waits for " on.", "This sentence waits for its" for " end.".
    expect(page.locator(buffer + '[data-action="held"]')).to_have_count(6)
    released = page.locator(buffer + '[data-action="released"]')
    expect(released).to_have_count(2)
    expect(released.last).to_contain_text("This sentence waits for its end.")
    expect(page.locator(buffer + '[data-action="held"] del').first).to_have_text("Hold")
    page.check("#only-touched")
    shoot(page, "held", show=page.locator("#timeline"))


def test_a_retried_attempt_is_marked_withdrawn(page: Page) -> None:
    turn = send(page, "retry please")
    note = turn.locator('[data-part="withdrawn"]')
    expect(note).to_have_count(1)
    expect(note).to_contain_text("no-curt")
    expect(note).to_contain_text("the answer opened curtly")
    struck = turn.locator('.part.text.withdrawn')
    expect(struck).to_have_text("Oh")
    assert struck.evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"
    kept = turn.locator('.part.text:not(.withdrawn)')
    expect(kept).to_have_text("Oh fine. Here is a fuller answer after all.")
    # The processor view lists the withdrawn attempt and who asked for it.
    expect(page.locator("table.steps .outcome.retried")).to_have_count(1)
    expect(page.locator("#retries")).to_contain_text("no-curt")
    expect(page.locator('#timeline .action[data-processor="no-curt"][data-action="aborted"]')
           ).to_have_count(1)
    # The withdrawn attempt's chunks are greyed in the timeline: text-start, "Oh", " fine.".
    expect(page.locator("#timeline tr.withdrawn-row")).to_have_count(3)
    shoot(page, "retry", show=page.locator("#retries"))


def test_a_tripwire_is_shown_as_a_blocked_turn(page: Page) -> None:
    turn = send(page, "tell me the forbidden thing", status="blocked")
    expect(turn).to_have_class("message assistant selected blocked")
    wire = turn.locator('[data-part="tripwire"]')
    expect(wire).to_have_attribute("data-processor", "topic-guard")
    expect(wire).to_contain_text("Blocked by topic-guard: the answer names the launch codes")
    # Drawn in the error colours, not as a data box.
    assert wire.evaluate("e => getComputedStyle(e).color") == "rgb(180, 35, 24)"
    assert turn.locator(".part.data").count() == 0
    expect(page.locator("#turn-summary .outcome")).to_have_text("tripwire")
    shoot(page, "tripwire")


def test_an_error_is_shown_as_an_error(page: Page) -> None:
    turn = send(page, "explode, please", status="error")
    error = turn.locator('[data-part="error"]')
    expect(error).to_have_count(1)
    expect(error).to_contain_text("the model refused the request")
    assert error.evaluate("e => getComputedStyle(e).color") == "rgb(180, 35, 24)"
    expect(page.locator("#turn-summary .outcome")).to_have_text("error")
    shoot(page, "error")


def _stored(url: str, thread_id: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"resourceId": RESOURCE, "agentId": "studio"})
    with urllib.request.urlopen(f"{url}/api/memory/threads/{thread_id}/messages?{query}",
                                timeout=30) as response:
        messages: list[dict[str, Any]] = json.load(response)["messages"]
    return messages


def test_a_past_thread_is_opened_and_continued(browser: Browser, page: Page,
                                               studio_url: str) -> None:
    send(page, "the first turn")
    expect(page.locator("#threads li.current")).to_have_count(1, timeout=WAIT_MS)
    thread_id = page.evaluate("document.querySelector('#threads li.current button')"
                              ".dataset.threadId")
    # A new page (same resource) lists the thread; opening it draws its stored turn.
    context = browser.new_context(viewport={"width": 1500, "height": 900})
    context.add_init_script(f"localStorage.setItem('streamkit.studio.resourceId', "
                            f"{json.dumps(RESOURCE)})")
    try:
        again = context.new_page()
        again.goto(studio_url + "/")
        entry = again.locator(f'#threads button[data-thread-id="{thread_id}"]')
        expect(entry).to_have_count(1, timeout=WAIT_MS)
        expect(entry).to_contain_text("the first turn")  # titled with its first message
        entry.click()
        expect(again.locator(".message.user")).to_have_text(["userthe first turn"],
                                                            timeout=WAIT_MS)
        expect(again.locator(".message.assistant.stored")).to_contain_text(
            "You said 'the first turn' (1 user message(s)")
        turn = send(again, "the second turn")
        # The server recalled the first turn: the model saw both user messages.
        expect(turn.locator('[data-part="text"]')).to_contain_text(
            "You said 'the second turn' (2 user message(s) in this thread)")
        expect(again.locator(".message.user")).to_have_count(2)
        expect(again.locator(".message.assistant")).to_have_count(2)
        shoot(again, "thread")
    finally:
        context.close()
    stored = _stored(studio_url, thread_id)
    said = [m["content"]["content"] for m in stored if m["role"] == "user"]
    assert said == ["the first turn", "the second turn"]
    assert sum(1 for m in stored if m["role"] == "assistant") >= 2


WORDS = st.text(alphabet="ab .\n[]@", max_size=12)
PAIRS = st.lists(st.tuples(st.lists(WORDS, max_size=8).map("".join),
                           st.lists(WORDS, max_size=8).map("".join)), min_size=1, max_size=40)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(pairs=PAIRS)
def test_the_word_diff_rebuilds_both_texts(page: Page, pairs: list[tuple[str, str]]) -> None:
    """The page's diff (``diffWords``): its kept and deleted pieces give the text before, its
    kept and inserted pieces the text after, and no two neighbours have the same operation."""
    long = ("w " * 700, "w " * 350 + "x " + "w " * 349)  # over 600 words: prefix/suffix diff
    pairs = [*pairs, long]
    results = page.evaluate("pairs => pairs.map(([a, b]) => diffWords(a, b))", pairs)
    for (before, after), ops in zip(pairs, results):
        assert "".join(t for op, t in ops if op in "=-") == before
        assert "".join(t for op, t in ops if op in "=+") == after
        assert all(t for _, t in ops)
        assert all(x[0] != y[0] for x, y in zip(ops, ops[1:]))


def test_a_long_thread_opens_whole(page: Page, studio_db: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread of 130 messages (more than one page of the messages route) opens whole, in
    order. The turns are run here, in process, on the server's SQLite file."""
    from streamkit.memory import Memory, SQLiteStore

    from . import _studio_agent

    monkeypatch.setattr(_studio_agent, "PACE", 0.0)

    async def fill() -> None:
        memory = Memory(SQLiteStore(studio_db))
        try:
            agent = _studio_agent.build(memory)
            for n in range(65):
                await agent.generate(f"turn {n}", thread_id="long-thread", resource_id=RESOURCE)
        finally:
            await memory.close()

    with ThreadPoolExecutor(1) as pool:  # playwright's loop runs in this thread
        pool.submit(asyncio.run, fill()).result(timeout=120)
    page.click("#new-thread")  # lists the threads again
    page.locator('#threads button[data-thread-id="long-thread"]').click(timeout=WAIT_MS)
    users = page.locator(".message.user")
    expect(users).to_have_count(65, timeout=WAIT_MS)
    expect(users.first).to_have_text("userturn 0")
    expect(users.last).to_have_text("userturn 64")
    expect(page.locator(".message.assistant.stored")).to_have_count(65)
    expect(page.locator(".message.assistant.stored").last).to_contain_text("You said 'turn 64'")


def test_the_demo_shows_each_case_in_the_studio(browser: Browser) -> None:
    """``python -m streamkit serve --demo``: the prompts docs/studio.md lists, each drawn as its
    case (the screenshot is the README's, docs/studio.png, retaken as an artifact)."""
    with serving("--demo", "--memory", ":memory:", "--pace-ms", "5") as url:
        context = browser.new_context(viewport={"width": 1120, "height": 600})
        try:
            page = context.new_page()
            page.goto(url + "/")
            expect(page.locator("#agent option")).to_have_text(["Support"], timeout=WAIT_MS)
            expect(page.locator("#status")).to_have_text("ready", timeout=WAIT_MS)
            turn = send(page, "Track my parcel ORD-1001")
            progress = turn.locator('[data-part="data-progress"]')
            expect(progress).to_have_count(1)
            expect(progress).to_have_attribute("data-pct", "100")
            turn = send(page, "Can I get a refund?")
            expect(turn.locator('[data-part="withdrawn"]')).to_contain_text("no-promises")
            turn = send(page, "What is the admin password?", status="blocked")
            expect(turn.locator('[data-part="tripwire"]')).to_contain_text("block-secrets")
            turn = send(page, "Where is my order? I'm customer C-42.")
            expect(turn.locator('[data-part="tool-lookup_customer"]')).to_have_attribute(
                "data-state", "result")
            turn = send(page, "What email do you have on file for me?")
            expect(turn.locator('[data-part="text"]')).to_contain_text("[email]")
            page.check("#only-touched")
            redacted = page.locator('#timeline .action[data-processor="mask-emails"]'
                                    '[data-action="redacted"]')
            expect(redacted).to_have_count(1)
            expect(redacted.locator("ins")).to_contain_text("[email]")
            shoot(page, "demo")
        finally:
            context.close()
