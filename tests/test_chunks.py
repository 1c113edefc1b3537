"""Chunk structs: every type, flattened constructors, absent-vs-null, unknown payload keys."""

import ast
import copy
import doctest
import inspect
import json
import pickle
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

import streamkit._chunk_base as base_module
import streamkit._model_chunks as model_chunks_module
import streamkit._payloads as payloads_module
import streamkit.chunks as chunks_module
from streamkit import wire
from streamkit.chunks import (
    CHUNK_TYPES,
    AbortChunk,
    Chunk,
    ChunkBase,
    Custom,
    DataChunk,
    ErrorChunk,
    File,
    Finish,
    FinishPayload,
    ObjectChunk,
    ObjectResult,
    PayloadBase,
    Raw,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningFile,
    ReasoningSignature,
    ReasoningStart,
    RedactedReasoning,
    ResponseMetadata,
    Source,
    Start,
    StepFinish,
    StepFinishPayload,
    StepOutputPayload,
    StepResultPayload,
    StepStart,
    TextDelta,
    TextDeltaPayload,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallApproval,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
    ToolCallSuspended,
    ToolErrorChunk,
    ToolOutput,
    ToolOutputDenied,
    ToolResult,
    TripwireChunk,
    TripwirePayload,
    UsagePayload,
    coerce_chunk,
)
from streamkit.errors import ChunkDecodeError, InvalidArgument, InvalidType

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "chunks"
ENV: dict[str, Any] = {"run_id": "run-1", "from_": "AGENT"}

# The same chunks as tests/fixtures/chunks/<type>.json, built in Python with the flattened
# constructors. Two independent spellings: each test checks one against the other.
EXPECTED: dict[str, Chunk] = {
    "start": Start(id="support-agent", message_id="msg-1", **ENV),
    "step-start": StepStart(request={"body": '{"model":"gpt-4o-mini"}'}, warnings=[],
                            message_id="msg-1", started_at=1796210641257, **ENV),
    "response-metadata": ResponseMetadata(id="resp-1", timestamp="2026-01-01T00:00:00.000Z",
                                          model_id="gpt-4o-mini",
                                          headers={"x-request-id": "req-9"}, **ENV),
    "text-start": TextStart(id="txt-0", provider_metadata={"openai": {"itemId": "msg_1"}}, **ENV),
    "text-delta": TextDelta(id="txt-0", text="Hello, w\u00f6rld \U0001F44B", **ENV),
    "text-end": TextEnd(id="txt-0", type="text-end", **ENV),
    "reasoning-start": ReasoningStart(id="rs-0", **ENV),
    "reasoning-delta": ReasoningDelta(id="rs-0", text="The user wants their order.", **ENV),
    "reasoning-end": ReasoningEnd(id="rs-0", signature="c2lnbmF0dXJl", **ENV),
    "reasoning-signature": ReasoningSignature(id="rs-0", signature="c2lnbmF0dXJl", **ENV),
    "redacted-reasoning": RedactedReasoning(id="rs-1", data="ZW5jcnlwdGVk", **ENV),
    "reasoning-file": ReasoningFile(data="iVBORw0KGgo=", mime_type="image/png", **ENV),
    "source": Source(id="src-0", source_type="url", title="CRM record C-42",
                     url="https://crm.example.com/customers/C-42", **ENV),
    "file": File(data="aGVsbG8=", base64="aGVsbG8=", mime_type="text/plain",
                 filename="hello.txt", **ENV),
    "custom": Custom(kind="openai.web-search-call", provider_metadata={"openai": {"id": "ws_1"}},
                     **ENV),
    "tool-call-input-streaming-start": ToolCallInputStreamingStart(
        tool_call_id="call-1", tool_name="lookupCustomer", provider_executed=False,
        dynamic=False, **ENV),
    "tool-call-delta": ToolCallDelta(args_text_delta='{"customerId":', tool_call_id="call-1",
                                     tool_name="lookupCustomer", **ENV),
    "tool-call-input-streaming-end": ToolCallInputStreamingEnd(tool_call_id="call-1", **ENV),
    "tool-call": ToolCall(tool_call_id="call-1", tool_name="lookupCustomer",
                          args={"customerId": "C-42"}, **ENV),
    "tool-result": ToolResult(tool_call_id="call-1", tool_name="lookupCustomer",
                              result={"customerId": "C-42", "tier": "gold"}, is_error=False,
                              args={"customerId": "C-42"}, **ENV),
    "tool-error": ToolErrorChunk(tool_call_id="call-1", tool_name="lookupCustomer",
                                 args={"customerId": "C-404"},
                                 error={"name": "Error", "message": "customer not found"}, **ENV),
    "tool-output-denied": ToolOutputDenied(
        tool_call_id="call-2", tool_name="deleteCustomer", args={"customerId": "C-42"},
        approval={"id": "appr-1", "approved": False, "reason": "not allowed"}, **ENV),
    "tool-call-approval": ToolCallApproval(tool_call_id="call-2", tool_name="deleteCustomer",
                                           args={"customerId": "C-42"},
                                           resume_schema='{"type":"object"}', **ENV),
    "tool-call-suspended": ToolCallSuspended(tool_call_id="call-3", tool_name="askHuman",
                                             suspend_payload={"question": "Refund?"}, args={},
                                             resume_schema='{"type":"object"}', **ENV),
    "tool-output": ToolOutput(output={"type": "text-delta", "from": "AGENT",
                                      "payload": {"id": "t", "text": "sub-agent says hi"}},
                              tool_call_id="call-4", tool_name="researcher", **ENV),
    "step-finish": StepFinish(
        message_id="msg-1",
        step_result=StepResultPayload(reason="tool-calls", warnings=[], is_continued=True),
        metadata={"id": "resp-1", "timestamp": "2026-01-01T00:00:00.000Z",
                  "modelId": "gpt-4o-mini", "request": {}},
        output=StepOutputPayload(
            text="",
            tool_calls=[{"toolCallId": "call-1", "toolName": "lookupCustomer",
                         "args": {"customerId": "C-42"}}],
            usage=UsagePayload(input_tokens=30, output_tokens=9, total_tokens=39)),
        messages={"all": [], "user": [], "nonUser": []}, processor_retry_count=0, **ENV),
    "finish": Finish(
        message_id="msg-1",
        step_result=StepResultPayload(reason="stop", is_continued=False, raw_reason="stop"),
        metadata={"providerMetadata": {}},
        output=StepOutputPayload(text="Your order ships today.",
                                 usage=UsagePayload(input_tokens=12, output_tokens=5,
                                                    total_tokens=17, reasoning_tokens=0,
                                                    cached_input_tokens=0)),
        messages={"all": [], "user": [], "nonUser": []}, processor_retry_count=0, **ENV),
    "error": ErrorChunk(error={"name": "AI_APICallError", "message": "Too many requests",
                               "statusCode": 429}, **ENV),
    "abort": AbortChunk(**ENV),
    "tripwire": TripwireChunk(reason="PII detected", retry=False, metadata={"rule": "email"},
                              processor_id="pii-guard", **ENV),
    "raw": Raw(payload={"type": "response.created", "sequence_number": 1}, **ENV),
    "object": ObjectChunk(object={"name": "Ada"}, **ENV),
    "object-result": ObjectResult(object={"name": "Ada Lovelace", "tier": "gold"}, **ENV),
    "data-progress": DataChunk("data-progress", {"pct": 50}, id="prog-1", transient=True),
}

CASES = [pytest.param(name, id=name) for name in EXPECTED]


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def test_every_chunk_type_has_a_fixture_and_an_expected_object() -> None:
    fixture_names = {path.stem for path in FIXTURES.glob("*.json")}
    wire_types = set(CHUNK_TYPES) | {"data-progress"}
    assert fixture_names == wire_types
    assert set(EXPECTED) == wire_types


@pytest.mark.parametrize("name", CASES)
def test_fixture_decodes_to_the_expected_object(name: str) -> None:
    chunk = wire.decode((FIXTURES / f"{name}.json").read_bytes())
    assert type(chunk) is type(EXPECTED[name])
    assert chunk == EXPECTED[name]
    assert chunk.type == name


@pytest.mark.parametrize("name", CASES)
def test_python_object_encodes_to_the_fixture_json(name: str) -> None:
    assert json.loads(wire.encode(EXPECTED[name])) == fixture_json(name)


@pytest.mark.parametrize("name", CASES)
def test_python_object_round_trips_through_json_and_msgpack(name: str) -> None:
    chunk = EXPECTED[name]
    assert wire.decode(wire.encode(chunk)) == chunk
    assert wire.decode_msgpack(wire.encode_msgpack(chunk)) == chunk
    assert wire.from_builtins(wire.to_builtins(chunk)) == chunk


@pytest.mark.parametrize("name", CASES)
def test_copy_deepcopy_and_pickle_keep_the_chunk(name: str) -> None:
    chunk = EXPECTED[name]
    assert copy.copy(chunk) == chunk
    assert copy.deepcopy(chunk) == chunk
    assert pickle.loads(pickle.dumps(chunk)) == chunk


def test_type_is_a_class_attribute_with_the_wire_type() -> None:
    for wire_type, cls in CHUNK_TYPES.items():
        assert cls.type == wire_type
        assert "type" not in cls.__struct_fields__
        assert issubclass(cls, ChunkBase)
    assert DataChunk("data-x", 1).type == "data-x"
    assert TextDelta.type == "text-delta" and ToolErrorChunk.type == "tool-error"


def test_chunk_union_lists_every_class() -> None:
    members = set(Chunk.__args__)  # type: ignore[attr-defined]
    assert members == set(CHUNK_TYPES.values()) | {DataChunk}


# --- constructors ----------------------------------------------------------------------------


def test_flattened_and_payload_constructors_build_the_same_chunk() -> None:
    flat = TextDelta(text="hi", id="t1", run_id="r", from_="AGENT")
    explicit = TextDelta(payload=TextDeltaPayload(id="t1", text="hi"), run_id="r", from_="AGENT")
    assert flat == explicit
    assert flat.payload.text == "hi" and flat.run_id == "r" and flat.from_ == "AGENT"


def test_chunk_without_payload_fields_builds_an_empty_payload() -> None:
    assert AbortChunk().payload == payloads_module.AbortPayload()
    assert wire.encode(AbortChunk()) == b'{"type":"abort","payload":{}}'


@pytest.mark.parametrize("kwargs, words", [
    pytest.param({"txt": "hi", "id": "t"}, ["txt", "text", "run_id", "from_"],
                 id="misspelled-payload-field"),
    pytest.param({"text": "hi", "id": "t", "runid": "r"}, ["runid", "run_id"],
                 id="misspelled-envelope-field"),
    pytest.param({"payload": TextDeltaPayload(id="t", text="a"), "colour": 1}, ["colour"],
                 id="unknown-next-to-payload"),
    pytest.param({"payload": TextDeltaPayload(id="t", text="a"), "text": "b"}, ["not both"],
                 id="payload-and-its-fields"),
    pytest.param({"id": "t"}, ["TextDelta", "text"], id="missing-required-payload-field"),
])
def test_bad_constructor_arguments_raise_type_error_naming_them(kwargs: dict[str, Any],
                                                                words: list[str]) -> None:
    with pytest.raises(InvalidType) as info:
        TextDelta(**kwargs)
    for word in words:
        assert word in str(info.value)


def test_unknown_keyword_on_chunk_without_payload_struct_names_valid_ones() -> None:
    with pytest.raises(InvalidType,
                       match=r"objekt.*valid: chunk fields run_id, from_, metadata, object"):
        ObjectChunk(objekt={})


def test_payload_metadata_wins_in_flattened_form_envelope_metadata_via_payload_form() -> None:
    flat = TripwireChunk(reason="r", metadata={"rule": 1})
    assert flat.payload.metadata == {"rule": 1} and flat.metadata is UNSET
    explicit = TripwireChunk(payload=TripwirePayload(reason="r"), metadata={"trace": 1})
    assert explicit.metadata == {"trace": 1} and explicit.payload.metadata is UNSET


def test_data_chunk_type_must_start_with_data() -> None:
    with pytest.raises(InvalidArgument, match="'progress'"):
        DataChunk("progress", {})


def test_payload_fields_are_snake_case_with_camel_case_wire_names() -> None:
    for cls in [TextDeltaPayload, *[c._payload_cls for c in CHUNK_TYPES.values()
                                    if c._payload_cls is not None]]:
        for f in msgspec.structs.fields(cls):
            assert f.name == f.name.lower(), f"{cls.__name__}.{f.name}"
            assert "_" not in f.encode_name, f"{cls.__name__}.{f.name} -> {f.encode_name}"


def test_typed_constructors_list_exactly_the_payload_fields() -> None:
    # The flattened constructors are spelled out for type checkers under TYPE_CHECKING, where the
    # runtime never looks; this keeps them equal to the payload structs they flatten.
    checked = set()
    for module in (chunks_module, model_chunks_module):
        for node in ast.parse(inspect.getsource(module)).body:
            cls = getattr(module, node.name, None) if isinstance(node, ast.ClassDef) else None
            if not (isinstance(cls, type) and issubclass(cls, ChunkBase)) \
                    or cls._payload_cls is None:
                continue
            inits = [f for f in ast.walk(node) if isinstance(f, ast.FunctionDef)
                     and f.name == "__init__"
                     and any(ast.unparse(d) == "overload" for d in f.decorator_list)]
            assert len(inits) == 2, cls.__name__
            by_payload, flat = inits
            payload_arg = by_payload.args.kwonlyargs[0]
            assert payload_arg.arg == "payload"
            assert ast.unparse(payload_arg.annotation) == cls._payload_cls.__name__
            fields = msgspec.structs.fields(cls._payload_cls)
            assert [a.arg for a in flat.args.kwonlyargs] == [f.name for f in fields], cls.__name__
            for _arg, default, f in zip(flat.args.kwonlyargs, flat.args.kw_defaults, fields):
                required = f.default is msgspec.NODEFAULT \
                    and f.default_factory is msgspec.NODEFAULT
                assert (default is None) == required, f"{cls.__name__}.{f.name}"
            envelope = "_RunKeywords" if "metadata" in cls._payload_fields else "_EnvelopeKeywords"
            assert flat.args.kwarg is not None
            assert ast.unparse(flat.args.kwarg.annotation) == f"Unpack[{envelope}]"
            checked.add(cls)
    assert checked == {c for c in CHUNK_TYPES.values() if c._payload_cls is not None}


# --- absent is not null ----------------------------------------------------------------------


def test_tripwire_chunk_has_the_contract_shape() -> None:
    chunk = TripwireChunk(reason="nope", retry=False, metadata={"x": 1}, processor_id="blocker",
                          run_id="run-9", from_="AGENT")
    assert json.loads(wire.encode(chunk)) == {
        "type": "tripwire", "runId": "run-9", "from": "AGENT",
        "payload": {"reason": "nope", "retry": False, "metadata": {"x": 1},
                    "processorId": "blocker"}}


def test_mastra_tripwire_without_envelope_decodes_and_stays_without_it() -> None:
    data = b'{"type":"tripwire","payload":{"reason":"Tripwire triggered by guard"}}'
    chunk = wire.decode(data)
    assert isinstance(chunk, TripwireChunk)
    assert chunk.run_id is UNSET and chunk.from_ is UNSET
    assert chunk.payload.retry is UNSET and chunk.payload.processor_id is UNSET
    assert json.loads(wire.encode(chunk)) == json.loads(data)


def test_null_is_kept_as_null_where_the_type_allows_it() -> None:
    data = (b'{"type":"tool-result","runId":"r","from":"AGENT","payload":'
            b'{"toolCallId":"c","toolName":"t","result":null}}')
    chunk = wire.decode(data)
    assert chunk.payload.result is None
    assert json.loads(wire.encode(chunk)) == json.loads(data)


def test_only_extra_may_have_a_non_unset_default() -> None:
    # Payloads encode with omit_defaults=True; any other real default (False, 0, "") would be
    # silently left out of the JSON -- e.g. a tripwire's "retry": false.
    classes = [obj for obj in vars(payloads_module).values()
               if isinstance(obj, type) and issubclass(obj, PayloadBase)]
    assert len(classes) > 30
    for cls in classes:
        for f in msgspec.structs.fields(cls):
            if f.name == "extra":
                continue
            assert f.default in (UNSET, msgspec.NODEFAULT), f"{cls.__name__}.{f.name}"
            assert f.default_factory is msgspec.NODEFAULT, f"{cls.__name__}.{f.name}"


# --- unknown payload keys --------------------------------------------------------------------


def step_finish_json(**extra_at: dict[str, Any]) -> dict[str, Any]:
    data = fixture_json("step-finish")
    for where, keys in extra_at.items():
        target = data["payload"]
        for part in where.split("__")[1:]:
            target = target[part]
        target.update(keys)
    return data


@pytest.mark.parametrize("where, keys, attr_path", [
    pytest.param("payload", {"totalUsage2": {"a": [1, {"b": None}]}}, (), id="payload"),
    pytest.param("payload__stepResult", {"tripwire": {"reason": "x"}}, ("step_result",),
                 id="step-result"),
    pytest.param("payload__output", {"reasoningText": "hmm"}, ("output",), id="output"),
    pytest.param("payload__output__usage", {"inputTokenDetails": {"cacheRead": 3}},
                 ("output", "usage"), id="usage"),
    pytest.param("payload", {"extra": {"looks": "like our field"}}, (),
                 id="literal-extra-key"),
    pytest.param("payload", {"extra": {}}, (), id="literal-empty-extra-key"),
])
def test_unknown_keys_are_kept_where_they_were(where: str, keys: dict[str, Any],
                                               attr_path: tuple[str, ...]) -> None:
    data = step_finish_json(**{where: keys})
    raw = json.dumps(data).encode()
    chunk = wire.decode(raw)
    target: Any = chunk.payload
    for attr in attr_path:
        target = getattr(target, attr)
    assert target.extra == keys
    assert chunk.payload.has_extra_keys()
    assert json.loads(wire.encode(chunk)) == data
    assert wire.decode_msgpack(wire.encode_msgpack(chunk)) == chunk
    assert wire.to_builtins(chunk) == data


def test_unknown_keys_in_a_flat_payload() -> None:
    data = {"type": "text-delta", "runId": "r", "from": "AGENT",
            "payload": {"id": "t", "text": "hi", "providerExecuted": True, "n": 1.5}}
    chunk = wire.decode(json.dumps(data))
    assert chunk.payload.extra == {"providerExecuted": True, "n": 1.5}
    assert json.loads(wire.encode(chunk)) == data


def test_extra_keys_set_in_python_are_encoded_beside_the_fields() -> None:
    chunk = TextDelta(id="t", text="hi", extra={"hint": [1, 2]})
    assert json.loads(wire.encode(chunk))["payload"] == {"id": "t", "text": "hi", "hint": [1, 2]}
    chunk.payload.extra["text"] = "shadow"  # a modelled field wins over an extra key
    assert json.loads(wire.encode(chunk))["payload"]["text"] == "hi"


def test_extra_keys_added_later_to_a_nested_struct_are_encoded() -> None:
    chunk = EXPECTED["finish"]
    changed = wire.decode(wire.encode(chunk))
    changed.payload.output.usage.extra["raw2"] = {"tokens": 1}
    assert json.loads(wire.encode(changed))["payload"]["output"]["usage"]["raw2"] == {"tokens": 1}
    changed = changed.replace(total_usage=UsagePayload(total_tokens=3, extra={"z": 1}))
    assert json.loads(wire.encode(changed))["payload"]["totalUsage"] == {"totalTokens": 3, "z": 1}


def test_step_end_fast_check_covers_every_nested_payload_struct() -> None:
    # StepFinishPayload.has_extra_keys() is written out by hand for speed; it must look
    # everywhere the generic walk looks.
    def paths(cls: type, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        found = [prefix]
        for attr, _wire, sub in base_module._layout(cls).nested:
            found += paths(sub, prefix + (attr,))
        return found

    for cls in (StepFinishPayload, FinishPayload):
        for path in paths(cls):
            payload = wire.decode(wire.encode(EXPECTED["finish"])).payload
            payload = cls(**{f: getattr(payload, f) for f in payload.__struct_fields__
                             if f != "total_usage"}, total_usage=UsagePayload())
            target: Any = payload
            for attr in path:
                target = getattr(target, attr)
            assert not payload.has_extra_keys()
            target.extra["k"] = 1  # payloads are frozen; their ``extra`` dict is not
            assert payload.has_extra_keys(), path
            assert base_module.has_extra_keys(payload), path


# --- coerce_chunk ----------------------------------------------------------------------------


def test_coerce_chunk_passes_chunks_through_and_converts_mappings() -> None:
    chunk = EXPECTED["text-delta"]
    assert coerce_chunk(chunk) is chunk
    assert coerce_chunk(fixture_json("text-delta")) == chunk
    assert coerce_chunk({"type": "data-x", "data": [1]}) == DataChunk("data-x", [1])


@pytest.mark.parametrize("value, match", [
    pytest.param(42, "got int", id="not-a-mapping"),
    pytest.param({"type": "nope"}, "unknown chunk type 'nope'", id="unknown-type"),
    pytest.param({"data": 1}, "no string 'type'", id="no-type"),
    pytest.param({"type": "data-x", "data": 1, "transient": "yes"}, r"Expected `bool`",
                 id="data-chunk-bad-field"),
])
def test_coerce_chunk_rejects_bad_values(value: Any, match: str) -> None:
    with pytest.raises(ChunkDecodeError, match=match):
        coerce_chunk(value)


# --- docstring examples ----------------------------------------------------------------------


@pytest.mark.parametrize("module", [
    pytest.param(chunks_module, id="chunks"),
    pytest.param(model_chunks_module, id="model-chunks"),
    pytest.param(payloads_module, id="payloads"),
    pytest.param(base_module, id="chunk-base"),
    pytest.param(wire, id="wire"),
])
def test_docstring_examples_run(module: Any) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
