"""``python -m streamkit serve --port 0`` announces its port only once it accepts (issue 26, 12):
a client that connects the moment it reads the line is served, every time."""

from __future__ import annotations

import socket

import pytest

from ._spawn import serving

WAIT = 20.0


def _get_agents_at_once(url: str) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    # One attempt, no retry: a refused connection is the bug.
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(b"GET /api/agents HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


@pytest.mark.parametrize("attempt", range(5))
def test_a_connect_right_after_the_announcement_is_served(attempt: int) -> None:
    with serving("--demo", "--memory", ":memory:") as url:
        reply = _get_agents_at_once(url)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    assert b'"support"' in reply
