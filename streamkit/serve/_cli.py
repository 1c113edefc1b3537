"""``python -m streamkit serve [TARGET ...] [--demo] [--host H] [--port P]``: serve agents with
uvicorn.

What belongs here: loading ``module:attribute`` targets, building the demo's memory, running
uvicorn (with streamkit's connection limits, ``_connections``) on a socket bound here (so
``--port 0`` can print the port it got). What does not: the app (``_app``); argument parsing
lives in ``streamkit.__main__`` with the other commands.

The ``streamkit serve: http://...`` line is printed once uvicorn accepts connections on the
socket, never before: a client (or a test) that connects as soon as it reads the line is
served, not refused.

A TARGET names an ``Agent``, a list or tuple of agents, or a dict of them. ``--demo`` adds the
demo support agent (id ``support``) with memory in SQLite (``--memory PATH``, default
``streamkit-demo.sqlite3`` in the working directory; ``:memory:`` keeps nothing).
``--resource-header NAME`` takes each request's resource from that header (``docs/serving.md``,
"Trust boundary").
"""

from __future__ import annotations

import asyncio
import importlib
import re
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import uvicorn
from starlette.requests import Request

from .._demo import build_serve_agent
from ..agent import Agent
from ..errors import InvalidArgument, InvalidType
from ..memory import Memory, SQLiteStore
from ._app import create_app
from ._connections import uvicorn_config
from ._limits import Limits

__all__ = ["load_target", "serve"]

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def load_target(target: str) -> list[Agent]:
    """The agents ``module:attribute`` names.

    Raises:
        InvalidArgument: not ``module:attribute``, or the module or attribute does not exist.
        InvalidType: the attribute is not an ``Agent`` (or a list/dict of them).

    Example:
        >>> [a.id for a in load_target("myapp.agents:support")]
        ['support']
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise InvalidArgument(f"serve target {target!r} must be module:attribute, e.g. "
                              f"myapp.agents:support")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(f"serve target {target!r}: cannot import {module_name!r}: "
                              f"{exc}") from exc
    value: Any = module
    for name in attribute.split("."):
        if not hasattr(value, name):
            raise InvalidArgument(f"serve target {target!r}: {module_name!r} has no "
                                  f"attribute {attribute!r}")
        value = getattr(value, name)
    items = list(value.values()) if isinstance(value, dict) else \
        list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, Agent):
            raise InvalidType(f"serve target {target!r} is a {type(item).__name__}; expected "
                              f"an Agent, or a list or dict of agents")
    return items


def _header_resource(name: str) -> Callable[[Request], str | None]:
    """The ``resource=`` hook reading header ``name`` (absent or empty: no resource)."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        raise InvalidArgument(f"--resource-header must be an HTTP header name (letters, digits "
                              f"and -), got {name!r}")

    def resource(request: Request) -> str | None:
        return request.headers.get(name) or None

    return resource


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed (the ``serve`` extra installs it where it exists:
    not on Windows), else asyncio's (``None``). uvloop's transports write and read with less
    Python per call (measured in benchmarks/README.md, "Serving")."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only for a socket
    # whose protocol is IPPROTO_TCP; with Nagle's algorithm on, each response on a reused
    # keep-alive connection waited ~40 ms for the client's delayed ACK (issue 28). The
    # protocol sets it per connection as well (``_connections``), for sockets bound elsewhere.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidArgument(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


#: Connections the kernel queues before they are accepted (uvicorn's default backlog).
_KERNEL_BACKLOG = 2048


class _Server(uvicorn.Server):
    """uvicorn's server, announcing itself once it accepts connections."""

    def __init__(self, config: uvicorn.Config, announce: str, out: TextIO) -> None:
        super().__init__(config)
        self._announce = announce
        self._out = out

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for sock in sockets or []:
            # asyncio accepts ``backlog`` connections per wake-up (``_connections``: kept small
            # so a burst cannot exhaust file descriptors); the kernel's queue may be long:
            # waiting connections hold no descriptor of ours.
            sock.listen(_KERNEL_BACKLOG)
        if self.started:
            self._out.write(self._announce)
            self._out.flush()


def serve(targets: Sequence[str], *, demo: bool = False, host: str = "127.0.0.1",
          port: int = 8000, memory_path: str = "streamkit-demo.sqlite3",
          heartbeat: float = 15.0, limits: Limits | None = None,
          out: TextIO = sys.stdout, resource_header: str | None = None) -> int:
    """Serve the agents of ``targets`` (and the demo agent with ``demo``) until interrupted.

    Prints ``streamkit serve: http://HOST:PORT (agents: ...)`` once accepting connections
    (the real port when ``port`` is 0). ``limits`` bounds requests and connections (default
    ``Limits()``; docs/serving.md). Returns the exit status. ``resource_header`` names the
    request header that carries each request's resource (``create_app(resource=...)``): set it
    when a proxy that authenticates callers sets that header, never when clients reach the
    server directly.

    Raises:
        UsageError: no target and no ``demo``, a bad target, a port that cannot be bound, a
            ``resource_header`` that is not a header name.
    """
    resource = None if resource_header is None else _header_resource(resource_header)
    agents = [agent for target in targets for agent in load_target(target)]
    memory: Memory | None = None
    if demo:
        memory = Memory(SQLiteStore(memory_path), last_messages=20)
        agents.append(build_serve_agent(memory))
    if not agents:
        raise InvalidArgument("nothing to serve: give module:attribute targets or --demo")
    app = create_app(agents, memory=memory, heartbeat=heartbeat, resource=resource,
                     limits=limits)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn_config(app, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=5)
    server = _Server(config, f"streamkit serve: http://{shown}:{bound} (agents: "
                             f"{', '.join(a.id for a in agents)})\n", out)
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(server.serve(sockets=[sock]))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if memory is not None:
            asyncio.run(memory.close())
    return 0
