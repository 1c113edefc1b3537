"""The real Mastra server's transcripts (``tests/fixtures/mastra-server``), parsed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIR = Path(__file__).resolve().parents[1] / "fixtures" / "mastra-server"


@dataclass
class Exchange:
    method: str
    path: str
    request: Any
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[Any]:
        """An SSE body's events, parsed (``[DONE]`` kept as the string)."""
        out: list[Any] = []
        for event in self.body.split(b"\n\n"):
            if event.startswith(b"data: "):
                data = event[6:].decode()
                out.append(data if data == "[DONE]" else json.loads(data))
        return out


def exchange(name: str) -> Exchange:
    raw = (DIR / name).read_bytes()
    head, _, response = raw.partition(b"<<<\n")
    lines = head.decode().splitlines()
    method, path = lines[0][4:].split(" ", 1)
    # ``>>>`` alone separates the request headers from its body (the lines after it).
    request_body = "\n".join(lines[lines.index(">>>") + 1:]) if ">>>" in lines else None
    # The response head is raw HTTP (CRLF line ends); the body is byte for byte.
    head_bytes, _, body = response.partition(b"\r\n\r\n")
    status_line, _, header_block = head_bytes.partition(b"\r\n")
    headers = {}
    for line in header_block.decode().splitlines():
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return Exchange(method, path, json.loads(request_body) if request_body else None,
                    int(status_line.split()[1]), headers, body)


def chat_bodies() -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (DIR / "ui-chat-request-bodies.jsonl").read_text().splitlines() if line]
