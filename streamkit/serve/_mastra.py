"""Mastra's agent API as ``@mastra/client-js`` calls it: the routes under ``/api`` and the JSON
they answer (``docs/protocols.md``, "Mastra's agent API"; checked against the real server's
transcripts).

What belongs here: ``MastraAPI`` (the routes: agents, ``generate``, ``stream``, the memory routes
a chat client needs), the JSON shapes (agent, thread, message, ``generate`` output), the
``stream`` framing (``data: <chunk JSON>\\n\\n`` … ``data: [DONE]\\n\\n``), and how errors become
JSON responses. What does not: the SSE machinery (``_sse``), the AI SDK route (``_app``).

Errors before a stream starts are JSON (``404 {"error": "Agent with id X not found"}``, ``400
{"error": "Invalid request body", "issues": [...]}``, ``403 {"error": "Access denied: thread
belongs to a different resource"}``), never SSE: the routes check the caller's resource and the
thread's owner before the run (``_tenancy``), and ``stream`` waits for the run's first chunk
before it answers, so a thread taken by another resource since is still a ``403``. Errors during
a stream are the run's in-band ``error`` chunk.

Decisions where Mastra is silent or streamkit differs:

* Memory routes use the memory of the agent named by ``agentId``; without ``agentId`` the app's
  ``memory`` (``create_app(memory=...)``), else the one memory all agents share. A thread that
  does not exist is ``404 {"error": "Thread X not found"}``.
* Memory routes act for one resource: the server's (``create_app(resource=...)``) or the
  ``resourceId`` the client names (query, or body for ``POST``). None at all is ``400`` before
  anything is looked up (Mastra 1.69, recorded, answered a thread to anyone; newer Mastra
  answers ``403``: the ``400`` says what is missing and tells nothing about the thread). Another
  resource's thread is ``403``. ``POST /memory/threads`` with an id that exists is ``409
  {"error": "Thread X already exists"}`` whoever owns it, so it never tells whose it is.
* A client that leaves ends the run on ``generate`` too (answered ``499`` to nobody), as on
  ``stream`` (``_sse``): an abandoned turn is not stored.
* ``rememberedMessages`` is what memory recalls for the turn, read before the run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec import UNSET
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._json import JSONDict, JSONValue
from ..agent import Agent, AgentResult, Usage
from ..chunks import Chunk, ErrorChunk, StepStart, ToolCall, ToolErrorChunk, ToolResult
from ..errors import (
    InvalidArgument,
    MemoryStoreError,
    MessageError,
    StreamkitError,
    ToolError,
    UsageError,
)
from ..memory import Memory, Thread
from ..messages import Message, format_timestamp, message_to_dict, to_core
from ..wire import encode_sse, to_builtins
from ._limits import request_body
from ._requests import Call, decode_agent_call, decode_thread_body, issues_of
from ._sse import CLOSE_TIMEOUT, DONE, SSE_HEADERS, EventStream, SSEResponse
from ._tenancy import DENIED, Tenancy

__all__ = ["MastraAPI", "agent_json", "thread_json", "message_json", "error_response",
           "MastraFraming", "sse_frame"]

_LINE_SEPARATORS = ("\u2028".encode(), "\u2029".encode())


def sse_frame(chunk: Chunk) -> bytes:
    """``data: <compact JSON>\\n\\n``, U+2028/U+2029 escaped as Mastra's server does.

    Example:
        >>> from streamkit.chunks import TextDelta
        >>> sse_frame(TextDelta(id="t", text="a\\u2028b", run_id="r", from_="AGENT"))[-22:]
        b'"text":"a\\\\u2028b"}}\\n\\n'
    """
    if chunk.__class__ is StepStart and chunk.payload.request not in (UNSET, {}):
        # Mastra redacts the provider request from step-start (it can hold the whole prompt).
        chunk = msgspec.structs.replace(
            chunk, payload=msgspec.structs.replace(chunk.payload, request={}))
    frame = encode_sse(chunk)
    # One byte first, as an int: ``0xE2 in frame`` is a memchr (~30 ns over a 120-byte frame);
    # ``b"\xe2" in frame`` took the bytes-needle path (~180 ns, most of a small frame's
    # framing), the two-byte search ~2.7 µs over a 3 KB finish frame. The pair is looked for
    # only where an E2 byte is.
    if 0xE2 in frame and b"\xe2\x80" in frame:
        frame = frame.replace(_LINE_SEPARATORS[0], b"\\u2028").replace(_LINE_SEPARATORS[1],
                                                                        b"\\u2029")
    return frame


def _error_chunk_frame(run_id: str, exc: BaseException) -> bytes:
    return sse_frame(ErrorChunk(error={"name": type(exc).__name__, "message": str(exc)},
                                run_id=run_id, from_="AGENT"))


class MastraFraming:
    """The ``stream`` route's body (a ``Framing`` for ``EventStream.of_run``): each chunk as a
    frame (``sse_frame``), then ``data: [DONE]``.

    A run that fails before its first chunk (the thread belongs to another resource; its only
    chunk is an ``error``) raises that error, so the route answers JSON; an error raised later
    becomes an in-band ``error`` event, and the body still ends with ``[DONE]``.
    """

    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    #: ``sse_frame`` itself: no call around it per chunk.
    frame = staticmethod(sse_frame)

    def failed(self, error: StreamkitError, /) -> bytes:
        return _error_chunk_frame(self.run_id, error)

    def end(self) -> bytes:
        return DONE


def error_response(exc: BaseException) -> JSONResponse:
    """The JSON error for an exception raised before any stream started. Its text may quote
    what was refused (a lone surrogate, say): that is escaped (``\\ud800``), never a failed
    encode."""
    if isinstance(exc, (UsageError, MessageError)) and getattr(exc, "field", None):
        return JSONResponse({"error": "Invalid request body", "issues": issues_of(exc)}, 400)
    text = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(exc, (UsageError, MessageError, ToolError)):
        return JSONResponse({"error": text}, 400)
    if isinstance(exc, MemoryStoreError) and getattr(exc, "operation", None) == \
            "check the thread":
        # The client named a thread it may not use (the routes check before the run; this is a
        # thread created by another resource since): Mastra's 403, the owner never named.
        return JSONResponse({"error": DENIED}, 403)
    return JSONResponse({"error": text or type(exc).__name__}, 500)


# --------------------------------------------------------------------------------------------
# JSON shapes
# --------------------------------------------------------------------------------------------


def _processor_list(value: Any) -> list[dict[str, str]]:
    """Static processor lists as ``[{id, name}]``; a list built per request shows as ``[]``."""
    if not isinstance(value, (list, tuple)):
        return []
    out = []
    for p in value:
        pid = getattr(p, "id", None)
        if isinstance(pid, str):
            out.append({"id": pid, "name": str(getattr(p, "name", None) or pid)})
    return out


def agent_json(agent: Agent) -> JSONDict:
    """``GET /api/agents/:id``: the agent as Mastra describes it (tools' ``inputSchema`` is a
    string holding ``{"json": <JSON Schema>}``, as client-js expects)."""
    model = agent.model
    tools: dict[str, JSONValue] = {
        name: {"id": name, "description": t.description,
               "inputSchema": json.dumps({"json": t.input_schema}, separators=(",", ":")),
               "requireApproval": False}
        for name, t in agent.tools.items()}
    return {
        "id": agent.id, "name": agent.name, "description": "",
        "instructions": "\n".join(agent.instructions), "tools": tools, "agents": {},
        "workflows": {}, "skills": [], "workspaceTools": [], "browserTools": [],
        "hasBrowser": False,
        "inputProcessors": _processor_list(agent.input_processors),
        "outputProcessors": _processor_list(agent.output_processors),
        "provider": str(getattr(model, "provider", "")),
        "modelId": str(getattr(model, "model_id", "")),
        "supportsMemory": agent.memory is not None, "defaultOptions": {}, "source": "code",
    }


def thread_json(thread: Thread) -> JSONDict:
    """A thread: ``{id, title, resourceId, createdAt, updatedAt, metadata?}`` (ISO dates; an
    untitled thread has ``title: ""`` as Mastra writes it)."""
    out: JSONDict = {"id": thread.id, "title": thread.title or "",
                           "resourceId": thread.resource_id,
                           "createdAt": format_timestamp(thread.created_at),
                           "updatedAt": format_timestamp(thread.updated_at)}
    if thread.metadata is not None:
        out["metadata"] = thread.metadata
    return out


def message_json(message: Message) -> JSONDict:
    """A ``MastraDBMessage`` (with Mastra's ``type: "text"``)."""
    out = message_to_dict(message)
    out.setdefault("type", "text")
    return out


def _usage(usage: Usage) -> dict[str, int]:
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.total_tokens}


def output_json(agent: Agent, result: AgentResult, steps: Sequence[dict[str, list[Any]]],
                input_messages: Sequence[Message], remembered: Sequence[Message]
                ) -> dict[str, object]:
    """``generate``'s body: Mastra's full output, keys in Mastra's order. ``toolCalls`` and
    ``toolResults`` are the run's own chunks (client-js reads ``payload.toolName``)."""
    model_id = str(getattr(agent.model, "model_id", ""))
    now = format_timestamp(datetime.now(UTC))
    step_json = []
    for index, step in enumerate(result.steps):
        seen = steps[index] if index < len(steps) else {"calls": [], "results": []}
        step_json.append({
            "stepType": "initial" if index == 0 else "tool-result",
            "text": step.text, "reasoningText": step.reasoning,
            "toolCalls": seen["calls"], "toolResults": seen["results"],
            "finishReason": step.finish_reason, "usage": _usage(step.usage), "warnings": [],
            "request": {}, "response": {"id": result.run_id, "timestamp": now,
                                        "modelId": model_id},
        })
    reasoning: list[JSONValue] = [{"type": "reasoning", "runId": result.run_id, "from": "AGENT",
                  "payload": {"id": f"reasoning-{i}", "text": s.reasoning}}
                 for i, s in enumerate(result.steps) if s.reasoning]
    body: dict[str, object] = {
        "text": result.text, "usage": _usage(result.usage), "steps": step_json,
        "finishReason": result.finish_reason, "warnings": [], "request": {},
        "reasoning": reasoning, "reasoningText": "".join(s.reasoning for s in result.steps),
        "toolCalls": [c for s in steps for c in s["calls"]],
        "toolResults": [r for s in steps for r in s["results"]],
        "sources": [], "files": [],
        "response": {"id": result.run_id, "timestamp": now, "modelId": model_id,
                     "messages": to_core(result.messages),
                     "dbMessages": [message_json(m) for m in result.messages]},
        "totalUsage": _usage(result.usage), "usedFallbackValue": False,
        "runId": result.run_id,
        "messages": [message_json(m) for m in [*remembered, *input_messages,
                                               *result.messages]],
        "rememberedMessages": [message_json(m) for m in remembered],
    }
    if result.tripwire is not None:
        t = result.tripwire
        body["tripwire"] = {"reason": t.reason, "retry": t.retry, "metadata": t.metadata,
                            "processorId": t.processor_id}
    if result.object is not None:
        body["object"] = result.object
    return body


def _full_output_response(output: dict[str, object]) -> JSONResponse:
    """``generate``'s 200. Decision: an answer holding a lone surrogate (a model's text that is
    not Unicode) is a JSON ``500 {"error": ...}`` saying so, as the stream routes report it in
    band; Starlette's encoder would raise ``UnicodeEncodeError`` (a text/plain 500)."""
    try:
        return JSONResponse(output)
    except UnicodeEncodeError as exc:
        return JSONResponse({"error": f"the agent's answer cannot be sent: it holds text that is "
                                      f"not valid Unicode ({exc.reason} at position "
                                      f"{exc.start}); expected text without lone surrogates"},
                            500)


def _not_found(agent_id: str) -> JSONResponse:
    return JSONResponse({"error": f"Agent with id {agent_id} not found"}, 404)


# --------------------------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------------------------


class MastraAPI:
    """The Mastra routes over a set of agents (see the module docstring).

    Args:
        agents: by id.
        memory: for memory routes that name no agent (``None``: the agents' shared memory).
        heartbeat: seconds of silence before a ``: heartbeat`` comment on a stream.
        queue_size: frames that may wait for a slow client before the run waits.
        tenancy: who a request may act as (``_tenancy``); default: no server-side hooks.
    """

    def __init__(self, agents: Mapping[str, Agent], *, memory: Memory | None,
                 heartbeat: float, queue_size: int, tenancy: Tenancy | None = None) -> None:
        self.agents = dict(agents)
        self.memory = memory
        self.heartbeat = heartbeat
        self.queue_size = queue_size
        self.tenancy = Tenancy() if tenancy is None else tenancy

    def routes(self) -> list[Route]:
        return [
            Route("/agents", self.list_agents, methods=["GET"]),
            Route("/agents/{agent_id}", self.agent_details, methods=["GET"]),
            Route("/agents/{agent_id}/generate", self.generate, methods=["POST"]),
            Route("/agents/{agent_id}/stream", self.stream, methods=["POST"]),
            Route("/memory/threads", self.list_threads, methods=["GET"]),
            Route("/memory/threads", self.create_thread, methods=["POST"]),
            Route("/memory/threads/{thread_id}", self.get_thread, methods=["GET"]),
            Route("/memory/threads/{thread_id}/messages", self.list_messages, methods=["GET"]),
        ]

    # ------------------------------------------------------------------ agents

    async def list_agents(self, request: Request) -> Response:
        return JSONResponse({aid: agent_json(a) for aid, a in self.agents.items()})

    async def agent_details(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        agent = self.agents.get(agent_id)
        return _not_found(agent_id) if agent is None else JSONResponse(agent_json(agent))

    async def _call(self, request: Request) -> tuple[Agent, Call] | Response:
        agent_id = request.path_params["agent_id"]
        agent = self.agents.get(agent_id)
        if agent is None:
            return _not_found(agent_id)
        try:
            call = decode_agent_call(await request_body(request))
            refused = await self.tenancy.admit(request, agent, call, call.resource_field)
        except StreamkitError as exc:
            return error_response(exc)
        return (agent, call) if refused is None else refused

    async def generate(self, request: Request) -> Response:
        called = await self._call(request)
        if isinstance(called, Response):
            return called
        agent, call = called
        # The run goes in a task of its own so that a client that leaves ends it (as on the
        # stream route): nothing of an abandoned turn is stored.
        run = asyncio.create_task(_generate(agent, call))
        gone = asyncio.create_task(_disconnect(request))
        try:
            await asyncio.wait({run, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not run.done():
                run.cancel()
                await asyncio.wait({run}, timeout=CLOSE_TIMEOUT)
        if run.cancelled():
            return Response(status_code=499)  # nobody is listening; nginx's "client closed"
        try:
            return _full_output_response(run.result())
        except StreamkitError as exc:
            return error_response(exc)

    async def stream(self, request: Request) -> Response:
        called = await self._call(request)
        if isinstance(called, Response):
            return called
        agent, call = called
        try:
            stream = agent.stream(call.messages, **call.options)
            events = EventStream.of_run(stream, MastraFraming(stream.run_id),
                                        queue_size=self.queue_size)
            first = await events.first()
        except StreamkitError as exc:
            return error_response(exc)
        return SSEResponse(events, first, headers=SSE_HEADERS, heartbeat=self.heartbeat)

    # ------------------------------------------------------------------ memory

    def _memory(self, request: Request) -> Memory | Response:
        agent_id = request.query_params.get("agentId")
        if agent_id:
            agent = self.agents.get(agent_id)
            if agent is None:
                return _not_found(agent_id)
            if agent.memory is None:
                return JSONResponse({"error": f"Agent {agent_id} has no memory"}, 400)
            return agent.memory
        if self.memory is not None:
            return self.memory
        shared = {id(a.memory): a.memory for a in self.agents.values() if a.memory is not None}
        if len(shared) == 1:
            return next(iter(shared.values()))
        return JSONResponse({"error": "Pass agentId: the agents do not share one memory"}, 400)

    async def _resource(self, request: Request, claimed: Any) -> str | Response:
        """The resource a memory route acts for: the server's (``resource=`` hook) or the one
        the client names; ``400`` when there is none (before anything is looked up)."""
        resource = await self.tenancy.resource_of(
            request, claimed if isinstance(claimed, str) and claimed else None)
        if resource is None:
            return JSONResponse({"error": "resourceId is required: pass ?resourceId=<the "
                                          "thread's resource> (or configure the server's "
                                          "resource hook)"}, 400)
        return resource

    async def _owned_thread(self, request: Request) -> tuple[Memory, Thread] | Response:
        """The memory and the thread of the path, after checking the caller's resource owns it
        (``403`` without naming the owner, ``404`` when there is no such thread)."""
        memory = self._memory(request)
        if isinstance(memory, Response):
            return memory
        resource = await self._resource(request, request.query_params.get("resourceId"))
        if isinstance(resource, Response):
            return resource
        thread_id = request.path_params["thread_id"]
        try:
            thread = await memory.get_thread(thread_id)
        except StreamkitError as exc:
            return error_response(exc)
        if thread is None:
            return JSONResponse({"error": f"Thread {thread_id} not found"}, 404)
        if thread.resource_id != resource:
            return JSONResponse({"error": DENIED}, 403)
        return memory, thread

    async def list_threads(self, request: Request) -> Response:
        memory = self._memory(request)
        if isinstance(memory, Response):
            return memory
        resource_id = await self._resource(request, request.query_params.get("resourceId"))
        if isinstance(resource_id, Response):
            return resource_id
        try:
            page, per_page = _paging(request, default_per_page=100)
            threads = await memory.list_threads(resource_id)
        except StreamkitError as exc:
            return error_response(exc)
        chosen = threads[page * per_page:(page + 1) * per_page]
        return JSONResponse({"threads": [thread_json(t) for t in chosen],
                             "total": len(threads), "page": page, "perPage": per_page,
                             "hasMore": (page + 1) * per_page < len(threads)})

    async def get_thread(self, request: Request) -> Response:
        owned = await self._owned_thread(request)
        if isinstance(owned, Response):
            return owned
        return JSONResponse(thread_json(owned[1]))

    async def list_messages(self, request: Request) -> Response:
        owned = await self._owned_thread(request)
        if isinstance(owned, Response):
            return owned
        memory, thread = owned
        try:
            page, per_page = _paging(request, default_per_page=40)
            messages = await memory.get_messages(thread.id)
        except StreamkitError as exc:
            return error_response(exc)
        chosen = messages[page * per_page:(page + 1) * per_page]
        return JSONResponse({"messages": [message_json(m) for m in chosen],
                             "total": len(messages), "page": page, "perPage": per_page,
                             "hasMore": (page + 1) * per_page < len(messages),
                             "uiMessages": None})

    async def create_thread(self, request: Request) -> Response:
        memory = self._memory(request)
        if isinstance(memory, Response):
            return memory
        thread_id: str | None = None
        try:
            body = decode_thread_body(await request_body(request))
            claimed = body.resource_id or body.resourceid or None
            resource_id = await self.tenancy.resource_of(request, claimed)
            if isinstance(resource_id, Response):
                return resource_id
            if resource_id is None:
                return JSONResponse({"error": "Invalid request body", "issues": [
                    {"field": "resourceId", "message": "Invalid input"}]}, 400)
            thread_id = body.thread_id or None
            if thread_id is not None and await memory.get_thread(thread_id) is not None:
                return _exists(thread_id)
            thread = await memory.create_thread(thread_id, resource_id=resource_id,
                                                title=body.title, metadata=body.metadata)
        except StreamkitError as exc:
            if isinstance(exc, MemoryStoreError) and thread_id is not None:
                # Created by another request since the check: the same answer, and the
                # store's message (which names the owner) stays here.
                try:
                    if await memory.get_thread(thread_id) is not None:
                        return _exists(thread_id)
                except StreamkitError:
                    pass
            return error_response(exc)
        return JSONResponse(thread_json(thread))


def _exists(thread_id: str) -> JSONResponse:
    """``409`` for a thread id already taken, whoever owns it (the owner is never named)."""
    return JSONResponse({"error": f"Thread {thread_id} already exists"}, 409)


def _paging(request: Request, *, default_per_page: int) -> tuple[int, int]:
    """``page``/``perPage`` from the query (Mastra's pagination, 0-based pages)."""
    try:
        page = int(request.query_params.get("page", 0))
        per_page = int(request.query_params.get("perPage", default_per_page))
    except ValueError:
        raise InvalidArgument("page and perPage must be integers", field="page",
                              issue="expected integers") from None
    if page < 0 or per_page < 1:
        raise InvalidArgument("page must be >= 0 and perPage >= 1", field="page",
                              issue="expected page >= 0 and perPage >= 1")
    return page, per_page


async def _generate(agent: Agent, call: Call) -> dict[str, object]:
    """Run ``call`` to the end; Mastra's full output (the tool chunks collected per step)."""
    remembered = await _recall(agent, call)
    stream = agent.stream(call.messages, **call.options)
    steps: list[dict[str, list[Any]]] = []
    async for chunk in stream:
        if chunk.__class__ is StepStart:
            steps.append({"calls": [], "results": []})
        elif steps and chunk.__class__ is ToolCall:
            steps[-1]["calls"].append(to_builtins(chunk))
        elif steps and chunk.__class__ in (ToolResult, ToolErrorChunk):
            steps[-1]["results"].append(to_builtins(chunk))
    result = await stream.result()
    return output_json(agent, result, steps, call.messages, remembered)


async def _disconnect(request: Request) -> None:
    """Returns when the client has gone (the body is read, so only a disconnect is left)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _recall(agent: Agent, call: Call) -> list[Message]:
    """What memory will recall for this turn (``rememberedMessages``), ``[]`` without memory."""
    if agent.memory is None or call.thread_id is None:
        return []
    return await agent.memory.recall(call.thread_id, call.resource_id)
