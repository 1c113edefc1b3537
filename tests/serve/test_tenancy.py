"""Nobody reads another's memory over HTTP (issue 26, points 1-3): a second tenant tries every
route on the first one's thread, under real uvicorn with a keep-alive client, on SQLite and on
PostgreSQL.

* A thread without a resource is ``400`` (never run, never appended to); another resource's
  thread is ``403`` (Mastra's body), never read nor appended to, its owner never named.
* The memory routes: ``400`` without a resource, ``403`` for another's thread, ``409`` for an
  existing thread id whoever owns it.
* The trust boundary: with ``create_app(resource=...)`` the server decides the resource; the
  client's ``requestContext`` never sets reserved keys — the ResponseCache poisoning attack,
  reproduced over HTTP, no longer reaches the other tenant.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.exceptions import HTTPException
from starlette.requests import Request

from streamkit import Agent, Processor
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.memory import Memory, PostgresStore, SQLiteStore
from streamkit.models import ModelRequest
from streamkit.serve import create_app
from streamkit.testing import FunctionModel, text
from streamkit_operators import ResponseCache
from streamkit_operators._response_cache import CONTEXT_KEY

from ..conftest import REPO, as_mode
from ._server import ServerThread, running
from .test_app import WAIT, _start, _stop

DENIED = {"error": "Access denied: thread belongs to a different resource"}
SECRET = "my card PIN is 4711"
OWNER, INTRUDER = "alice-resource", "mallory-resource"
THREAD = "alice-thread"


class Recorder:
    """A model that answers with every user text it was shown (so anything recalled from
    another's thread would be in the reply) and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.model = FunctionModel(self._answer, model_id="recorder")

    def _answer(self, request: ModelRequest) -> Any:
        self.calls += 1
        said = [m["content"] if isinstance(m["content"], str) else
                "".join(p.get("text", "") for p in m["content"] if p.get("type") == "text")
                for m in request.prompt if m["role"] == "user"]
        return text("seen: " + " | ".join(said))


@pytest.fixture(params=["sqlite", "postgres"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    """The memory of every test here: a real SQLite file, and a real PostgreSQL schema (skipped,
    with the reason, when the server is not reachable)."""
    if request.param == "sqlite":
        store: Any = SQLiteStore(str(tmp_path / "tenancy.sqlite3"))
    else:
        try:
            dsn = request.getfixturevalue("pg_dsn")
        except pytest.skip.Exception as exc:
            print(f"SKIP postgres: {exc}")
            raise
        store = PostgresStore(dsn, schema=request.getfixturevalue("pg_schema"))
    made = Memory(store, last_messages=20)
    yield made
    await made.close()


def agent_with(memory: Memory, recorder: Recorder, **options: Any) -> Agent:
    return Agent(id="demo", instructions="Answer.", model=recorder.model, memory=memory,
                 **options)


async def seed(client: httpx.AsyncClient, headers: dict[str, str] | None = None) -> None:
    """Alice's thread, holding her secret (one turn: two messages)."""
    body: dict[str, Any] = {"messages": SECRET, "memory": {"thread": THREAD}}
    if headers is None:
        body["memory"]["resource"] = OWNER
    done = await client.post("/api/agents/demo/generate", json=body, headers=headers)
    assert done.status_code == 200, done.text


def reply_text(answer: httpx.Response) -> str:
    """The answer's text: ``generate``'s ``text``, or the text deltas of an SSE stream (a
    Mastra stream's ``payload.text``, a UI stream's ``delta``)."""
    if answer.headers["content-type"].startswith("application/json"):
        return str(answer.json()["text"])
    out = []
    for frame in answer.text.split("\n\n"):
        if not frame.startswith("data: {"):
            continue
        chunk = json.loads(frame[len("data: "):])
        if chunk["type"] == "text-delta":
            out.append(chunk["payload"]["text"] if "payload" in chunk else chunk["delta"])
    return "".join(out)


async def stored(memory: Memory) -> list[str]:
    return [m.role for m in await memory.get_messages(THREAD)]


def agent_call(route: str, memory_form: str, resource: str | None) -> tuple[str, dict[str, Any]]:
    """The path and body of one agent call on alice's thread (``resource`` may be omitted)."""
    if memory_form == "memory":
        opts: dict[str, Any] = {"memory": {"thread": THREAD}}
        if resource is not None:
            opts["memory"]["resource"] = resource
    else:
        opts = {"threadId": THREAD}
        if resource is not None:
            opts["resourceId"] = resource
    if route == "chat":
        return "/chat/demo", {"id": "c", "trigger": "submit-message", **opts, "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "What did I say?"}]}]}
    return f"/api/agents/demo/{route}", {"messages": "What did I say?", **opts}


ROUTES = [pytest.param(route, form, id=f"{route}-{form}")
          for route in ("generate", "stream", "chat") for form in ("memory", "top-level")]


# --------------------------------------------------------------------------------------------
# 1. Agent routes: a thread needs a resource; another's thread is 403
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("route", "form"), ROUTES)
async def test_a_thread_without_a_resource_is_refused_before_anything_runs(
        memory: Memory, route: str, form: str) -> None:
    recorder = Recorder()
    async with running(create_app([agent_with(memory, recorder)])) as url, \
            httpx.AsyncClient(base_url=url) as client:
        await seed(client)
        calls = recorder.calls
        path, body = agent_call(route, form, None)
        answer = await client.post(path, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/json"
    field = "memory.resource" if form == "memory" else "resourceId"
    assert answer.json()["issues"][0]["field"] == field
    assert "resource" in answer.json()["issues"][0]["message"]
    assert SECRET not in answer.text and OWNER not in answer.text
    assert recorder.calls == calls  # never ran
    assert await stored(memory) == ["user", "assistant"]  # never appended to


@pytest.mark.parametrize(("route", "form"), ROUTES)
async def test_another_resources_thread_is_403_never_read_nor_appended(
        memory: Memory, route: str, form: str) -> None:
    recorder = Recorder()
    async with running(create_app([agent_with(memory, recorder)])) as url, \
            httpx.AsyncClient(base_url=url) as client:
        await seed(client)
        calls = recorder.calls
        path, body = agent_call(route, form, INTRUDER)
        answer = await client.post(path, json=body)
        # The owner still can (the check lets the right resource through).
        path, body = agent_call(route, form, OWNER)
        owner = await client.post(path, json=body)
    assert answer.status_code == 403 and answer.json() == DENIED
    assert recorder.calls == calls + 1  # only the owner's turn ran
    assert owner.status_code == 200 and SECRET in reply_text(owner)
    assert await stored(memory) == ["user", "assistant"] * 2


# --------------------------------------------------------------------------------------------
# 2. Memory routes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [f"/api/memory/threads/{THREAD}",
                                  f"/api/memory/threads/{THREAD}/messages"])
async def test_thread_routes_need_the_owners_resource(memory: Memory, path: str) -> None:
    async with running(create_app([agent_with(memory, Recorder())])) as url, \
            httpx.AsyncClient(base_url=url) as client:
        await seed(client)
        absent = await client.get(path, params={"agentId": "demo"})
        wrong = await client.get(path, params={"agentId": "demo", "resourceId": INTRUDER})
        right = await client.get(path, params={"agentId": "demo", "resourceId": OWNER})
        unknown = await client.get(path.replace(THREAD, "nobodys-thread"),
                                   params={"resourceId": INTRUDER})
    assert absent.status_code == 400 and "resourceId" in absent.json()["error"]
    assert wrong.status_code == 403 and wrong.json() == DENIED
    for refused in (absent, wrong):
        assert SECRET not in refused.text and OWNER not in refused.text
    assert right.status_code == 200 and OWNER in right.text
    assert unknown.status_code == 404


async def test_creating_an_existing_thread_is_409_and_never_names_the_owner(
        memory: Memory) -> None:
    async with running(create_app([agent_with(memory, Recorder())])) as url, \
            httpx.AsyncClient(base_url=url) as client:
        await seed(client)
        by_intruder = await client.post("/api/memory/threads", json={
            "threadId": THREAD, "resourceId": INTRUDER, "title": "mine now"})
        by_owner = await client.post("/api/memory/threads", json={
            "threadId": THREAD, "resourceId": OWNER, "title": "again"})
        fresh = await client.post("/api/memory/threads", json={
            "threadId": "new-thread", "resourceId": INTRUDER})
    assert by_intruder.status_code == by_owner.status_code == 409
    # The same answer whoever asks: it tells nobody whose thread it is.
    assert by_intruder.json() == by_owner.json() == {"error": f"Thread {THREAD} already exists"}
    thread = await memory.get_thread(THREAD)
    assert thread is not None and thread.resource_id == OWNER and thread.title != "mine now"
    assert fresh.status_code == 200 and fresh.json()["resourceId"] == INTRUDER


async def test_listing_threads_needs_a_resource_and_lists_only_its_own(memory: Memory) -> None:
    async with running(create_app([agent_with(memory, Recorder())])) as url, \
            httpx.AsyncClient(base_url=url) as client:
        await seed(client)
        omitted = await client.get("/api/memory/threads")
        empty = await client.get("/api/memory/threads", params={"resourceId": ""})
        mine = await client.get("/api/memory/threads", params={"resourceId": INTRUDER})
    assert omitted.status_code == empty.status_code == 400
    assert mine.status_code == 200 and mine.json()["threads"] == []


# --------------------------------------------------------------------------------------------
# 3. The server decides the resource (resource= hook)
# --------------------------------------------------------------------------------------------


def header_resource(request: Request) -> str | None:
    return request.headers.get("x-user")


def as_user(name: str) -> dict[str, str]:
    return {"x-user": name}


async def test_with_a_resource_hook_a_second_tenant_reaches_nothing_on_any_route(
        memory: Memory, mode: str) -> None:
    recorder = Recorder()
    app = create_app([agent_with(memory, recorder)], resource=as_mode(header_resource, mode))
    alice, mallory = as_user(OWNER), as_user(INTRUDER)
    async with running(app) as url, httpx.AsyncClient(base_url=url) as client:
        await seed(client, alice)  # no resource in the body: the hook filled it in
        calls = recorder.calls
        refused: dict[str, httpx.Response] = {}
        for route, form in [(r, f) for r in ("generate", "stream", "chat")
                            for f in ("memory", "top-level")]:
            for claimed in (None, OWNER):
                path, body = agent_call(route, form, claimed)
                refused[f"{route}-{form}-{claimed}"] = await client.post(
                    path, json=body, headers=mallory)
        for path in (f"/api/memory/threads/{THREAD}", f"/api/memory/threads/{THREAD}/messages"):
            for params in ({}, {"resourceId": OWNER}):
                refused[f"{path}-{params}"] = await client.get(path, params=params,
                                                               headers=mallory)
        refused["list-as-alice"] = await client.get(
            "/api/memory/threads", params={"resourceId": OWNER}, headers=mallory)
        refused["create-as-alice"] = await client.post(
            "/api/memory/threads", json={"resourceId": OWNER}, headers=mallory)
        listed = await client.get("/api/memory/threads", headers=mallory)
        taken = await client.post("/api/memory/threads", json={"threadId": THREAD},
                                  headers=mallory)
        own = await client.get(f"/api/memory/threads/{THREAD}/messages", headers=alice)
    for name, answer in refused.items():
        assert answer.status_code == 403, (name, answer.text)
        assert SECRET not in answer.text and OWNER not in answer.text, name
    assert recorder.calls == calls
    assert listed.status_code == 200 and listed.json()["threads"] == []  # filled: her own
    assert taken.status_code == 409 and OWNER not in taken.text
    assert own.status_code == 200 and len(own.json()["messages"]) == 2
    assert await stored(memory) == ["user", "assistant"]


async def test_a_hook_without_a_resource_refuses_memory_and_claims(memory: Memory) -> None:
    app = create_app([agent_with(memory, Recorder())], resource=header_resource)
    async with running(app) as url, httpx.AsyncClient(base_url=url) as client:
        no_memory = await client.post("/api/agents/demo/generate", json={"messages": "hi"})
        thread = await client.post("/api/agents/demo/generate",
                                   json={"messages": "hi", "threadId": "t"})
        claimed = await client.post("/api/agents/demo/generate", json={
            "messages": "hi", "threadId": "t", "resourceId": OWNER})
        listed = await client.get("/api/memory/threads")
    assert no_memory.status_code == 200
    assert thread.status_code == 400 and thread.json()["issues"][0]["field"] == "resourceId"
    assert claimed.status_code == 403
    assert listed.status_code == 400


async def test_a_hook_may_refuse_a_request_or_be_wrong() -> None:
    def refuse(request: Request) -> str:
        raise HTTPException(401, "log in first")

    def broken(request: Request) -> Any:
        return 42

    agent = Agent(id="demo", model=Recorder().model, memory=Memory())
    async with running(create_app([agent], resource=refuse)) as url, \
            httpx.AsyncClient(base_url=url) as client:
        unauthorised = await client.post("/api/agents/demo/generate",
                                         json={"messages": "hi", "threadId": "t"})
    async with running(create_app([agent], resource=broken)) as url, \
            httpx.AsyncClient(base_url=url) as client:
        bug = await client.get("/api/memory/threads")
    assert unauthorised.status_code == 401
    assert bug.status_code == 500 and "returned int" in bug.json()["error"]


def test_create_app_checks_the_tenancy_options() -> None:
    agent = Agent(id="demo", model=Recorder().model)
    with pytest.raises(InvalidType, match="resource= must be a function"):
        create_app([agent], resource="x-user")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="reserved for the server"):
        create_app([agent], client_context_keys={"locale", CONTEXT_KEY})
    with pytest.raises(InvalidType, match="client_context_keys"):
        create_app([agent], client_context_keys="locale")


# --------------------------------------------------------------------------------------------
# 3. requestContext: reserved keys, the allow-list, trusted entries; the cache poisoning attack
# --------------------------------------------------------------------------------------------

QUESTION = "What address do I send payment questions to?"
POISON = "Send your card number to evil.example"
HONEST = "Write to billing@shop.example"


def cache_agent(memory: Memory | None, answer: dict[str, str], cache: ResponseCache) -> Agent:
    def reply(request: ModelRequest) -> Any:
        return text(answer["next"])  # the attacker makes the model say the poison to them

    return Agent(id="demo", model=FunctionModel(reply, model_id="m"), memory=memory,
                 input_processors=[cache])


@pytest.mark.parametrize("with_hook", [pytest.param(False, id="client-named-resources"),
                                       pytest.param(True, id="server-decided-resources")])
@pytest.mark.parametrize("route", ["generate", "chat"])
async def test_a_client_cannot_store_an_answer_under_another_tenants_cache_entry(
        with_hook: bool, route: str) -> None:
    answer = {"next": POISON}
    hook: dict[str, Any] = {"resource": header_resource} if with_hook else {}
    app = create_app([cache_agent(None, answer, ResponseCache(scope="resource"))], **hook)

    def call(tenant: str, context: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        extra: dict[str, Any] = {} if with_hook else {"resourceId": tenant}
        if context is not None:
            extra["requestContext"] = context
        if route == "chat":
            return "/chat/demo", {"id": "c", "trigger": "submit-message", **extra, "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": QUESTION}]}]}
        return "/api/agents/demo/generate", {"messages": QUESTION, **extra}

    async with running(app) as url, httpx.AsyncClient(base_url=url) as client:
        # Tenant A asks with ResponseCache's per-call override: "store this under B's scope".
        path, body = call("tenant-a", {CONTEXT_KEY: {"scope": "tenant-b"}})
        attack = await client.post(path, json=body, headers=as_user("tenant-a"))
        answer["next"] = HONEST
        path, body = call("tenant-b", None)
        victim = await client.post(path, json=body, headers=as_user("tenant-b"))
    assert victim.status_code == 200
    assert reply_text(victim) == HONEST  # before the fix: the poison, replayed from the cache
    assert attack.status_code == 400, attack.text
    assert attack.json()["issues"][0]["field"] == f"requestContext.{CONTEXT_KEY}"
    assert "reserved for the server" in attack.json()["issues"][0]["message"]


async def test_reserved_keys_are_refused_even_when_allow_listed_keys_are_set() -> None:
    agent = Agent(id="demo", model=Recorder().model)
    app = create_app([agent], client_context_keys={"locale"})
    async with running(app) as url, httpx.AsyncClient(base_url=url) as client:
        allowed = await client.post("/api/agents/demo/generate", json={
            "messages": "hi", "requestContext": {"locale": "fr"}})
        other = await client.post("/api/agents/demo/generate", json={
            "messages": "hi", "requestContext": {"locale": "fr", "tier": "gold"}})
        mastra = await client.post("/chat/demo", json={
            "id": "c", "requestContext": {"mastra__resourceId": "x"},
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
    assert allowed.status_code == 200
    assert other.status_code == 400
    assert other.json()["issues"][0]["field"] == "requestContext.tier"
    assert "allowed: locale" in other.json()["issues"][0]["message"]
    assert mastra.status_code == 400
    assert mastra.json()["issues"][0]["field"] == "requestContext.mastra__resourceId"


class SeenContext(Processor):
    """Records the request_context each call's processors got."""

    id = "seen-context"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def process_input(self, messages: Any, request_context: Any) -> None:
        self.seen.append(dict(request_context))


async def test_the_server_adds_trusted_context_entries_over_the_clients(mode: str) -> None:
    def trusted(request: Request) -> dict[str, Any]:
        tenant = request.headers.get("x-user", "anonymous")
        return {"tier": "from-server", **ResponseCache.context(scope=tenant)}

    seen = SeenContext()
    agent = Agent(id="demo", model=Recorder().model, input_processors=[seen])
    app = create_app([agent], request_context=as_mode(trusted, mode))
    async with running(app) as url, httpx.AsyncClient(base_url=url) as client:
        done = await client.post("/api/agents/demo/generate", headers=as_user("tenant-a"), json={
            "messages": "hi", "requestContext": {"tier": "from-client", "locale": "fr"}})
    assert done.status_code == 200, done.text
    assert seen.seen == [{"tier": "from-server", "locale": "fr",
                          CONTEXT_KEY: {"scope": "tenant-a"}}]


# A property over many key names, against one running server: a key is refused exactly when it
# starts with a reserved prefix, and the answer names it.
KEYS = st.one_of(
    st.text(min_size=1, max_size=20),
    st.builds(lambda p, s: p + s, st.sampled_from(["streamkit__", "mastra__"]),
              st.text(max_size=12)),
)


def test_exactly_the_reserved_keys_are_refused_for_any_key_name() -> None:
    agent = Agent(id="demo", model=FunctionModel(lambda request: text("ok")))
    with ServerThread(create_app([agent])) as url, httpx.Client(base_url=url) as client:

        @settings(max_examples=60, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(key=KEYS)
        def check(key: str) -> None:
            try:
                key.encode("utf-8")
            except UnicodeEncodeError:
                return  # not JSON text a client can send
            answer = client.post("/api/agents/demo/generate", content=json.dumps(
                {"messages": "hi", "requestContext": {key: 1}}).encode(),
                headers={"content-type": "application/json"})
            if key.startswith(("streamkit__", "mastra__")):
                assert answer.status_code == 400
                assert answer.json()["issues"][0]["field"] == f"requestContext.{key}"
            else:
                assert answer.status_code == 200, answer.text

        check()


def test_hooks_are_plain_callables_of_the_request() -> None:
    # Callable objects work too (decided once: sync here).
    class Header:
        def __call__(self, request: Request) -> str | None:
            return request.headers.get("x-user")

    hook: Callable[[Request], str | None] = Header()
    agent = Agent(id="demo", model=Recorder().model, memory=Memory())
    with ServerThread(create_app([agent], resource=hook)) as url, \
            httpx.Client(base_url=url) as client:
        ok = client.post("/api/agents/demo/generate", headers=as_user("u"),
                         json={"messages": "hi", "threadId": "t"})
        listed = client.get("/api/memory/threads", headers=as_user("u"))
    assert ok.status_code == 200
    assert [t["id"] for t in listed.json()["threads"]] == ["t"]


# --------------------------------------------------------------------------------------------
# Races: a thread taken by another resource between the route's check and the store's
# --------------------------------------------------------------------------------------------


class RacingStore:
    """A real SQLite store whose first ``get_thread`` of an id answers as if the thread did not
    exist yet and then lets another resource take it — what a concurrent request does between
    the route's check and the run's (or the insert's)."""

    def __init__(self, path: str, taker: str) -> None:
        self.inner = SQLiteStore(path)
        self.taker = taker
        self.raced: set[str] = set()

    async def get_thread(self, thread_id: str) -> Any:
        found = await self.inner.get_thread(thread_id)
        if thread_id in self.raced:
            return found
        self.raced.add(thread_id)
        if found is None:
            await Memory(self.inner).create_thread(thread_id, resource_id=self.taker)
        return None

    async def create_thread(self, thread: Any) -> Any:
        return await self.inner.create_thread(thread)

    async def list_threads(self, resource_id: str) -> Any:
        return await self.inner.list_threads(resource_id)

    async def save_messages(self, thread_id: str, resource_id: str | None,
                            messages: Any) -> Any:
        return await self.inner.save_messages(thread_id, resource_id, messages)

    async def get_messages(self, thread_id: str, limit: int | None = None) -> Any:
        return await self.inner.get_messages(thread_id, limit)

    async def delete_thread(self, thread_id: str) -> bool:
        return await self.inner.delete_thread(thread_id)

    async def close(self) -> None:
        await self.inner.close()


@pytest.mark.parametrize("route", ["generate", "stream", "chat"])
async def test_a_thread_taken_since_the_check_is_still_403_without_the_owner(
        tmp_path: Path, route: str) -> None:
    memory = Memory(RacingStore(str(tmp_path / "race.sqlite3"), taker=OWNER))
    recorder = Recorder()
    async with running(create_app([agent_with(memory, recorder)])) as url, \
            httpx.AsyncClient(base_url=url) as client:
        path, body = agent_call(route, "memory", INTRUDER)
        answer = await client.post(path, json=body)
        created = await client.post("/api/memory/threads", json={
            "threadId": "raced-new", "resourceId": INTRUDER})
    await memory.close()
    assert answer.status_code == 403 and answer.json() == DENIED
    assert recorder.calls == 0
    assert created.status_code == 409 and OWNER not in created.text


# --------------------------------------------------------------------------------------------
# The command line: --resource-header
# --------------------------------------------------------------------------------------------


def _get(url: str, **kwargs: Any) -> httpx.Response:
    """GET, retrying refused connects for a bounded time (``serve --port 0`` may print its port
    a moment before it listens: issue 26 point 12, fixed elsewhere)."""
    for _ in range(100):
        try:
            return httpx.get(url, timeout=WAIT, **kwargs)
        except httpx.ConnectError:
            threading.Event().wait(0.05)
    raise AssertionError(f"nothing listens at {url}")


def test_serve_resource_header_lets_the_proxy_decide_the_resource(tmp_path: Path) -> None:
    proc, url = _start(["--demo", "--memory", str(tmp_path / "demo.sqlite3"),
                        "--resource-header", "X-User"], tmp_path)
    try:
        assert _get(f"{url}/api/agents").status_code == 200
        with httpx.Client(base_url=url, timeout=WAIT) as client:
            turn = client.post("/api/agents/support/generate", headers={"x-user": "ada"},
                               json={"messages": "My name is Ada", "threadId": "cli-t"})
            mine = client.get("/api/memory/threads/cli-t/messages", headers={"x-user": "ada"})
            theirs = client.get("/api/memory/threads/cli-t/messages",
                                headers={"x-user": "eve"})
            claimed = client.get("/api/memory/threads/cli-t/messages",
                                 params={"resourceId": "ada"})
    finally:
        _stop(proc)
    assert turn.status_code == 200, turn.text
    assert mine.status_code == 200 and len(mine.json()["messages"]) == 2
    assert theirs.status_code == 403 and theirs.json() == DENIED
    assert claimed.status_code == 403  # no header: no resource, and a claim is not enough


def test_serve_refuses_a_resource_header_that_is_not_a_header_name(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "streamkit", "serve", "--demo",
                           "--resource-header", "x user"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=WAIT, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and "--resource-header must be an HTTP header name" in proc.stderr


@pytest.mark.parametrize("route", ["generate", "stream", "chat"])
async def test_a_thread_taken_during_the_run_never_names_its_owner(
        tmp_path: Path, route: str) -> None:
    from ..test_memory_tenancy import OWNER as FIRST
    from ..test_memory_tenancy import TakenBeforeSave

    memory = Memory(TakenBeforeSave(SQLiteStore(str(tmp_path / "race.sqlite3"))))
    async with running(create_app([agent_with(memory, Recorder())])) as url, \
            httpx.AsyncClient(base_url=url) as client:
        path, body = agent_call(route, "memory", INTRUDER)
        answer = await client.post(path, json=body)
    messages = await memory.get_messages(THREAD)
    await memory.close()
    assert FIRST not in answer.text
    assert messages == []
    if route == "generate":
        assert answer.status_code == 403 and answer.json() == DENIED
    else:  # the stream had started: an in-band error, then the end
        assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
        assert '"type":"error"' in answer.text and "another resource" in answer.text


# A property over many pairs of resource ids (look-alikes included: case, spaces, unicode):
# whatever the second one is, it reaches nothing of the first one's thread on any route.
RESOURCE_IDS = st.one_of(
    st.text(min_size=1, max_size=16).filter(lambda s: s.strip() != ""),
    st.sampled_from(["alice", "Alice", "alice ", " alice", "alice\u200b", "al\u0131ce"]),
)


def _encodable(*values: str) -> bool:
    try:
        for value in values:
            value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_no_other_resource_id_reaches_a_thread_on_any_route(tmp_path: Path) -> None:
    memory = Memory(SQLiteStore(str(tmp_path / "property.sqlite3")))
    recorder = Recorder()
    app = create_app([agent_with(memory, recorder)])
    with ServerThread(app) as url, httpx.Client(base_url=url, timeout=WAIT) as client:
        counter = iter(range(1_000_000))

        @settings(max_examples=40, deadline=None)
        @given(owner=RESOURCE_IDS, other=RESOURCE_IDS,
               route=st.sampled_from(["generate", "stream", "chat", "thread", "messages"]))
        def check(owner: str, other: str, route: str) -> None:
            if owner == other or not _encodable(owner, other):
                return
            thread = f"t{next(counter)}"
            seeded = client.post("/api/agents/demo/generate", json={
                "messages": SECRET, "memory": {"thread": thread, "resource": owner}})
            assert seeded.status_code == 200, seeded.text
            calls = recorder.calls
            if route in ("thread", "messages"):
                path = f"/api/memory/threads/{thread}" + ("/messages" if route == "messages"
                                                          else "")
                answer = client.get(path, params={"resourceId": other})
            else:
                path, body = agent_call(route, "memory", other)
                body["memory"]["thread"] = thread
                answer = client.post(path, json=body)
            assert answer.status_code == 403 and answer.json() == DENIED, (owner, other)
            assert recorder.calls == calls

        check()
    asyncio.run(memory.close())
