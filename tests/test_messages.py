"""Messages and the MessageList: Mastra's JSON, loose input, formats, and every list operation."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit.errors import MessageError, ProcessorError
from streamkit.messages import (
    DataPart,
    ErrorPart,
    FilePart,
    ImagePart,
    Message,
    MessageContent,
    MessageList,
    ReasoningPart,
    ReasoningText,
    RedactedReasoning,
    SourceInfo,
    SourcePart,
    StepStartPart,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    decode_message,
    decode_messages,
    format_timestamp,
    get_text,
    message_encoder,
    message_from_dict,
    message_to_dict,
    to_core,
    to_message,
    to_messages,
    to_part,
    to_ui,
)

UTC = UTC
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


#: A real Mastra 1.71.0 result, copied into the repository from shared/fixtures/mastra.
TOOL_TURN = Path(__file__).parent / "fixtures" / "mastra" / "tool-turn.result.json"


@pytest.fixture(scope="module")
def tool_turn() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(TOOL_TURN.read_text())
    return result


def _stored_messages(data: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(data["messages"]) + list(data["response"]["dbMessages"])
    for step in data["steps"]:
        found.extend(step["response"].get("dbMessages", []))
    return found


def _types(message: Message) -> list[str]:
    return [p.type for p in message.content.parts]


def _text_part(message: Message, index: int = 0) -> TextPart:
    part = message.content.parts[index]
    assert isinstance(part, TextPart)
    return part


def _tool_parts(message: Message) -> list[ToolInvocationPart]:
    parts = [p for p in message.content.parts if isinstance(p, ToolInvocationPart)]
    assert len(parts) == len(message.content.parts)
    return parts


def _user(text: str, id: str, created_at: datetime) -> Message:
    return Message.user(text, id=id, created_at=created_at)


# ------------------------------------------------------------------------------------------
# The model and its JSON
# ------------------------------------------------------------------------------------------


def test_fixture_messages_round_trip_to_equal_json(tool_turn: dict[str, Any]) -> None:
    stored = _stored_messages(tool_turn)
    assert len(stored) >= 3
    for raw in stored:
        message = decode_message(json.dumps(raw))
        assert json.loads(message_encoder.encode(message)) == raw
        assert message_to_dict(message) == raw
        assert message_from_dict(raw) == message


def test_fixture_messages_decode_to_typed_parts(tool_turn: dict[str, Any]) -> None:
    user, assistant = decode_messages(json.dumps(tool_turn["messages"]))
    assert user.role == "user" and get_text(user) == "Who is customer C-42?"
    assert user.created_at == datetime(2026, 12, 2, 11, 24, 1, 252000, tzinfo=UTC)
    assert _types(assistant) == ["source", "tool-invocation", "data-progress", "step-start", "text"]
    source, tool, data, _, text = assistant.content.parts
    assert isinstance(source, SourcePart) and source.source.url.endswith("/C-42")
    assert isinstance(tool, ToolInvocationPart) and tool.state == "result"
    assert tool.tool_invocation.result["name"] == "Ada Lovelace"
    assert isinstance(data, DataPart) and data.data == {"pct": 50}
    assert data.created_at == 1796210641264
    assert isinstance(text, TextPart)
    mirror = assistant.content.tool_invocations
    assert isinstance(mirror, list) and mirror[0].tool_call_id == "call-lookup-1"
    assert assistant.thread_id is msgspec.UNSET


def test_fixture_tool_turn_in_core_format(tool_turn: dict[str, Any]) -> None:
    ml = MessageList(decode_messages(json.dumps(tool_turn["messages"])))
    result = {"customerId": "C-42", "name": "Ada Lovelace", "tier": "gold", "openTickets": 2}
    assert ml.get.all.core() == [
        {"role": "user", "content": "Who is customer C-42?"},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "call-lookup-1",
                                           "toolName": "lookupCustomer",
                                           "args": {"customerId": "C-42"}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call-lookup-1",
                                      "toolName": "lookupCustomer", "result": result}]},
        {"role": "assistant", "content": "Ada Lovelace is a gold customer with 2 open tickets."},
    ]


@pytest.mark.parametrize("part", [
    pytest.param({"type": "text", "text": "hi", "createdAt": 1,
                  "providerMetadata": {"x": {"y": 1}}}, id="text"),
    pytest.param({"type": "reasoning", "reasoning": "",
                  "details": [{"type": "text", "text": "think", "signature": "sig"},
                              {"type": "redacted", "data": "xx"}]}, id="reasoning-details"),
    pytest.param({"type": "tool-invocation", "toolInvocation": {
        "state": "approval-requested", "toolCallId": "c1", "toolName": "t", "args": {"a": 1},
        "approval": {"id": "ap1"}}, "providerExecuted": False, "title": "T"}, id="tool-approval"),
    pytest.param({"type": "tool-invocation", "toolInvocation": {
        "state": "output-error", "toolCallId": "c1", "toolName": "t", "args": {},
        "errorText": "boom", "rawInput": "{", "step": 0}}, id="tool-output-error"),
    pytest.param({"type": "file", "mimeType": "image/png", "data": "aGk=", "filename": "a.png"},
                 id="file"),
    pytest.param({"type": "image", "image": "https://x/y.png"}, id="image"),
    pytest.param({"type": "source", "source": {"sourceType": "url", "id": "s", "url": "https://x",
                                               "providerMetadata": {}}}, id="source"),
    pytest.param({"type": "source-document", "sourceId": "d", "mediaType": "application/pdf",
                  "title": "Doc"}, id="source-document"),
    pytest.param({"type": "step-start"}, id="step-start"),
    pytest.param({"type": "error", "error": {"name": "APICallError", "message": "429"}},
                 id="error"),
    pytest.param({"type": "data-progress", "data": {"pct": 50}, "id": "p1"}, id="data-with-id"),
])
def test_every_part_type_round_trips(part: dict[str, Any]) -> None:
    raw = {"id": "m1", "role": "assistant", "createdAt": "2026-01-01T00:00:00.000Z",
           "content": {"format": 2, "parts": [part]}}
    message = decode_message(json.dumps(raw).encode())
    assert json.loads(message_encoder.encode(message)) == raw


def test_absent_stays_absent_and_null_stays_null() -> None:
    raw = {"id": "m1", "role": "user", "createdAt": "2026-01-01T00:00:00.000Z",
           "content": {"format": 2, "parts": [], "content": None}}
    message = decode_message(json.dumps(raw))
    assert message.content.content is None and message.content.metadata is msgspec.UNSET
    assert json.loads(message_encoder.encode(message)) == raw
    encoded = json.loads(message_encoder.encode(Message.user("hi")))
    assert set(encoded) == {"id", "role", "createdAt", "content"}
    assert set(encoded["content"]) == {"format", "parts", "content"}


def test_encoder_encodes_a_list_as_an_array() -> None:
    messages = [Message.user("a", created_at=T0), Message.assistant("b", created_at=T0)]
    assert decode_messages(message_encoder.encode(messages)) == messages


@pytest.mark.parametrize("value, expected", [
    pytest.param(datetime(2026, 12, 2, 11, 24, 1, 252000, tzinfo=UTC), "2026-12-02T11:24:01.252Z",
                 id="milliseconds"),
    pytest.param(datetime(2026, 12, 2, 11, 24, 1, tzinfo=UTC), "2026-12-02T11:24:01.000Z",
                 id="whole-second"),
    pytest.param(datetime(2026, 12, 2, 11, 24, 1, 252001, tzinfo=UTC),
                 "2026-12-02T11:24:01.252001Z", id="microseconds-kept"),
    pytest.param(datetime(2026, 12, 2, 13, 24, 1, tzinfo=timezone(timedelta(hours=2))),
                 "2026-12-02T11:24:01.000Z", id="offset-to-utc"),
])
def test_format_timestamp_writes_javascript_iso(value: datetime, expected: str) -> None:
    assert format_timestamp(value) == expected


def test_naive_created_at_becomes_aware_utc() -> None:
    naive = datetime(2026, 1, 1, 12, 0, 0)
    message = Message.user("hi", created_at=naive)
    assert message.created_at.tzinfo is not None
    assert message.created_at == naive.astimezone(UTC)


def test_constructors() -> None:
    user = Message.user("hi", id="u1", thread_id="t1", metadata={"k": 1})
    assert (user.id, user.role, user.thread_id) == ("u1", "user", "t1")
    assert user.content.parts == [TextPart("hi")] and user.content.content == "hi"
    assert user.content.metadata == {"k": 1}
    assert user.created_at.microsecond % 1000 == 0
    assert uuid.UUID(Message.user("x").id).version == 4
    mixed = Message.assistant(["a", {"type": "data-x", "data": 1}, ReasoningPart("r")])
    assert _types(mixed) == ["text", "data-x", "reasoning"]
    assert Message.system("Be brief.").role == "system"
    assert ToolInvocationPart.call("c", "t").tool_invocation.args == {}
    returned = ToolInvocationPart.returned("c", "t", 1, args={"a": 1}).tool_invocation
    assert (returned.state, returned.result, returned.args) == ("result", 1, {"a": 1})
    failed = ToolInvocationPart.failed("c", "t", "boom").tool_invocation
    assert (failed.state, failed.error_text) == ("output-error", "boom")
    assert ErrorPart.from_exception(ValueError("bad")).error == {"name": "ValueError",
                                                                 "message": "bad"}
    assert ReasoningPart("", details=[ReasoningText("a"), RedactedReasoning("x")]).text == "a"


# Deliberately ill-typed values: the point is the runtime error a caller gets.
_BAD: dict[str, Any] = {"role": "bot", "text": "hi", "when": "2026", "nope": {"type": "nope"},
                        "int": 42}


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: Message(role=_BAD["role"]), "unknown message role 'bot'", id="bad-role"),
    pytest.param(lambda: Message(role="user", content=_BAD["text"]), "must be a MessageContent",
                 id="content-str"),
    pytest.param(lambda: Message(role="user", created_at=_BAD["when"]),
                 "created_at must be a datetime", id="created-at-str"),
    pytest.param(lambda: DataPart("progress", 1), "must start with 'data-'", id="data-type"),
    pytest.param(lambda: MessageContent(parts=[_BAD["nope"]]),
                 "unknown message part type 'nope'", id="unknown-part"),
    pytest.param(lambda: MessageContent(parts=[_BAD["int"]]), "got int", id="part-int"),
    pytest.param(lambda: MessageContent(parts=_BAD["text"]), "must be a list", id="parts-str"),
    pytest.param(lambda: Message.user(_BAD["int"]), "got int", id="user-int"),
    pytest.param(lambda: to_part({"type": "text"}), "invalid 'text' part", id="part-missing-field"),
])
def test_bad_model_values_raise_message_error(build: Any, match: str) -> None:
    with pytest.raises(MessageError, match=match):
        build()


@pytest.mark.parametrize("data, match", [
    pytest.param(b"{", "invalid message JSON", id="malformed"),
    pytest.param(b'{"id":"m","role":"bot","content":{"format":2,"parts":[]}}',
                 "invalid message JSON", id="unknown-role"),
    pytest.param(b'{"id":"m","content":{"format":2,"parts":[]}}', "role", id="missing-role"),
    pytest.param(b'{"id":"m","role":"user","content":{"format":2,"parts":[{"type":"bogus"}]}}',
                 "unknown message part type 'bogus'", id="unknown-part"),
    pytest.param(b'{"id":"m","role":"user","content":{"format":1,"parts":[]}}', "format",
                 id="format-1"),
])
def test_decode_errors_are_message_errors(data: bytes, match: str) -> None:
    with pytest.raises(MessageError, match=match):
        decode_message(data)


def test_decode_messages_error() -> None:
    with pytest.raises(MessageError, match="invalid message JSON"):
        decode_messages(b'[{"id": 1}]')


# ------------------------------------------------------------------------------------------
# get_text and loose input
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("message, expected", [
    pytest.param(Message.user([TextPart("a"), FilePart("image/png", "x"), TextPart("b")]), "ab",
                 id="joined-text-parts"),
    pytest.param(Message(role="user", content=MessageContent(parts=[], content="legacy")), "legacy",
                 id="fallback-content"),
    pytest.param(Message.assistant([ReasoningPart("hidden")]), "", id="no-text"),
    pytest.param(Message(role="user", content=MessageContent(parts=[TextPart("p")], content="c")),
                 "p", id="parts-win"),
])
def test_get_text(message: Message, expected: str) -> None:
    assert get_text(message) == expected


def test_get_text_rejects_non_messages() -> None:
    with pytest.raises(MessageError, match="expects a Message, got dict"):
        get_text({"role": "user"})  # type: ignore[arg-type]


def test_to_message_shapes() -> None:
    assert to_message("hi").role == "user"
    assert to_message("hi", default_role="assistant").role == "assistant"
    core = to_message({"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image", "image": "u", "mimeType": "image/png"},
        {"type": "file", "data": "d", "mimeType": "text/plain"}]})
    assert _types(core) == ["text", "image", "file"]
    assistant = to_message({"role": "assistant", "content": [
        {"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "ok"},
        {"type": "tool-call", "toolCallId": "c1", "toolName": "t", "input": {"a": 1}}]})
    assert _types(assistant) == ["reasoning", "text", "tool-invocation"]
    assert assistant.content.parts[2].tool_invocation.args == {"a": 1}  # type: ignore[union-attr]
    tool = to_message({"role": "tool", "content": [
        {"type": "tool-result", "toolCallId": "c1", "toolName": "t", "result": 42},
        {"type": "tool-result", "toolCallId": "c2", "toolName": "t", "result": "no",
         "isError": True},
        {"type": "tool-result", "toolCallId": "c3", "toolName": "t",
         "output": {"type": "json", "value": {"v": 1}}}]})
    assert tool.role == "assistant"
    states = [(p.state, p.tool_invocation.result) for p in _tool_parts(tool)]
    assert states == [("result", 42), ("output-error", msgspec.UNSET), ("result", {"v": 1})]
    ui = to_message({"id": "u1", "role": "assistant", "parts": [{"type": "text", "text": "x"}],
                     "createdAt": 1767268800000, "metadata": {"m": 1}})
    assert (ui.id, ui.created_at, ui.content.metadata) == ("u1", T0, {"m": 1})
    db = to_message({"id": "d1", "role": "user", "createdAt": "2026-01-01T12:00:00.000Z",
                     "threadId": "t",
                     "content": {"format": 2, "parts": [{"type": "text", "text": "x"}]}})
    assert (db.id, db.created_at, db.thread_id) == ("d1", T0, "t")


@pytest.mark.parametrize("value, match", [
    pytest.param(42, "cannot turn a int into a message", id="int"),
    pytest.param({"role": "bot", "content": "x"}, "unknown message role 'bot'", id="bad-role"),
    pytest.param({"role": "user"}, "needs 'content'", id="no-content"),
    pytest.param({"role": "user", "content": [{"type": "nope"}]}, "unknown message part type",
                 id="bad-core-part"),
    pytest.param({"role": "user", "content": [42]}, "content part must be", id="core-part-int"),
    pytest.param({"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c",
                                               "result": 1}]},
                 "missing 'toolName'", id="tool-result-missing-name"),
    pytest.param({"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c",
                                               "toolName": "t"}]}, "needs 'result'",
                 id="tool-result-no-result"),
    pytest.param({"role": "user", "content": "x", "createdAt": "yesterday"}, "not an ISO-8601",
                 id="bad-created-at"),
    pytest.param({"role": "user", "parts": "x"}, "'parts' must be a list", id="parts-not-list"),
    pytest.param({"id": "m", "role": "user", "content": {"format": 2, "parts": 3}},
                 "invalid Mastra message", id="db-parts-not-list"),
])
def test_to_message_bad_input(value: Any, match: str) -> None:
    with pytest.raises(MessageError, match=match):
        to_message(value)


def test_to_messages_names_the_bad_item() -> None:
    with pytest.raises(MessageError, match=r"message #1: cannot turn a float"):
        to_messages(["ok", 1.5])  # type: ignore[list-item]
    with pytest.raises(MessageError, match="expected a message or a list of messages, got int"):
        to_messages(7)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# Formats
# ------------------------------------------------------------------------------------------


def test_core_splits_steps_and_drops_pending_tool_calls() -> None:
    message = Message.assistant([
        ReasoningPart("", details=[ReasoningText("think", signature="s"), RedactedReasoning("r")]),
        TextPart("Checking."),
        ToolInvocationPart(ToolInvocation(state="partial-call", tool_call_id="p", tool_name="t")),
        ToolInvocationPart.returned("c1", "lookup", {"ok": True}, args={"id": 1}),
        ToolInvocationPart.failed("c2", "lookup", "boom"),
        ToolInvocationPart(ToolInvocation(state="output-denied", tool_call_id="c3",
                                          tool_name="rm")),
        ToolInvocationPart.call("c4", "pending"),
        DataPart("data-progress", 1),
        StepStartPart(),
        SourcePart(SourceInfo(id="s", url="https://x")),
        TextPart("Done."),
        TextPart(" Really."),
    ])
    assert to_core([message]) == [
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "think", "signature": "s"},
            {"type": "redacted-reasoning", "data": "r"},
            {"type": "text", "text": "Checking."},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "lookup", "args": {"id": 1}},
            {"type": "tool-call", "toolCallId": "c2", "toolName": "lookup", "args": {}},
            {"type": "tool-call", "toolCallId": "c3", "toolName": "rm", "args": {}},
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "lookup",
             "result": {"ok": True}},
            {"type": "tool-result", "toolCallId": "c2", "toolName": "lookup", "result": "boom",
             "isError": True},
            {"type": "tool-result", "toolCallId": "c3", "toolName": "rm",
             "result": "Tool execution was denied.", "isError": True},
        ]},
        {"role": "assistant", "content": "Done. Really."},
    ]


def test_core_user_system_and_signal() -> None:
    messages = [
        Message.system("sys"),
        Message.user([TextPart("see"), FilePart("image/png", "d"), ImagePart("u")]),
        Message(role="signal", content=MessageContent(parts=[TextPart("<reminder/>")])),
        Message.assistant([ToolInvocationPart.call("c", "t")]),  # nothing left to send
    ]
    assert to_core(messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "see"},
                                     {"type": "file", "data": "d", "mimeType": "image/png"},
                                     {"type": "image", "image": "u"}]},
        {"role": "user", "content": "<reminder/>"},
    ]


def test_core_round_trips_through_add() -> None:
    prompt = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1",
                                           "toolName": "t", "args": {"a": 1}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "t",
                                      "result": 5}]},
    ]
    ml = MessageList()
    ml.add(prompt[0], "input")
    ml.add(prompt[1:], "response")
    assert len(ml.get.response.db()) == 1  # the tool message patched the call in place
    assert ml.get.all.core() == prompt


def test_ui_shape() -> None:
    message = Message.assistant([TextPart("hi"), DataPart("data-x", {"a": 1})], id="a1",
                                created_at=T0, metadata={"modelId": "m"})
    assert to_ui([message]) == [{
        "id": "a1", "role": "assistant", "createdAt": "2026-01-01T12:00:00.000Z", "content": "hi",
        "parts": [{"type": "text", "text": "hi"}, {"type": "data-x", "data": {"a": 1}}],
        "metadata": {"modelId": "m"},
    }]
    assert MessageList(message, "response").get.response.ui() == to_ui([message])


# ------------------------------------------------------------------------------------------
# MessageList: adding, sources, views
# ------------------------------------------------------------------------------------------


def test_add_accepts_every_input_shape() -> None:
    ml = MessageList(thread_id="t1", resource_id="r1")
    stored = ml.add(["plain", {"role": "user", "content": "core"},
                     {"role": "user",
                      "content": {"format": 2, "parts": [{"type": "text", "text": "db"}]}},
                     Message.user("obj")], "user")
    assert [get_text(m) for m in stored] == ["plain", "core", "db", "obj"]
    assert all(uuid.UUID(m.id).version == 4 for m in stored)
    assert all(ml.source_of(m) == "input" for m in stored)
    assert {(m.thread_id, m.resource_id) for m in stored} == {("t1", "r1")}
    assert [m.role for m in ml.add("reply", "response")] == ["assistant"]


def test_add_assigns_an_id_when_empty() -> None:
    message = Message.user("x", id="")
    MessageList(message)
    assert message.id and uuid.UUID(message.id)


def test_created_at_strictly_increasing() -> None:
    ml = MessageList()
    late = Message.user("first", created_at=T0 + timedelta(hours=1))
    ml.add(late)
    for i in range(50):
        ml.add(Message.user(str(i), created_at=T0), "input" if i % 2 else "response")
    times = [m.created_at for m in ml.get.all.db()]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert times[1] == late.created_at + timedelta(milliseconds=1)


def test_memory_keeps_timestamps_and_sorts_first() -> None:
    ml = MessageList("now")
    old = [_user("old 1", "h1", T0),
           Message.assistant("old 2", id="h2", created_at=T0 + timedelta(seconds=1))]
    ml.add(old, "memory")
    assert [m.id for m in ml.get.all.db()][:2] == ["h1", "h2"]
    assert ml.get.remembered.db()[0].created_at == T0
    assert [get_text(m) for m in ml.get.input.db()] == ["now"]


def test_views_return_live_objects_in_fresh_lists() -> None:
    ml = MessageList()
    ml.add(_user("ctx", "c", T0), "context")
    ml.add(_user("mem", "m", T0 - timedelta(days=1)), "memory")
    ml.add("in", "input")
    ml.add("out", "response")
    assert [get_text(m) for m in ml.get.all.db()] == ["mem", "ctx", "in", "out"]
    assert [get_text(m) for m in ml.get.context.db()] == ["ctx"]
    first = ml.get.input.db()
    first.clear()
    assert len(ml.get.input.db()) == 1
    _text_part(ml.get.input.db()[0]).text = "edited"
    assert get_text(ml.get.input.db()[0]) == "edited"
    assert len(ml) == 4 and len(ml.get.remembered) == 1
    assert "m" in ml and "missing" not in ml and 3 not in ml
    assert repr(ml) == "<MessageList memory=1 context=1 input=1 response=1 system=0>"


def test_system_role_messages_route_to_system_buckets() -> None:
    ml = MessageList()
    assert ml.add([{"role": "system", "content": "sys"}, "hi"]) == ml.get.input.db()
    ml.add(Message.system("from memory"), "memory")  # Mastra ignores these
    assert [get_text(m) for m in ml.add("via source", "system")] == ["via source"]
    assert [get_text(m) for m in ml.get_system_messages()] == ["sys", "via source"]
    with pytest.raises(MessageError, match="add_system\\(\\) takes system messages"):
        ml.add(Message.user("x"), "system")


@pytest.mark.parametrize("call, match", [
    pytest.param(lambda ml: ml.add("x", "output"), "unknown message source 'output'", id="source"),
    pytest.param(lambda ml: ml.add(3), "got int", id="int"),
    pytest.param(lambda ml: ml.add(["ok", {"role": "user"}]), "message #1", id="bad-item"),
    pytest.param(lambda ml: ml.remove_by_ids([1]), "takes message ids", id="remove-int"),
    pytest.param(lambda ml: ml.update_tool_invocation(TextPart("x")), "takes a ToolInvocationPart",
                 id="update-text-part"),
    pytest.param(lambda ml: ml.update_tool_invocation({"type": "tool-invocation"}),
                 "invalid 'tool-invocation' part", id="update-bad-dict"),
    pytest.param(lambda ml: ml.add_system("x", tag=""), "tag must be a non-empty str",
                 id="empty-tag"),
    pytest.param(lambda ml: ml.add_system(Message.user("x")), "takes system messages",
                 id="system-user-role"),
    pytest.param(lambda ml: ml.replace_all_system_messages([object()]), "message #0",
                 id="replace-object"),
    pytest.param(lambda ml: ml.restore_system([]), "takes a SystemSnapshot", id="restore-list"),
    pytest.param(lambda ml: ml.rollback(MessageList().checkpoint()), "made by this MessageList",
                 id="foreign-checkpoint"),
    pytest.param(lambda ml: ml.rollback("token"), "made by this MessageList", id="checkpoint-str"),
])
def test_bad_list_input_raises_message_error_and_changes_nothing(call: Any, match: str) -> None:
    ml = MessageList("keep")
    ml.add_system("sys")
    with pytest.raises(MessageError, match=match):
        call(ml)
    assert [get_text(m) for m in ml.get.all.db()] == ["keep"]
    assert [get_text(m) for m in ml.get_all_system_messages()] == ["sys"]


# ------------------------------------------------------------------------------------------
# Merging assistant steps
# ------------------------------------------------------------------------------------------


def test_tool_turn_merges_into_one_message_with_step_start() -> None:
    ml = MessageList("Who is customer C-42?")
    first = Message.assistant([TextPart("Let me check."),
                               ToolInvocationPart.call("call-1", "lookup", {"id": "C-42"})])
    assert ml.add(first, "response") == [first]
    assert ml.update_tool_invocation(ToolInvocationPart.returned("call-1", "lookup",
                                                                 {"name": "Ada"}))
    assert ml.add(Message.assistant(DataPart("data-progress", {"pct": 50})), "response") == [first]
    ml.add(Message.assistant("Ada Lovelace."), "response", new_step=True)
    [response] = ml.get.response.db()
    assert response is first
    assert _types(response) == ["text", "tool-invocation", "data-progress", "step-start", "text"]
    assert response.content.parts[1].tool_invocation.state == "result"  # type: ignore[union-attr]
    assert response.content.content == "Ada Lovelace."
    assert ml.get.response.core() == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool-call", "toolCallId": "call-1", "toolName": "lookup",
             "args": {"id": "C-42"}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call-1",
                                      "toolName": "lookup", "result": {"name": "Ada"}}]},
        {"role": "assistant", "content": "Ada Lovelace."},
    ]


@pytest.mark.parametrize("incoming, new_step, expected", [
    pytest.param([StepStartPart(), TextPart("b")], True, ["text", "step-start", "text"],
                 id="own-step-start-not-doubled"),
    pytest.param([StepStartPart(), TextPart("b")], False, ["text", "step-start", "text"],
                 id="own-step-start-marks-step"),
    pytest.param([TextPart("b")], False, ["text", "text"], id="same-step-no-marker"),
    pytest.param([TextPart("b")], True, ["text", "step-start", "text"], id="new-step-flag"),
])
def test_step_boundary_is_marked_by_the_caller(incoming: list[Any], new_step: bool,
                                               expected: list[str]) -> None:
    ml = MessageList()
    ml.add(Message.assistant("a"), "response")
    ml.add(Message.assistant(incoming), "response", new_step=new_step)
    assert [_types(m) for m in ml.get.response.db()] == [expected]


def test_new_step_on_a_message_ending_in_step_start_adds_no_second_marker() -> None:
    ml = MessageList(Message.assistant([TextPart("a"), StepStartPart()]), "response")
    ml.add(Message.assistant("b"), "response", new_step=True)
    assert _types(ml.get.response.db()[0]) == ["text", "step-start", "text"]


@pytest.mark.parametrize("setup", [
    pytest.param(lambda ml: ml.add(Message.assistant("old"), "memory"), id="into-memory"),
    pytest.param(lambda ml: (ml.add(Message.assistant("a"), "response"), ml.add("user turn")),
                 id="after-a-user-message"),
    pytest.param(lambda ml: ml.add(Message.assistant("a", metadata={"mastra": {"sealed": True}}),
                                   "response"), id="sealed"),
    pytest.param(lambda ml: ml.add(Message.assistant("a", thread_id="other"), "response"),
                 id="other-thread"),
    pytest.param(lambda ml: ml.add(Message.assistant("a"), "input"), id="into-input"),
])
def test_no_merge(setup: Any) -> None:
    ml = MessageList()
    setup(ml)
    before = len(ml)
    ml.add(Message.assistant("next"), "response")
    assert len(ml) == before + 1


def test_merge_false_and_non_response_sources_add_separate_messages() -> None:
    ml = MessageList(Message.assistant("a"), "response")
    ml.add(Message.assistant("b"), "response", merge=False)
    ml.add(Message.assistant("c"), "context")
    assert len(ml) == 3


def test_merge_patches_known_tool_calls_and_keeps_metadata() -> None:
    ml = MessageList(Message.assistant([ToolInvocationPart.call("c1", "t", {"a": 1})],
                                       metadata={"modelId": "m1"}), "response")
    ml.add(Message.assistant([ToolInvocationPart.returned("c1", "t", 7, args={"b": 2})],
                             metadata={"step": 1}), "response")
    [message] = ml.get.response.db()
    [part] = message.content.parts
    invocation = part.tool_invocation  # type: ignore[union-attr]
    assert (invocation.state, invocation.result, invocation.args) == ("result", 7, {"a": 1, "b": 2})
    assert message.content.metadata == {"modelId": "m1", "step": 1}
    assert message.content.tool_invocations == [invocation]


def test_readding_an_id_replaces_in_place_and_moves_source() -> None:
    ml = MessageList()
    ml.add(_user("remembered", "m1", T0), "memory")
    ml.add("live")
    copy = Message.user("remembered, edited", id="m1", created_at=T0)
    assert ml.add(copy, "response") == [copy]
    assert ml.source_of("m1") == "response"
    assert [get_text(m) for m in ml.get.all.db()] == ["remembered, edited", "live"]
    ml.add(Message.user("stored copy", id="m1", created_at=T0), "memory")
    assert ml.source_of("m1") == "response"  # a memory copy never demotes a live message
    assert get_text(ml.get.all.db()[0]) == "stored copy"


# ------------------------------------------------------------------------------------------
# Removing, tool invocations, system messages, prompt
# ------------------------------------------------------------------------------------------


def test_remove_by_ids() -> None:
    ml = MessageList([_user("a", "a", T0), _user("b", "b", T0), _user("c", "c", T0)])
    removed = ml.remove_by_ids(["c", "a", "zzz"])
    assert [m.id for m in removed] == ["a", "c"]
    assert [m.id for m in ml.get.all.db()] == ["b"] and ml.source_of("a") is None
    assert [m.id for m in ml.remove_by_ids("b")] == ["b"] and len(ml) == 0


def test_update_tool_invocation() -> None:
    ml = MessageList()
    ml.add(Message.assistant([ToolInvocationPart.call("c1", "t", {"q": 1})]), "memory")
    ml.add("next question")
    ml.add(Message.assistant([ToolInvocationPart.call("c1", "t", {"q": 2})]), "response")
    assert ml.update_tool_invocation({"type": "tool-invocation", "toolInvocation": {
        "state": "result", "toolCallId": "c1", "toolName": "t", "result": "new"}})
    remembered, response = ml.get.remembered.db()[0], ml.get.response.db()[0]
    assert remembered.content.parts[0].state == "call"  # type: ignore[union-attr]
    patched = response.content.parts[0].tool_invocation  # type: ignore[union-attr]
    assert (patched.state, patched.result, patched.args) == ("result", "new", {"q": 2})
    assert not ml.update_tool_invocation(ToolInvocationPart.returned("nope", "t", 1))
    # a state never moves backwards
    assert ml.update_tool_invocation(ToolInvocationPart.call("c1", "t"))
    assert response.content.parts[0].state == "result"  # type: ignore[union-attr]


def test_update_tool_invocation_moves_memory_to_response_and_keeps_mirror() -> None:
    ml = MessageList()
    stored = decode_message(json.dumps({
        "id": "h1", "role": "assistant", "createdAt": "2026-01-01T00:00:00.000Z",
        "content": {"format": 2, "parts": [{"type": "tool-invocation", "toolInvocation": {
            "state": "call", "toolCallId": "c9", "toolName": "t", "args": {}}}],
            "toolInvocations": [{"state": "call", "toolCallId": "c9", "toolName": "t",
                                 "args": {}}]}}))
    ml.add(stored, "memory")
    assert ml.update_tool_invocation(ToolInvocationPart.returned("c9", "t", "ok"))
    assert ml.source_of("h1") == "response"
    mirror = stored.content.tool_invocations
    assert isinstance(mirror, list) and [t.state for t in mirror] == ["result"]


def test_update_tool_invocation_falls_back_to_pending_provider_executed_call() -> None:
    part = ToolInvocationPart.call("provider-id", "web_search")
    part.provider_executed = True
    ml = MessageList(Message.assistant([part]), "response")
    assert ml.update_tool_invocation(ToolInvocationPart.returned("other-id", "web_search", "hits"))
    assert (part.tool_call_id, part.state) == ("provider-id", "result")


def test_system_buckets() -> None:
    ml = MessageList()
    assert len(ml.add_system(["inst", "inst", Message.system("inst 2")])) == 2
    ml.add_system("feedback", tag="processor-retry-feedback")
    ml.add_system({"role": "system", "content": "mem"}, tag="memory")
    ml.add_system("feedback", tag="processor-retry-feedback")
    ml.add_system("inst", tag="memory")  # dedup is per bucket
    text = lambda ms: [get_text(m) for m in ms]  # noqa: E731
    assert text(ml.get_system_messages()) == ["inst", "inst 2"]
    assert text(ml.get_system_messages("memory")) == ["mem", "inst"]
    assert ml.get_system_messages("unknown") == []
    assert text(ml.get_all_system_messages()) == ["inst", "inst 2", "feedback", "mem", "inst"]
    ml.replace_all_system_messages(["new", Message.user("ignored"), "new"])
    assert text(ml.get_system_messages()) == ["new"]
    assert text(ml.get_system_messages("memory")) == ["mem", "inst"]
    ml.clear_system_messages("memory")
    assert text(ml.get_all_system_messages()) == ["new", "feedback"]
    ml.clear_system_messages()
    assert text(ml.get_all_system_messages()) == ["feedback"]
    assert ml.source_of(ml.get_system_messages("processor-retry-feedback")[0]) == "system"


def test_snapshot_and_restore_system() -> None:
    ml = MessageList()
    ml.add_system("instructions")
    ml.add_system("tagged", tag="user-provided")
    snapshot = ml.snapshot_system()
    for step in range(2):
        _text_part(ml.get_system_messages()[0]).text = "mutated"
        ml.add_system(f"step {step}")
        ml.add_system(f"kept {step}", tag="user-provided")
        ml.restore_system(snapshot)
        assert [get_text(m) for m in ml.get_system_messages()] == ["instructions"]
    assert [get_text(m) for m in ml.get_system_messages("user-provided")] == ["tagged", "kept 0",
                                                                            "kept 1"]


def test_restore_system_keeps_an_unchanged_bucket_and_restores_a_changed_one_exactly() -> None:
    original = Message.system("instructions", id="s1",
                              created_at=datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC))
    original.content.metadata = {"source": {"nested": [1, "two", None]}}
    ml = MessageList()
    ml.add_system(original)
    snapshot = ml.snapshot_system()
    ml.restore_system(snapshot)
    assert ml.get_system_messages()[0] is original  # unchanged: nothing is copied
    original.content.metadata["source"]["nested"].append("changed in place")
    ml.restore_system(snapshot)
    restored = ml.get_system_messages()[0]
    assert restored is not original
    assert restored.id == "s1" and restored.created_at == datetime(2026, 1, 2, 3, 4, 5, 123456,
                                                                   tzinfo=UTC)
    assert restored.content.metadata == {"source": {"nested": [1, "two", None]}}
    ml.replace_all_system_messages([])
    ml.restore_system(snapshot)
    assert [m.id for m in ml.get_system_messages()] == ["s1"]


def test_prompt_order() -> None:
    ml = MessageList()
    ml.add("context", "context")
    ml.add_system("retry feedback", tag="processor-retry-feedback")
    ml.add("question", "input")
    ml.add_system("instructions")
    ml.add(_user("old question", "h1", T0), "memory")
    ml.add_system("guidance", tag="mcp-guidance")
    ml.add("answer", "response")
    assert ml.prompt() == [
        {"role": "system", "content": "instructions"},
        {"role": "system", "content": "retry feedback"},
        {"role": "system", "content": "guidance"},
        {"role": "user", "content": "old question"},
        {"role": "user", "content": "context"},
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "answer"},
    ]


def test_source_of() -> None:
    ml = MessageList()
    [message] = ml.add("x", "context")
    assert ml.source_of(message) == ml.source_of(message.id) == "context"
    assert ml.source_of("unknown") is None and ml.source_of(42) is None


# ------------------------------------------------------------------------------------------
# apply_hook_result (Mastra's reconcile rules)
# ------------------------------------------------------------------------------------------


@pytest.fixture
def conversation() -> MessageList:
    ml = MessageList()
    ml.add(_user("history", "h1", T0), "memory")
    ml.add(Message.user("question", id="u1"), "input")
    ml.add(Message.assistant("answer", id="a1"), "response")
    ml.add_system("instructions")
    return ml


def _ids(ml: MessageList) -> list[str]:
    return [m.id for m in ml.get.all.db()]


@pytest.mark.parametrize("result", [pytest.param(None, id="none"),
                                    pytest.param("same", id="same-list")])
def test_hook_result_no_change(conversation: MessageList, result: Any) -> None:
    given = conversation.get.all.db()
    conversation.apply_hook_result(conversation if result == "same" else None, given, "input")
    assert _ids(conversation) == ["h1", "u1", "a1"]


def test_hook_result_empty_list_deletes_every_given_message(conversation: MessageList) -> None:
    conversation.apply_hook_result([], conversation.get.all.db(), "response")
    assert _ids(conversation) == []
    assert [get_text(m) for m in conversation.get_system_messages()] == ["instructions"]


def test_hook_result_only_touches_given_messages(conversation: MessageList) -> None:
    conversation.apply_hook_result([], conversation.get.response.db(), "response")
    assert _ids(conversation) == ["h1", "u1"]


def test_hook_result_list_reconciles_by_id(conversation: MessageList) -> None:
    given = conversation.get.all.db()
    history = given[0]
    edited_history = Message.user("history, redacted", id="h1", created_at=T0)
    new = Message.assistant("added by the hook", id="n1")
    conversation.apply_hook_result([edited_history, given[2], new, "plain text"], given, "response")
    assert _ids(conversation)[:3] == ["h1", "a1", "n1"] and len(conversation) == 4
    assert conversation.source_of("h1") == "memory"  # keeps its original source
    assert conversation.source_of("n1") == "response"  # new ones get the default source
    assert conversation.get.all.db()[0] is edited_history and history is not edited_history
    assert conversation.get.all.db()[1] is given[2]  # the identical object was skipped
    assert conversation.get.all.db()[3].role == "assistant"
    assert conversation.source_of("u1") is None


def test_hook_result_system_message_in_list_becomes_system_message(
        conversation: MessageList) -> None:
    given = conversation.get.input.db()
    conversation.apply_hook_result(given + [{"role": "system", "content": "Be careful."}], given,
                                   "input")
    assert _ids(conversation) == ["h1", "u1", "a1"]
    assert [get_text(m) for m in conversation.get_system_messages()] == ["instructions",
                                                                        "Be careful."]


@pytest.mark.parametrize("key", ["system_messages", "systemMessages"])
def test_hook_result_dict_shape(conversation: MessageList, key: str) -> None:
    conversation.add_system("tagged", tag="memory")
    given = conversation.get.input.db()
    conversation.apply_hook_result({"messages": [], key: ["replaced", Message.system("also")]},
                                   given, "input")
    assert _ids(conversation) == ["h1", "a1"]
    assert [get_text(m) for m in conversation.get_all_system_messages()] == ["replaced", "also",
                                                                            "tagged"]


def test_hook_result_dict_without_messages_keeps_messages(conversation: MessageList) -> None:
    conversation.apply_hook_result({"system_messages": []}, conversation.get.all.db(), "input")
    assert _ids(conversation) == ["h1", "u1", "a1"] and conversation.get_system_messages() == []
    conversation.apply_hook_result({"message_list": conversation}, conversation.get.all.db(),
                                   "input")
    assert _ids(conversation) == ["h1", "u1", "a1"]


@pytest.mark.parametrize("result, match", [
    pytest.param(MessageList(), "returned a different MessageList", id="different-list"),
    pytest.param({"message_list": MessageList()}, "returned a different MessageList",
                 id="dict-different-list"),
    pytest.param("text", "returned a str", id="str"),
    pytest.param(42, "returned a int", id="int"),
    pytest.param({"messages": [], "model": "x"}, "unknown key\\(s\\) model", id="unknown-key"),
    pytest.param({"messages": "x"}, "'messages' as a str, not a list", id="messages-not-list"),
    pytest.param({"system_messages": "x"}, "'system_messages' as a str", id="system-not-list"),
    pytest.param({"messages": [], "message_list": "same"}, "both 'messages' and 'message_list'",
                 id="both"),
    pytest.param([Message.user("ok"), 3.5], "invalid message \\(message #1", id="bad-entry"),
    pytest.param({"system_messages": [{"role": "bot", "content": "x"}]}, "unknown message role",
                 id="bad-system-entry"),
])
def test_hook_result_errors(conversation: MessageList, result: Any, match: str) -> None:
    if isinstance(result, dict) and result.get("message_list") == "same":
        result = {**result, "message_list": conversation}
    with pytest.raises(ProcessorError, match=match) as info:
        conversation.apply_hook_result(result, conversation.get.all.db(), "input",
                                       processor_id="guard", hook="process_input")
    assert (info.value.processor_id, info.value.hook) == ("guard", "process_input")
    assert "must return None, the same message_list" in str(info.value)
    assert _ids(conversation) == ["h1", "u1", "a1"]
    assert [get_text(m) for m in conversation.get_system_messages()] == ["instructions"]


def test_hook_result_bad_default_source(conversation: MessageList) -> None:
    with pytest.raises(MessageError, match="unknown message source 'out'"):
        conversation.apply_hook_result([], [], "out")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# checkpoint / rollback
# ------------------------------------------------------------------------------------------


def test_rollback_undoes_a_rejected_step() -> None:
    ml = MessageList("question")
    response = Message.assistant([TextPart("step 1"),
                                  ToolInvocationPart.call("c1", "t", {"a": 1})], id="r1")
    ml.add(response, "response")
    ml.add(_user("old", "h1", T0), "memory")
    token = ml.checkpoint()
    ml.update_tool_invocation(ToolInvocationPart.returned("c1", "t", "result"))
    ml.add(Message.assistant("rejected"), "response", new_step=True)
    _text_part(response).text = "edited in place"
    ml.update_tool_invocation(ToolInvocationPart.returned("h1-call", "t", 1))
    ml.add(Message.assistant("another"), "response", merge=False)
    ml.remove_by_ids(["h1"])
    ml.add(Message.user("old, moved", id="h1", created_at=T0), "response")
    ml.add_system("feedback", tag="processor-retry-feedback")

    ml.rollback(token)

    assert [m.id for m in ml.get.response.db()] == ["r1"]
    assert _types(response) == ["text", "tool-invocation"]
    assert get_text(response) == "step 1"
    invocation = response.content.parts[1].tool_invocation  # type: ignore[union-attr]
    assert (invocation.state, invocation.result) == ("call", msgspec.UNSET)
    assert response.content.tool_invocations is msgspec.UNSET
    assert ml.source_of("h1") == "memory" and get_text(ml.get.remembered.db()[0]) == "old"
    assert len(ml.get_system_messages("processor-retry-feedback")) == 1  # untouched
    # new messages still come after everything ever added
    [after] = ml.add("retry", "input")
    assert after.created_at > max(m.created_at for m in ml.get.all.db() if m is not after)


def test_rollback_restores_fields_edited_in_place() -> None:
    part = ToolInvocationPart.call("c1", "t")
    message = Message.assistant([part], metadata={"k": 1})
    ml = MessageList(message, "response")
    token = ml.checkpoint()
    part.tool_invocation.state = "result"
    part.tool_invocation.result = "sneaky"
    part.title = "T"
    message.content.metadata = {"k": 2}
    message.content.parts.append(TextPart("x"))
    ml.rollback(token)
    assert (part.state, part.tool_invocation.result, part.title) == ("call", msgspec.UNSET,
                                                                    msgspec.UNSET)
    assert message.content.metadata == {"k": 1} and _types(message) == ["tool-invocation"]


def test_rollback_token_is_reusable_and_restores_removed_messages() -> None:
    ml = MessageList(["a", "b"])
    token = ml.checkpoint()
    for _ in range(2):
        ml.apply_hook_result([], ml.get.all.db(), "input")
        ml.add(Message.assistant("x"), "response")
        ml.rollback(token)
        assert [get_text(m) for m in ml.get.all.db()] == ["a", "b"]
        assert ml.get.response.db() == []


# ------------------------------------------------------------------------------------------
# Imports
# ------------------------------------------------------------------------------------------


def test_private_module_can_be_imported_first() -> None:
    code = ("import streamkit._message_list as m, streamkit.messages as p; "
            "assert p.MessageList is m.MessageList and 'MessageList' in dir(p)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_all_is_honest() -> None:
    import streamkit.messages as module

    for name in module.__all__:
        assert getattr(module, name) is not None, name
    public = {n for n in vars(module) if not n.startswith("_")
              and getattr(getattr(module, n), "__module__", "").startswith("streamkit")}
    assert public <= set(module.__all__) | {"MessageError", "TYPE_CHECKING"}


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.one_of(st.none(), st.just(UTC), st.timezones())))
def test_format_timestamp_is_the_utc_iso_form_whatever_the_zone(value: datetime) -> None:
    # The rule written plainly; format_timestamp takes a faster path for UTC times.
    utc = value.astimezone(UTC)
    spec = "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
    assert format_timestamp(value) == utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def test_now_is_aware_utc_in_whole_milliseconds() -> None:
    from streamkit._message_model import _now

    before = datetime.now(UTC)
    now = _now()
    after = datetime.now(UTC)
    assert now.tzinfo is UTC and now.microsecond % 1000 == 0
    assert before - timedelta(milliseconds=1) < now <= after  # the clock, floored to a ms

