"""``ResponseCache``: answer a repeated model call from a cache instead of the provider.

Mastra's ``ResponseCache`` (``docs/mastra-fidelity.md``, "ResponseCache"): ``process_llm_request``
looks the
call up and, on a hit, returns ``{"response": chunks}`` so the agent replays them instead of
calling the model; ``process_llm_response`` stores a live step's chunks. The backends live
beside it: ``InMemoryCache`` (per process, LRU-bounded, the default) and ``SQLiteCache``
(stdlib ``sqlite3``, shared by processes on one machine, survives restarts) in
``_cache_backends``; ``RedisCache`` (``_redis``) shares one cache between machines. Any object
with ``get(key)``, ``set(key, value, ttl)`` and ``delete(key)`` — sync or async — works as a
backend.

Decisions:

* The key is a SHA-256 of a canonical JSON of the prompt exactly as the model would receive it,
  the model (``provider:model_id``), the upstream it is served by (base URL and account, see
  ``upstream_identity``), the tool schemas, ``tool_choice``, ``model_settings``,
  ``provider_options`` and the structured-output schema — everything that changes the answer —
  namespaced and scoped.
* "Exactly as the model would receive it" whatever the processor order: ``ResponseCache`` sets
  ``sees_final_request``, so the engine runs its ``process_llm_request`` after every other
  processor's (which may edit the prompt) and the lookup keys on the final prompt. Refusing a
  list where a processor after the cache edits the prompt was the other option; it was not
  taken because the list is not fixed where the agent is built (a call may replace it, a list
  may be a function of the ``request_context``) and a user who lists the cache first, before
  the processors it should serve, expects it to work. As a second line, an answer is written
  only when the request the model actually got (``process_llm_response``'s ``request``) has
  the prompt the key was made from; otherwise (another "final" processor after the cache
  edited it) nothing is written, with a warning, so an entry can never be found by a prompt
  the model did not answer.
* Scope (whose entries these are) defaults to the run's ``resource_id`` — set by the caller of
  ``generate``/``stream`` (on the HTTP server: the server, see docs/serving.md); the default
  never reads ``request_context``. A run without a resource is scoped to its thread; a run with
  neither is not cached (warned once per cache), because sharing it with everyone must be a
  choice: ``scope=None`` (or a literal scope string) says so. Scopes are tagged by kind
  (``resource:``, ``thread:``, ``custom:``) so a thread id can never name a resource's entries.
* The per-call override (``request_context[CONTEXT_KEY]``) chooses whose entries a call reads
  and writes, so it is trusted only as a server-side option (the class docstring says how);
  a malformed one is a typed error, never a silent change of scope.
* What is stored is the step's chunks as the consumer received them, without the loop's
  framing (``step-start``), transient or processor-made ``data-*`` chunks, or envelopes; a step
  whose chunks hold an ``error``, ``tripwire`` or ``abort`` is never stored, and a failed model
  call never reaches ``process_llm_response``. A replayed step reports zero token usage (nothing
  was billed) and ``step.from_cache``; it goes through the output processors again.
* When a processor rejects a stored answer and the step is retried, the entry written for that
  step in this request is deleted, so the rejected answer is not served again.
* Backend failures (unreadable entry, locked database) are logged and treated as a miss; the
  run never fails because of the cache.
* Single flight (``_single_flight``): concurrent misses on one key make one model call. In a
  process the others wait on the first; across processes the first takes the backend's lease
  (``RedisCache``: ``SET NX PX``; a backend without ``acquire_lease``/``release_lease`` —
  ``InMemoryCache``, ``SQLiteCache``, a custom one — is single-flight within the process only)
  and the others poll the cache for its answer. A holder that fails, is cancelled or dies
  (its lease expires) hands the call to the next waiter; nobody waits past ``wait``, after
  which it calls the model itself; a backend that fails or hangs fails open. The flight is
  keyed by the cache key, so it shares answers exactly where the cache does (scope, upstream).
  ``bust`` skips it (a refresh wants its own call).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from streamkit import MessageList, Processor
from streamkit.chunks import coerce_chunk
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.tools import json_schema
from streamkit.validate import optional_seconds
from streamkit.wire import to_builtins

from ._aio import call_maybe_async
from ._cache_backends import InMemoryCache, SQLiteCache
from ._single_flight import SingleFlight

__all__ = ["ResponseCache", "InMemoryCache", "SQLiteCache", "CONTEXT_KEY", "upstream_identity"]

log = logging.getLogger("streamkit_operators")

#: The ``request_context`` key for per-call options (see ``ResponseCache.context``).
CONTEXT_KEY = "streamkit__response_cache"

_SKIP_TYPES = frozenset(("start", "step-start", "step-finish", "finish", "response-metadata"))
_FAIL_TYPES = frozenset(("error", "tripwire", "abort"))
_UNSET: Any = object()


# Stable JSON (sorted keys, no whitespace, non-JSON values by ``repr``), as UTF-8. msgspec, not
# json.dumps(sort_keys=True): the prompt is hashed twice per step and may be hundreds of KB
# (measured on 100 KB: 0.2 ms against 0.9 ms).
_CANONICAL = msgspec.json.Encoder(order="sorted", enc_hook=repr)


def _digest(value: Any, size: int = 32) -> str:
    """Hex SHA-256 of ``value``'s canonical JSON, cut to ``size`` digits. Raises
    ``UnicodeEncodeError`` for a lone surrogate (such a call is not cached)."""
    return hashlib.sha256(_CANONICAL.encode(value)).hexdigest()[:size]


#: The variable streamkit's HTTP models read their key from when ``api_key`` is ``None``.
_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY"}


def upstream_identity(model: Any) -> dict[str, str | None]:
    """Who serves ``model``'s answers: ``{"base_url", "account"}``, part of every default key.

    Two servers, or two accounts, with the same model id must not share entries (an account's
    fine-tune, a proxy that routes by key, a tenant's deployment all answer differently). What
    a model object exposes is read: ``base_url`` (streamkit's HTTP models; shown without its
    ``user:password@`` and query) and, for the account, a SHA-256 of every credential the model
    sends — ``api_key`` (or, when it is ``None``, the environment variable the model reads at the
    call: ``ANTHROPIC_API_KEY`` for provider ``anthropic``, else ``OPENAI_API_KEY``), the URL's
    user info and query, and the model's ``headers`` (``Authorization``,
    ``OpenAI-Organization``...). A secret
    is never in the result in clear. A model object without these attributes (a test double, a
    custom model) is identified by ``provider:model_id`` alone; give it a ``base_url`` or the
    cache a ``namespace`` per upstream.

    Example:
        >>> from streamkit.models import OpenAIChatModel
        >>> upstream_identity(OpenAIChatModel("m", base_url="http://u:pw@10.0.0.1/v1",
        ...                                   api_key="sk-1"))["base_url"]
        'http://10.0.0.1/v1'
    """
    base_url = getattr(model, "base_url", None)
    if not isinstance(base_url, str):
        return {"base_url": None, "account": None}
    parts = urlsplit(base_url)
    userinfo, _, host = parts.netloc.rpartition("@")
    # user info and query (``?key=...``) may hold credentials: hashed, never shown
    shown = urlunsplit((parts.scheme, host, parts.path, "", ""))
    key = getattr(model, "api_key", None)
    if key is None:
        key = os.environ.get(_KEY_ENV.get(str(getattr(model, "provider", "")), "OPENAI_API_KEY"))
    headers = getattr(model, "headers", None)
    secret = {"key": key, "userinfo": userinfo, "query": parts.query,
              "headers": sorted((str(k).lower(), str(v)) for k, v in headers.items())
              if isinstance(headers, dict) else None}
    return {"base_url": shown, "account": _digest(secret)}


def _tool_schema(tool: Any) -> dict[str, Any]:
    spec = getattr(tool, "spec", tool)
    if isinstance(spec, dict):
        return spec
    return {"name": getattr(spec, "name", getattr(tool, "id", None)),
            "description": getattr(spec, "description", None),
            "parameters": getattr(spec, "parameters", getattr(tool, "input_schema", None))}


# --------------------------------------------------------------------------------------------
# The processor
# --------------------------------------------------------------------------------------------


class ResponseCache(Processor):
    """Replays a cached answer for a model call seen before, and caches live answers.

    Put it in ``input_processors`` (its hooks are ``process_llm_request`` and
    ``process_llm_response``), anywhere in the list: its lookup runs after every other
    processor's ``process_llm_request`` (``sees_final_request``), so the key is the prompt the
    model receives, including what processors edited for this call (a user's account text).

    Args:
        cache: the backend (default: a new ``InMemoryCache()``).
        key: a fixed key, or ``fn(inputs) -> str`` over ``{"prompt", "model", "upstream",
            "tools", "tool_choice", "model_settings", "provider_options", "structured_output"
            (its JSON schema), "step_number", "scope", "request_context"}``; default: a hash
            of those that change the answer (``upstream``: ``upstream_identity``, the base URL
            and account). A custom key replaces that hash (the scope still prefixes it):
            include what must keep entries apart. A key function that raises (or returns an
            empty key) turns caching off for that call.
        ttl: seconds an entry lives (default 300; ``None``: until evicted).
        scope: whose entries these are — ``"resource"`` (default: the run's ``resource_id``;
            a run without one: its ``thread_id``; with neither: not cached), ``"thread"``
            (the run's ``thread_id``; without one: not cached), ``None`` (shared by everyone),
            any other string (that literal scope), or ``fn(request_context) -> str | None``
            (``None``: not cached).
        bust: skip the lookup but still store the fresh answer (refresh).
        namespace: first part of every key (Mastra's ``agentId``), so agents do not share.
        lease: single flight (see the module docstring): seconds the first caller of a new key
            holds it — on a backend with leases, also how long a dead holder's lease blocks
            the others (default 30; set it above a typical model call). ``None``: no single
            flight, every concurrent miss calls the model.
        wait: seconds a caller waits for another's answer before calling the model itself
            (default: twice ``lease``, so a waiter outlasts a dead holder's lease).
        id: processor id (default ``"response-cache"``).

    Per call, ``request_context=ResponseCache.context(key=..., scope=..., bust=True)`` overrides
    ``key``, ``scope`` and ``bust`` (a malformed override raises ``InvalidArgument`` or
    ``InvalidType``: a mistyped option must not quietly change whose entries are read).

    Trust: the override lives in ``request_context`` under ``CONTEXT_KEY``
    (``"streamkit__response_cache"``), and whoever sets it chooses whose entries a call reads
    and writes. It is a server-side option: in-process, ``request_context`` is the developer's
    and trusted. A server must never forward a client-chosen value for it — streamkit's HTTP
    server rejects client ``requestContext`` keys starting with ``streamkit__`` (docs/serving.md,
    "Trust boundary") — and a ``scope`` function must read only what the server put in
    ``request_context``. The default scope reads nothing a client sends: the run's
    ``resource_id``, which the server decides.

    Example:
        >>> cache = ResponseCache(SQLiteCache("responses.db"), ttl=3600)
        >>> agent = Agent(id="faq", model="openai/gpt-4o-mini", input_processors=[cache])
        >>> await agent.generate("Opening hours?", resource_id="u1")   # calls the model
        >>> await agent.generate("Opening hours?", resource_id="u1")   # replayed, no model call
        >>> shared = ResponseCache(SQLiteCache("faq.db"), scope=None)  # one entry for everyone
    """

    id = "response-cache"
    name = "Response Cache"
    sees_final_request = True

    def __init__(self, cache: Any = None, *, key: str | Callable[[dict[str, Any]], str] | None
                 = None, ttl: float | None = 300, scope: Any = "resource", bust: bool = False,
                 namespace: str = "streamkit-response-cache", lease: float | None = 30.0,
                 wait: float | None = None, id: str | None = None) -> None:
        super().__init__(id)
        cache = InMemoryCache() if cache is None else cache
        for method in ("get", "set", "delete"):
            if not callable(getattr(cache, method, None)):
                raise InvalidType(f"cache must have get/set/delete methods; "
                                  f"{type(cache).__name__} has no {method}()")
        optional_seconds(ttl, "ttl")
        for name, value in (("lease", lease), ("wait", wait)):
            optional_seconds(value, name)
        self.cache = cache
        #: One model call per new key at a time (``None`` when ``lease=None``).
        self.single_flight = None if lease is None else SingleFlight(
            cache, lease=float(lease), wait=float(2 * lease if wait is None else wait))
        self.key = _check_key(key)
        self.ttl = ttl
        self.scope = _check_scope(scope)
        self.bust = bust
        self.namespace = namespace
        self._warned: set[str] = set()

    # -- per-call options ---------------------------------------------------------------------

    @staticmethod
    def context(*, key: str | Callable[[dict[str, Any]], str] | None = None,
                scope: Any = _UNSET, bust: bool | None = None) -> dict[str, Any]:
        """A ``request_context`` holding per-call overrides (a server-side option: see the
        class docstring).

        Example:
            >>> await agent.generate("q", request_context=ResponseCache.context(bust=True))
        """
        return ResponseCache.apply_context({}, key=key, scope=scope, bust=bust)

    @staticmethod
    def apply_context(request_context: dict[str, Any], *,
                      key: str | Callable[[dict[str, Any]], str] | None = None,
                      scope: Any = _UNSET, bust: bool | None = None) -> dict[str, Any]:
        """Add per-call overrides to an existing ``request_context`` (returned, changed in
        place)."""
        options: dict[str, Any] = {}
        if key is not None:
            options["key"] = _check_key(key)
        if scope is not _UNSET:
            options["scope"] = _check_scope(scope)
        if bust is not None:
            options["bust"] = _check_bust(bust)
        request_context[CONTEXT_KEY] = options
        return request_context

    # -- keys ---------------------------------------------------------------------------------

    def _scope_value(self, scope: Any, message_list: MessageList | None,
                     request_context: Any) -> str | None:
        """The tagged scope, ``None`` for shared by everyone, or ``_NO_SCOPE`` (not cached)."""
        if scope is None:
            return None
        resource = getattr(message_list, "resource_id", None) or None
        thread = getattr(message_list, "thread_id", None) or None
        if callable(scope):
            value = scope(request_context)
            return _NO_SCOPE if value is None else f"custom:{value}"
        if scope == "resource":
            if resource is not None:
                return f"resource:{resource}"
            return _NO_SCOPE if thread is None else f"thread:{thread}"
        if scope == "thread":
            return _NO_SCOPE if thread is None else f"thread:{thread}"
        return f"custom:{scope}"

    def make_key(self, inputs: dict[str, Any], key: Any = None, *,
                 prompt_digest: str | None = None) -> str:
        """The cache key for one call's ``inputs`` (see the class docstring).

        Format: ``<namespace>[:<8 hex of sha256(scope)>]:<32 hex of sha256(canonical inputs)>``;
        the prompt enters as its own SHA-256 (``prompt_digest`` when the caller has it).
        """
        key = self.key if key is None else key
        scope = inputs.get("scope")
        prefix = self.namespace
        if scope is not None:
            prefix += ":" + hashlib.sha256(str(scope).encode()).hexdigest()[:8]
        if key is not None:
            custom = key(inputs) if callable(key) else key
            if not isinstance(custom, str):
                raise InvalidType(f"the cache key (key=) must be a non-empty str, got "
                                  f"{type(custom).__name__} {custom!r}")
            if not custom:
                raise InvalidArgument("the cache key (key=) must be a non-empty str, got ''")
            return f"{prefix}:{custom}"
        material = {k: inputs.get(k) for k in _KEY_INPUTS}
        material["prompt"] = prompt_digest or _digest(inputs.get("prompt"), 64)
        return f"{prefix}:{_digest(material)}"

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning("response-cache %r: %s", self.id, message)

    # -- hooks --------------------------------------------------------------------------------

    async def process_llm_request(self, prompt: list[dict[str, Any]], model: Any, tools: Any,
                                  tool_choice: Any, model_settings: dict[str, Any],
                                  provider_options: dict[str, Any], structured_output: Any,
                                  request_context: Any,
                                  message_list: MessageList, state: dict[str, Any],
                                  step_number: int, retry_count: int
                                  ) -> dict[str, Any] | None:
        state.pop("pending", None)
        state.pop("pending_prompt", None)
        self._land(state)  # an attempt that never reported (a stream tripwire, then a retry)
        written: dict[int, str] = state.setdefault("written", {})
        if retry_count and step_number in written:
            # A processor rejected the answer this request stored for this step.
            await self._safe(self.cache.delete, written.pop(step_number))
        overrides = _overrides(request_context)
        try:
            scope = self._scope_value(overrides.get("scope", self.scope), message_list,
                                      request_context)
        except Exception:  # noqa: BLE001 - no scope, no caching; never fail the run
            log.exception("response-cache: the scope function failed; not caching this call")
            return None
        if scope is _NO_SCOPE:
            self._warn_once("no-scope", "a run without a resource_id or thread_id (or a scope "
                            "function returning None) is not cached; pass resource_id=, or "
                            "scope=None to share entries between everyone")
            return None
        try:
            tool_list = list(tools.values()) if isinstance(tools, dict) else list(tools or ())
            inputs = {
                "prompt": prompt,
                "model": f"{getattr(model, 'provider', '?')}:{getattr(model, 'model_id', model)}",
                "upstream": upstream_identity(model),
                "tools": sorted((_tool_schema(t) for t in tool_list),
                                key=lambda t: str(t.get("name"))),
                "tool_choice": tool_choice, "model_settings": model_settings,
                "provider_options": provider_options,
                "structured_output": None if structured_output is None
                else json_schema(structured_output), "step_number": step_number,
                "scope": scope, "request_context": request_context,
            }
            prompt_digest = _digest(prompt, 64)
            key = self.make_key(inputs, overrides.get("key"), prompt_digest=prompt_digest)
        except Exception:  # noqa: BLE001 - no key, no caching; never fail the run
            log.exception("response-cache: could not build a key; not caching this call")
            return None
        state["pending"] = key
        state["pending_prompt"] = prompt_digest
        if overrides.get("bust", self.bust):
            state["busted"] = state.get("busted", 0) + 1
            return None
        entry = await self._safe(self.cache.get, key)
        chunks = None if entry is _FAILED else self._chunks_of(entry)
        if not chunks:
            # unreadable: drop it so the fresh answer replaces it
            if entry is not None and entry is not _FAILED:
                await self._safe(self.cache.delete, key)
            if self.single_flight is not None:
                chunks, state["flight"] = await self.single_flight.join(
                    key, lambda: self._read(key))
            if not chunks:
                state["misses"] = state.get("misses", 0) + 1
                return None
            state["shared"] = state.get("shared", 0) + 1  # another caller's fresh answer
        state.pop("pending", None)
        state.pop("pending_prompt", None)
        state["hits"] = state.get("hits", 0) + 1
        return {"response": chunks}

    async def process_llm_response(self, chunks: list[Any], from_cache: bool,
                                   state: dict[str, Any], step_number: int,
                                   request: Any = None) -> None:
        try:
            await self._store(chunks, from_cache, state, step_number, request)
        finally:
            self._land(state)  # stored or not: whoever waits for this call reads now
        return None

    async def process_api_error(self, state: dict[str, Any]) -> None:
        # The call failed: a caller waiting for its answer calls the model itself.
        self._land(state)
        return None

    def _land(self, state: dict[str, Any]) -> None:
        if self.single_flight is not None:
            self.single_flight.end(state.pop("flight", None))

    async def _read(self, key: str) -> list[Any] | None:
        entry = await self._safe(self.cache.get, key)
        return None if entry is _FAILED else self._chunks_of(entry)

    async def _store(self, chunks: list[Any], from_cache: bool, state: dict[str, Any],
                     step_number: int, request: Any) -> None:
        key = state.pop("pending", None)
        keyed_prompt = state.pop("pending_prompt", None)
        if from_cache or key is None:
            return None
        if keyed_prompt is not None and request is not None and \
                self._sent_digest(request) != keyed_prompt:
            # Another processor that also runs last changed the prompt after the lookup: this
            # answer is to a prompt the key does not name, so it must not be findable by it.
            self._warn_once("edited", "a processor after the cache (another one with "
                            "sees_final_request) changed the prompt; answers are not cached — "
                            "put the cache after it")
            state["unkeyed"] = state.get("unkeyed", 0) + 1
            return None
        stored: list[dict[str, Any]] = []
        has_tool_calls = False
        for chunk in chunks:
            kind = chunk.type
            if kind in _FAIL_TYPES:
                return None  # never cache a failed or tripped step
            if kind in _SKIP_TYPES or kind.startswith("data-"):
                continue
            data = to_builtins(chunk)
            data.pop("runId", None)
            data.pop("from", None)
            stored.append(data)
            has_tool_calls = has_tool_calls or kind == "tool-call"
        if not stored:
            return None
        stored.append({"type": "finish", "payload": {
            "stepResult": {"reason": "tool-calls" if has_tool_calls else "stop"},
            "output": {"usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}}}})
        entry = {"chunks": stored, "createdAt": time.time()}
        if await self._safe(self.cache.set, key, entry, self.ttl) is not _FAILED:
            state.setdefault("written", {})[step_number] = key
            state["writes"] = state.get("writes", 0) + 1
        return None

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _sent_digest(request: Any) -> str | None:
        """The digest of the prompt the model got (``None``: unreadable, so not verifiable)."""
        try:
            return _digest(request.prompt, 64)
        except Exception:  # noqa: BLE001 - an answer that cannot be checked is not stored
            return None

    @staticmethod
    def _chunks_of(entry: Any) -> list[Any] | None:
        """The entry's chunks decoded (fresh objects every time), or ``None`` when the entry
        is missing, empty or unreadable."""
        if not isinstance(entry, dict) or not isinstance(entry.get("chunks"), list):
            return None
        try:
            chunks = [coerce_chunk(c) for c in entry["chunks"]]
        except Exception as exc:  # noqa: BLE001 - a stale entry is a miss, not a failure
            log.warning("response-cache: unreadable entry ignored: %s", exc)
            return None
        return chunks or None

    async def _safe(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await call_maybe_async(fn, *args)
        except Exception:  # noqa: BLE001 - documented: backend failures are a miss
            log.exception("response-cache: backend %s() failed; ignored",
                          getattr(fn, "__name__", "call"))
            return _FAILED


_FAILED: Any = object()
_NO_SCOPE: Any = object()  # the scope of a call that is not cached

#: What the default key hashes (``step_number`` and ``request_context`` are for key functions).
_KEY_INPUTS = ("prompt", "model", "upstream", "tools", "tool_choice", "model_settings",
               "provider_options", "structured_output", "scope")
_OVERRIDE_KEYS = frozenset(("key", "scope", "bust"))


def _check_key(key: Any) -> Any:
    if key is None or callable(key):
        return key
    if not isinstance(key, str):
        raise InvalidType(f"the cache key (key=) must be a non-empty str or a function "
                          f"fn(inputs) -> str, got {type(key).__name__} {key!r:.60}")
    if not key:
        raise InvalidArgument("the cache key (key=) must be a non-empty str, got ''")
    return key


def _check_scope(scope: Any) -> Any:
    if scope is not None and not callable(scope) and (not isinstance(scope, str) or not scope):
        raise InvalidArgument(f"scope must be 'resource', 'thread', None (shared by everyone), "
                              f"a non-empty str or fn(request_context) -> str | None; got "
                              f"{type(scope).__name__} {scope!r:.60}")
    return scope


def _check_bust(bust: Any) -> bool:
    if not isinstance(bust, bool):
        raise InvalidArgument(f"bust must be True or False, got {type(bust).__name__} "
                              f"{bust!r:.60}")
    return bust


def _overrides(request_context: Any) -> dict[str, Any]:
    """The per-call overrides under ``CONTEXT_KEY``, checked (``InvalidArgument`` when
    malformed: a misspelt or mistyped option must not silently change whose entries are read)."""
    options = request_context.get(CONTEXT_KEY) if isinstance(request_context, dict) else None
    if options is None:
        return {}
    if not isinstance(options, dict) or not set(options) <= _OVERRIDE_KEYS:
        raise InvalidArgument(f"request_context[{CONTEXT_KEY!r}] must be a dict with any of "
                              f"'key', 'scope', 'bust' (made by ResponseCache.context()); got "
                              f"{options!r:.80}")
    if "key" in options:
        _check_key(options["key"])
    if "scope" in options:
        _check_scope(options["scope"])
    if "bust" in options:
        _check_bust(options["bust"])
    return options
