"""The step ends' message snapshot (``model_messages``) is the provider prompt of each message
(``to_core``) in the AI SDK v5 ``ModelMessage`` form, exactly: built in one walk of the parts, it
must give the JSON the prompt dicts give once reshaped (the derivation below, which it was
before issue 28's fifth pass)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from hypothesis import given
from hypothesis import strategies as st

from streamkit.agent._step_end import model_messages
from streamkit.messages import (
    DataPart,
    FilePart,
    ImagePart,
    Message,
    MessageContent,
    ReasoningPart,
    ReasoningText,
    RedactedReasoning,
    StepStartPart,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    to_core,
)

Role = Literal["user", "assistant", "system", "signal"]


def _reference(message: Message) -> list[dict[str, Any]]:
    """The snapshot form derived from ``to_core``'s prompt dicts, part by part."""
    if message.role == "system":
        return []
    stamp = {"mastra": {"createdAt": int(message.created_at.timestamp() * 1000)}}
    out: list[dict[str, Any]] = []
    inputs: dict[str, Any] = {}
    for core in to_core((message,)):
        content: Any = core["content"]
        if isinstance(content, str):
            out.append({"role": core["role"], "content": [
                {"type": "text", "text": content, "providerOptions": stamp}]})
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            if part["type"] == "tool-call":
                inputs[part["toolCallId"]] = part.get("args")
                parts.append({"type": "tool-call", "toolCallId": part["toolCallId"],
                              "toolName": part["toolName"], "input": part.get("args"),
                              "providerOptions": stamp})
            elif part["type"] == "tool-result":
                value = part.get("result")
                kind = ("error-text" if isinstance(value, str) else "error-json") \
                    if part.get("isError") is True else "json"
                parts.append({"type": "tool-result", "toolCallId": part["toolCallId"],
                              "toolName": part["toolName"],
                              "output": {"type": kind, "value": value},
                              "input": inputs.get(part["toolCallId"]), "providerOptions": stamp})
            else:
                parts.append({**part, "providerOptions": stamp})
        out.append({"role": core["role"], "content": parts})
    return out


_ids = st.sampled_from(["c1", "c2", "c3"])
_values = st.none() | st.integers() | st.text(max_size=3) | st.dictionaries(
    st.text(max_size=2), st.integers(), max_size=2)
_invocations = st.one_of(
    st.builds(lambda i, v, a: ToolInvocationPart.returned(i, "t", v, a), _ids, _values,
              st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)),
    st.builds(lambda i, e: ToolInvocationPart.failed(i, "t", e), _ids, st.text(max_size=3)),
    st.builds(lambda i: ToolInvocationPart.call(i, "t", {"q": 1}), _ids),
    st.builds(lambda i, v, err: ToolInvocationPart(ToolInvocation(
        state="result", tool_call_id=i, tool_name="t", result=v, is_error=err)),
        _ids, _values, st.booleans()),
    st.builds(lambda i, v: ToolInvocationPart(ToolInvocation(
        state="output-denied", tool_call_id=i, tool_name="t", result=v)), _ids, _values),
    st.builds(lambda i: ToolInvocationPart(ToolInvocation(
        state="output-denied", tool_call_id=i, tool_name="t")), _ids))
_reasoning = st.one_of(
    st.builds(ReasoningPart, reasoning=st.text(max_size=3)),
    st.builds(lambda t, sig, red: ReasoningPart(reasoning=t, details=[
        ReasoningText(text=t, signature=sig) if sig else ReasoningText(text=t),
        *([RedactedReasoning(data="x")] if red else [])]),
        st.text(max_size=3), st.text(max_size=2), st.booleans()))
_parts = st.lists(st.one_of(
    st.builds(TextPart, text=st.text(max_size=4)),
    _reasoning,
    _invocations,
    st.builds(lambda m: FilePart(mime_type=m, data="ZGF0YQ=="), st.sampled_from(["a/b", "c/d"])),
    st.builds(lambda m: ImagePart(image="aW1n", mime_type=m) if m else ImagePart(image="aW1n"),
              st.sampled_from(["", "image/png"])),
    st.just(DataPart(type="data-x", data={"k": 1})),
    st.just(StepStartPart())), max_size=7)


_roles: st.SearchStrategy[Role] = st.sampled_from(["user", "assistant", "system", "signal"])


@given(_roles, _parts,
       st.one_of(st.none(), st.text(max_size=3)),
       st.integers(0, 2_000_000_000_000))
def test_the_snapshot_form_is_the_prompt_reshaped(role: Role, parts: list[Any],
                                                  fallback: str | None, ms: int) -> None:
    content = MessageContent(parts=parts) if fallback is None else \
        MessageContent(parts=parts, content=fallback)
    created = datetime.fromtimestamp(ms / 1000, UTC)
    message = Message(role=role, content=content, created_at=created)
    assert model_messages(message) == _reference(message)


def test_a_text_only_step_is_one_text_part_and_tool_turns_follow_their_step() -> None:
    message = Message.assistant([
        TextPart("Let me look."), TextPart(" One moment."),
        ToolInvocationPart.returned("c1", "lookup", {"n": 1}, {"id": 7}),
        ToolInvocationPart.call("c2", "lookup", {"id": 8}),  # no outcome: not in the prompt
        StepStartPart(), TextPart("Found it.")])
    got = model_messages(message)
    assert [(m["role"], [p["type"] for p in m["content"]]) for m in got] == [
        ("assistant", ["text", "text", "tool-call"]), ("tool", ["tool-result"]),
        ("assistant", ["text"])]
    assert got[1]["content"][0]["input"] == {"id": 7}
    assert got[1]["content"][0]["output"] == {"type": "json", "value": {"n": 1}}
    assert got[2]["content"][0]["text"] == "Found it."


def test_with_sources_is_the_all_view_with_each_message_source() -> None:
    from streamkit.messages import MessageList

    ml = MessageList()
    ml.add_system("Be brief.")
    ml.add(Message.user("earlier"), "memory")
    ml.add(Message.user("now"), "input")
    ml.add(Message.assistant("answer"), "response")
    ml.add(Message.user("aside"), "context")
    pairs = ml.with_sources()
    assert [m for m, _ in pairs] == ml.get.all.db()
    assert [source for _, source in pairs] == [ml.source_of(m) for m in ml.get.all.db()]
    assert sorted(source for _, source in pairs) == ["context", "input", "memory", "response"]
