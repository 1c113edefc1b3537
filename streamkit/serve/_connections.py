"""Connection-level limits on uvicorn: deadlines for headers and for a client that stops reading,
keep-alive idle time, and a bound on open connections. ``uvicorn_config`` builds the uvicorn
configuration that applies them (``python -m streamkit serve`` uses it).

What belongs here: ``GuardedHttpToolsProtocol`` (the default) and ``GuardedH11Protocol``
(uvicorn's httptools and h11 protocols with the deadlines a connection needs and uvicorn lacks,
and ``TCP_NODELAY``), and ``uvicorn_config``. What does not: the limits one request is held to
inside the app (``_limits.RequestLimits``: body size, body deadline, JSON shape).

Decision (issue 28): httptools (llhttp, C) and uvloop are the default stack, measured against
h11 and asyncio with everything else equal (benchmarks/README.md, "Serving beside Mastra's
real server"): 1.4-2.1x the requests at about two thirds of the CPU per request. h11 stays
available (``uvicorn_config(app, http="h11")``) and is held to the same tests.

What uvicorn (0.55, h11) bounds by itself, and what it does not:

* A request head still incomplete at h11's ``max_incomplete_event_size`` (set here from
  ``Limits.max_header_bytes``): uvicorn answers 400 and closes. h11 checks only heads still
  arriving (one that comes whole in one read, up to asyncio's 256 KiB, is parsed), so the
  size and count of complete heads are checked by ``RequestLimits`` (431).
* Keep-alive idle time: ``timeout_keep_alive``, armed only once a response is complete.
* ``TCP_NODELAY`` only when the listening socket was created with ``IPPROTO_TCP`` (asyncio's
  rule); it is set here on every connection (``set_nodelay``).
* Nothing else. A connection that never sends a byte, or sends its headers one byte at a time,
  is never timed out; a response to a client that stopped reading waits in ``drain()``
  forever, holding its run and the model's stream; and every open connection holds a file
  descriptor, so enough idle connections (1,100 under a 1,024-file limit) make ``accept()``
  fail for everyone. uvicorn's ``limit_concurrency`` does not help: it answers 503 to *new
  requests* once the connections are many, so the idle flood locks normal clients out.

What ``GuardedH11Protocol`` adds:

* **Header deadline.** From the opening of a connection, and from the first byte of each
  later request on it, the headers must be complete within ``header_timeout``; otherwise the
  connection is closed. Trickling bytes does not extend it (slow-loris).
* **Send deadline.** When the transport stops taking writes (the client's receive window and
  the socket buffers are full) a timer starts; if writing has not resumed within
  ``send_timeout`` the connection is aborted. uvicorn then reports ``http.disconnect`` to the
  app, and the response ends the way a disconnect ends it (``_sse``: the producer is
  cancelled, the model's stream closed, nothing of the turn stored).
* **Connection bound.** Above ``max_connections`` open connections, the oldest connection
  that is not in a request (one that has not sent its headers yet, else an idle keep-alive
  one) is closed to make room; when every connection is in a request, the new one is closed.
  An idle flood so only displaces idle connections. asyncio accepts up to ``backlog``
  connections in one go before the protocol sees any, so the default bound leaves room for
  one such batch (and the backlog is sized from the open-file limit): the process does not
  run out of file descriptors (measured: 300 flooding connections under a 128-file limit,
  uvicorn alone fails ``accept()`` with EMFILE tens of thousands of times and never serves
  the next client; with this, no EMFILE and the client is served).

Decision: connections evicted or timed out while waiting for headers are closed without a
response (as nginx does on ``client_header_timeout``): there is no request to answer yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import resource
import socket
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from ..errors import InvalidArgument, InvalidType
from ._limits import DEFAULT_LIMITS, Limits

__all__ = ["GuardedH11Protocol", "GuardedHttpToolsProtocol", "GuardedConfig", "uvicorn_config",
           "connection_cap", "accept_batch", "set_nodelay", "SERVER_PROTOCOLS"]

def _open_files() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def accept_batch() -> int:
    """The ``backlog`` given to asyncio, which is also how many connections it accepts in one
    go (``for _ in range(backlog): sock.accept()``) before any of them reaches the protocol:
    an eighth of the open-file limit (8 to 2,048, uvicorn's default). ``python -m streamkit
    serve`` then lengthens the kernel's queue back to 2,048 (``listen()`` again): a queued
    connection holds no descriptor, and a short queue would make clients retry their SYN."""
    return max(8, min(2048, _open_files() // 8))


def connection_cap(limits: Limits) -> int:
    """``limits.max_connections``, or, when it is ``None``, what the open-file limit leaves
    once a quarter of it (at least 32) is kept for what runs open (stores, model connections)
    and one accept batch is kept for connections not yet seen by the protocol (never below
    16)."""
    if limits.max_connections is not None:
        return limits.max_connections
    files = _open_files()
    return max(16, files - max(32, files // 4) - accept_batch())


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off on a TCP connection (``TCP_NODELAY``).

    A streamed response is many small writes and the client answers none of them, so with
    Nagle on, every write after the first waits for the client's delayed ACK (~40 ms on
    Linux) while earlier bytes are unacknowledged: on a reused keep-alive connection every
    response waited that long (issue 28). asyncio sets it only on sockets created with
    ``IPPROTO_TCP``; a socket a user binds with protocol 0 (``socket.socket()``'s default)
    gets it here, per connection. A Unix socket (no TCP) is left as it is.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) \
            and sock.type == socket.SOCK_STREAM:
        with contextlib.suppress(OSError):  # reset before we got to it: nothing to tune
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Table:
    """The open connections of one server, oldest first (a dict keeps insertion order)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.open: dict[_Guard, None] = {}

    def admit(self, new: _Guard) -> None:
        self.open[new] = None
        if len(self.open) <= self.cap:
            return
        fresh = next((c for c in self.open if c is not new and c.is_awaiting_first_request),
                     None)
        victim = fresh or next((c for c in self.open if c is not new and c.is_idle), None)
        (victim or new).close_idle()


class GuardedConfig(uvicorn.Config):
    """A uvicorn ``Config`` carrying streamkit's ``Limits`` for the guarded protocols."""

    def __init__(self, app: Any, *, limits: Limits = DEFAULT_LIMITS, **options: Any) -> None:
        http = options.setdefault("http", GuardedHttpToolsProtocol)
        if isinstance(http, str):  # "h11" / "httptools": the guarded protocol of that name
            if http not in SERVER_PROTOCOLS:
                raise InvalidArgument(f"http must be one of {sorted(SERVER_PROTOCOLS)} (the "
                                      f"protocols that carry streamkit's limits), got {http!r}")
            options["http"] = SERVER_PROTOCOLS[http]
        options.setdefault("loop", "uvloop" if _has("uvloop") else "asyncio")
        options.setdefault("timeout_keep_alive", limits.keep_alive_timeout)
        options.setdefault("h11_max_incomplete_event_size", limits.max_header_bytes)
        options.setdefault("backlog", accept_batch())
        super().__init__(app, **options)
        self.limits = limits
        self.table = _Table(connection_cap(limits))


class _Guard:
    """What both guarded protocols add (see the module docstring): the connection table,
    ``TCP_NODELAY``, the header deadline's timer and the send deadline. The protocol says when
    a head is due or in (``_watch_head``) and how to close an idle connection."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def _guard_init(self, config: uvicorn.Config) -> None:
        if not isinstance(config, GuardedConfig):
            raise InvalidType(f"{type(self).__name__} needs a GuardedConfig, got "
                              f"{type(config).__name__}; build it with uvicorn_config(app)")
        self._limits = config.limits
        self._table = config.table
        self._head_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._has_had_request = False

    @property
    def is_awaiting_first_request(self) -> bool:
        """Open, and no complete request head received on it yet."""
        raise NotImplementedError

    @property
    def is_idle(self) -> bool:
        """Between requests: no request being received (after its head) or answered."""
        raise NotImplementedError

    def close_idle(self) -> None:
        """Close a connection that is in no request (as the keep-alive timeout does)."""
        raise NotImplementedError

    def _guard_made(self) -> None:
        set_nodelay(self.transport)
        self._arm_head_timer()
        self._table.admit(self)

    def _guard_lost(self) -> None:
        self._table.open.pop(self, None)
        for timer in (self._head_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._send_timer = None

    def _guard_pause_writing(self) -> None:
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self._limits.send_timeout,
                                                    self._send_timed_out)

    def _guard_resume_writing(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self._limits.header_timeout,
                                                self._head_timed_out)

    def _head_in(self) -> None:
        """A request head is complete: its deadline is off."""
        self._has_had_request = True
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        raise NotImplementedError

    def _send_timed_out(self) -> None:
        # The client stopped reading: abort (drop what is buffered; ``close`` would wait to
        # flush it forever). ``connection_lost`` then tells the app it disconnected.
        self._send_timer = None
        self.transport.abort()


class GuardedH11Protocol(_Guard, H11Protocol):
    """uvicorn's h11 protocol with a header deadline, a send deadline and a connection bound
    (see the module docstring). Used through ``GuardedConfig`` (``uvicorn_config``).

    Raises:
        InvalidType: given a plain ``uvicorn.Config``.
    """

    def __init__(self, config: uvicorn.Config, server_state: ServerState,
                 app_state: dict[str, object], _loop: asyncio.AbstractEventLoop | None = None
                 ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._guard_init(config)

    @property
    def is_awaiting_first_request(self) -> bool:
        return not self._has_had_request and self.conn.their_state is h11.IDLE

    @property
    def is_idle(self) -> bool:
        return self.conn.their_state is h11.IDLE and (
            self.cycle is None or self.cycle.response_complete)

    def close_idle(self) -> None:
        if not self.transport.is_closing():
            if self.conn.our_state is not h11.ERROR and self.is_idle:
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guard_made()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard_lost()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_head(bytes_arrived=True)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch_head(bytes_arrived=False)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._guard_pause_writing()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._guard_resume_writing()

    def _watch_head(self, *, bytes_arrived: bool) -> None:
        """After bytes arrive or a response ends: a request head is due (its deadline runs from
        its first byte; between requests the keep-alive timeout applies), or it is in (the
        deadline is off)."""
        if self.conn.their_state is h11.IDLE:
            if self._head_timer is None and not self.transport.is_closing() \
                    and (bytes_arrived or self.conn.trailing_data[0]):
                self._arm_head_timer()
            return
        self._head_in()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE:
            self.close_idle()


class _HeadFirst:
    """The transport as one response sees it (httptools): the status line and headers, the
    response's first write, are held until its next write and go out with it, in one
    ``write`` (one system call and, with ``TCP_NODELAY``, one packet instead of two). A
    response that writes nothing more in this turn of the loop gets its head sent at the end
    of the turn (``call_soon``), so nothing waits: an SSE stream whose first frame is slow
    still shows its head at once. Everything else is the transport's.

    Decision (issue 28): a 3-delta stream was two writes, the head and then the body; the
    head's write was ~10 % of the server's samples under load (py-spy, 50 clients).
    """

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop  # the protocol's: no get_running_loop() (a getpid() on 3.11) per write
        self._held: bytes | None = b""  # b"": nothing written yet; None: head sent

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._transport.write(data)
        elif held:
            self._held = None
            self._transport.write(held + data)
        else:
            self._held = data
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedHttpToolsProtocol(_Guard, HttpToolsProtocol):
    """uvicorn's httptools (llhttp, C) protocol with the same guards as ``GuardedH11Protocol``
    (see the module docstring), and the bound on a head still arriving that h11 applies
    itself (``max_incomplete_event_size``) and llhttp does not: above ``max_header_bytes``
    before the head is complete, the answer is ``400`` and the connection is closed, as h11's.

    The head's deadline runs from the parser's ``on_message_begin`` (a request's first byte)
    to ``on_headers_complete``. Used through ``GuardedConfig`` (``uvicorn_config``).

    Raises:
        InvalidType: given a plain ``uvicorn.Config``.
    """

    def __init__(self, config: uvicorn.Config, server_state: ServerState,
                 app_state: dict[str, object], _loop: asyncio.AbstractEventLoop | None = None
                 ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._guard_init(config)
        self._in_head = False  # a request has begun and its head is not complete
        self._head_bytes = 0  # bytes received since the head began (or since the last one)

    @property
    def is_awaiting_first_request(self) -> bool:
        return not self._has_had_request

    @property
    def is_idle(self) -> bool:
        return not self.pipeline and (self.cycle is None or self.cycle.response_complete)

    def close_idle(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guard_made()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard_lost()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        counting = self._in_head or self.is_idle
        if counting:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head:
            if self._head_bytes > self._limits.max_header_bytes \
                    and not self.transport.is_closing():
                self.send_400_response("Request head too large")  # h11's answer, then closed
            elif self._head_timer is None and not self.transport.is_closing():
                # A head begun in these bytes and not finished in them: its deadline starts
                # (a head that comes whole in one read, the usual case, never sets a timer).
                self._arm_head_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._head_in()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:
            cycle.transport = _HeadFirst(self.transport, self.loop)  # type: ignore[assignment]

    def pause_writing(self) -> None:
        super().pause_writing()
        self._guard_pause_writing()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._guard_resume_writing()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.is_idle:  # no complete head in since it was armed
            self.close_idle()


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


#: The guarded HTTP/1.1 protocols by uvicorn's name for them (``uvicorn_config(http=...)``).
SERVER_PROTOCOLS: dict[str, type[_Guard]] = {"h11": GuardedH11Protocol,
                                              "httptools": GuardedHttpToolsProtocol}


def uvicorn_config(app: Any, *, limits: Limits | None = None, **options: Any) -> GuardedConfig:
    """A uvicorn ``Config`` for ``app`` with streamkit's connection limits (see the module
    docstring); ``limits`` defaults to the ones ``create_app`` was given.

    Args:
        app: the ASGI app (``create_app(...)``).
        limits: the bounds (default: ``app.state.limits``, else the defaults).
        options: any other ``uvicorn.Config`` keyword (``host``, ``port``, ``log_level``...).

    Example:
        >>> app = create_app([support_agent])
        >>> uvicorn.Server(uvicorn_config(app, port=8000)).run()
    """
    if limits is None:
        state = getattr(app, "state", None)
        limits = getattr(state, "limits", None) or DEFAULT_LIMITS
    return GuardedConfig(app, limits=limits, **options)
