"""Mid-stream guards with retry, through ``Agent`` and ``max_processor_retries``: the step re-runs
with the reason as feedback, the client gets ``data-step-retry`` to withdraw what it showed, what
a guard held for the withdrawn attempt never leaks into the next one, and memory stores only
the accepted attempt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent, ops
from streamkit.memory import Memory, SQLiteStore
from streamkit.testing import ScriptedModel, text
from streamkit_operators import Buffering, PIIDetector, StreamGuard

from ..conftest import as_mode

BAD = "We offer a full refund. Anything else?"
GOOD = "Refunds are handled by billing. Anything else?"


def no_refund_promises(text: str, context: str = "") -> Any:
    return "do not promise refunds" if "full refund" in context + text else None


def text_of(chunks: list[Any]) -> str:
    return "".join(c.payload.text for c in chunks if c.type == "text-delta")


async def run(agent: Agent, **options: Any) -> tuple[list[Any], Any]:
    stream = agent.stream("Can I get my money back?", **options)
    chunks = [c async for c in stream]
    return chunks, await stream.result()


@pytest.mark.parametrize("buffering", [
    pytest.param(Buffering.sentence(), id="sentence"),
    # Per delta, the phrase is split (" full" + " refund."): the overlap joins it up.
    pytest.param(Buffering.passthrough(overlap=2), id="passthrough-with-overlap"),
    pytest.param(Buffering.end_of_stream(hold=False), id="audit"),
])
async def test_a_tripped_stream_guard_re_runs_the_step_with_feedback(
        buffering: Buffering, mode: str) -> None:
    model = ScriptedModel([text(BAD), text(GOOD)])
    guard = StreamGuard(as_mode(no_refund_promises, mode), id="policy", buffering=buffering,
                        retry=True)
    chunks, result = await run(Agent(id="a", model=model, output_processors=[guard],
                                     max_processor_retries=2))
    types = [c.type for c in chunks]
    retry_at = types.index("data-step-retry")
    withdrawn, kept = chunks[:retry_at], chunks[retry_at + 1:]
    retry = chunks[retry_at]
    assert retry.transient is True
    assert retry.data == {"stepNumber": 0, "reason": "do not promise refunds",
                          "processorId": "policy", "retryCount": 1}
    # The client may have been shown part of the first attempt (all of it, for an audit);
    # after the retry chunk comes exactly the accepted attempt.
    assert BAD.startswith(text_of(withdrawn))
    assert text_of(kept) == GOOD == result.text
    assert result.tripwire is None
    assert [s.finish_reason for s in result.steps] == ["retry", "stop"]
    feedback = model.requests[1].prompt[-1]
    assert feedback["role"] == "system" and "do not promise refunds" in feedback["content"]


async def test_retries_used_up_become_an_abort() -> None:
    model = ScriptedModel([text(BAD), text(BAD)])
    guard = StreamGuard(no_refund_promises, id="policy", retry=True)
    chunks, result = await run(Agent(id="a", model=model, output_processors=[guard],
                                     max_processor_retries=1))
    assert [c.type for c in chunks].count("data-step-retry") == 1
    assert chunks[-1].type == "tripwire" and result.tripwire is not None
    assert result.tripwire.retry is True and result.text == ""


async def test_without_max_processor_retries_it_is_a_plain_abort() -> None:
    model = ScriptedModel([text(BAD)])
    guard = StreamGuard(no_refund_promises, id="policy", retry=True)
    chunks, result = await run(Agent(id="a", model=model, output_processors=[guard]))
    assert "data-step-retry" not in [c.type for c in chunks]
    assert result.tripwire is not None and model.calls == 1


async def test_per_call_max_processor_retries_enables_it() -> None:
    model = ScriptedModel([text(BAD), text(GOOD)])
    guard = StreamGuard(no_refund_promises, id="policy", retry=True)
    agent = Agent(id="a", model=model, output_processors=[guard])
    _, result = await run(agent, max_processor_retries=1)
    assert result.text == GOOD


async def test_text_held_for_a_withdrawn_attempt_never_reaches_the_next() -> None:
    # The redactor still holds "4111" (it might be a card) when the guard after it trips on
    # "Card"; the retried attempt must start clean.
    model = ScriptedModel([text("Card 4111 1111 1111 1111 on file."), text("No card on file.")])
    trip = ops.abort(lambda c: "Card" in c.payload.text, "no card talk", retry=True,
                     types="text-delta", id="no-cards")
    agent = Agent(id="a", model=model, output_processors=[PIIDetector(phase="output"), trip],
                  max_processor_retries=1)
    chunks, result = await run(agent)
    assert "4111" not in text_of(chunks) and "**** " not in text_of(chunks)
    assert text_of(chunks) == "No card on file." == result.text


async def test_memory_stores_only_the_accepted_attempt(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "m.db"))
    model = ScriptedModel([text(BAD), text(GOOD)])
    guard = StreamGuard(no_refund_promises, id="policy", retry=True,
                        buffering=Buffering.end_of_stream(hold=False))
    agent = Agent(id="a", model=model, output_processors=[guard], max_processor_retries=1,
                  memory=memory)
    chunks, _ = await run(agent, thread_id="t", resource_id="u")
    assert BAD in text_of(chunks)  # an audit shows the text, then withdraws it
    stored = await memory.get_messages("t")
    assert [(m.role, "".join(p.text for p in m.content.parts if p.type == "text"))
            for m in stored] == [("user", "Can I get my money back?"), ("assistant", GOOD)]
    await memory.close()
