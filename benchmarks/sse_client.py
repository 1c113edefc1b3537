#!/usr/bin/env python3
"""sseload: a bounded, loopback-only HTTP/1.1 load client for SSE agent routes.

Each request is a POST whose whole SSE response is read (chunked transfer-encoding decoded) to
its end; a response counts as OK only with status 200, ``data: [DONE]`` at the end and exactly
``--expect-deltas`` text-delta events (when given). Closed loop: ``--concurrency`` workers, each
on its own keep-alive connection, send requests back to back until ``--requests`` are done (or
``--max-seconds`` passes). Stops by itself; refuses any host outside 127.0.0.0/8 / ::1.

Per request it records: time to first response byte (TTFB), time to the first text-delta event
(first text), total latency, SSE events, bytes. With ``--server-pid`` it also reads the server
process's CPU time (utime+stime from /proc/PID/stat, all threads) before/after the measured
requests, and its peak RSS during them (VmHWM, reset through /proc/PID/clear_refs first when
permitted; otherwise the peak since the process started, flagged ``hwm_reset: false``).

Usage (prints one JSON object):
    python sseload.py --port 4111 --agent demo --route mastra --concurrency 50 --requests 2000
    python sseload.py --port 8111 --agent demo --route chat -c 1 -n 500 --warmup 50 --server-pid PID

Routes: ``mastra`` = POST /api/agents/{agent}/stream with {"messages": "<prompt>"};
``chat`` = POST /chat/{agent} with the AI SDK v5 DefaultChatTransport body (id, one UI user
message, trigger "submit-message"). ``--path``/``--body`` override both.
Optional: uvloop for the client loop when installed (``--no-uvloop`` to turn it off).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import resource
import statistics
import sys
import time
from typing import Any

TEXT_DELTA = b'"type":"text-delta"'
DONE = b"data: [DONE]"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------- /proc helpers


def proc_cpu_s(pid: int) -> float:
    """utime + stime of the whole process (all threads), seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat


def proc_tree_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and its live children (``serve --workers N``: the workers)."""
    total = proc_cpu_s(pid)
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            children = [int(c) for c in fh.read().split()]
    except OSError:
        return total
    for child in children:
        try:
            total += proc_cpu_s(child)
        except OSError:
            pass  # exited meanwhile
    return total


def proc_mem_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def reset_hwm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# ----------------------------------------------------------------------------- HTTP


class Conn:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def ensure(self) -> None:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Result:
    __slots__ = ("ok", "error", "ttfb", "first_text", "latency", "events", "deltas", "nbytes")

    def __init__(self) -> None:
        self.ok = False
        self.error = ""
        self.ttfb = self.first_text = self.latency = float("nan")
        self.events = self.deltas = self.nbytes = 0


async def request(conn: Conn, raw: bytes, expect_deltas: int | None) -> Result:
    """One request on ``conn`` (reconnects when needed); the whole response is read."""
    res = Result()
    await conn.ensure()
    reader, writer = conn.reader, conn.writer
    assert reader is not None and writer is not None
    sent = time.perf_counter()
    writer.write(raw)
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = await reader.read(65536)
        if not data:
            conn.close()
            res.error = "closed before headers"
            return res
        if not buf:
            res.ttfb = time.perf_counter() - sent
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    chunked, length, close = False, None, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        value = value.strip().lower()
        if name == b"transfer-encoding" and b"chunked" in value:
            chunked = True
        elif name == b"content-length":
            length = int(value)
        elif name == b"connection" and value == b"close":
            close = True
    body = bytearray()
    pending = rest
    first_text_seen = False

    def note(piece: bytes) -> None:
        nonlocal first_text_seen
        if not first_text_seen:
            # look across the boundary with what was already decoded
            window = bytes(body[-len(TEXT_DELTA):]) + piece
            if TEXT_DELTA in window:
                res.first_text = time.perf_counter() - sent
                first_text_seen = True
        body.extend(piece)

    if chunked:
        # chunked decoder over `pending` + further reads
        while True:
            nl = pending.find(b"\r\n")
            while nl < 0:
                data = await reader.read(65536)
                if not data:
                    conn.close()
                    res.error = "closed mid-body"
                    return res
                pending += data
                nl = pending.find(b"\r\n")
            size = int(pending[:nl].split(b";", 1)[0], 16)
            pending = pending[nl + 2:]
            if size == 0:
                # trailers (none expected) end with an empty line
                while b"\r\n" not in pending:
                    data = await reader.read(65536)
                    if not data:
                        break
                    pending += data
                pending = pending[pending.find(b"\r\n") + 2:]
                break
            while len(pending) < size + 2:
                # deliver what we have as it arrives (for the first-text time)
                data = await reader.read(65536)
                if not data:
                    conn.close()
                    res.error = "closed mid-chunk"
                    return res
                pending += data
            note(pending[:size])
            pending = pending[size + 2:]
    elif length is not None:
        while len(pending) < length:
            data = await reader.read(65536)
            if not data:
                break
            pending += data
        note(pending[:length])
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            pending += data
        note(pending)
        close = True
    res.latency = time.perf_counter() - sent
    if close:
        conn.close()
    res.nbytes = len(body)
    res.events = body.count(b"\ndata: ") + (1 if body.startswith(b"data: ") else 0)
    res.deltas = body.count(TEXT_DELTA)
    if status != 200:
        res.error = f"status {status}"
    elif not body.rstrip().endswith(DONE):
        res.error = "no [DONE]"
    elif expect_deltas is not None and res.deltas != expect_deltas:
        res.error = f"{res.deltas} text deltas, expected {expect_deltas}"
    else:
        res.ok = True
    return res


def build_request(host: str, port: int, path: str, body: bytes, keepalive: bool) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Connection: {'keep-alive' if keepalive else 'close'}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


# ----------------------------------------------------------------------------- load


async def run_load(host: str, port: int, raw: bytes, concurrency: int, total: int,
                   expect: int | None, max_seconds: float, timeout: float
                   ) -> tuple[list[Result], float]:
    remaining = total
    results: list[Result] = []
    deadline = time.perf_counter() + max_seconds

    async def worker() -> None:
        nonlocal remaining
        conn = Conn(host, port)
        try:
            while remaining > 0 and time.perf_counter() < deadline:
                remaining -= 1
                try:
                    res = await asyncio.wait_for(request(conn, raw, expect), timeout)
                except (TimeoutError, OSError, ValueError, IndexError) as exc:
                    conn.close()
                    res = Result()
                    res.error = f"{type(exc).__name__}: {exc}"[:120]
                results.append(res)
        finally:
            conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.perf_counter() - started


def summarize(results: list[Result], wall: float) -> dict[str, Any]:
    ok = [r for r in results if r.ok]
    errors: dict[str, int] = {}
    for r in results:
        if not r.ok:
            errors[r.error] = errors.get(r.error, 0) + 1
    ms = lambda xs, q: round(quantile(xs, q) * 1e3, 3)  # noqa: E731
    lat = [r.latency for r in ok]
    ttfb = [r.ttfb for r in ok]
    first = [r.first_text for r in ok]
    events = sum(r.events for r in ok)
    deltas = sum(r.deltas for r in ok)
    return {
        "requests": len(results), "ok": len(ok), "errors": sum(errors.values()),
        "error_kinds": errors, "wall_s": round(wall, 4),
        "rps": round(len(ok) / wall, 2) if wall else None,
        "events_per_s": round(events / wall, 1) if wall else None,
        "text_deltas_per_s": round(deltas / wall, 1) if wall else None,
        "events_per_response": round(events / len(ok), 2) if ok else None,
        "bytes_per_response": round(sum(r.nbytes for r in ok) / len(ok)) if ok else None,
        "latency_ms": {"p50": ms(lat, 0.5), "p99": ms(lat, 0.99), "mean": round(
            statistics.fmean(lat) * 1e3, 3) if lat else None},
        "ttfb_ms": {"p50": ms(ttfb, 0.5), "p99": ms(ttfb, 0.99)},
        "first_text_ms": {"p50": ms(first, 0.5), "p99": ms(first, 0.99)},
    }


def route_request(route: str, agent: str, prompt: str) -> tuple[str, bytes]:
    if route == "mastra":
        return f"/api/agents/{agent}/stream", json.dumps({"messages": prompt}).encode()
    if route == "chat":
        return f"/chat/{agent}", json.dumps({
            "id": "chat-load-1",
            "messages": [{"id": "msg-user-1", "role": "user",
                          "parts": [{"type": "text", "text": prompt}]}],
            "trigger": "submit-message"}).encode()
    raise SystemExit(f"unknown route {route!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--agent", default="demo")
    ap.add_argument("--route", choices=["mastra", "chat"], default="mastra")
    ap.add_argument("--path", help="override the route's path")
    ap.add_argument("--body", help="override the route's JSON body")
    ap.add_argument("--prompt", default="go")
    ap.add_argument("-c", "--concurrency", type=int, default=1)
    ap.add_argument("-n", "--requests", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20, help="requests before measuring (same c)")
    ap.add_argument("--expect-deltas", type=int, help="text-delta events each response must have")
    ap.add_argument("--max-seconds", type=float, default=120.0, help="stop sending after this")
    ap.add_argument("--timeout", type=float, default=60.0, help="per request")
    ap.add_argument("--no-keepalive", action="store_true")
    ap.add_argument("--server-pid", type=int, help="server process: CPU time and peak RSS")
    ap.add_argument("--server-children", action="store_true",
                    help="add the CPU time of the server's children (its workers)")
    ap.add_argument("--no-uvloop", action="store_true")
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)

    try:
        addr = ipaddress.ip_address(args.host if args.host != "localhost" else "127.0.0.1")
    except ValueError:
        raise SystemExit("--host must be a loopback IP address") from None
    if not addr.is_loopback:
        raise SystemExit("refusing a non-loopback host: this client only loads 127.0.0.0/8 or ::1")
    if args.requests <= 0 or args.requests > 1_000_000 or args.concurrency <= 0 \
            or args.concurrency > 5000 or args.max_seconds > 3600:
        raise SystemExit("bounds: 0 < requests <= 1e6, 0 < concurrency <= 5000, "
                         "max-seconds <= 3600")
    if not args.no_uvloop:
        try:
            import uvloop  # type: ignore[import-not-found]
            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        except ImportError:
            pass

    path, body = route_request(args.route, args.agent, args.prompt)
    if args.path:
        path = args.path
    if args.body:
        body = args.body.encode()
    raw = build_request(args.host, args.port, path, body, not args.no_keepalive)

    async def go() -> dict[str, Any]:
        if args.warmup:
            await run_load(args.host, args.port, raw, min(args.concurrency, args.warmup),
                           args.warmup, args.expect_deltas, args.max_seconds, args.timeout)
        pid = args.server_pid
        hwm_reset = reset_hwm(pid) if pid else None
        mem0 = proc_mem_kib(pid) if pid else None
        cpu_of = proc_tree_cpu_s if args.server_children else proc_cpu_s
        cpu0 = cpu_of(pid) if pid else None
        me0 = resource.getrusage(resource.RUSAGE_SELF)
        results, wall = await run_load(args.host, args.port, raw, args.concurrency,
                                       args.requests, args.expect_deltas, args.max_seconds,
                                       args.timeout)
        me1 = resource.getrusage(resource.RUSAGE_SELF)
        out = summarize(results, wall)
        out.update({"label": args.label, "route": args.route, "path": path,
                    "concurrency": args.concurrency, "port": args.port})
        client_cpu = (me1.ru_utime - me0.ru_utime) + (me1.ru_stime - me0.ru_stime)
        out["client_cpu_ms_per_req"] = round(client_cpu / max(1, len(results)) * 1e3, 4)
        out["client_cpu_util"] = round(client_cpu / wall, 3)  # cores the load client used
        if pid:
            cpu1 = cpu_of(pid)
            mem1 = proc_mem_kib(pid)
            out["server"] = {
                "pid": pid, "cpu_s": round(cpu1 - cpu0, 3),
                "cpu_ms_per_req": round((cpu1 - cpu0) / max(1, out["ok"]) * 1e3, 4),
                "cpu_util": round((cpu1 - cpu0) / wall, 3),
                "rss_before_mib": round(mem0["VmRSS"] / 1024, 1),
                "rss_after_mib": round(mem1["VmRSS"] / 1024, 1),
                "peak_rss_mib": round(mem1["VmHWM"] / 1024, 1), "hwm_reset": hwm_reset}
        return out

    print(json.dumps(asyncio.run(go())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
