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
"Trust boundary"). ``--workers N`` serves from N forked processes, each on its own socket of
the port on Linux (``serve``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import importlib.util
import ipaddress
import os
import re
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import uvicorn
from starlette.requests import Request

from .._demo import build_serve_agent
from .._demo import pace_ms as demo_pace
from ..agent import Agent
from ..errors import InvalidArgument, InvalidType
from ..memory import Memory, SQLiteStore
from ..validate import int_at_least
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
    if importlib.util.find_spec("uvloop") is None:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = \
        importlib.import_module("uvloop").new_event_loop
    return factory


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


def _balanced() -> bool:
    """Whether this system spreads connections over sockets sharing a port (``SO_REUSEPORT``
    on Linux hashes each new connection to one of them; elsewhere the option only lets them
    bind, and one socket gets everything)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def _bind_workers(host: str, port: int, workers: int) -> list[socket.socket]:
    """One listening socket per worker on ``host:port``, joined with ``SO_REUSEPORT``, so the
    kernel spreads new connections evenly over the workers.

    Why not one shared socket: every worker then waits on it, the first to wake accepts every
    connection queued, and a burst of keep-alive connections ends up on one worker (measured:
    50 clients connecting at once were split 46/4 and 49/1 between two workers; the busy one
    was saturated while the other idled). With a socket each, the split follows the kernel's
    hash of each connection's addresses.

    The port is first bound alone, without ``SO_REUSEPORT`` (and closed): a port another
    process listens on fails there as with one worker, instead of this server silently
    joining that process's group and taking half its connections.
    """
    probe = _bind(host, port)
    port = probe.getsockname()[1]  # the real port when 0 was asked for
    probe.close()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks: list[socket.socket] = []
    try:
        for _ in range(workers):
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
    except OSError as exc:
        for sock in socks:
            sock.close()
        raise InvalidArgument(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return socks


#: Connections the kernel queues before they are accepted (uvicorn's default backlog).
_KERNEL_BACKLOG = 2048


class _Server(uvicorn.Server):
    """uvicorn's server, calling ``ready`` once it accepts connections."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for sock in sockets or []:
            # asyncio accepts ``backlog`` connections per wake-up (``_connections``: kept small
            # so a burst cannot exhaust file descriptors); the kernel's queue may be long:
            # waiting connections hold no descriptor of ours.
            sock.listen(_KERNEL_BACKLOG)
        if self.started:
            self._ready()


#: Net new container objects (allocations minus frees) between two young-generation
#: collections in a served process: Python's default is 700.
YOUNG_COLLECTION_THRESHOLD = 10_000


def tune_collector() -> None:
    """Set the cyclic collector up for a server process (``serve`` calls it after start-up).

    * What start-up built (modules, the agents, the app) lives as long as the server: it is
      moved out of the collector's generations (``gc.freeze``), so a full collection walks only
      what requests left, and forked workers do not touch, so do not copy, those pages.
      (Issue 28: the collector was one of the tails of the first-chunk latency.)
    * The young generation is collected after ``YOUNG_COLLECTION_THRESHOLD`` net new
      containers instead of 700. Requests in flight hold their state (messages, chunks, the
      run) for a while, so under concurrency the 700 fill up every few requests and each
      collection walks every open request's young objects without freeing them (a run makes
      no reference cycle: ``benchmarks/README.md``, "Serving"). Measured in the server with a
      ``gc.callbacks`` probe, 50 keep-alive clients, 20,000 3-delta requests: 3,290 young and
      298 middle collections, 5.4 % of the server's CPU; at 10,000, 13 and 0, 0.5 %. A
      collection then walks more objects (~0.8 ms instead of ~0.06 ms, once per ~1,500
      requests); garbage in cycles waits longer, bounded by the same count.

    Only the ``serve`` command's own processes are tuned: an app served by another server
    (``uvicorn_config``, gunicorn) keeps its process's settings.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def _writer(out: TextIO, line: str) -> Callable[[], None]:
    def announce() -> None:
        out.write(line)
        out.flush()
    return announce


def _in_memory_stores(agents: Sequence[Agent], memory: Memory | None) -> list[str]:
    """Where the served memories keep their data in this process alone (SQLite ``:memory:``):
    the agents' ids, or ``--demo``."""
    def private(mem: Memory | None) -> bool:
        store = getattr(mem, "store", None)
        return isinstance(store, SQLiteStore) and store.path in ("", ":memory:")

    found = [agent.id for agent in agents if private(agent.memory)]
    return found if found or not private(memory) else ["--memory :memory:"]


def _run(server: _Server, sock: socket.socket) -> None:
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(server.serve(sockets=[sock]))


#: Longest wait for the workers to accept connections, and for them to stop.
WORKER_START_TIMEOUT = 60.0
WORKER_STOP_TIMEOUT = 10.0


def _serve_workers(make_server: Callable[[Callable[[], None]], _Server],
                   socks: list[socket.socket], announce: Callable[[], None],
                   close: Callable[[], None]) -> int:
    """Fork a worker per socket of ``socks`` (one socket each: ``_bind_workers``; or the same
    socket repeated, shared, where the kernel does not spread connections), each serving its
    socket (and ``close``-ing what it opened when it stops); announce once every one accepts;
    on SIGINT/SIGTERM stop them all (bounded). A worker that exits on its own stops the
    others: the exit status is 1. The parent keeps no listening socket of its own."""
    workers = len(socks)
    read_fd, write_fd = os.pipe()
    pids: list[int] = []
    for mine in socks:
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(read_fd)
            status = 0
            try:
                for other in socks:
                    if other is not mine:
                        other.close()  # the other workers' (a shared socket is ``mine``)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us (SIGTERM)
                def started() -> None:
                    os.write(write_fd, b"r")

                _run(make_server(started), mine)
                close()
            except BaseException:  # noqa: BLE001 - reported, then this process ends
                traceback.print_exc()
                status = 1
            finally:
                os._exit(status)
        pids.append(pid)
    for sock in socks:
        sock.close()  # the workers hold them
    os.close(write_fd)
    status = 0
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ready, deadline = 0, time.monotonic() + WORKER_START_TIMEOUT
        while ready < workers and not stopping and time.monotonic() < deadline:
            if select.select([read_fd], [], [], 0.2)[0]:
                got = os.read(read_fd, workers)
                if not got:
                    break  # every worker is gone
                ready += len(got)
        if ready < workers:
            if not stopping:
                sys.stderr.write(f"streamkit serve: {ready} of {workers} workers started\n")
                status = 1
        else:
            announce()
        while not stopping and status == 0:
            pid, code = os.waitpid(-1, os.WNOHANG)
            if pid:
                pids.remove(pid)
                sys.stderr.write(f"streamkit serve: worker {pid} exited ({code}); stopping\n")
                status = 1
            else:
                time.sleep(0.2)  # polling the workers; a signal sets ``stopping``
    finally:
        os.close(read_fd)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + WORKER_STOP_TIMEOUT
        while pids and time.monotonic() < deadline:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid in pids:
                pids.remove(pid)
            elif not pid:
                time.sleep(0.05)
        for pid in pids:  # past the bound: killed
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def is_loopback(host: str) -> bool:
    """Whether ``host`` (as given to ``--host``) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(targets: Sequence[str], *, demo: bool = False, host: str = "127.0.0.1",
          port: int = 8000, memory_path: str = "streamkit-demo.sqlite3",
          heartbeat: float = 15.0, limits: Limits | None = None,
          out: TextIO = sys.stdout, resource_header: str | None = None,
          workers: int = 1, pace_ms: float | None = None, studio: bool | None = None) -> int:
    """Serve the agents of ``targets`` (and the demo agent with ``demo``) until interrupted.

    Prints ``streamkit serve: http://HOST:PORT (agents: ...)`` once accepting connections
    (the real port when ``port`` is 0). ``limits`` bounds requests and connections (default
    ``Limits()``; docs/serving.md). Returns the exit status. ``resource_header`` names the
    request header that carries each request's resource (``create_app(resource=...)``): set it
    when a proxy that authenticates callers sets that header, never when clients reach the
    server directly.

    Then it prints ``streamkit studio: http://HOST:PORT/`` (the studio, docs/studio.md).
    ``studio`` ``None`` (the default) serves the studio's routes only when ``host`` is a
    loopback address (``127.0.0.1``, ``::1``, ``localhost``): they show what the output
    processors removed, which only the developer at this machine should see; on any other
    host they are left out unless ``studio=True`` (``--studio``), which then also prints a
    warning. ``studio=False`` (``--no-studio``) always leaves them out. Without them no
    studio line is printed; ``GET /`` serves the page, which falls back to the Mastra
    routes. With ``demo``, ``pace_ms`` is the demo model's milliseconds before
    each chunk (``None``: ``STREAMKIT_DEMO_PACE_MS``, else 30).

    ``workers`` > 1 forks that many processes after the agents are loaded (POSIX only), each
    listening on its own socket of the port where the kernel spreads connections over such
    sockets (Linux, ``SO_REUSEPORT``: ``_bind_workers``), else all on one shared socket. Each
    has its own connections to the memory's store, so the store must be one they share:
    PostgreSQL, Redis, or a SQLite *file* (WAL mode; writes wait ``busy_timeout`` for each
    other). A SQLite ``:memory:`` store would be a different,
    empty memory in each worker: refused. Stores must connect on first use, not when built
    (streamkit's do), so no connection is shared across the fork. Limits apply per worker
    (``max_connections`` is per process).

    Raises:
        UsageError: no target and no ``demo``, a bad target, a port that cannot be bound, a
            ``resource_header`` that is not a header name, ``workers`` < 1, or several workers
            over a ``:memory:`` store (or on a system without ``fork``).
    """
    int_at_least(workers, "workers", 1)
    if workers > 1 and not hasattr(os, "fork"):
        raise InvalidArgument("--workers above 1 needs fork() (Linux, macOS); run one "
                              "process per port behind a proxy instead")
    resource = None if resource_header is None else _header_resource(resource_header)
    if studio is None:
        studio = is_loopback(host)
    elif studio and not is_loopback(host):
        print(f"warning: the studio's routes are served on {host}: whoever reaches them sees "
              "what the output processors removed (docs/studio.md)", file=sys.stderr)
    agents = [agent for target in targets for agent in load_target(target)]
    memory: Memory | None = None
    if demo:
        memory = Memory(SQLiteStore(memory_path), last_messages=20)
        agents.append(build_serve_agent(memory, pace=demo_pace(pace_ms)))
    if not agents:
        raise InvalidArgument("nothing to serve: give module:attribute targets or --demo")
    private = _in_memory_stores(agents, memory) if workers > 1 else []
    if private:
        raise InvalidArgument(
            f"--workers {workers} with a SQLite ':memory:' store ({', '.join(private)}): "
            f"each worker would have its own empty memory, so a thread made on one would be "
            f"missing on the others; give a SQLite file (--memory PATH), PostgreSQL or Redis, "
            f"or serve with one worker")
    app = create_app(agents, memory=memory, heartbeat=heartbeat, resource=resource,
                     limits=limits, studio=studio)
    socks = _bind_workers(host, port, workers) if workers > 1 and _balanced() else \
        [_bind(host, port)] * workers
    sock = socks[0]
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    # access_log off: at log level "warning" uvicorn's access lines are never shown, but it
    # still formats the client address and path of every response to hand them to the logger.
    config = uvicorn_config(app, log_level="warning", lifespan="off", access_log=False,
                            timeout_graceful_shutdown=5)
    served = f" (agents: {', '.join(a.id for a in agents)}" + \
        (f"; {workers} workers)" if workers > 1 else ")")
    announce = _writer(out, f"streamkit serve: http://{shown}:{bound}{served}\n" + (
        f"streamkit studio: http://{shown}:{bound}/\n" if studio else ""))
    tune_collector()
    try:
        if workers > 1:
            def close() -> None:
                if memory is not None:
                    asyncio.run(memory.close())

            return _serve_workers(lambda ready: _Server(config, ready), socks, announce,
                                  close)
        _run(_Server(config, announce), sock)
    except KeyboardInterrupt:
        pass
    finally:
        for sock in socks:
            sock.close()
        if memory is not None:
            asyncio.run(memory.close())
    return 0
