"""Stream chunks: one ``msgspec.Struct`` per Mastra chunk type, and the ``Chunk`` union.

What belongs here: the public chunk API -- the chunks the agent loop emits (``Start``,
``StepFinish``, ``ToolResult``, ``TripwireChunk``, ..., ``DataChunk``), ``Chunk``, ``CHUNK_TYPES``
and ``coerce_chunk`` -- and, re-exported, the chunks a model step produces
(``streamkit._model_chunks``: ``TextDelta``, ``ToolCall``, ...), the payload structs
(``streamkit._payloads``) and the base classes (``streamkit._chunk_base``). What does not: bytes,
JSON, SSE and MessagePack (``streamkit.wire``), and anything about agents, processors or HTTP.

The wire form is Mastra's::

    {"type": "text-delta", "runId": "r1", "from": "AGENT", "payload": {"id": "t1", "text": "hi"}}

* Envelope: ``run_id`` (wire ``runId``), ``from_`` (wire ``from``: ``"AGENT"``, ``"USER"``,
  ``"SYSTEM"``, ``"WORKFLOW"`` or ``"NETWORK"``) and ``metadata``. They default to ``UNSET``:
  a key that is absent stays absent when encoded again (absent is not null).
* ``chunk.type`` is the wire type, a class attribute (``TextDelta.type == "text-delta"``);
  on ``DataChunk`` it is a field holding the full ``"data-..."`` string.
* Payload attributes are snake_case, wire keys camelCase (``payload.tool_call_id`` is
  ``toolCallId``). Payload keys streamkit does not model are kept in ``payload.extra``.
* ``object`` and ``object-result`` chunks carry ``object`` at top level, not in a payload;
  ``data-*`` chunks have no envelope at all.

Constructors take the payload's fields flattened, or the payload itself:

>>> TextDelta(text="hi", id="t1", run_id="r1", from_="AGENT")
TextDelta(run_id='r1', from_='AGENT', payload=TextDeltaPayload(id='t1', text='hi'))
>>> TextDelta(payload=TextDeltaPayload(id="t1", text="hi")).payload.text
'hi'

A keyword that names a payload field goes to the payload: ``metadata=`` of ``TripwireChunk``,
``StepFinish`` and ``Finish`` is the payload's ``metadata``; pass ``payload=`` to set the
envelope's. (Each class's constructor is generated for its fields, ``streamkit._chunk_init``;
a model provider's hot loop can use ``Stamper``, ~4× cheaper still.)

Chunks are frozen: return a new chunk instead of mutating one. A chunk is shared -- the caller's
list given to ``ops.apply``, the stored step, every processor after yours -- so setting an
attribute raises ``AttributeError`` (a processor's hook that tries fails the request with
``ProcessorError``). ``chunk.replace(...)`` takes what the constructor takes and returns a copy
with those fields changed, payload fields flattened:

>>> delta = TextDelta(text="hi", id="t1", run_id="r1")
>>> delta.replace(text="HI")
TextDelta(run_id='r1', payload=TextDeltaPayload(id='t1', text='HI'))
>>> delta.payload.text
'hi'

In a per-chunk hook, ``ops.with_text(part, text)`` (or ``msgspec.structs.replace`` on the chunk
and its payload) does the same in ~0.2 µs. Containers inside a chunk (``payload.extra``, a tool
call's ``args``, ``metadata`` dicts) are not copied: treat them as read-only too, and build a new
dict for the copy.
"""

import re
from collections.abc import Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    Self,
    TypeAlias,
    Unpack,
    get_args,
    overload,
)

import msgspec
from msgspec import UNSET, UnsetType

from ._chunk_base import (
    ChunkBase,
    PayloadBase,
    _EnvelopeKeywords,
    _RunKeywords,
    _struct_call,
    assign_extra_keys,
    split_extra_keys,
)
from ._model_chunks import (
    Custom,
    File,
    Raw,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningFile,
    ReasoningSignature,
    ReasoningStart,
    RedactedReasoning,
    ResponseMetadata,
    Source,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
)
from ._payloads import (
    AbortPayload,
    CustomPayload,
    ErrorPayload,
    FilePayload,
    FinishPayload,
    ReasoningDeltaPayload,
    ReasoningEndPayload,
    ReasoningFilePayload,
    ReasoningSignaturePayload,
    ReasoningStartPayload,
    RedactedReasoningPayload,
    ResponseMetadataPayload,
    SourcePayload,
    StartPayload,
    StepFinishPayload,
    StepOutputPayload,
    StepResultPayload,
    StepStartPayload,
    TextDeltaPayload,
    TextEndPayload,
    TextStartPayload,
    ToolCallApprovalPayload,
    ToolCallDeltaPayload,
    ToolCallInputStreamingEndPayload,
    ToolCallInputStreamingStartPayload,
    ToolCallPayload,
    ToolCallSuspendedPayload,
    ToolErrorPayload,
    ToolOutputDeniedPayload,
    ToolOutputPayload,
    ToolResultPayload,
    TripwirePayload,
    UsagePayload,
)
from .errors import ChunkDecodeError, InvalidArgument, InvalidType

__all__ = [
    # base classes and helpers
    "ChunkBase", "PayloadBase", "Chunk", "ModelChunk", "CHUNK_TYPES", "coerce_chunk", "Stamper",
    # model output
    "ResponseMetadata", "TextStart", "TextDelta", "TextEnd", "ReasoningStart", "ReasoningDelta",
    "ReasoningEnd", "ReasoningSignature", "RedactedReasoning", "ReasoningFile", "Source", "File",
    "Custom", "ToolCallInputStreamingStart", "ToolCallDelta", "ToolCallInputStreamingEnd",
    "ToolCall", "Raw",
    # agent loop
    "Start", "StepStart", "StepFinish", "Finish", "ToolResult", "ToolErrorChunk",
    "ToolOutputDenied", "ToolCallApproval", "ToolCallSuspended", "ToolOutput", "ErrorChunk",
    "AbortChunk", "TripwireChunk", "ObjectChunk", "ObjectResult", "DataChunk",
    # payloads
    "StartPayload", "StepStartPayload", "TextStartPayload", "TextDeltaPayload", "TextEndPayload",
    "ReasoningStartPayload", "ReasoningDeltaPayload", "ReasoningEndPayload",
    "ReasoningSignaturePayload", "RedactedReasoningPayload", "ReasoningFilePayload",
    "SourcePayload", "FilePayload", "CustomPayload", "ToolCallInputStreamingStartPayload",
    "ToolCallDeltaPayload", "ToolCallInputStreamingEndPayload", "ToolCallPayload",
    "ToolResultPayload", "ToolErrorPayload", "ToolOutputDeniedPayload", "ToolCallApprovalPayload",
    "ToolCallSuspendedPayload", "ToolOutputPayload", "StepFinishPayload", "FinishPayload",
    "StepResultPayload", "StepOutputPayload", "UsagePayload", "ErrorPayload", "AbortPayload",
    "TripwirePayload", "ResponseMetadataPayload",
]


class Start(ChunkBase, kw_only=True, frozen=True):
    """A run starts (``start``): ``payload.id`` is the agent id."""

    type: ClassVar[Literal["start"]] = "start"
    payload: StartPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: StartPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str | UnsetType = ..., message_id: str | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class StepStart(ChunkBase, kw_only=True, frozen=True):
    """A model step starts (``step-start``)."""

    type: ClassVar[Literal["step-start"]] = "step-start"
    payload: StepStartPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: StepStartPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, request: object = ..., warnings: list[Any] | UnsetType = ...,
                     message_id: str | UnsetType = ..., started_at: int | float | UnsetType = ...,
                     input_messages: object = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class StepFinish(ChunkBase, kw_only=True, frozen=True):
    """A step ended, after its tools ran (``step-finish``).

    Example:
        >>> chunk = StepFinish(step_result=StepResultPayload(reason="stop"),
        ...                    output=StepOutputPayload(text="Hi",
        ...                                             usage=UsagePayload(total_tokens=3)))
        >>> chunk.payload.output.usage.total_tokens
        3
    """

    type: ClassVar[Literal["step-finish"]] = "step-finish"
    payload: StepFinishPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: StepFinishPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, step_result: StepResultPayload, output: StepOutputPayload,
                     message_id: str | UnsetType = ..., metadata: object = ...,
                     messages: object = ...,
                     processor_retry_count: int | UnsetType = ...,
                     processor_retry_feedback: object = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     total_usage: UsagePayload | UnsetType = ..., response: object = ...,
                     id: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_RunKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class Finish(ChunkBase, kw_only=True, frozen=True):
    """The run finished (``finish``); last chunk of a run. Same payload shape as ``step-finish``."""

    type: ClassVar[Literal["finish"]] = "finish"
    payload: FinishPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: FinishPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, step_result: StepResultPayload, output: StepOutputPayload,
                     message_id: str | UnsetType = ..., metadata: object = ...,
                     messages: object = ...,
                     processor_retry_count: int | UnsetType = ...,
                     processor_retry_feedback: object = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     total_usage: UsagePayload | UnsetType = ..., response: object = ...,
                     id: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_RunKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolResult(ChunkBase, kw_only=True, frozen=True):
    """A tool's result (``tool-result``)."""

    type: ClassVar[Literal["tool-result"]] = "tool-result"
    payload: ToolResultPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolResultPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, tool_name: str, result: object = ...,
                     is_error: bool | UnsetType = ..., provider_executed: bool | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ..., args: object = ...,
                     dynamic: bool | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolErrorChunk(ChunkBase, kw_only=True, frozen=True):
    """A tool raised or was unknown (``tool-error``); the loop goes on so the model can recover."""

    type: ClassVar[Literal["tool-error"]] = "tool-error"
    payload: ToolErrorPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolErrorPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, tool_name: str, error: object = ...,
                     args: object = ...,
                     id: str | UnsetType = ..., provider_executed: bool | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolOutputDenied(ChunkBase, kw_only=True, frozen=True):
    """A tool call's approval was declined (``tool-output-denied``)."""

    type: ClassVar[Literal["tool-output-denied"]] = "tool-output-denied"
    payload: ToolOutputDeniedPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolOutputDeniedPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, tool_name: str, args: object = ...,
                     approval: object = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolCallApproval(ChunkBase, kw_only=True, frozen=True):
    """A tool call waits for approval (``tool-call-approval``)."""

    type: ClassVar[Literal["tool-call-approval"]] = "tool-call-approval"
    payload: ToolCallApprovalPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolCallApprovalPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, tool_name: str, args: object = ...,
                     resume_schema: object = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolCallSuspended(ChunkBase, kw_only=True, frozen=True):
    """A tool suspended the run (``tool-call-suspended``)."""

    type: ClassVar[Literal["tool-call-suspended"]] = "tool-call-suspended"
    payload: ToolCallSuspendedPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolCallSuspendedPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, tool_name: str, suspend_payload: object = ...,
                     args: object = ..., resume_schema: object = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolOutput(ChunkBase, kw_only=True, frozen=True):
    """Output streamed by a nested run inside a tool (``tool-output``)."""

    type: ClassVar[Literal["tool-output"]] = "tool-output"
    payload: ToolOutputPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolOutputPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, output: object = ...,
                     tool_name: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ErrorChunk(ChunkBase, kw_only=True, frozen=True):
    """A terminal error (``error``); ``payload.error`` is JSON (a message string or an object)."""

    type: ClassVar[Literal["error"]] = "error"
    payload: ErrorPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ErrorPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, error: object = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class AbortChunk(ChunkBase, kw_only=True, frozen=True):
    """The caller cancelled the run (``abort``)."""

    type: ClassVar[Literal["abort"]] = "abort"
    payload: AbortPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: AbortPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class TripwireChunk(ChunkBase, kw_only=True, frozen=True):
    """A processor stopped the run (``tripwire``); nothing follows it in the stream.

    Mastra's per-chunk pass emits these without ``runId``/``from``; streamkit always sets both.

    Example:
        >>> chunk = TripwireChunk(reason="blocked", retry=False, processor_id="guard",
        ...                       run_id="r1", from_="AGENT")
        >>> chunk.payload.retry
        False
    """

    type: ClassVar[Literal["tripwire"]] = "tripwire"
    payload: TripwirePayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: TripwirePayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, reason: str, retry: bool | UnsetType = ..., metadata: object = ...,
                     processor_id: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_RunKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ObjectChunk(ChunkBase, kw_only=True, frozen=True):
    """A partial structured-output object (``object``), at top level rather than in a payload.

    Example:
        >>> ObjectChunk(object={"name": "Ada"}, run_id="r1", from_="AGENT").object
        {'name': 'Ada'}
    """

    type: ClassVar[Literal["object"]] = "object"
    object: Any = UNSET


class ObjectResult(ChunkBase, kw_only=True, frozen=True):
    """The final structured-output object (``object-result``), at top level."""

    type: ClassVar[Literal["object-result"]] = "object-result"
    object: Any = UNSET


class DataChunk(msgspec.Struct, forbid_unknown_fields=True, repr_omit_defaults=True, gc=False,
                frozen=True):
    """A custom data chunk (any ``data-*`` type): ``{"type", "data", "id"?, "transient"?}``.

    It has no envelope and no payload. ``transient=True`` chunks are streamed but never stored.

    Example:
        >>> DataChunk("data-progress", {"pct": 50}, transient=True)
        DataChunk(type='data-progress', data={'pct': 50}, transient=True)
    """

    _flat_payload: ClassVar[bool] = False
    _nested_payload: ClassVar[bool] = False

    type: str
    data: Any = UNSET
    id: str | UnsetType = UNSET
    transient: bool | UnsetType = UNSET

    def replace(self, **changes: object) -> Self:
        """A copy of this chunk with ``changes`` (``type``, ``data``, ``id``, ``transient``):
        chunks are frozen, so return a new one.

        Raises:
            InvalidType: an unknown keyword. InvalidArgument: a ``type`` not starting ``data-``.
        """
        unknown = sorted(k for k in changes if k not in self.__struct_fields__)
        if unknown:
            raise InvalidType(f"DataChunk.replace() got unexpected keyword argument(s) "
                              f"{', '.join(unknown)}; valid: {', '.join(self.__struct_fields__)}")
        return msgspec.structs.replace(self, **changes)

    def __post_init__(self) -> None:
        # Both are ValueError/TypeError, which msgspec turns into a ValidationError on decode.
        if not isinstance(self.type, str):
            raise InvalidType(f"DataChunk(type=...) takes a str such as 'data-progress', got "
                              f"{type(self.type).__name__}")
        if not self.type.startswith("data-"):
            raise InvalidArgument(f"DataChunk(type={self.type!r}): a data chunk's type must "
                                  f"start with 'data-', such as 'data-progress'")


Chunk: TypeAlias = (
    Start | StepStart | ResponseMetadata | TextStart | TextDelta | TextEnd | ReasoningStart
    | ReasoningDelta | ReasoningEnd | ReasoningSignature | RedactedReasoning | ReasoningFile
    | Source | File | Custom | ToolCallInputStreamingStart | ToolCallDelta
    | ToolCallInputStreamingEnd | ToolCall | ToolResult | ToolErrorChunk | ToolOutputDenied
    | ToolCallApproval | ToolCallSuspended | ToolOutput | StepFinish | Finish | ErrorChunk
    | AbortChunk | TripwireChunk | Raw | ObjectChunk | ObjectResult | DataChunk
)
"""Any chunk: the union of every chunk class."""

ModelChunk: TypeAlias = (
    ResponseMetadata | TextStart | TextDelta | TextEnd | ReasoningStart | ReasoningDelta
    | ReasoningEnd | ReasoningSignature | RedactedReasoning | ReasoningFile | Source | File
    | Custom | ToolCallInputStreamingStart | ToolCallDelta | ToolCallInputStreamingEnd | ToolCall
    | Raw | ToolResult | ToolErrorChunk | Finish
)
"""What a model's ``stream(request)`` yields for one step (``streamkit.models.Model``): the chunks
converted from a provider stream, a provider-executed tool's ``tool-result``/``tool-error``, and
the step's one ``finish``. The agent's own chunks (``start``, ``step-start``, ``step-finish``,
``tripwire``, ``data-*``, ...) are not in it."""

CHUNK_TYPES: dict[str, type[ChunkBase]] = {
    cls.type: cls for cls in get_args(Chunk) if cls is not DataChunk
}
"""Wire type -> chunk class, for every type except ``data-*`` (any of which is a ``DataChunk``)."""


_PATH = re.compile(r" - at `(\$[^`]*)`$")


_replace = msgspec.structs.replace


class Stamper:
    """Build many chunks of one class and one run fast — for model providers' hot loops.

    The flattened constructor (``TextDelta(id=..., text=..., run_id=...)``) is pleasant but goes
    through Python-level keyword handling (~1-3 µs). A stamper copies a prototype envelope and
    sets only the payload (~0.1 µs): build the payload struct, stamp it.

    Example:
        >>> delta = Stamper(TextDelta, run_id="run-1")
        >>> chunk = delta(TextDeltaPayload(id="t1", text="Hello"))
        >>> (chunk.type, chunk.run_id, chunk.from_, chunk.payload.text)
        ('text-delta', 'run-1', 'AGENT', 'Hello')
    """

    __slots__ = ("cls", "run_id", "from_", "_proto")

    def __init__(self, cls: type[ChunkBase], *, run_id: str, from_: str = "AGENT") -> None:
        if not (isinstance(cls, type) and issubclass(cls, ChunkBase)) or cls._payload_cls is None:
            raise InvalidType(f"Stamper needs a chunk class with a payload (such as TextDelta), "
                              f"got {cls!r}")
        self.cls = cls
        self.run_id = run_id
        self.from_ = from_
        self._proto: Any = None

    def __call__(self, payload: object) -> Any:
        proto = self._proto
        if proto is None:
            # The prototype is never handed out, so nobody can mutate the envelope we copy.
            proto = self._proto = _struct_call(self.cls, payload=payload, run_id=self.run_id,
                                               from_=self.from_)
        return _replace(proto, payload=payload)


def coerce_chunk(value: object) -> Chunk:
    """Return ``value`` as a chunk: chunks pass through, mappings in wire form are converted.

    Args:
        value: a chunk, or a mapping in Mastra's wire form (camelCase keys), such as
            ``{"type": "data-progress", "data": {"pct": 50}}``.

    Returns:
        The chunk. Unknown payload keys of a mapping land in ``payload.extra``.

    Raises:
        ChunkDecodeError: ``value`` is neither, its ``type`` is unknown, or a field has the
            wrong type (``chunk_type`` and ``path`` say which).

    Example:
        >>> coerce_chunk({"type": "data-progress", "data": {"pct": 50}})
        DataChunk(type='data-progress', data={'pct': 50})
    """
    if isinstance(value, (ChunkBase, DataChunk)):
        return value  # type: ignore[return-value]  # every ChunkBase subclass is in Chunk
    if isinstance(value, Mapping):
        return chunk_from_builtins(value if type(value) is dict else dict(value))
    raise ChunkDecodeError(f"expected a chunk or a mapping, got {type(value).__name__}")


def chunk_from_builtins(obj: object) -> Chunk:
    """Convert the builtins form of one chunk (as an untyped JSON decode gives it) to a chunk.

    This is the general path: ``streamkit.wire`` first tries msgspec's typed decoder and comes
    here only for ``data-*`` chunks, payloads with unknown keys, and errors.

    Raises:
        ChunkDecodeError: not an object, no string ``type``, an unknown type, or a field of the
            wrong type.
    """
    if type(obj) is not dict:
        raise ChunkDecodeError(f"expected a chunk object, got {_json_kind(obj)}")
    chunk_type = obj.get("type")
    if not isinstance(chunk_type, str):
        raise ChunkDecodeError("chunk has no string 'type' field"
                               + ("" if chunk_type is None else f" (got {_json_kind(chunk_type)})"))
    cls: Any
    if chunk_type.startswith("data-"):
        cls = DataChunk
    else:
        cls = CHUNK_TYPES.get(chunk_type)
        if cls is None:
            raise ChunkDecodeError(
                f"unknown chunk type {chunk_type!r}: expected a 'data-' type or one of "
                f"{', '.join(sorted(CHUNK_TYPES))}", chunk_type=chunk_type)
    known, found = split_extra_keys(cls, obj)
    try:
        chunk: Chunk = msgspec.convert(known, cls)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _PATH.search(message)
        raise ChunkDecodeError(f"invalid {chunk_type!r} chunk: {message}", chunk_type=chunk_type,
                               path=match.group(1) if match else "$") from exc
    if found:
        assign_extra_keys(chunk, found)
    return chunk


def _json_kind(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
