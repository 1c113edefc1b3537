"""The main job: a support agent whose stream is guarded and shaped by processors.

``python -m streamkit demo`` runs it on the built-in scripted model (no keys, no network):
the model looks a customer up with a tool, a processor redacts PII in the tool result before the
model sees it, a stream filter drops reasoning chunks, a word counter counts what the user gets;
the answer streams to the terminal as it arrives, then a table shows what each processor did and
how long it took. ``--model openai-compatible/<model> --base-url http://...`` runs the same against
a real provider.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

from .agent import Agent
from .chunks import ErrorChunk, TextDelta, ToolCall, ToolResult, TripwireChunk
from .errors import ToolError
from .messages import ToolInvocationPart
from .processors import Processor
from .testing import ScriptedModel, reasoning, text, tool_call
from .tools import tool

__all__ = ["build_agent", "run_demo"]

CUSTOMERS = {
    "C-42": {"customer_id": "C-42", "name": "Ada Lovelace", "email": "ada@example.com",
             "phone": "+44 20 7946 0958", "tier": "gold", "open_tickets": 2,
             "last_order": "ORD-1001 (shipped 2 days ago)"},
}

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
PHONE = re.compile(r"\+?\d[\d ()-]{7,}\d")


@tool
def lookup_customer(customer_id: str) -> dict[str, Any]:
    """Look up a customer record by id (name, contact details, tier, open tickets, last order)."""
    record = CUSTOMERS.get(customer_id)
    if record is None:
        raise ToolError(f"no customer {customer_id!r}; known ids: {', '.join(CUSTOMERS)}",
                        tool_name="lookup_customer")
    return dict(record)


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return PHONE.sub("[phone]", EMAIL.sub("[email]", value))
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


class RedactToolPII(Processor):
    """Redacts e-mail addresses and phone numbers in tool results before the model sees them."""

    id = "redact-tool-pii"

    def process_tool_result(self, tool_call_id: str, tool_name: str, args: Any, result: Any,
                            message_list: Any, state: dict[str, Any]) -> None:
        clean = _redact(result)
        state["redacted"] = state.get("redacted", 0) + (clean != result)
        message_list.update_tool_invocation(
            ToolInvocationPart.returned(tool_call_id, tool_name, clean, args))


class HideReasoning(Processor):
    """Drops reasoning chunks: the user sees the answer, not the model's scratchpad."""

    id = "hide-reasoning"

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if part.type.startswith("reasoning"):
            state["dropped"] = state.get("dropped", 0) + 1
            return None
        return part


class WordCounter(Processor):
    """Counts the words the user receives."""

    id = "word-counter"

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if part.type == "text-delta":
            state["words"] = state.get("words", 0) + len(part.payload.text.split())
        return part

    def process_output_result(self, state: dict[str, Any], result: dict[str, Any]) -> None:
        state["final_words"] = len(result["text"].split())


def scripted_model() -> ScriptedModel:
    return ScriptedModel([
        [reasoning("The customer asks about an order; look the account up first."),
         tool_call("lookup_customer", {"customer_id": "C-42"})],
        text("Hi Ada! Your order ORD-1001 shipped two days ago and should arrive tomorrow. "
             "I can also see 2 open tickets on your gold account; reply here if you want me "
             "to chase them. Your contact details are on file, so we will notify you when "
             "it is delivered."),
    ], model_id="scripted-support")


def build_agent(model: Any = None) -> Agent:
    """The demo's support agent (scripted model unless ``model`` is given)."""
    return Agent(
        id="support", name="Support",
        instructions="You are a concise support agent. Look customers up before answering.",
        model=model if model is not None else scripted_model(),
        tools=[lookup_customer],
        output_processors=[RedactToolPII(), HideReasoning(), WordCounter()],
        max_steps=4)


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), line, *(fmt.format(*map(str, r)) for r in rows)])


async def run_demo(model: Any = None, *, question: str = "Where is my order? I'm customer C-42.",
                   out: TextIO = sys.stdout) -> Any:
    """Stream the demo agent's answer to ``out``, then print the processor table.
    Returns the ``AgentResult``."""
    agent = build_agent(model)
    out.write(f"user> {question}\n")
    out.write("agent> ")
    out.flush()
    stream = agent.stream(question)
    async for chunk in stream:
        # Matching on the class narrows the chunk union, so ``payload`` is typed.
        if isinstance(chunk, TextDelta):
            out.write(chunk.payload.text)
            out.flush()
        elif isinstance(chunk, ToolCall):
            out.write(f"[calling {chunk.payload.tool_name}({chunk.payload.args})]\n       ")
        elif isinstance(chunk, ToolResult):
            out.write(f"[{chunk.payload.tool_name} → {chunk.payload.result}]\n       ")
        elif isinstance(chunk, TripwireChunk):
            out.write(f"\n[blocked by {chunk.payload.processor_id}: {chunk.payload.reason}]")
        elif isinstance(chunk, ErrorChunk):
            out.write(f"\n[error: {chunk.payload.error}]")
    out.write("\n\n")
    result = await stream.result()
    rows = []
    for rec in result.trace:
        rows.append([rec.processor_id, rec.hook, "-" if rec.step is None else rec.step,
                     rec.calls, rec.dropped, f"{rec.duration * 1e3:.3f}", rec.outcome])
    out.write(_table(rows, ["processor", "hook", "step", "calls", "dropped", "ms", "outcome"]))
    states = result.states
    did = [
        f"redact-tool-pii redacted {states.get('redact-tool-pii', {}).get('redacted', 0)} "
        f"tool result(s)",
        f"hide-reasoning dropped {states.get('hide-reasoning', {}).get('dropped', 0)} "
        f"reasoning chunk(s)",
        f"word-counter counted {states.get('word-counter', {}).get('words', 0)} word(s) "
        f"streamed",
    ]
    out.write("\n\n" + "\n".join(did))
    out.write(f"\nfinish: {result.finish_reason} · steps: {len(result.steps)} · tokens: "
              f"{result.usage.input_tokens} in / {result.usage.output_tokens} out\n")
    return result
