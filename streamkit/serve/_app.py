"""``create_app``: one ASGI app (Starlette) serving agents to Mastra and AI SDK clients.

What belongs here: assembling the app — the Mastra routes under ``/api`` (``_mastra``), the AI
SDK chat route ``POST /chat/{agent_id}`` (framing ``_ui_stream``'s chunks), the chat page at
``/``, the server's tenancy hooks (``_tenancy``) — and checking what ``create_app`` is given.
What does not: the command line (``_cli``).

Decision: an unknown agent on the chat route is ``404 {"error": "Agent with id X not found"}``
(Mastra's ``chatRoute`` answers ``500 Internal Server Error``); the AI SDK transport throws the
response text either way, and a 404 says what was wrong.
"""

from __future__ import annotations

import re
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from importlib import resources
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from ..agent import Agent
from ..chunks import Chunk, TextDelta
from ..errors import InvalidArgument, InvalidType, StreamkitError
from ..memory import Memory
from ..validate import int_at_least, seconds
from ._limits import DEFAULT_LIMITS, Limits, RequestLimits, request_body
from ._mastra import MastraAPI, error_response
from ._requests import decode_chat_call
from ._sse import DONE, EventStream, SSEResponse
from ._studio import StudioAPI
from ._tenancy import ContextHook, ResourceHook, Tenancy
from ._ui_stream import UI_MESSAGE_STREAM_HEADERS, UIMessageStream

__all__ = ["create_app", "UIFraming", "chat_page"]

_encode = msgspec.json.Encoder().encode


_UNENCODABLE = (UnicodeEncodeError, RecursionError, TypeError, ValueError)


def _unencodable(part: Mapping[str, object], exc: BaseException) -> InvalidArgument:
    return InvalidArgument(f"UI chunk {part.get('type')!r} cannot be encoded: "
                           f"{type(exc).__name__}: {exc}; text must be valid Unicode "
                           f"and values nested at most a few hundred levels")


def _ui_frame(part: Mapping[str, object]) -> bytes:
    """``data: <JSON>\n\n``; a part that cannot be encoded (a lone surrogate in a model's
    text) is a typed error, so the stream reports it in-band and still ends with ``[DONE]``
    (as ``_mastra.sse_frame`` does through ``wire.encode``)."""
    try:
        return b"data: " + _encode(part) + b"\n\n"
    except _UNENCODABLE as exc:
        raise _unencodable(part, exc) from None


class UIFraming:
    """The chat route's body (a ``Framing`` for ``EventStream.of_run``): each UI chunk of
    ``UIMessageStream`` as ``data: <JSON>\\n\\n``, then ``data: [DONE]``.

    A run that fails before it started raises its error (the route answers JSON), as on the
    Mastra route; one raised later becomes a UI ``error`` chunk. A part that cannot be encoded
    (a lone surrogate in a model's text) is a typed error, reported in-band.
    """

    __slots__ = ("_ui", "_convert")

    def __init__(self) -> None:
        self._ui = UIMessageStream()
        self._convert = self._ui.convert

    def frame(self, chunk: Chunk, /) -> bytes:
        if chunk.__class__ is TextDelta:
            # ``UIMessageStream.convert``'s text-delta rule, written here as bytes: no list and
            # dict per delta (~0.17 vs ~0.38 µs; tests/serve/test_ui_framing.py holds the two
            # to the same output).
            payload = chunk.payload
            try:
                return b'data: {"type":"text-delta","id":%b,"delta":%b}\n\n' % (
                    _encode(payload.id), _encode(payload.text))
            except _UNENCODABLE:
                pass  # the general path below raises the typed error
        parts = self._convert(chunk)
        if len(parts) == 1:  # nearly always: one UI chunk per chunk
            return _ui_frame(parts[0])
        return b"".join([_ui_frame(part) for part in parts])  # b"" for none

    def failed(self, error: StreamkitError, /) -> bytes:
        return b"data: " + _encode({"type": "error", "errorText": str(error)}) + b"\n\n"

    def end(self) -> bytes:
        return b"".join([*(_ui_frame(part) for part in self._ui.close()), DONE])


def chat_page() -> str:
    """The chat page's HTML (plain HTML and JS, no build step)."""
    return resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")


class _Chat:
    """``POST /chat/{agent_id}``: the AI SDK v5 UI message stream."""

    def __init__(self, agents: Mapping[str, Agent], *, heartbeat: float,
                 queue_size: int, tenancy: Tenancy) -> None:
        self.agents = agents
        self.heartbeat = heartbeat
        self.queue_size = queue_size
        self.tenancy = tenancy

    async def handle(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        agent = self.agents.get(agent_id)
        if agent is None:
            return JSONResponse({"error": f"Agent with id {agent_id} not found"}, 404)
        try:
            call = decode_chat_call(await request_body(request))
            refused = await self.tenancy.admit(request, agent, call, call.resource_field)
            if refused is not None:
                return refused
            # The UI stream reads a step end's reason, never its message snapshots.
            call.options["step_snapshots"] = False
            stream = agent.stream(call.messages, **call.options)
            events = EventStream.of_run(stream, UIFraming(), queue_size=self.queue_size)
            first = await events.first()
        except StreamkitError as exc:
            return error_response(exc)
        return SSEResponse(events, first, headers=UI_MESSAGE_STREAM_HEADERS,
                           heartbeat=self.heartbeat)


#: The streaming routes the direct path serves (``_App``): Starlette's ``{agent_id}`` is
#: ``[^/]+``, as here.
_STREAM_PATH = re.compile(r"/(?:api/agents/([^/]+)/stream|chat/([^/]+))")


class _App(Starlette):
    """Starlette, plus a direct path to the two streaming routes.

    ``POST /api/agents/{id}/stream`` and ``POST /chat/{id}`` go straight to their handlers,
    inside ``RequestLimits`` (every request limit still applies), instead of through
    Starlette's error middleware, CORS, exception middleware, router and route wrapper: those
    layers cost about a sixth of a short stream's server time (measured: 0.30 vs 0.26 ms per
    request in process; benchmarks/README.md, "Serving"). The answers are the same. The full
    stack is taken instead whenever it could answer differently: a request with an ``Origin``
    header while CORS is on (CORS adds its headers), an app whose middleware or exception
    handlers were changed after ``create_app`` (``add_middleware``,
    ``add_exception_handler``), or a server that mounts the app under a ``root_path``. A
    ``HTTPException`` raised by a hook answers as Starlette's default handler does.
    """

    def __init__(self, *, routes: list[Any], middleware: list[Middleware], limits: Limits,
                 stream: Callable[[Request], Awaitable[Response]],
                 chat: Callable[[Request], Awaitable[Response]], cors: bool) -> None:
        super().__init__(routes=routes, middleware=middleware)
        self._own_middleware = list(self.user_middleware)
        self._handlers = (stream, chat)
        self._cors = cors
        self._direct = RequestLimits(self._serve_direct, limits)

    def _takes_direct(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path") \
                or self.exception_handlers or self.user_middleware != self._own_middleware:
            return False
        if self._cors:
            for name, _ in scope["headers"]:
                if name == b"origin":
                    return False
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._takes_direct(scope):
            found = _STREAM_PATH.fullmatch(scope["path"])
            if found is not None:
                scope["app"] = self
                scope["path_params"] = {"agent_id": found.group(1) or found.group(2)}
                scope["endpoint"] = self._handlers[found.group(1) is None]
                await self._direct(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def _serve_direct(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await scope["endpoint"](request)
        except HTTPException as exc:  # as Starlette's default handler answers it
            response = Response(status_code=exc.status_code, headers=exc.headers) \
                if exc.status_code in (204, 304) else \
                PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)
        await response(scope, receive, send)


def _agents_by_id(agents: Agent | Iterable[Agent] | Mapping[str, Agent]) -> dict[str, Agent]:
    if isinstance(agents, Agent):
        items: list[Agent] = [agents]
    elif isinstance(agents, Mapping):
        items = list(agents.values())
    elif isinstance(agents, Iterable) and not isinstance(agents, (str, bytes)):
        items = list(agents)
    else:
        raise InvalidType(f"create_app() takes an Agent, a list of agents or a dict of them, "
                          f"got {type(agents).__name__}")
    out: dict[str, Agent] = {}
    for agent in items:
        if not isinstance(agent, Agent):
            raise InvalidType(f"create_app() serves streamkit Agents, got "
                              f"{type(agent).__name__}: {agent!r:.60}")
        if agent.id in out:
            raise InvalidArgument(f"two agents have the id {agent.id!r}; ids name the routes "
                                  f"(/api/agents/<id>), so they must be unique")
        out[agent.id] = agent
    if not out:
        raise InvalidArgument("create_app() needs at least one agent")
    return out


def create_app(agents: Agent | Iterable[Agent] | Mapping[str, Agent], *,
               memory: Memory | None = None, heartbeat: float = 15.0,
               queue_size: int = 64, allow_origins: Sequence[str] = ("*",),
               resource: ResourceHook | None = None,
               request_context: ContextHook | None = None,
               client_context_keys: Collection[str] | None = None,
               limits: Limits | None = None, studio: bool = False) -> Starlette:
    """An ASGI app serving ``agents`` to ``@mastra/client-js`` and the AI SDK's ``useChat``.

    Routes: ``GET /api/agents``, ``GET /api/agents/{id}``, ``POST /api/agents/{id}/generate``,
    ``POST /api/agents/{id}/stream`` (SSE of Mastra chunks), the memory routes
    (``GET/POST /api/memory/threads``, ``GET /api/memory/threads/{id}``,
    ``GET /api/memory/threads/{id}/messages``), ``POST /chat/{id}`` (the AI SDK v5 UI message
    stream) and ``GET /`` (a chat page). Processors run exactly as in-process: what the agent's
    processors let out is what goes on the wire and into memory.

    The trust boundary (``docs/serving.md``, "Security"): what a client sends selects data only
    within what the server decided. A ``threadId`` needs a resource (``400`` without one), and a
    thread of another resource is ``403`` on every route, never read nor appended to. Without
    ``resource=``, the ``resourceId`` a client sends is taken as its claim; with it, the server
    decides (a different ``resourceId`` is ``403``, a missing one is filled in). The client's
    ``requestContext`` may never set keys starting with ``streamkit__`` or ``mastra__`` (the
    library's per-call options, such as ``ResponseCache``'s key and scope): ``400`` naming the
    key.

    Args:
        agents: an ``Agent``, a list of agents, or a dict of them (their ids name the routes).
        memory: the memory the memory routes use when a request names no ``agentId`` (default:
            the one memory the agents share, if they do).
        heartbeat: seconds without a chunk after which a stream sends a ``: heartbeat`` comment.
        queue_size: chunks a stream keeps ready for a slow client before the run waits for it
            (default 64; it is also the largest batch a response writes at once: 32 cost
            ~12 % more server CPU on 200-delta streams with no measured change in when the
            first chunk came, benchmarks/README.md "Fourth pass (issue 28)").
        allow_origins: origins whose pages may call the app (CORS). Default ``("*")``, as
            Mastra's server answers (``access-control-allow-origin: *``), so a chat UI served
            from another origin (a dev server) can stream; ``()`` turns CORS off.
        resource: ``fn(request) -> str | None``, sync or async, given the Starlette
            ``Request``: the caller's resource as the server decides it (e.g. from a header
            your auth proxy sets, or a verified token). ``None`` from it means "no resource"
            (memory is refused); raise Starlette's ``HTTPException(401)`` to refuse a request.
        request_context: ``fn(request) -> dict | None``, sync or async: trusted entries added
            to every call's ``request_context``, over the client's; they may use the reserved
            keys (e.g. ``ResponseCache.context(scope=tenant)``).
        client_context_keys: the only ``requestContext`` keys a client may send (any other is
            ``400``); default ``None``: any key that is not reserved.
        limits: the bounds on requests and connections (default ``Limits()``: 4 MiB bodies,
            JSON 100 deep, 100 headers, deadlines; see ``Limits`` and docs/serving.md). The app
            enforces the request-level ones under any server; ``python -m streamkit serve``
            and ``uvicorn_config(app)`` apply the connection-level ones.
        studio: serve the studio's routes (``/api/studio/...``, docs/studio.md). They show
            what the model produced *before* the output processors — what a redacting guard
            removed included — to whoever may run the agent: a developer's tool. Off by
            default (decision): an app built for clients must opt in, so a deployed server
            never hands out what its guards removed unless its author asked for it
            (``python -m streamkit serve`` turns it on only on a loopback host). Without it,
            ``GET /`` still serves the page, which falls back to the Mastra routes.

    Raises:
        UsageError: no agents, two agents with one id, something that is not an ``Agent``, a
            bad ``heartbeat``/``queue_size``, a hook that is not callable, a reserved key in
            ``client_context_keys``, or ``limits`` that is not a ``Limits``.

    Example:
        >>> app = create_app([support_agent], memory=memory)
        >>> uvicorn.run(app, host="127.0.0.1", port=8000)   # or: python -m streamkit serve
        >>> # Multi-tenant: the resource comes from the server, never from the body.
        >>> app = create_app([support_agent], memory=memory,
        ...                  resource=lambda request: request.headers.get("x-user-id"))
    """
    by_id = _agents_by_id(agents)
    if memory is not None and not isinstance(memory, Memory):
        raise InvalidType(f"memory must be a streamkit Memory or None, got "
                          f"{type(memory).__name__}")
    seconds(heartbeat, "heartbeat")
    int_at_least(queue_size, "queue_size", 1)
    if isinstance(allow_origins, str) or not all(isinstance(o, str) for o in allow_origins):
        raise InvalidType(f"allow_origins must be a list of origin strings, got "
                          f"{allow_origins!r}")
    if limits is None:
        limits = DEFAULT_LIMITS
    elif not isinstance(limits, Limits):
        raise InvalidType(f"limits must be a streamkit.serve.Limits, got "
                          f"{type(limits).__name__}")
    tenancy = Tenancy(resource=resource, request_context=request_context,
                      client_context_keys=client_context_keys)
    api = MastraAPI(by_id, memory=memory, heartbeat=float(heartbeat), queue_size=queue_size,
                    tenancy=tenancy)
    chat = _Chat(by_id, heartbeat=float(heartbeat), queue_size=queue_size, tenancy=tenancy)
    page = chat_page()

    async def index(request: Request) -> Response:
        return HTMLResponse(page)

    middleware = [Middleware(
        CORSMiddleware, allow_origins=list(allow_origins), allow_methods=["*"],
        allow_headers=["*"], expose_headers=["Content-Length", "X-Requested-With"])] \
        if allow_origins else []
    # Inside CORS, so a browser can read the 413/408/400 a limit answers.
    middleware.append(Middleware(RequestLimits, limits=limits))
    app = _App(routes=[
        Route("/", index, methods=["GET"]),
        Route("/chat/{agent_id}", chat.handle, methods=["POST"]),
        Mount("/api", routes=api.routes() + (StudioAPI(api).routes() if studio else [])),
    ], middleware=middleware, limits=limits, stream=api.stream, chat=chat.handle,
        cors=bool(allow_origins))
    app.state.agents = by_id
    app.state.memory = memory
    app.state.limits = limits
    return app

