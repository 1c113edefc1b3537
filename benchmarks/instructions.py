"""Instructions per chunk and per request, counted by valgrind's callgrind: repeatable on a noisy
host.

Wall-clock rows on a shared 2-core VM move 30–50 % between runs; callgrind counts the instructions
a run executes, which stay the same for the same code and inputs whatever else the machine does.
Each figure is a difference of two whole-process counts (``n`` chunks minus one chunk, or ``R``
requests minus none), so start-up and imports cancel out. ``PYTHONHASHSEED`` is fixed.

    python -m benchmarks.instructions                       # this checkout
    python -m benchmarks.instructions --tree ../old-checkout  # another checkout, same workloads
    python -m benchmarks.instructions --only otel            # rows whose name contains "otel"

Needs ``valgrind`` on PATH (Debian's package). Not part of ``python -m benchmarks``: one figure
takes a few seconds to a minute under callgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Mastra's d0: r + 1 requests of ``chunks`` text deltas each (argv[2] = r).
_MASTRA_REQUESTS = """
import asyncio, sys
from benchmarks.rows_mastra import MockModel, INSTRUCTIONS
from streamkit import Agent
r = int(sys.argv[2])
async def main():
    agent = Agent(id="a", instructions=INSTRUCTIONS)
    for _ in range(r + 1):
        async for _ in agent.stream("Say the words.", model=MockModel({chunks})):
            pass
asyncio.run(main())
"""

#: name -> (script body taking argv[1] = processors, argv[2] = size)
_WORKLOADS = {
    "ops.apply": """
import asyncio, sys
from streamkit import ops
from streamkit.chunks import TextDelta
k, n = int(sys.argv[1]), int(sys.argv[2])
chunks = [TextDelta(id="t", text="w", run_id="r", from_="AGENT")] * n  # building is not measured
def same(c): return c
async def main():
    async for _ in ops.apply(chunks, [ops.map(same) for _ in range(k)]):
        pass
asyncio.run(main())
""",
    "model stream alone": """
import asyncio, sys
from streamkit.models import ModelRequest
from streamkit.testing import ScriptedModel, text
n = int(sys.argv[2])
async def main():
    model = ScriptedModel([text(" ".join(["w"] * n))])
    async for _ in model.stream(ModelRequest(prompt=[{"role": "user", "content": "hi"}])):
        pass
asyncio.run(main())
""",
    "agent.stream": """
import asyncio, sys
from streamkit import Agent, ops
from streamkit.testing import ScriptedModel, text
k, n = int(sys.argv[1]), int(sys.argv[2])
def same(c): return c
async def main():
    agent = Agent(id="a", model=ScriptedModel([text(" ".join(["w"] * n))]),
                  output_processors=[ops.map(same) for _ in range(k)] or None)
    async for _ in agent.stream("hi"):
        pass
asyncio.run(main())
""",
    "100-chunk requests": """
import asyncio, sys
from streamkit import Agent, ops
from streamkit.testing import ScriptedModel, text
k, r = int(sys.argv[1]), int(sys.argv[2])
def same(c): return c
async def main():
    words = " ".join(["w"] * 100)
    agent = Agent(id="a", model=ScriptedModel([text(words)] * (r + 1)),
                  output_processors=[ops.map(same) for _ in range(k)] or None)
    for _ in range(r + 1):
        async for _ in agent.stream("hi"):
            pass
asyncio.run(main())
""",
    # One request through the served app (``create_app`` of benchmarks.serve_agent's agent),
    # called as uvicorn calls it but with no socket: the agent run, the serving layer (limits,
    # body, request parsing, tenancy, the producer task, framing, the response) and asyncio;
    # not httptools nor the kernel. argv[1] = 0: the stream route, 1: the chat route.
    "served request": """
import asyncio, sys
from benchmarks.serve_agent import agent
from streamkit.serve import create_app
chat, r = int(sys.argv[1]), int(sys.argv[2])
app = create_app(agent)
path = "/chat/demo" if chat else "/api/agents/demo/stream"
body = (b'{"messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hello"}]}]}'
        if chat else b'{"messages":[{"role":"user","content":"hello"}]}')
headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
           (b"content-length", str(len(body)).encode())]
async def one():
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000), "state": {}}
    done = asyncio.get_running_loop().create_future()
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    status = []
    async def receive():
        if pending:
            return pending.pop()
        await done
        return {"type": "http.disconnect"}
    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif not message.get("more_body") and not done.done():
            done.set_result(None)
    await app(scope, receive, send)
    assert status == [200], status
async def main():
    for _ in range(r + 1):
        await one()
asyncio.run(main())
""",
    "mastra c": """
import asyncio, sys
from benchmarks.rows_mastra import (MockModel, Uppercase, DropEvery10th, WordCount, INSTRUCTIONS)
from streamkit import Agent
n = int(sys.argv[2])
async def main():
    probe = {"words": 0, "seen_finish": 0}
    agent = Agent(id="a", instructions=INSTRUCTIONS, output_processors=[
        Uppercase("uppercase"), DropEvery10th("drop"), WordCount(probe)])
    async for _ in agent.stream("Say the words.", model=MockModel(n)):
        pass
asyncio.run(main())
""",
    "mastra floor": """
import asyncio, sys
from benchmarks.rows_mastra import _mock_stream
n = int(sys.argv[2])
async def main():
    async for _ in _mock_stream(n, "r"):
        pass
asyncio.run(main())
""",
    "mastra a": """
import asyncio, sys
from benchmarks.rows_mastra import MockModel, INSTRUCTIONS
from streamkit import Agent
n = int(sys.argv[2])
async def main():
    agent = Agent(id="a", instructions=INSTRUCTIONS)
    async for _ in agent.stream("Say the words.", model=MockModel(n)):
        pass
asyncio.run(main())
""",
    "mastra d0": _MASTRA_REQUESTS.format(chunks=100),
    "mastra d0 · no chunks": _MASTRA_REQUESTS.format(chunks=0),
}

# The agent.stream workload with opentelemetry in three states (``otel`` rows): not importable
# (as if not installed), imported but no provider set, and an SDK provider tracing every run.
_OTEL_STATES = {
    "otel absent": 'import sys\nsys.modules["opentelemetry"] = None\n',
    "otel unconfigured": "import opentelemetry.trace\n",
    "otel tracing on": """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
trace.set_tracer_provider(provider)
""",
}
for _state, _setup in _OTEL_STATES.items():
    _WORKLOADS[f"agent.stream · {_state}"] = _setup + _WORKLOADS["agent.stream"]
    _WORKLOADS[f"requests · {_state}"] = _setup + _WORKLOADS["100-chunk requests"]

# The agent.stream workload watched by an observer (``observers=``, streamkit.events) that
# counts the events: per node only, and with chunk detail (the instrumented chain).
for _detail in (False, True):
    _WORKLOADS[f"agent.stream · observed{' · chunk detail' if _detail else ''}"] = \
        _WORKLOADS["agent.stream"].replace(
            'async for _ in agent.stream("hi"):',
            f"class Seen:\n        chunk_detail = {_detail}\n        n = 0\n"
            f"        def on_event(self, event): self.n += 1\n"
            f'    async for _ in agent.stream("hi", observers=[Seen()]):')

#: The served request with 200 text deltas (``serve_agent``'s ``SK_DELTAS``): the serving
#: layer's per-chunk path (framing, the producer, batching) beside the fixed one above.
_WORKLOADS["served 200-delta request"] = (
    'import os\nos.environ["SK_DELTAS"] = "200"\n' + _WORKLOADS["served request"])


#: (workload, processors, small, large, unit): the figure is (large - small) / (large - small size)
ROWS = [
    ("ops.apply", 0, 0, 20_000, "chunk"),
    ("ops.apply", 1, 0, 20_000, "chunk"),
    ("ops.apply", 3, 0, 20_000, "chunk"),
    ("model stream alone", 0, 1, 10_001, "chunk"),
    ("agent.stream", 0, 1, 10_001, "chunk"),
    ("agent.stream", 3, 1, 10_001, "chunk"),
    ("100-chunk requests", 0, 0, 200, "request"),
    ("100-chunk requests", 3, 0, 200, "request"),
    ("served request", 0, 0, 200, "request"),
    ("served request", 1, 0, 200, "request"),
    ("served 200-delta request", 0, 0, 50, "request"),
    ("served 200-delta request", 1, 0, 50, "request"),
    *((f"agent.stream · {state}", 3, 1, 10_001, "chunk") for state in _OTEL_STATES),
    *((f"requests · {state}", 3, 0, 200, "request") for state in _OTEL_STATES),
    # Mastra's scenarios, and the pieces of a d0 request: the mock model's own cost per chunk
    # (floor), the agent's per chunk with no processors (a, which includes the floor), and the
    # per-request cost of a request that streams no text.
    ("mastra floor", 0, 1, 10_001, "chunk"),
    ("mastra a", 0, 1, 10_001, "chunk"),
    ("mastra c", 3, 1, 10_001, "chunk"),
    ("mastra d0 · no chunks", 0, 0, 200, "request"),
    ("mastra d0", 0, 0, 200, "request"),
    ("agent.stream · observed", 3, 1, 10_001, "chunk"),
    ("agent.stream · observed · chunk detail", 3, 1, 10_001, "chunk"),
]


def _count(tree: Path, script: Path, k: int, n: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=f"{tree}{os.pathsep}{tree / 'operators'}")
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, str(script), str(k), str(n)],
                         cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({script.name} {k} {n}):\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the checkout to measure (default: this one)")
    parser.add_argument("--only", nargs="+", metavar="TEXT",
                        help="only the workloads whose name contains one of these (e.g. "
                             "'mastra c' 'agent.stream')")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    tree = args.tree.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {}
        for name, body in _WORKLOADS.items():
            scripts[name] = Path(tmp) / (re.sub(r"\W+", "_", name) + ".py")
            scripts[name].write_text(body)
        print(f"instructions per unit, {tree}")
        for name, k, small, large, unit in ROWS:
            if args.only and not any(text in name for text in args.only):
                continue
            a = _count(tree, scripts[name], k, small)
            b = _count(tree, scripts[name], k, large)
            print(f"  {name:<32} {k:>2} processors  {(b - a) / (large - small):>12,.0f} per {unit}")


if __name__ == "__main__":
    main()
