"""Who a request may act as: the server decides the resource and the trusted request context.

What belongs here: ``Tenancy`` — the server-side hooks ``create_app`` takes (``resource=``,
``request_context=``, ``client_context_keys=``), the rule that a client's body selects data only
within what the server decided, and the answers when it tries otherwise. What does not: parsing
bodies (``_requests``), the routes (``_mastra``, ``_app``).

The rules (``docs/serving.md``, "Trust boundary" and "Tenancy rules"):

* **The resource.** With a ``resource`` hook, the server decides each request's resource (e.g.
  from an auth header): a body or query ``resourceId`` that differs is ``403``, an absent one is
  filled from the hook. Without a hook, the ``resourceId`` a client sends is its claim, checked
  only against the threads' owners (fine behind a gateway that sets it; multi-tenant servers
  set the hook).
* **Threads.** A ``threadId`` needs a resource (``400`` when there is none, before the thread
  is looked up); a thread owned by another resource is ``403 {"error": "Access denied: thread
  belongs to a different resource"}`` — never read, never appended to, its owner never named.
* **The request context.** Keys starting with ``streamkit__`` or ``mastra__`` are reserved for
  the server and the library (``ResponseCache`` takes per-call key and scope overrides under
  ``streamkit__response_cache``): a client that sends one gets a ``400`` naming the key.
  ``client_context_keys`` narrows what a client may send to an explicit allow-list; the
  ``request_context`` hook adds trusted entries, which win over the client's and may use the
  reserved keys.

Decisions: a resource hook returning ``None`` means "this caller has no resource" (memory is
refused, a client-given ``resourceId`` is ``403``); to refuse a request outright a hook raises
Starlette's ``HTTPException`` (e.g. ``401``). A hook that returns something else is a server bug:
``500`` saying what it returned. Hooks may be sync or async (decided once, when the app is
built).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..agent import Agent
from ..errors import InvalidArgument, InvalidType
from ..memory import Memory
from ..processors import is_async_callable
from ._requests import Call

__all__ = ["Tenancy", "RESERVED_CONTEXT_PREFIXES", "DENIED", "ResourceHook", "ContextHook"]

#: ``request_context`` key prefixes only the server may set (the library's per-call options).
RESERVED_CONTEXT_PREFIXES = ("streamkit__", "mastra__")

#: Mastra's answer for a thread of another resource (``validateThreadOwnership``).
DENIED = "Access denied: thread belongs to a different resource"

#: ``(request) -> resource id | None`` (or a coroutine of it): the caller's resource.
ResourceHook = Callable[[Request], "str | None | Awaitable[str | None]"]
#: ``(request) -> dict | None`` (or a coroutine of it): trusted ``request_context`` entries.
ContextHook = Callable[[Request], "Mapping[str, Any] | None | Awaitable[Mapping[str, Any] | None]"]


def _denied(message: str = DENIED) -> JSONResponse:
    return JSONResponse({"error": message}, 403)


def _body_error(field: str, message: str) -> JSONResponse:
    return JSONResponse({"error": "Invalid request body",
                         "issues": [{"field": field, "message": message}]}, 400)


def _hook_error(what: str, value: object, expected: str) -> JSONResponse:
    # A server-side bug, not the client's: 500, saying what the hook gave.
    return JSONResponse({"error": f"the server's {what} hook returned {type(value).__name__}; "
                                  f"expected {expected}"}, 500)


def _reserved(key: str) -> bool:
    return key.startswith(RESERVED_CONTEXT_PREFIXES)


class Tenancy:
    """The server's decisions about a request: its resource and its trusted request context.

    Args:
        resource: ``fn(request) -> str | None`` (sync or async), the caller's resource as the
            server decides it; ``None`` (default): the client's ``resourceId`` is used.
        request_context: ``fn(request) -> dict | None`` (sync or async): entries added to every
            call's ``request_context``, over the client's.
        client_context_keys: the only ``requestContext`` keys a client may send; ``None``
            (default): any key not reserved.

    Raises:
        InvalidType: a hook that is not callable, keys that are not strings.
        InvalidArgument: a reserved key in ``client_context_keys``.

    Example:
        >>> tenancy = Tenancy(resource=lambda request: request.headers.get("x-user-id"))
    """

    def __init__(self, *, resource: ResourceHook | None = None,
                 request_context: ContextHook | None = None,
                 client_context_keys: Collection[str] | None = None) -> None:
        for name, hook in (("resource", resource), ("request_context", request_context)):
            if hook is not None and not callable(hook):
                raise InvalidType(f"{name}= must be a function of the request (sync or async) "
                                  f"or None, got {type(hook).__name__}")
        if client_context_keys is not None:
            if isinstance(client_context_keys, (str, bytes)) or not all(
                    isinstance(k, str) for k in client_context_keys):
                raise InvalidType(f"client_context_keys must be a collection of str keys or "
                                  f"None, got {client_context_keys!r:.80}")
            bad = sorted(k for k in client_context_keys if _reserved(k))
            if bad:
                raise InvalidArgument(f"client_context_keys cannot allow {bad[0]!r}: keys "
                                      f"starting with {' or '.join(RESERVED_CONTEXT_PREFIXES)} "
                                      f"are reserved for the server (set them with "
                                      f"request_context=)")
        self.resource = resource
        self.request_context = request_context
        self.client_context_keys = None if client_context_keys is None \
            else frozenset(client_context_keys)
        # Sync or async, decided once here rather than per request.
        self._resource_is_async = resource is not None and is_async_callable(resource)
        self._context_is_async = request_context is not None and \
            is_async_callable(request_context)

    # ------------------------------------------------------------------ the resource

    async def resource_of(self, request: Request, claimed: str | None) -> str | None | Response:
        """The resource ``request`` acts as: the hook's when set (a different ``claimed`` one is
        a ``403``), else ``claimed``. A ``Response`` is the refusal to send."""
        if self.resource is None:
            return claimed
        decided: Any = await cast(Awaitable[Any], self.resource(request)) \
            if self._resource_is_async else self.resource(request)
        if decided is not None and (not isinstance(decided, str) or not decided):
            return _hook_error("resource", decided, "a non-empty str or None")
        if claimed is not None and claimed != decided:
            return _denied("Access denied: the resourceId is not the caller's resource")
        return decided

    # ------------------------------------------------------------------ the request context

    def _check_client_context(self, context: Mapping[str, object]) -> Response | None:
        for key in context:
            if _reserved(key):
                return _body_error(f"requestContext.{key}",
                                   f"{key!r} is reserved for the server (keys starting with "
                                   f"{' or '.join(RESERVED_CONTEXT_PREFIXES)}); a client may "
                                   f"not set it")
            if self.client_context_keys is not None and key not in self.client_context_keys:
                allowed = ", ".join(sorted(self.client_context_keys)) or "none"
                return _body_error(f"requestContext.{key}",
                                   f"{key!r} is not a requestContext key this server accepts "
                                   f"(allowed: {allowed})")
        return None

    async def _server_context(self, request: Request) -> Mapping[str, Any] | Response:
        if self.request_context is None:
            return {}
        added: Any = await cast(Awaitable[Any], self.request_context(request)) \
            if self._context_is_async else self.request_context(request)
        if added is None:
            return {}
        if not isinstance(added, Mapping) or not all(isinstance(k, str) for k in added):
            return _hook_error("request_context", added, "a dict with str keys or None")
        return added

    # ------------------------------------------------------------------ one agent call

    async def admit(self, request: Request, agent: Agent, call: Call,
                    resource_field: str) -> Response | None:
        """Settle ``call`` for ``request`` in place (its resource and request context), or the
        refusal to answer instead; nothing has run or been read when it refuses.

        Raises:
            MemoryStoreError: the store failed while checking the thread's owner.

        ``resource_field`` names the body field a missing resource is reported under
        (``memory.resource`` or ``resourceId``).
        """
        context = call.options.get("request_context")
        if isinstance(context, Mapping):
            refused = self._check_client_context(context)
            if refused is not None:
                return refused
        resource = await self.resource_of(request, call.resource_id)
        if isinstance(resource, Response):
            return resource
        if resource is not None:
            call.options["resource_id"] = resource
        trusted = await self._server_context(request)
        if isinstance(trusted, Response):
            return trusted
        if trusted:
            call.options["request_context"] = {**(context or {}), **trusted}
        thread_id = call.thread_id
        if thread_id is None:
            return None
        if resource is None:
            # Mastra: a thread without a resource is refused (requireEffectiveResourceId).
            return _body_error(resource_field, "A resource ID is required when using memory: "
                                               "pass it with the thread")
        if agent.memory is not None:
            return await owner_check(agent.memory, thread_id, resource)
        return None


async def owner_check(memory: Memory, thread_id: str, resource_id: str) -> Response | None:
    """``403`` when ``thread_id`` exists and belongs to another resource; ``None`` when the
    thread is the resource's or does not exist yet. The owner is never named.

    Raises:
        MemoryStoreError: the store failed.
    """
    thread = await memory.get_thread(thread_id)
    if thread is not None and thread.resource_id != resource_id:
        return _denied()
    return None
