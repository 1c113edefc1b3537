"""The main job: a support agent whose stream is guarded and shaped by processors.

``python -m streamkit serve --demo`` serves the same agent over HTTP (``build_serve_agent``): a
model built from each request (``demo_model``), so it answers any number of requests — the
order question with the lookup tool (which reports progress as a ``data-progress`` chunk), any
other prompt with text that shows what the thread remembers.

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
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from ._prompt import PromptMessage
from .agent import Agent
from .chunks import ModelChunk, TextDelta, ToolCall, ToolResult, TripwireChunk
from .errors import ToolError
from .messages import ToolInvocationPart
from .models import ModelRequest
from .processors import Processor
from .testing import FunctionModel, ScriptedModel, reasoning, text, tool_call
from .tools import tool

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["build_agent", "run_demo", "build_serve_agent", "demo_model", "QUESTION"]

#: The question the demo is built around.
QUESTION = "Where is my order? I'm customer C-42."

CUSTOMERS = {
    "C-42": {"customer_id": "C-42", "name": "Ada Lovelace", "email": "ada@example.com",
             "phone": "+44 20 7946 0958", "tier": "gold", "open_tickets": 2,
             "last_order": "ORD-1001 (shipped 2 days ago)"},
}

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
PHONE = re.compile(r"\+?\d[\d ()-]{7,}\d")


@tool
def lookup_customer(customer_id: str, writer: Any = None) -> dict[str, Any]:
    """Look up a customer record by id (name, contact details, tier, open tickets, last order)."""
    if writer is not None:  # a client sees progress while the tool runs
        writer.custom({"type": "data-progress",
                       "data": {"pct": 50, "message": f"Looking up {customer_id}"}})
    record = CUSTOMERS.get(customer_id)
    if record is None:
        raise ToolError(f"no customer {customer_id!r}; known ids: {', '.join(CUSTOMERS)}",
                        tool_name="lookup_customer")
    return dict(record)


def _redact(value: object) -> object:
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


CUSTOMER_ID = re.compile(r"\bC-\d+\b")


def _text_of(content: object) -> str:
    """The text of a provider-shaped message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _answer(prompt: list[PromptMessage]) -> object:
    """The demo model's step for ``prompt``: see ``demo_model``."""
    turns = [m for m in prompt if m.get("role") != "system"]
    last = turns[-1] if turns else {"role": "user", "content": ""}
    if last.get("role") == "tool":
        content = last.get("content")
        outcome: Mapping[str, Any] = content[0] if isinstance(content, list) else {}
        record = outcome.get("result")
        if outcome.get("isError") or not isinstance(record, dict):
            return text(f"Sorry, I could not find that customer: {record}")
        first = str(record.get("name", "there")).split()[0]
        return text(f"Hi {first}! Your order {record.get('last_order', '(none on file)')}. "
                    f"I can also see {record.get('open_tickets', 0)} open tickets on your "
                    f"{record.get('tier', '')} account; reply here if you want me to chase "
                    f"them.")
    said = _text_of(last.get("content"))
    customer = CUSTOMER_ID.search(said)
    if customer is not None:
        return [reasoning("The customer asks about an order; look the account up first."),
                tool_call("lookup_customer", {"customer_id": customer.group(0)})]
    earlier = [_text_of(m.get("content")) for m in turns[:-1] if m.get("role") == "user"]
    lookups = sum(1 for m in turns if m.get("role") == "tool")
    reply = f"You said: \u201c{said.strip()}\u201d."
    if earlier:
        reply += (f" Earlier in this thread you said {len(earlier)} thing(s), first: "
                  f"\u201c{earlier[0].strip()}\u201d.")
    if lookups:
        reply += f" I looked up {lookups} customer record(s) for you in this thread."
    return text(reply + f' Ask me "{QUESTION}" to see a tool call.')


class _ServedModel(FunctionModel):
    """A ``FunctionModel`` that keeps no request log: a server answers requests forever."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        return self._run(request)


def demo_model() -> FunctionModel:
    """The served demo's model (no network): a message naming a customer id (``C-42``) gets
    reasoning and a ``lookup_customer`` call, the tool's result gets the answer, and any other
    prompt gets text that repeats it and says what the thread remembers (earlier user
    messages, customer lookups) — so memory and resent chat history are visible."""
    return _ServedModel(lambda request: _answer(request.prompt), model_id="demo-support")


def build_serve_agent(memory: Memory | None = None) -> Agent:
    """The demo agent as ``python -m streamkit serve --demo`` serves it (id ``support``)."""
    return Agent(
        id="support", name="Support",
        instructions="You are a concise support agent. Look customers up before answering.",
        model=demo_model(), tools=[lookup_customer],
        output_processors=[RedactToolPII(), HideReasoning(), WordCounter()],
        max_steps=4, memory=memory)


def _table(rows: list[list[str | int]], headers: list[str]) -> str:
    cells: list[list[str]] = [headers, *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), line, *(fmt.format(*map(str, r)) for r in rows)])


async def run_demo(model: object = None, *, question: str = QUESTION,
                   out: TextIO = sys.stdout) -> Any:
    """Stream the demo agent's answer to ``out``, then print the processor table.
    Returns the ``AgentResult``; raises the error that ended the run, if one did (printed by
    the caller, once)."""
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
        # An ``error`` chunk is not printed here: ``stream.result()`` raises that error just
        # below, and whoever called the demo reports it once (the CLI: ``error: ...``).
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
