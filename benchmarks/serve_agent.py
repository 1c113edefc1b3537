"""The streamkit side of ``benchmarks.serve_vs_mastra``: the agent ``mastra-server/server.mjs``
serves, as streamkit serves it.

Agent id ``demo``, instructions "You are a protocol-anchor agent.", one tool (lookup_customer),
memory configured but unused (no thread in the requests), and a model that streams, for any
plain prompt, exactly what the anchor's MastraLanguageModelV2Mock streams:

    reasoning-start, 1 reasoning-delta ("The user said something; echo it."), reasoning-end,
    text-start, "Echo: <last user text> (turn <n>)" in 3 deltas, text-end, finish (12/3 tokens)

Environment (read at import):
    SK_DELTAS  number of text deltas (default 3 = the echo in 3 slices; any other N streams N
               deltas of "word ", as the bench copy of server.mjs does with --deltas N)
    SK_PROCS   0 (default) or 3: three output processors, each with a process_output_stream hook
               (uppercase text deltas, pass-through, count text deltas in state)
    SK_MEMORY  the memory's SQLite path (default ``:memory:``; a file for several workers)

Run:  python -m streamkit serve benchmarks.serve_agent:agent --port 8111
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from streamkit import Agent
from streamkit.chunks import (
    Finish,
    FinishPayload,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    Stamper,
    StepOutputPayload,
    StepResultPayload,
    TextDelta,
    TextDeltaPayload,
    TextEnd,
    TextStart,
    UsagePayload,
)
from streamkit.memory import Memory, SQLiteStore
from streamkit.processors import Processor
from streamkit.tools import tool

DELTAS = int(os.environ.get("SK_DELTAS", "3"))
PROCS = int(os.environ.get("SK_PROCS", "0"))
#: The memory's SQLite path (configured, unused by the requests); a file for --workers > 1.
MEMORY = os.environ.get("SK_MEMORY", ":memory:")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and p.get("type") == "text")
    return ""


class MirrorModel:
    """Streams the anchor mock's plain-prompt script (no request log: serves forever)."""

    provider = "mock-provider"
    model_id = "mock-model-id"

    def stream(self, request: Any) -> AsyncIterator[Any]:
        return self._run(request)

    async def _run(self, request: Any) -> AsyncIterator[Any]:
        prompt = request.prompt
        users = [m for m in prompt if m.get("role") == "user"]
        user_text = _text_of(users[-1].get("content")) if users else ""
        run_id, frm = request.run_id, "AGENT"
        if DELTAS == 3:
            reply = f"Echo: {user_text} (turn {len(users)})"
            third = math.ceil(len(reply) / 3)
            pieces = [reply[:third], reply[third:2 * third], reply[2 * third:]]
        else:
            pieces = ["word "] * DELTAS
        yield ReasoningStart(id="rsn-0", run_id=run_id, from_=frm)
        yield ReasoningDelta(id="rsn-0", text="The user said something; echo it.",
                             run_id=run_id, from_=frm)
        yield ReasoningEnd(id="rsn-0", run_id=run_id, from_=frm)
        yield TextStart(id="txt-0", run_id=run_id, from_=frm)
        delta = Stamper(TextDelta, run_id=run_id, from_=frm)
        for piece in pieces:
            yield delta(TextDeltaPayload(id="txt-0", text=piece))
        yield TextEnd(id="txt-0", run_id=run_id, from_=frm)
        yield Finish(payload=FinishPayload(
            step_result=StepResultPayload(reason="stop"),
            output=StepOutputPayload(usage=UsagePayload(
                input_tokens=12, output_tokens=3, total_tokens=15))),
            run_id=run_id, from_=frm)


@tool
def lookup_customer(customer_id: str) -> dict[str, Any]:
    """Look up a customer record by id."""
    return {"customerId": customer_id, "name": "Ada Lovelace", "tier": "gold", "openTickets": 2}


class Upper(Processor):
    id = "uppercase"

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if part.__class__ is TextDelta:
            p = part.payload
            return msgspec.structs.replace(part, payload=msgspec.structs.replace(
                p, text=p.text.upper()))
        return part


class PassThrough(Processor):
    id = "pass-through"

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        return part


class Counter(Processor):
    id = "counter"

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if part.type == "text-delta":
            state["n"] = state.get("n", 0) + 1
        return part


def build_agent() -> Agent:
    return Agent(
        id="demo", name="Demo Agent", instructions="You are a protocol-anchor agent.",
        model=MirrorModel(), tools=[lookup_customer],
        output_processors=[Upper(), PassThrough(), Counter()] if PROCS == 3 else None,
        memory=Memory(SQLiteStore(MEMORY), last_messages=20))


agent = build_agent()  # python -m streamkit serve benchmarks.serve_agent:agent
