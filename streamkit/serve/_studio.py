"""The studio's data routes: what the studio page (``/``) reads, documented so a user can script
against them (``docs/studio.md``).

* ``GET /api/studio/agents``: ``[{id, name, modelId, provider, processors: [{id, name, lane,
  hooks}], tools: [{id, description}]}]``.
* ``GET /api/studio/agents/{agentId}/graph``: the agent's loop graph (``Agent.graph()``):
  ``{title, nodes: [{name, label, kind, processors, group}], edges: [{src, dst, label}],
  svg}`` — ``svg`` is ``streamkit.display.graph_svg``'s drawing, whose ``<g data-node=...>``
  and ``<g data-src=... data-dst=...>`` let a page highlight a run's path.
* ``POST /api/studio/agents/{agentId}/stream``: the body, tenancy and limits of Mastra's
  ``POST /api/agents/{agentId}/stream`` (``_mastra``); the answer is SSE, one ``data: <event
  JSON>\\n\\n`` per ``streamkit.events`` event of the run (with chunk detail: ``model-chunk``,
  ``action`` and ``chunk`` events too), then ``data: [DONE]\\n\\n``. Errors before the run
  starts are the Mastra route's JSON errors (``400``/``403``/``404``).

Threads are the Mastra memory routes' (``GET /api/memory/threads?resourceId=&agentId=``,
``/api/memory/threads/{id}/messages``); nothing is added for them.

Security: these routes show what the model produced *before* the output processors (what a
redacting guard removed included), and tool results before ``process_tool_result``, to whoever
may run the agent — a developer's tool. ``create_app(studio=False)`` leaves them out.

Decision: a value in an event with no JSON form (a tool's result object) is sent as its
``repr``. A ``StreamkitError`` raised after the first event is sent as an ``error``-outcome
``run-finish`` event (``error``: its text) before ``[DONE]``, the events' counterpart of the
Mastra route's in-band ``error`` chunk.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._json import JSONDict
from ..agent import Agent, AgentStream, CallOptions
from ..chunks import ErrorChunk
from ..display import graph_svg
from ..errors import StreamkitError
from ..events import RunEvent, RunFinished
from ._mastra import MastraAPI, error_response
from ._sse import DONE, SSE_HEADERS, EventStream, SSEResponse

__all__ = ["StudioAPI", "studio_frames", "event_frame", "agent_summary", "graph_json"]

def _shown(value: object) -> str:
    """A value with no JSON form (what a tool returned, say), shown by its ``repr``."""
    text = repr(value)
    return text if len(text) <= 2000 else text[:1997] + "..."


_encode = msgspec.json.Encoder(enc_hook=_shown).encode
_LINE_SEPARATORS = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def event_frame(event: RunEvent) -> bytes:
    """``data: <event JSON>\\n\\n`` (U+2028/U+2029 escaped, as the Mastra route's frames)."""
    data = _encode(event)
    for raw, escaped in _LINE_SEPARATORS:
        if raw in data:
            data = data.replace(raw, escaped)
    return b"data: " + data + b"\n\n"


class _Collect:
    """The route's observer: keeps the run's events until the frames are written."""

    chunk_detail = True

    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent) -> None:
        self.events.append(event)

    def take(self) -> list[RunEvent]:
        events, self.events = self.events, []
        return events


async def studio_frames(stream: AgentStream, sink: _Collect) -> AsyncIterator[bytes]:
    """The studio stream route's body: the events of each chunk's way out, as they happen,
    then ``data: [DONE]``. A run that fails before its first chunk raises (the route answers
    JSON, as the Mastra route does)."""
    sent = False
    try:
        async for chunk in stream:
            if not sent and isinstance(chunk, ErrorChunk):
                await stream.result()  # a run that failed before it started: raises why
            sent = True
            for event in sink.take():
                yield event_frame(event)
        for event in sink.take():
            yield event_frame(event)
    except StreamkitError as exc:
        if not sent:
            raise
        for event in sink.take():
            yield event_frame(event)
        yield event_frame(RunFinished(
            run_id=stream.run_id, outcome="error", text="", error=str(exc), tripwire=None,
            finish_reason="error", usage={}, at=time.time() * 1000.0))
    finally:
        await stream.aclose()
    yield DONE


def _processors(agent: Agent, hooks: Mapping[str, list[str]]) -> list[JSONDict]:
    out: list[JSONDict] = []
    for lane in ("input_processors", "output_processors", "error_processors"):
        procs = getattr(agent, lane)
        if not isinstance(procs, (list, tuple)):
            continue  # a list built per request: only its calls show what it holds
        for p in procs:
            pid = getattr(p, "id", None)
            if isinstance(pid, str):
                out.append({"id": pid, "name": str(getattr(p, "name", None) or pid),
                            "lane": lane.removesuffix("_processors"),
                            "hooks": hooks.get(pid, [])})
    return out


def agent_summary(agent: Agent) -> JSONDict:
    """One agent of ``GET /api/studio/agents``; a processor's ``hooks`` are the loop nodes it
    runs at (from the agent's graph)."""
    hooks: dict[str, list[str]] = {}
    for node in agent.graph().nodes:
        for pid in node.processors:
            hooks.setdefault(pid, []).append(node.name)
    model = agent.model
    return {
        "id": agent.id, "name": agent.name, "modelId": str(getattr(model, "model_id", "")),
        "provider": str(getattr(model, "provider", "")),
        "processors": _processors(agent, hooks),
        "tools": [{"id": name, "description": t.description} for name, t in
                  agent.tools.items()],
        "memory": agent.memory is not None,
    }


def graph_json(agent: Agent) -> JSONDict:
    """``GET /api/studio/agents/{id}/graph``: the agent's loop graph and its drawing."""
    graph = agent.graph()
    return {
        "title": graph.title,
        "nodes": [{"name": n.name, "label": n.label, "kind": n.kind,
                   "processors": list(n.processors), "group": n.group} for n in graph.nodes],
        "edges": [{"src": e.src, "dst": e.dst, "label": e.label} for e in graph.edges],
        "svg": graph_svg(graph),
    }


class StudioAPI:
    """The studio routes (see the module docstring) beside ``api``, the Mastra routes whose
    request parsing, tenancy and limits the stream route shares."""

    def __init__(self, api: MastraAPI) -> None:
        self.api = api

    def routes(self) -> list[Route]:
        return [
            Route("/studio/agents", self.list_agents, methods=["GET"]),
            Route("/studio/agents/{agent_id}/graph", self.graph, methods=["GET"]),
            Route("/studio/agents/{agent_id}/stream", self.stream, methods=["POST"]),
        ]

    async def list_agents(self, request: Request) -> Response:
        return JSONResponse([agent_summary(a) for a in self.api.agents.values()])

    async def graph(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        agent = self.api.agents.get(agent_id)
        if agent is None:
            return JSONResponse({"error": f"Agent with id {agent_id} not found"}, 404)
        try:
            return JSONResponse(graph_json(agent))
        except StreamkitError as exc:  # a processor list built per request that needs one
            return error_response(exc)

    async def stream(self, request: Request) -> Response:
        called = await self.api._call(request)
        if isinstance(called, Response):
            return called
        agent, call = called
        sink = _Collect()
        try:
            options: CallOptions = {**call.options, "observers": [sink]}
            stream = agent.stream(call.messages, **options)
            events = EventStream(studio_frames(stream, sink), queue_size=self.api.queue_size)
            first = await events.first()
        except StreamkitError as exc:
            return error_response(exc)
        return SSEResponse(events, first, headers=SSE_HEADERS, heartbeat=self.api.heartbeat)
