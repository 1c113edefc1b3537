"""ResponseCache keeps tenants apart (issue 26, points 3 and 4), on every backend.

* The key is the prompt the model receives, whatever the processor order: a processor that adds
  a user's account text to the prompt in ``process_llm_request`` — before or after the cache —
  gives each user their own entry, and the cache still answers a repeat.
* Two upstreams (real HTTP servers on 127.0.0.1) or two accounts serving the same model id
  never share an entry, and no API key is stored in clear.
* The default scope comes from the run's ``resource_id``; a run with neither resource nor
  thread is not cached; thread and resource scopes cannot name each other's entries; a
  malformed ``request_context`` override is a typed error.

Backends: ``InMemoryCache``, ``SQLiteCache`` (a real file) and ``RedisCache`` (the server at
127.0.0.1:6379; skipped with the reason when it cannot be reached).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import Agent
from streamkit.chunks import TextDelta
from streamkit.errors import InvalidArgument, InvalidType, ProcessorError
from streamkit.models import ModelRequest, OpenAIChatModel
from streamkit.testing import FunctionModel, ScriptedModel, text
from streamkit_operators import InMemoryCache, RedisCache, ResponseCache, SQLiteCache
from streamkit_operators._response_cache import CONTEXT_KEY, upstream_identity

from .._http_server import ReplayServer, Reply
from ..conftest import P, as_mode

QUESTION = "What is my balance?"


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The backend under test (Redis: this test's own key prefix, deleted afterwards)."""
    if request.param == "memory":
        yield InMemoryCache()
    elif request.param == "sqlite":
        sqlite = SQLiteCache(tmp_path / "cache.db")
        yield sqlite
        sqlite.close()
    else:
        cache = RedisCache(request.getfixturevalue("redis_url"),
                           prefix=request.getfixturevalue("redis_prefix"))
        yield cache
        await cache.aclose()


async def entries(store: Any) -> list[tuple[str, str]]:
    """Every ``(key, value as JSON text)`` the backend holds."""
    keys = store.keys()
    if not isinstance(keys, list):
        keys = await keys
    out = []
    for key in keys:
        value = store.get(key)
        if not isinstance(value, dict | None):
            value = await value
        out.append((key, json.dumps(value)))
    return out


def account_editor(mode: str, *, id: str = "account-text", final: bool = False) -> Any:
    """A processor that puts the caller's account into the prompt for this call only — the
    server put the account in ``request_context`` (as an auth middleware would)."""
    def process_llm_request(prompt: list[dict[str, Any]], request_context: Any) -> Any:
        account = request_context["account"]
        return {"prompt": [*prompt, {"role": "system",
                                     "content": f"Account {account}: balance {len(account)}00"}]}

    return P(id, process_llm_request=as_mode(process_llm_request, mode),
             sees_final_request=final)


def echo_model() -> FunctionModel:
    """Answers with the system text it received: what a user would see of their account."""
    def answer(request: Any) -> Any:
        systems = [m["content"] for m in request.prompt if m["role"] == "system"]
        return text(" | ".join(systems) or "no account")

    return FunctionModel(answer)


async def ask(agent: Agent, account: str, **kw: Any) -> Any:
    return await agent.generate(QUESTION, request_context={"account": account}, **kw)


# --------------------------------------------------------------------------- point 4: the prompt


@pytest.mark.parametrize("order", ["cache-first", "cache-last"])
@pytest.mark.parametrize("sharing", [
    pytest.param({"scope": None}, id="one-cache-for-everyone"),
    pytest.param({"resource_id": "acme"}, id="two-users-of-one-resource"),
])
async def test_each_user_gets_their_own_answer_whatever_the_order(
        store: Any, mode: str, order: str, sharing: dict[str, Any]) -> None:
    # Users whose entries share a scope (scope=None, or one resource for a whole company):
    # only the key keeps them apart
    options = dict(sharing)
    run_options = {"resource_id": options.pop("resource_id")} if "resource_id" in options else {}
    cache = ResponseCache(store, **options)
    editor = account_editor(mode)
    model = echo_model()
    processors = [cache, editor] if order == "cache-first" else [editor, cache]
    agent = Agent(id="bank", model=model, input_processors=processors)
    alice = await ask(agent, "alice", **run_options)
    bob = await ask(agent, "bob", **run_options)
    assert alice.text == "Account alice: balance 500"
    assert bob.text == "Account bob: balance 300"
    # the cache still works: a hit for the same final prompt
    again = await ask(agent, "alice", **run_options)
    assert again.text == alice.text and again.steps[0].from_cache
    assert model.calls == 2
    # the lookup ran after the edit, wherever the cache was listed
    assert [r.processor_id for r in alice.trace if r.hook == "process_llm_request"] == \
        ["account-text", "response-cache"]


async def test_the_graph_shows_the_cache_after_the_prompt_editors(mode: str) -> None:
    agent = Agent(id="bank", model=echo_model(),
                  input_processors=[ResponseCache(scope=None), account_editor(mode)])
    node = next(n for n in agent.graph().nodes if n.name == "process_llm_request")
    assert node.processors == ("account-text", "response-cache")


async def test_final_request_processors_run_after_the_others_in_list_order(mode: str) -> None:
    """The engine's part, on its own: ``sees_final_request`` moves a processor's
    ``process_llm_request`` after every other one's; among such processors, list order holds."""
    seen: dict[str, list[str]] = {}

    def adder(name: str, final: bool) -> Any:
        def process_llm_request(prompt: list[dict[str, Any]]) -> Any:
            seen[name] = [m["content"] for m in prompt if m["role"] == "system"]
            return {"prompt": [*prompt, {"role": "system", "content": name}]}

        return P(name, process_llm_request=as_mode(process_llm_request, mode),
                 sees_final_request=final)

    model = echo_model()
    agent = Agent(id="order", model=model, input_processors=[
        adder("final-1", True), adder("x", False), adder("final-2", True), adder("y", False)])
    result = await agent.generate("hi")
    assert seen == {"x": [], "y": ["x"], "final-1": ["x", "y"], "final-2": ["x", "y", "final-1"]}
    assert result.text == "x | y | final-1 | final-2"


async def test_an_edit_after_the_lookup_is_never_written(store: Any, mode: str,
                                                         caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    # Another processor that also asks to run last, listed after the cache, edits the prompt
    # after the lookup: no entry may be written under a key that names another prompt.
    model = echo_model()
    agent = Agent(id="bank", model=model, input_processors=[
        ResponseCache(store, scope=None), account_editor(mode, final=True)])
    with caplog.at_level(logging.WARNING, logger="streamkit_operators"):
        alice = await ask(agent, "alice")
        bob = await ask(agent, "bob")
    assert (alice.text, bob.text) == ("Account alice: balance 500", "Account bob: balance 300")
    assert await entries(store) == [] and model.calls == 2
    assert alice.states["response-cache"]["unkeyed"] == 1
    assert sum("changed the prompt" in r.getMessage() for r in caplog.records) == 1  # once


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(["cache", "account", "greeting", "looker"]),
       users=st.lists(st.sampled_from(["ann", "bo", "cy"]), min_size=1, max_size=6))
async def test_answers_always_match_the_prompt_the_model_got(order: list[str],
                                                             users: list[str]) -> None:
    """Over any order of editors and any sequence of users, every answer is the one the model
    gave (or would give) to that user's final prompt, and each distinct prompt costs one call."""
    def greeting(prompt: list[dict[str, Any]]) -> Any:
        return {"prompt": [{"role": "system", "content": "Be kind."}, *prompt]}

    seen: list[Any] = []
    processors = {"cache": ResponseCache(scope=None), "account": account_editor("sync"),
                  "greeting": P("greeting", process_llm_request=greeting),
                  "looker": P("looker", process_llm_request=lambda prompt: seen.append(prompt))}
    model = echo_model()
    agent = Agent(id="bank", model=model, input_processors=[processors[k] for k in order])
    for user in users:
        result = await ask(agent, user)
        assert result.text == f"Be kind. | Account {user}: balance {len(user)}00"
    assert model.calls == len(set(users))


# ------------------------------------------------------------------------ point 4: the upstream


def sse_text(words: str) -> Reply:
    """An OpenAI chat-completions stream answering ``words``."""
    events = [{"id": "c1", "object": "chat.completion.chunk", "model": "same-model",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": words}}]},
              {"id": "c1", "object": "chat.completion.chunk", "model": "same-model",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return Reply.sse(body + b"data: [DONE]\n\n")


@pytest.fixture
def servers() -> Iterator[tuple[ReplayServer, ReplayServer]]:
    with ReplayServer() as one, ReplayServer() as two:
        yield one, two


async def test_two_upstreams_with_the_same_model_id_share_nothing(
        store: Any, servers: tuple[ReplayServer, ReplayServer]) -> None:
    one, two = servers
    one.enqueue(sse_text("from upstream one"))
    two.enqueue(sse_text("from upstream two"))
    cache = ResponseCache(store, scope=None)
    async with OpenAIChatModel("same-model", base_url=one.base_url, api_key="sk-one") as m1, \
            OpenAIChatModel("same-model", base_url=two.base_url, api_key="sk-one") as m2:
        first = await Agent(id="a", model=m1, input_processors=[cache]).generate(QUESTION)
        second = await Agent(id="a", model=m2, input_processors=[cache]).generate(QUESTION)
        repeat = await Agent(id="a", model=m1, input_processors=[cache]).generate(QUESTION)
    assert (first.text, second.text) == ("from upstream one", "from upstream two")
    assert not second.steps[0].from_cache and len(two.requests) == 1
    assert repeat.text == "from upstream one" and repeat.steps[0].from_cache
    assert len(one.requests) == 1


async def test_two_accounts_on_one_upstream_share_nothing(
        store: Any, servers: tuple[ReplayServer, ReplayServer]) -> None:
    server, _ = servers
    server.enqueue(sse_text("for account a"), sse_text("for account b"))
    cache = ResponseCache(store, scope=None)
    async with OpenAIChatModel("same-model", base_url=server.base_url,
                               api_key="sk-account-a-secret") as a, \
            OpenAIChatModel("same-model", base_url=server.base_url,
                            api_key="sk-account-b-secret") as b:
        first = await Agent(id="x", model=a, input_processors=[cache]).generate(QUESTION)
        second = await Agent(id="x", model=b, input_processors=[cache]).generate(QUESTION)
        repeat = await Agent(id="x", model=b, input_processors=[cache]).generate(QUESTION)
    assert (first.text, second.text, repeat.text) == ("for account a", "for account b",
                                                      "for account b")
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer sk-account-a-secret", "Bearer sk-account-b-secret"]
    stored = await entries(store)
    assert len(stored) == 2
    assert not any("secret" in key or "secret" in value for key, value in stored)


def test_upstream_identity_names_the_server_and_hashes_the_account(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def ident(**kw: Any) -> dict[str, Any]:
        kw.setdefault("base_url", "http://10.0.0.1:8000/v1")
        return upstream_identity(OpenAIChatModel("m", **kw))

    base = ident(api_key="sk-1")
    assert base["base_url"] == "http://10.0.0.1:8000/v1" and "sk-1" not in str(base)
    assert ident(api_key="sk-2")["account"] != base["account"]
    assert ident(api_key="sk-1", base_url="http://10.0.0.2:8000/v1")["base_url"] != \
        base["base_url"]
    assert ident(api_key="sk-1", headers={"OpenAI-Organization": "org-2"})["account"] != \
        base["account"]
    # credentials in the URL: not shown, but they tell accounts apart
    with_user = ident(api_key="sk-1", base_url="http://bob:hunter2@10.0.0.1:8000/v1")
    assert with_user["base_url"] == base["base_url"] and "hunter2" not in str(with_user)
    assert with_user["account"] != base["account"]
    with_query = ident(api_key="sk-1", base_url="http://10.0.0.1:8000/v1?key=qsecret")
    assert with_query["base_url"] == base["base_url"] and "qsecret" not in str(with_query)
    assert with_query["account"] != base["account"]
    # no api_key: the key the model reads from the environment is the account
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-a")
    env_a = ident()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-b")
    assert ident()["account"] != env_a["account"] and "sk-env" not in str(env_a)
    # a model object without a URL (a test double) is identified by provider:model_id alone
    assert upstream_identity(ScriptedModel([])) == {"base_url": None, "account": None}


# --------------------------------------------------------------------------- point 3: the scope


async def test_the_default_scope_is_the_runs_resource(store: Any) -> None:
    model = ScriptedModel([text("for u1"), text("for u2")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(store)])
    assert (await agent.generate("q", resource_id="u1")).text == "for u1"
    # anything else a client might send (request_context values) does not choose the scope
    other = await agent.generate("q", resource_id="u2", request_context={"resourceId": "u1",
                                                                          "scope": "u1"})
    assert other.text == "for u2" and model.calls == 2


async def test_a_run_without_resource_or_thread_is_not_cached(
        store: Any, caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([text("anon 1"), text("anon 2"), text("shared")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(store)])
    with caplog.at_level(logging.WARNING, logger="streamkit_operators"):
        assert (await agent.generate("q")).text == "anon 1"
        assert (await agent.generate("q")).text == "anon 2"
    assert await entries(store) == []
    assert sum("not cached" in r.getMessage() for r in caplog.records) == 1  # warned once
    # sharing between everyone is a choice the developer writes down
    shared = Agent(id="faq", model=model, input_processors=[ResponseCache(store, scope=None)])
    assert (await shared.generate("q")).text == "shared"
    assert (await shared.generate("q")).text == "shared" and model.calls == 3


async def test_a_thread_never_reads_a_resources_entries(store: Any) -> None:
    model = ScriptedModel([text("alice's answer"), text("thread answer"),
                           text("thread answer again")])
    agent = Agent(id="faq", model=model, input_processors=[ResponseCache(store)])
    await agent.generate("q", resource_id="alice")
    # no resource: scoped to the thread, even a thread whose id is alice's resource id
    by_thread = await agent.generate("q", thread_id="alice")
    assert by_thread.text == "thread answer" and not by_thread.steps[0].from_cache
    again = await agent.generate("q", thread_id="alice")
    assert again.text == "thread answer" and again.steps[0].from_cache
    # a scope function with no answer: not cached (never the shared scope)
    unknown = Agent(id="faq", model=model, input_processors=[
        ResponseCache(store, scope=lambda ctx: ctx.get("tenant"))])
    assert (await unknown.generate("q", request_context={})).text == "thread answer again"
    assert model.calls == 3


@pytest.mark.parametrize("options, error, words", [
    pytest.param({"scope": 42}, InvalidArgument, "scope must be", id="scope-int"),
    pytest.param({"bust": "yes"}, InvalidArgument, "bust must be True or False",
                 id="bust-str"),
    pytest.param({"key": ["k"]}, InvalidType, "cache key (key=)", id="key-list"),
    pytest.param({"scpoe": "x"}, InvalidArgument, "'key', 'scope', 'bust'", id="misspelt"),
    pytest.param("tenant-1", InvalidArgument, "must be a dict", id="not-a-dict"),
])
async def test_a_malformed_override_is_a_typed_error(options: Any, error: type[Exception],
                                                     words: str) -> None:
    agent = Agent(id="faq", model=ScriptedModel([text("never")]),
                  input_processors=[ResponseCache()])
    with pytest.raises(ProcessorError) as info:
        await agent.generate("q", resource_id="u1", request_context={CONTEXT_KEY: options})
    cause = info.value.__cause__
    assert isinstance(cause, error) and words in str(cause)


def test_context_checks_the_overrides_it_makes() -> None:
    with pytest.raises(InvalidArgument, match="scope must be"):
        ResponseCache.context(scope=42)
    with pytest.raises(InvalidArgument, match="bust must be True or False"):
        ResponseCache.context(bust="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="non-empty str, got ''"):
        ResponseCache.context(key="")
    assert ResponseCache.context(scope=None) == {CONTEXT_KEY: {"scope": None}}


async def test_an_answer_whose_prompt_cannot_be_checked_is_not_stored() -> None:
    # a lone surrogate cannot be encoded, so the prompt the model got cannot be compared with
    # the one the key names: the answer is dropped, and the run does not fail
    store = InMemoryCache()
    cache = ResponseCache(store, scope=None)
    state: dict[str, Any] = {"pending": "k1", "pending_prompt": "0" * 64}
    ok = TextDelta(id="t", text="hi", run_id="r", from_="AGENT")
    await cache.process_llm_response(chunks=[ok], from_cache=False, state=state, step_number=0,
                                     request=ModelRequest(prompt=[{"role": "user",
                                                                   "content": "\ud800"}]))
    assert store.keys() == [] and state["unkeyed"] == 1
