"""The agent the studio's browser tests drive (``python -m streamkit serve
tests.serve._studio_agent:agent``), built with the public API only.

Its model is paced: each chunk waits ``STREAMKIT_TEST_PACE`` seconds (default 0.04) before it
is yielded, so a streamed turn reaches the browser in several network reads and paints; the
tests assert on what the page shows, never on how long anything took.

What the model answers depends on the last user message:

* it names ``order`` -> a ``check_order`` tool call (whose tool reports progress twice as one
  ``data-progress`` part), then a text that quotes the tool's result;
* it names ``email`` -> a text holding an e-mail address, which the ``redact-email`` guard
  rewrites chunk by chunk (``changed`` actions with a before/after diff);
* it names ``retry`` -> a text starting "Oh fine", which the ``no-curt`` guard withdraws once
  (``abort(retry=True)``); the second attempt is accepted;
* it names ``forbidden`` -> a text that the ``topic-guard`` blocks (a tripwire, no retry);
* it names ``hold`` -> a text whose words the ``sentence-buffer`` holds back until each
  sentence ends (``held``, then ``released``);
* it names ``explode`` -> the model call fails (``api_error(400)``): the turn ends in an error;
* anything else -> a long text that repeats the message and counts the thread's user messages
  (so a continued thread shows that memory kept the earlier turn).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from streamkit import Agent
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import prompt_text
from streamkit.models import ModelRequest
from streamkit.processors import Processor
from streamkit.testing import FunctionModel, api_error, reasoning, text, tool_call
from streamkit.tools import tool

PACE = float(os.environ.get("STREAMKIT_TEST_PACE", "0.04"))
LONG = ("Streaming is when the words arrive one by one, as the model writes them, instead of "
        "all at once at the end. Each of these words is its own chunk on the wire, and every "
        "processor of the agent sees each one before you do.")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")


@tool
def check_order(order_id: str, writer: Any = None) -> dict[str, Any]:
    """Look an order up by id (status and carrier)."""
    if writer is not None:
        writer.custom({"type": "data-progress", "id": "lookup",
                       "data": {"pct": 40, "message": f"Finding {order_id}"}})
        writer.custom({"type": "data-progress", "id": "lookup",
                       "data": {"pct": 100, "message": f"Found {order_id}"}})
    return {"order_id": order_id, "status": "shipped", "carrier": "Parcelforce"}


class RedactEmail(Processor):
    """Rewrites e-mail addresses in the streamed text to ``[email]``."""

    id = "redact-email"

    def process_output_stream(self, part: Any) -> Any:
        if part.type == "text-delta" and EMAIL.search(part.payload.text):
            return part.replace(text=EMAIL.sub("[email]", part.payload.text))
        return part


class NoCurt(Processor):
    """Withdraws once an attempt that opens "Oh fine" (``abort(retry=True)`` at "fine", after
    "Oh" reached the client)."""

    id = "no-curt"

    def process_output_stream(self, part: Any, abort: Any, retry_count: int) -> Any:
        if part.type == "text-delta" and "fine" in part.payload.text and retry_count == 0:
            abort("the answer opened curtly", retry=True)
        return part


class TopicGuard(Processor):
    """Blocks a turn whose text names the forbidden topic (a tripwire, no retry)."""

    id = "topic-guard"

    def process_output_stream(self, part: Any, abort: Any) -> Any:
        if part.type == "text-delta" and "launch codes" in part.payload.text:
            abort("the answer names the launch codes")
        return part


class SentenceBuffer(Processor):
    """Holds back the words of a text that opens "Hold" until each sentence ends, then lets the
    sentence out as one chunk (``holds = True``: what it returns nothing for is held, not
    dropped). Any other text passes."""

    id = "sentence-buffer"
    holds = True

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        if part.type != "text-delta":
            return part
        if part.payload.text.startswith("Hold"):
            state["on"] = True
        if not state.get("on"):
            return part
        state["buffer"] = state.get("buffer", "") + part.payload.text
        if not part.payload.text.endswith("."):
            return None
        sentence, state["buffer"] = state["buffer"], ""
        return part.replace(text=sentence)


def _answer(request: ModelRequest) -> Any:
    turns = [m for m in request.prompt if m.get("role") != "system"]
    last = turns[-1]
    if last.get("role") == "tool":
        result = last["content"][0].get("result", {})
        return text(f"Order {result.get('order_id')} has {result.get('status')} with "
                    f"{result.get('carrier')}.")
    said = prompt_text(last.get("content"))
    if "order" in said:
        return [reasoning("The user asks about an order, so I look it up."),
                tool_call("check_order", {"order_id": "ORD-7"})]
    if "email" in said:
        return text("Write to ada@example.com and we will answer today.")
    if "retry" in said:
        return text("Oh fine. Here is a fuller answer after all.")
    if "hold" in said:
        return text("Hold on. This sentence waits for its end.")
    if "explode" in said:
        return api_error(400, "the model refused the request", is_retryable=False)
    if "forbidden" in said:
        return text("The launch codes are 0000.", chunk_size=40)
    users = [m for m in turns if m.get("role") == "user"]
    return text(f"You said {said!r} ({len(users)} user message(s) in this thread). {LONG}")


class PacedModel:
    """A ``FunctionModel`` whose chunks are ``PACE`` seconds apart (see the module)."""

    provider = "scripted"
    model_id = "paced-studio"

    def __init__(self) -> None:
        self.inner = FunctionModel(_answer, model_id=self.model_id)

    async def _paced(self, request: ModelRequest) -> AsyncIterator[Any]:
        async for chunk in self.inner.stream(request):
            await asyncio.sleep(PACE)
            yield chunk

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        return self._paced(request)


def build(memory: Memory | None = None) -> Agent:
    return Agent(id="studio", name="Studio test", instructions="Answer briefly.",
                 model=PacedModel(), tools=[check_order], memory=memory,
                 output_processors=[RedactEmail(), NoCurt(), TopicGuard(), SentenceBuffer()],
                 max_steps=4, max_processor_retries=2)


_DB = os.environ.get("STREAMKIT_TEST_STUDIO_DB")
agent = build(Memory(SQLiteStore(Path(_DB))) if _DB else Memory())
