"""Load test of ``streamkit.serve``: N concurrent SSE streams of M chunks through the app under
uvicorn on 127.0.0.1, beside the same N streams without HTTP.

Usage::

    python -m benchmarks.serve_load                    # 200 streams x 1,000 chunks
    python -m benchmarks.serve_load --streams 20 --chunks 100 --json out.json
    python -m benchmarks --serve                        # the same, after the fixed set

Both sides run in a fresh subprocess of their own, so each one's peak RSS (``VmHWM``) is its own:

* **HTTP**: a server process (the app on uvicorn, one worker) and this process as the client:
  N keep-alive connections (as browsers and SDK clients keep them), each warmed up by one
  request, then one request on each at once to ``POST /api/agents/load/stream``, each read to
  its last chunk, the text-delta events counted (a stream that lost one fails the run).
Both the server and the in-process side run on the loop ``python -m streamkit serve`` uses
(uvloop when installed).

* **in-process**: a process that runs the same N ``agent.stream()`` calls concurrently and frames
  every chunk as the server does (``sse_frame``), without HTTP; the consumer yields to the loop
  after each chunk (as a server's ``send`` does), so the N runs are alive at once.

Reported per side: wall time, requests/s (N / wall), chunks/s, p50/p99 time to first chunk (from
sending the request — or calling ``stream()`` — to the first event), and memory per stream
(peak RSS during the run minus RSS before it, / N), and CPU µs per chunk of the process that
serves (HTTP: the server's, not the client's; in-process: the whole process). The agent has no
processors; its model streams M one-word text deltas. The machine is shared: compare the two
sides of one run. On a loaded host the chunks/s ratio moves with the scheduler (0.6-2.5x in
four runs at load average 15); the ratio of CPU per chunk does much less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import uvicorn

from streamkit import Agent
from streamkit.serve import create_app, uvicorn_config
from streamkit.serve._cli import _bind, event_loop_factory
from streamkit.serve._mastra import sse_frame
from streamkit.testing import FunctionModel, text

__all__ = ["run", "main", "format_table"]

T = TypeVar("T")
TIMEOUT = 300.0  # the longest a run may take before it is abandoned
MARKER = b'"type":"text-delta"'


def bench_agent(chunks: int) -> Agent:
    words = "word" + " word" * (chunks - 1)  # exactly `chunks` one-word deltas
    return Agent(id="load", model=FunctionModel(lambda request: text(words),
                                                model_id="load-model"))


def _loop_run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on the event loop ``python -m streamkit serve`` uses (uvloop when
    installed): the server and the in-process side run on the same loop."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main)


def _rss_kib(pid: int | str = "self") -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# --------------------------------------------------------------------------- server process


def _serve(chunks: int, port_file: str) -> None:
    sock = _bind("127.0.0.1", 0)  # as ``python -m streamkit serve`` binds it
    app = create_app(bench_agent(chunks))
    config = uvicorn_config(app, log_level="warning", lifespan="off")
    Path(port_file).write_text(str(sock.getsockname()[1]))
    _loop_run(uvicorn.Server(config).serve(sockets=[sock]))


# --------------------------------------------------------------------------- HTTP client


class _Connection:
    """One keep-alive HTTP/1.1 connection, as browsers and SDK clients keep them: requests go
    one after another on it, each response read to its last chunk (``0\r\n\r\n``)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> _Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def stream(self, chunks: int, port: int | None = None) -> float:
        """One request read to its end; seconds from sending it to the first event. A
        connection the server closed while idle (its keep-alive timeout) is reopened once
        first, as browsers and SDK clients do (``port`` given)."""
        if port is not None and self.reader.at_eof():
            self.close()
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps({"messages": "go"}).encode()
        self.writer.write(b"POST /api/agents/load/stream HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                          b"content-type: application/json\r\n"
                          b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        sent = time.perf_counter()
        first: float | None = None
        count, tail = 0, b""
        while True:
            data = await self.reader.read(65536)
            if not data:
                raise RuntimeError("the server closed a keep-alive connection mid-response")
            if first is None and b"data: " in data:
                first = time.perf_counter() - sent
            joined = tail + data
            count += joined.count(MARKER) - tail.count(MARKER)
            tail = joined[-64:]
            if tail.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's last chunk
                break
        if count != chunks or first is None:
            raise RuntimeError(f"a stream delivered {count} of {chunks} text deltas")
        return first

    def close(self) -> None:
        self.writer.close()


async def _one_stream(port: int, chunks: int) -> float:
    """One request on a connection of its own."""
    conn = await _Connection.open(port)
    try:
        return await conn.stream(chunks)
    finally:
        conn.close()


async def _http_load(port: int, streams: int, chunks: int) -> tuple[float, list[float]]:
    """``streams`` keep-alive connections, each warmed up by one request, then one timed
    request on each at once (the timed requests reuse their connections)."""
    conns = [await _Connection.open(port) for _ in range(streams)]
    try:
        await asyncio.wait_for(asyncio.gather(*(c.stream(chunks) for c in conns)), TIMEOUT)
        await asyncio.sleep(0.1)  # lets an EOF of a connection closed while idle arrive
        started = time.perf_counter()
        firsts = await asyncio.wait_for(
            asyncio.gather(*(c.stream(chunks, port) for c in conns)), TIMEOUT)
        return time.perf_counter() - started, list(firsts)
    finally:
        for conn in conns:
            conn.close()


def _http_side(streams: int, chunks: int, tmp: Path) -> dict[str, Any]:
    port_file = tmp / f"serve-load-{os.getpid()}.port"
    port_file.unlink(missing_ok=True)
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.serve_load", "--role", "server",
                               "--chunks", str(chunks), "--port-file", str(port_file)])
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the load-test server did not start")
            time.sleep(0.05)
        port = int(port_file.read_text())
        asyncio.run(_one_stream_ready(port, chunks))
        before = _rss_kib(server.pid)["VmRSS"]
        cpu0 = _cpu_s(server.pid)
        wall, firsts = asyncio.run(_http_load(port, streams, chunks))
        cpu = _cpu_s(server.pid) - cpu0
        peak = _rss_kib(server.pid)["VmHWM"]
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
        port_file.unlink(missing_ok=True)
    return _row("HTTP (uvicorn, 127.0.0.1)", streams, chunks, wall, firsts, before, peak, cpu)


async def _one_stream_ready(port: int, chunks: int) -> None:
    """Wait for uvicorn to accept (the port file is written just before it listens)."""
    for _ in range(200):
        try:
            await _one_stream(port, chunks)
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError("the load-test server does not answer")


# --------------------------------------------------------------------------- without HTTP


async def _inproc_load(streams: int, chunks: int) -> tuple[float, list[float]]:
    agent = bench_agent(chunks)

    async def one() -> float:
        started = time.perf_counter()
        first: float | None = None
        count = 0
        async for chunk in agent.stream("go"):
            frame = sse_frame(chunk)
            if first is None:
                first = time.perf_counter() - started
            count += MARKER in frame
            # Yield to the loop per chunk, as a server's send does: the N runs interleave
            # (all alive at once) instead of running one after another.
            await asyncio.sleep(0)
        if count != chunks or first is None:
            raise RuntimeError(f"a stream delivered {count} of {chunks} text deltas")
        return first

    await one()  # warm-up
    started = time.perf_counter()
    firsts = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(streams))), TIMEOUT)
    return time.perf_counter() - started, list(firsts)


def _inproc_role(streams: int, chunks: int) -> None:
    _loop_run(_inproc_load(1, chunks))
    before = _rss_kib()["VmRSS"]
    cpu0 = _cpu_s(os.getpid())
    wall, firsts = _loop_run(_inproc_load(streams, chunks))
    cpu = _cpu_s(os.getpid()) - cpu0
    peak = _rss_kib()["VmHWM"]
    print(json.dumps(_row("in-process (no HTTP)", streams, chunks, wall, firsts, before, peak,
                          cpu)))


def _inproc_side(streams: int, chunks: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.serve_load", "--role", "inproc",
                           "--streams", str(streams), "--chunks", str(chunks)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"the in-process side failed: {proc.stderr[-2000:]}")
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


def _cpu_s(pid: int) -> float:
    """utime + stime of process ``pid`` (all threads), seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _row(name: str, streams: int, chunks: int, wall: float, firsts: list[float], before: int,
         peak: int, cpu: float) -> dict[str, Any]:
    return {
        # CPU seconds of the serving process (HTTP: the server, not the client) per chunk:
        # unlike chunks/s, it does not move with what else runs on the machine's cores.
        "cpu_us_per_chunk": round(cpu / (streams * chunks) * 1e6, 3),
        "name": name, "streams": streams, "chunks": chunks, "wall_s": round(wall, 3),
        "requests_per_s": round(streams / wall, 1),
        "chunks_per_s": round(streams * chunks / wall),
        "ttfc_p50_ms": round(statistics.median(firsts) * 1e3, 2),
        "ttfc_p99_ms": round(_quantile(firsts, 0.99) * 1e3, 2),
        "kib_per_stream": round(max(0, peak - before) / streams, 1),
    }


# --------------------------------------------------------------------------- report


def run(streams: int = 200, chunks: int = 1000, tmp: Path | None = None) -> list[dict[str, Any]]:
    """Both sides, HTTP first; their rows (see the module docstring)."""
    tmp = tmp or Path(os.environ.get("TMPDIR", "/tmp"))
    return [_http_side(streams, chunks, tmp), _inproc_side(streams, chunks)]


def format_table(rows: list[dict[str, Any]]) -> str:
    head = ["", "streams", "chunks", "wall s", "req/s", "chunks/s", "TTFC p50 ms",
            "TTFC p99 ms", "KiB/stream", "CPU µs/chunk"]
    keys = ["name", "streams", "chunks", "wall_s", "requests_per_s", "chunks_per_s",
            "ttfc_p50_ms", "ttfc_p99_ms", "kib_per_stream", "cpu_us_per_chunk"]
    table = [head] + [[str(r[k]) for k in keys] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             for row in table]
    if len(rows) == 2 and rows[1]["chunks_per_s"]:
        lines.append(f"HTTP / in-process throughput: "
                     f"{rows[0]['chunks_per_s'] / rows[1]['chunks_per_s']:.2f}x")
        if rows[0]["cpu_us_per_chunk"]:
            lines.append(f"in-process / server CPU per chunk: "
                         f"{rows[1]['cpu_us_per_chunk'] / rows[0]['cpu_us_per_chunk']:.2f}x "
                         f"(the throughput ratio with a core for the server alone)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--role", choices=["server", "inproc"], help=argparse.SUPPRESS)
    parser.add_argument("--port-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "server":
        _serve(args.chunks, args.port_file)
        return 0
    if args.role == "inproc":
        _inproc_role(args.streams, args.chunks)
        return 0
    rows = run(args.streams, args.chunks)
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
