"""A hung server for the Redis failure tests: accepts connections and never answers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture
def hung_port() -> Iterator[int]:
    """The port of a TCP server on 127.0.0.1 that accepts connections and never answers (a hung
    Redis); closed, with every connection it accepted, after the test."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    listener.close()
