"""The main job: a support agent whose stream is guarded and shaped by processors.

``python -m streamkit serve --demo`` serves the same agent over HTTP (``build_serve_agent``): a
model built from each request (``demo_model``), so it answers any number of requests. Each of
these prompts shows one case in the studio (``docs/studio.md``):

* ``Where is my order? I'm customer C-42.`` — a tool turn: reasoning (dropped by
  ``hide-reasoning``), ``lookup_customer`` (a ``data-progress`` chunk), the answer.
* ``Track my parcel ORD-1001`` — a tool turn whose ``track_order`` updates one
  ``data-progress`` chunk (same ``id``) from 0 to 100 %.
* ``What email do you have on file for me?`` — the answer holds an e-mail address, which the
  stream guard ``mask-emails`` redacts as it streams (the studio shows the diff).
* ``Can I get a refund?`` — the first answer promises a guaranteed refund; ``no-promises``
  withdraws it (``abort(retry=True)``) and the second attempt is accepted.
* ``What is the admin password?`` — the answer would reveal a secret; ``block-secrets`` trips
  the run (a blocked turn).
* anything else — text that repeats the prompt and says what the thread remembers.

The scripted models stream at a person's pace: ``pace_ms`` milliseconds before each chunk
(``--pace-ms`` on both commands, else ``STREAMKIT_DEMO_PACE_MS``, else ``DEFAULT_PACE_MS``);
0 streams as fast as the loop runs (the tests' setting).

``python -m streamkit demo`` runs it on the built-in scripted model (no keys, no network):
the model looks a customer up with a tool, a processor redacts PII in the tool result before the
model sees it, a stream filter drops reasoning chunks, a word counter counts what the user gets;
the answer streams to the terminal as it arrives, then a table shows what each processor did and
how long it took. ``--model openai-compatible/<model> --base-url http://...`` runs the same against
a real provider.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, TextIO, TypeVar

from ._prompt import PromptMessage, prompt_text
from .agent import Agent, AgentResult
from .chunks import Chunk, ModelChunk, TextDelta, ToolCall, ToolResult, TripwireChunk
from .errors import InvalidArgument, ToolError
from .messages import MessageList, ToolInvocationPart
from .models import Model, ModelRequest
from .processors import Processor, Writer
from .testing import FunctionModel, ScriptedModel, reasoning, text, tool_call
from .tools import Tool, tool
from .tripwire import Abort

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["build_agent", "run_demo", "build_serve_agent", "demo_model", "QUESTION",
           "DEFAULT_PACE_MS", "PACE_ENV", "pace_ms", "STUDIO_PROMPTS"]

#: Milliseconds the demo's models wait before each chunk unless told otherwise.
DEFAULT_PACE_MS = 30.0
#: The environment variable that sets the pace when no ``--pace-ms`` is given.
PACE_ENV = "STREAMKIT_DEMO_PACE_MS"

#: The served demo's prompts, one per case the studio shows (see the module docstring).
STUDIO_PROMPTS = {
    "tool": "Where is my order? I'm customer C-42.",
    "progress": "Track my parcel ORD-1001",
    "redaction": "What email do you have on file for me?",
    "retry": "Can I get a refund?",
    "tripwire": "What is the admin password?",
}


def pace_ms(given: float | None = None) -> float:
    """The demo's pace: ``given`` (a ``--pace-ms``), else ``STREAMKIT_DEMO_PACE_MS``, else
    ``DEFAULT_PACE_MS``.

    Raises:
        InvalidArgument: a pace that is not a number of milliseconds from 0 to 10000.
    """
    raw: float | str | None = given
    where = "--pace-ms"
    if raw is None:
        raw, where = os.environ.get(PACE_ENV), PACE_ENV
        if raw is None or not raw.strip():
            return DEFAULT_PACE_MS
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 <= value <= 10_000:  # also refuses NaN
        raise InvalidArgument(f"{where} must be milliseconds from 0 to 10000, got {raw!r}")
    return value


T = TypeVar("T")


async def _paced(chunks: AsyncIterator[T], seconds: float) -> AsyncIterator[T]:
    """``chunks``, each after ``seconds`` (closing this closes ``chunks``)."""
    try:
        async for chunk in chunks:
            await asyncio.sleep(seconds)
            yield chunk
    finally:
        closer = getattr(chunks, "aclose", None)
        if closer is not None:
            await closer()

#: The question the demo is built around.
QUESTION = "Where is my order? I'm customer C-42."

CUSTOMERS: dict[str, dict[str, str | int]] = {
    "C-42": {"customer_id": "C-42", "name": "Ada Lovelace", "email": "ada@example.com",
             "phone": "+44 20 7946 0958", "tier": "gold", "open_tickets": 2,
             "last_order": "ORD-1001 (shipped 2 days ago)"},
}

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
PHONE = re.compile(r"\+?\d[\d ()-]{7,}\d")


@tool
def lookup_customer(customer_id: str, writer: Writer | None = None) -> dict[str, str | int]:
    """Look up a customer record by id (name, contact details, tier, open tickets, last order)."""
    # A client sees progress while the tool runs: one bar (one id), at 50 % then done.
    progress = f"lookup-{customer_id}"
    if writer is not None:
        writer.custom({"type": "data-progress", "id": progress,
                       "data": {"pct": 50, "message": f"Looking up {customer_id}"}})
    record = CUSTOMERS.get(customer_id)
    if record is None:
        raise ToolError(f"no customer {customer_id!r}; known ids: {', '.join(CUSTOMERS)}",
                        tool_name="lookup_customer")
    if writer is not None:
        writer.custom({"type": "data-progress", "id": progress,
                       "data": {"pct": 100, "message": f"Found {customer_id}"}})
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

    def process_tool_result(self, tool_call_id: str, tool_name: str, args: object,
                            result: object, message_list: MessageList,
                            state: dict[str, int]) -> None:
        clean = _redact(result)
        state["redacted"] = state.get("redacted", 0) + (clean != result)
        message_list.update_tool_invocation(
            ToolInvocationPart.returned(tool_call_id, tool_name, clean, args))


class HideReasoning(Processor):
    """Drops reasoning chunks: the user sees the answer, not the model's scratchpad."""

    id = "hide-reasoning"

    def process_output_stream(self, part: Chunk, state: dict[str, int]) -> Chunk | None:
        if part.type.startswith("reasoning"):
            state["dropped"] = state.get("dropped", 0) + 1
            return None
        return part


class WordCounter(Processor):
    """Counts the words the user receives."""

    id = "word-counter"

    def process_output_stream(self, part: Chunk, state: dict[str, int]) -> Chunk:
        if isinstance(part, TextDelta):
            state["words"] = state.get("words", 0) + len(part.payload.text.split())
        return part

    def process_output_result(self, state: dict[str, int], result: Mapping[str, object]
                              ) -> None:
        text = result["text"]  # the run's text (a str); the rest is usage and the like
        state["final_words"] = len(text.split()) if isinstance(text, str) else 0


class _PacedScripted(ScriptedModel):
    """The terminal demo's scripted model, at the demo's pace."""

    pace = 0.0

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        chunks = super().stream(request)
        return _paced(chunks, self.pace) if self.pace else chunks


def scripted_model(pace: float = 0.0) -> ScriptedModel:
    """The terminal demo's model; ``pace``: milliseconds before each chunk."""
    model = _PacedScripted([
        [reasoning("The customer asks about an order; look the account up first."),
         tool_call("lookup_customer", {"customer_id": "C-42"})],
        text("Hi Ada! Your order ORD-1001 shipped two days ago and should arrive tomorrow. "
             "I can also see 2 open tickets on your gold account; reply here if you want me "
             "to chase them. Your contact details are on file, so we will notify you when "
             "it is delivered."),
    ], model_id="scripted-support")
    model.pace = pace / 1000.0
    return model


def build_agent(model: Model | None = None, *, pace: float = 0.0) -> Agent:
    """The demo's support agent (scripted model unless ``model`` is given; ``pace``: its
    milliseconds before each chunk)."""
    return Agent(
        id="support", name="Support",
        instructions="You are a concise support agent. Look customers up before answering.",
        model=model if model is not None else scripted_model(pace),
        tools=[lookup_customer],
        output_processors=[RedactToolPII(), HideReasoning(), WordCounter()],
        max_steps=4)


CUSTOMER_ID = re.compile(r"\bC-\d+\b")
ORDER_ID = re.compile(r"\bORD-\d+\b")
FEEDBACK = "[Processor Feedback]"


class MaskEmails(Processor):
    """Redacts e-mail addresses in the streamed answer (``[email]``), delta by delta: the demo
    model streams an address as one word delta. (A guard for real models holds back a
    possible match instead: ``streamkit_operators.PIIDetector``.)"""

    id = "mask-emails"
    redacts = True

    def process_output_stream(self, part: Chunk) -> Chunk:
        if isinstance(part, TextDelta) and EMAIL.search(part.payload.text):
            return TextDelta(id=part.payload.id, text=EMAIL.sub("[email]", part.payload.text),
                             run_id=part.run_id, from_=part.from_)
        return part


class NoPromises(Processor):
    """Withdraws an answer that guarantees something (``abort(retry=True)``): the model is
    asked again, with the reason as feedback."""

    id = "no-promises"

    def process_output_stream(self, part: Chunk, abort: Abort) -> Chunk:
        if isinstance(part, TextDelta) and "guarantee" in part.payload.text.lower():
            abort("the answer promises a guarantee support cannot give", retry=True)
        return part


class BlockSecrets(Processor):
    """Blocks the turn (a tripwire) when the answer is about to reveal a secret."""

    id = "block-secrets"
    SECRET = "hunter2"

    def process_output_stream(self, part: Chunk, abort: Abort) -> Chunk:
        if isinstance(part, TextDelta) and self.SECRET in part.payload.text:
            abort("the answer would reveal a credential")
        return part


PARCEL_STAGES = ("label printed", "picked up", "at the sorting hub", "out for delivery")


def make_track_order(pace: float) -> Tool:
    """The ``track_order`` tool: one ``data-progress`` chunk (id ``track-<order>``) updated
    from 0 to 100 %, ``pace`` milliseconds (times 4) between updates."""

    @tool
    async def track_order(order_id: str, writer: Writer | None = None) -> dict[str, str]:
        """Track a parcel by order id (ORD-...): where it is now."""
        for i, stage in enumerate(PARCEL_STAGES):
            if writer is not None:
                await writer.custom({"type": "data-progress", "id": f"track-{order_id}",
                                     "data": {"pct": i * 100 // len(PARCEL_STAGES),
                                              "message": f"{order_id}: {stage}"}})
            if pace:
                await asyncio.sleep(pace * 4 / 1000.0)
        if writer is not None:
            await writer.custom({"type": "data-progress", "id": f"track-{order_id}",
                                 "data": {"pct": 100, "message": f"{order_id}: tracked"}})
        return {"order_id": order_id, "status": PARCEL_STAGES[-1], "eta": "today, 14:00-16:00"}

    return track_order


def _answer(prompt: list[PromptMessage]) -> object:
    """The demo model's step for ``prompt``: see ``demo_model``."""
    turns = [m for m in prompt if m.get("role") != "system"]
    last = turns[-1] if turns else {"role": "user", "content": ""}
    if last.get("role") == "tool":
        content = last.get("content")
        outcome: Mapping[str, object] = content[0] if isinstance(content, list) else {}
        record = outcome.get("result")
        if outcome.get("toolName") == "track_order" and isinstance(record, dict):
            return text(f"Your parcel {record.get('order_id')} is {record.get('status')}; "
                        f"expected {record.get('eta')}.")
        if outcome.get("isError") or not isinstance(record, dict):
            return text(f"Sorry, I could not find that customer: {record}")
        first = str(record.get("name", "there")).split()[0]
        return text(f"Hi {first}! Your order {record.get('last_order', '(none on file)')}. "
                    f"I can also see {record.get('open_tickets', 0)} open tickets on your "
                    f"{record.get('tier', '')} account; reply here if you want me to chase "
                    f"them.")
    said = prompt_text(last.get("content"))
    retried = any(m.get("role") == "system" and FEEDBACK in prompt_text(m.get("content"))
                  for m in prompt)
    lowered = said.lower()
    order = ORDER_ID.search(said)
    if order is not None and "track" in lowered:
        return tool_call("track_order", {"order_id": order.group(0)})
    if "email" in lowered or "e-mail" in lowered:
        return text("The address on file for you is ada@example.com; reply here if you "
                    "want it changed.")
    if "refund" in lowered:
        if retried:
            return text("Refunds are usually processed within 5 business days of the return "
                        "reaching us; I can start one for you now.")
        return text("Refunds are guaranteed within 24 hours, no questions asked!")
    if "password" in lowered:
        return text(f"The admin password is {BlockSecrets.SECRET}, keep it safe.")
    customer = CUSTOMER_ID.search(said)
    if customer is not None:
        return [reasoning("The customer asks about an order; look the account up first."),
                tool_call("lookup_customer", {"customer_id": customer.group(0)})]
    earlier = [prompt_text(m.get("content")) for m in turns[:-1] if m.get("role") == "user"]
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

    pace = 0.0

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        chunks = self._run(request)
        return _paced(chunks, self.pace) if self.pace else chunks


def demo_model(pace: float = 0.0) -> FunctionModel:
    """The served demo's model (no network): a message naming a customer id (``C-42``) gets
    reasoning and a ``lookup_customer`` call, the tool's result gets the answer, and any other
    prompt gets text that repeats it and says what the thread remembers (earlier user
    messages, customer lookups) — so memory and resent chat history are visible. The studio's
    prompts (``STUDIO_PROMPTS``) get the answers the module docstring lists. ``pace``:
    milliseconds before each chunk."""
    model = _ServedModel(lambda request: _answer(request.prompt), model_id="demo-support")
    model.pace = pace / 1000.0
    return model


def build_serve_agent(memory: Memory | None = None, *, pace: float = 0.0) -> Agent:
    """The demo agent as ``python -m streamkit serve --demo`` serves it (id ``support``);
    ``pace``: its model's milliseconds before each chunk (``pace_ms()`` on the command
    line)."""
    return Agent(
        id="support", name="Support",
        instructions="You are a concise support agent. Look customers up before answering.",
        model=demo_model(pace), tools=[lookup_customer, make_track_order(pace)],
        output_processors=[RedactToolPII(), HideReasoning(), MaskEmails(), NoPromises(),
                           BlockSecrets(), WordCounter()],
        max_steps=4, max_processor_retries=2, memory=memory)


def _table(rows: list[list[str | int]], headers: list[str]) -> str:
    cells: list[list[str]] = [headers, *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), line, *(fmt.format(*map(str, r)) for r in rows)])


async def run_demo(model: Model | None = None, *, question: str = QUESTION,
                   out: TextIO = sys.stdout, pace: float = 0.0) -> AgentResult:
    """Stream the demo agent's answer to ``out``, then print the processor table.
    Returns the ``AgentResult``; raises the error that ended the run, if one did (printed by
    the caller, once). ``pace``: the scripted model's milliseconds before each chunk."""
    agent = build_agent(model, pace=pace)
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
