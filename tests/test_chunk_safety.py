"""Chunks are safe to share: frozen, ``replace`` for a changed copy, non-chunks rejected at once.

Also the generated constructors (``streamkit._chunk_init``): every chunk class builds the same
chunk through them as through msgspec directly.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit import Agent, Processor, ops
from streamkit.chunks import (
    CHUNK_TYPES,
    ChunkBase,
    DataChunk,
    Finish,
    StepOutputPayload,
    StepResultPayload,
    TextDelta,
    TextDeltaPayload,
    ToolCall,
    TripwireChunk,
    UsagePayload,
)
from streamkit.errors import InvalidArgument, InvalidType, ProcessorError
from streamkit.testing import ScriptedModel, text

from .conftest import P, hook

# --- frozen ----------------------------------------------------------------------------------


def test_chunks_and_payloads_are_frozen() -> None:
    chunk = TextDelta(id="t", text="hi", run_id="r")
    with pytest.raises(AttributeError):
        chunk.run_id = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        chunk.payload.text = "other"  # type: ignore[misc]
    data = DataChunk("data-x", {"k": 1})
    with pytest.raises(AttributeError):
        data.data = 2  # type: ignore[misc]
    assert chunk.payload.text == "hi" and data.data == {"k": 1}


async def test_a_processor_cannot_change_the_callers_chunks(mode: str) -> None:
    def mutate(part: Any) -> Any:
        part.payload.text = part.payload.text.upper()  # what issue 17 saw work, silently
        return part

    chunks = [TextDelta(id="t", text="hi"), TextDelta(id="t", text="there")]
    with pytest.raises(ProcessorError, match="AttributeError"):
        async for _ in ops.apply(chunks, [P("mutator", process_output_stream=hook(mode, mutate))]):
            pass
    assert [c.payload.text for c in chunks] == ["hi", "there"]


async def test_returning_a_new_chunk_leaves_the_callers_list_alone(mode: str) -> None:
    def upper(part: Any) -> Any:
        return part.replace(text=part.payload.text.upper())

    chunks = [TextDelta(id="t", text="hi", run_id="r")]
    processors = [P("upper", process_output_stream=hook(mode, upper))]
    out = [c async for c in ops.apply(chunks, processors)]
    assert out == [TextDelta(id="t", text="HI", run_id="r")]
    assert chunks == [TextDelta(id="t", text="hi", run_id="r")]


# --- replace ---------------------------------------------------------------------------------


def test_replace_takes_payload_fields_flattened_and_envelope_fields() -> None:
    chunk = TextDelta(id="t", text="hi", run_id="r", extra={"providerHint": 1})
    changed = chunk.replace(text="HI", from_="AGENT")
    assert changed == TextDelta(id="t", text="HI", run_id="r", from_="AGENT",
                                extra={"providerHint": 1})
    assert chunk.payload.text == "hi" and chunk.from_ is msgspec.UNSET
    assert chunk.replace(payload=TextDeltaPayload(id="u", text="x")).payload.id == "u"
    both = chunk.replace(payload=TextDeltaPayload(id="u", text="x"), text="y")
    assert (both.payload.id, both.payload.text) == ("u", "y")


def test_replace_sends_a_shared_name_to_the_payload_as_the_constructor_does() -> None:
    chunk = TripwireChunk(reason="r", run_id="run")
    assert chunk.replace(metadata={"k": 1}).payload.metadata == {"k": 1}


def test_replace_rejects_unknown_keywords_naming_the_valid_ones() -> None:
    with pytest.raises(InvalidType, match=r"TextDelta\.replace\(\) got unexpected keyword "
                                          r"argument\(s\) colour; valid: payload fields id"):
        TextDelta(id="t", text="hi").replace(colour="red")
    with pytest.raises(InvalidType, match=r"DataChunk\.replace\(\).*colour.*valid: type, data"):
        DataChunk("data-x", 1).replace(colour="red")
    with pytest.raises(InvalidArgument, match="must start with 'data-'"):
        DataChunk("data-x", 1).replace(type="x")
    assert DataChunk("data-x", 1).replace(data=2) == DataChunk("data-x", 2)


@given(st.text(), st.text(), st.text())
def test_replace_is_the_constructor_with_changed_fields(old: str, new: str, run_id: str) -> None:
    chunk = TextDelta(id="t", text=old, run_id=run_id)
    assert chunk.replace(text=new) == TextDelta(id="t", text=new, run_id=run_id)
    assert ops.with_text(chunk, new) == chunk.replace(text=new)


# --- non-chunks ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad, kind", [
    pytest.param({"type": "text-delta", "payload": {"id": "t", "text": "x"}}, "dict", id="dict"),
    pytest.param("hello", "str", id="str"),
    pytest.param(None, "NoneType", id="none"),
])
@pytest.mark.parametrize("source", ["list", "async"])
async def test_apply_over_non_chunks_fails_at_once_naming_the_item(
        mode: str, source: str, bad: Any, kind: str) -> None:
    seen: list[Any] = []

    def record(part: Any) -> Any:
        seen.append(part)
        return part

    items = [TextDelta(id="t", text="ok"), bad, TextDelta(id="t", text="never")]

    async def agen() -> Any:
        for item in items:
            yield item

    out: list[Any] = []
    with pytest.raises(InvalidType) as info:
        async for chunk in ops.apply(items if source == "list" else agen(),
                                     [P("rec", process_output_stream=hook(mode, record))]):
            out.append(chunk)
    message = str(info.value)
    assert f"yielded an item of type {kind}, not a chunk: {bad!r}" in message
    assert "coerce_chunk" in message
    # The good chunk before it went through; the bad one reached no processor.
    assert seen == out == [items[0]]


async def test_apply_with_no_processors_rejects_non_chunks_too() -> None:
    with pytest.raises(InvalidType, match="of type dict, not a chunk"):
        async for _ in ops.apply([{"type": "text-delta"}], []):
            pass


async def test_a_long_bad_item_is_shortened_in_the_message() -> None:
    with pytest.raises(InvalidType, match=r"not a chunk: 'xxx+\.\.\.\. Build"):
        async for _ in ops.apply(["x" * 1000], []):
            pass


async def test_apply_lets_instances_of_chunk_subclasses_through(mode: str) -> None:
    class MyDelta(TextDelta, kw_only=True, frozen=True):
        pass

    chunk = MyDelta(id="t", text="hi")  # type: ignore[call-arg]
    out = [c async for c in ops.apply([chunk], [P("same", process_output_stream=hook(
        mode, lambda part: part))])]
    assert out == [chunk] and type(out[0]) is MyDelta


async def test_a_model_yielding_a_non_chunk_fails_the_run_naming_it() -> None:
    class DictModel:
        provider = "dicts"
        model_id = "dicts"

        async def stream(self, request: Any) -> Any:
            yield {"type": "text-delta", "payload": {"id": "t", "text": "x"}}

    class Same(Processor):
        def process_output_stream(self, part: Any) -> Any:
            return part

    agent = Agent(id="a", model=DictModel(), output_processors=[Same("same")])
    with pytest.raises(InvalidType, match="of type dict, not a chunk"):
        await agent.generate("hi")


# --- generated constructors ------------------------------------------------------------------


def _required(struct: type) -> dict[str, Any]:
    structs = {"step_result": StepResultPayload(reason="stop"),
               "output": StepOutputPayload(usage=UsagePayload())}
    return {f.name: structs.get(f.name, f"v-{f.name}")
            for f in msgspec.structs.fields(struct) if f.required}


@pytest.mark.parametrize("cls", sorted(CHUNK_TYPES.values(), key=lambda c: c.type),
                         ids=lambda c: str(c.type))
def test_every_generated_constructor_builds_what_msgspec_builds(cls: Any) -> None:
    struct_call = type(msgspec.Struct).__call__
    envelope = {"run_id": "r", "from_": "AGENT"}
    payload_cls = cls._payload_cls
    if payload_cls is None:  # raw (any JSON payload), object, object-result
        own = {**_required(cls), **envelope}
        assert cls(**own) == struct_call(cls, **own)
        return
    fields = _required(payload_cls)
    want = struct_call(cls, payload=payload_cls(**fields), **envelope)
    assert cls(**fields, **envelope) == want
    assert cls(payload=payload_cls(**fields), **envelope) == want
    assert cls(payload=payload_cls(**fields), **envelope, metadata={"m": 1}).metadata == {"m": 1}
    if fields:
        with pytest.raises(InvalidType, match=rf"{cls.__name__}\(\): missing required field"):
            cls(**envelope)


def test_a_flattened_default_factory_gives_each_chunk_its_own_dict() -> None:
    a, b = TextDelta(id="t", text="x"), TextDelta(id="t", text="y")
    assert a.payload.extra == {} and a.payload.extra is not b.payload.extra


def test_a_field_named_like_a_python_builtin_or_args_is_a_keyword_like_any_other() -> None:
    call = ToolCall(tool_call_id="c", tool_name="n", args={"x": 1})
    assert call.payload.args == {"x": 1}
    finish = Finish(step_result=StepResultPayload(reason="stop"),
                    output=StepOutputPayload(usage=UsagePayload()),
                    metadata={"k": 1})
    assert finish.payload.metadata == {"k": 1} and finish.metadata is msgspec.UNSET


def test_positional_arguments_are_rejected_with_a_streamkit_error() -> None:
    with pytest.raises(InvalidType, match=r"TextDelta\(\) takes keyword arguments only"):
        TextDelta("t", "hi")  # type: ignore[call-overload]


def test_chunk_subclasses_get_a_constructor_of_their_own() -> None:
    class Tagged(TextDelta, kw_only=True, frozen=True):
        pass

    tagged = Tagged(id="t", text="x")  # type: ignore[call-arg]
    assert tagged.payload == TextDeltaPayload(id="t", text="x")
    assert type(Tagged) is not type(TextDelta) and isinstance(Tagged, type(ChunkBase))


async def test_the_agent_streams_frozen_chunks_end_to_end() -> None:
    stream = Agent(id="a", model=ScriptedModel([text("Hello world")])).stream("hi")
    parts = [c async for c in stream]
    assert all(isinstance(c, (ChunkBase, DataChunk)) for c in parts)
    with pytest.raises(AttributeError):
        parts[0].run_id = "x"  # type: ignore[misc, union-attr]
