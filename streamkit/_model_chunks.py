"""The chunks a model step produces (Mastra's ``stream/aisdk/v5/transform.ts``).

What belongs here: the chunk classes converted from the provider stream -- text, reasoning,
sources, files, tool-call streaming and ``raw``/``response-metadata``. What does not: the chunks
the agent loop emits (``streamkit.chunks``) and the base classes (``streamkit._chunk_base``).
Import these names from ``streamkit.chunks``; this module is private.
"""

from typing import TYPE_CHECKING, Any, ClassVar, Literal, Unpack, overload

from msgspec import UnsetType

from ._chunk_base import ChunkBase, _EnvelopeKeywords
from ._payloads import (
    CustomPayload,
    FilePayload,
    ReasoningDeltaPayload,
    ReasoningEndPayload,
    ReasoningFilePayload,
    ReasoningSignaturePayload,
    ReasoningStartPayload,
    RedactedReasoningPayload,
    ResponseMetadataPayload,
    SourcePayload,
    TextDeltaPayload,
    TextEndPayload,
    TextStartPayload,
    ToolCallDeltaPayload,
    ToolCallInputStreamingEndPayload,
    ToolCallInputStreamingStartPayload,
    ToolCallPayload,
)

__all__ = [
    "ResponseMetadata",
    "TextStart",
    "TextDelta",
    "TextEnd",
    "ReasoningStart",
    "ReasoningDelta",
    "ReasoningEnd",
    "ReasoningSignature",
    "RedactedReasoning",
    "ReasoningFile",
    "Source",
    "File",
    "Custom",
    "ToolCallInputStreamingStart",
    "ToolCallDelta",
    "ToolCallInputStreamingEnd",
    "ToolCall",
    "Raw",
]


class ResponseMetadata(ChunkBase, kw_only=True, frozen=True):
    """Provider response metadata (``response-metadata``); seen by processors, not consumers."""

    type: ClassVar[Literal["response-metadata"]] = "response-metadata"
    payload: ResponseMetadataPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ResponseMetadataPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str | UnsetType = ..., timestamp: object = ...,
                     model_id: str | UnsetType = ..., headers: object = ...,
                     signature: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class TextStart(ChunkBase, kw_only=True, frozen=True):
    """A text block opens (``text-start``)."""

    type: ClassVar[Literal["text-start"]] = "text-start"
    payload: TextStartPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: TextStartPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class TextDelta(ChunkBase, kw_only=True, frozen=True):
    """A piece of the model's text (``text-delta``).

    Example:
        >>> TextDelta(id="t1", text="Hello", run_id="r1", from_="AGENT").payload.text
        'Hello'
    """

    type: ClassVar[Literal["text-delta"]] = "text-delta"
    payload: TextDeltaPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: TextDeltaPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, text: str,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class TextEnd(ChunkBase, kw_only=True, frozen=True):
    """A text block closes (``text-end``)."""

    type: ClassVar[Literal["text-end"]] = "text-end"
    payload: TextEndPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: TextEndPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, provider_metadata: dict[str, Any] | UnsetType = ...,
                     type: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ReasoningStart(ChunkBase, kw_only=True, frozen=True):
    """A reasoning block opens (``reasoning-start``)."""

    type: ClassVar[Literal["reasoning-start"]] = "reasoning-start"
    payload: ReasoningStartPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ReasoningStartPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, provider_metadata: dict[str, Any] | UnsetType = ...,
                     signature: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ReasoningDelta(ChunkBase, kw_only=True, frozen=True):
    """A piece of the model's reasoning (``reasoning-delta``)."""

    type: ClassVar[Literal["reasoning-delta"]] = "reasoning-delta"
    payload: ReasoningDeltaPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ReasoningDeltaPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, text: str,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ReasoningEnd(ChunkBase, kw_only=True, frozen=True):
    """A reasoning block closes (``reasoning-end``)."""

    type: ClassVar[Literal["reasoning-end"]] = "reasoning-end"
    payload: ReasoningEndPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ReasoningEndPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, provider_metadata: dict[str, Any] | UnsetType = ...,
                     signature: str | UnsetType = ..., extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ReasoningSignature(ChunkBase, kw_only=True, frozen=True):
    """Legacy reasoning signature (``reasoning-signature``)."""

    type: ClassVar[Literal["reasoning-signature"]] = "reasoning-signature"
    payload: ReasoningSignaturePayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ReasoningSignaturePayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, signature: str,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class RedactedReasoning(ChunkBase, kw_only=True, frozen=True):
    """Legacy redacted reasoning (``redacted-reasoning``)."""

    type: ClassVar[Literal["redacted-reasoning"]] = "redacted-reasoning"
    payload: RedactedReasoningPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: RedactedReasoningPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, data: object = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ReasoningFile(ChunkBase, kw_only=True, frozen=True):
    """A file produced while reasoning (``reasoning-file``)."""

    type: ClassVar[Literal["reasoning-file"]] = "reasoning-file"
    payload: ReasoningFilePayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ReasoningFilePayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, data: object, mime_type: str, base64: str | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class Source(ChunkBase, kw_only=True, frozen=True):
    """A cited source (``source``).

    Example:
        >>> Source(id="src-0", source_type="url", url="https://example.com").payload.source_type
        'url'
    """

    type: ClassVar[Literal["source"]] = "source"
    payload: SourcePayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: SourcePayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, id: str, source_type: str, title: str | UnsetType = ...,
                     url: str | UnsetType = ..., mime_type: str | UnsetType = ...,
                     filename: str | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class File(ChunkBase, kw_only=True, frozen=True):
    """A generated file (``file``)."""

    type: ClassVar[Literal["file"]] = "file"
    payload: FilePayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: FilePayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, data: object, mime_type: str, base64: str | UnsetType = ...,
                     filename: str | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class Custom(ChunkBase, kw_only=True, frozen=True):
    """A provider-specific part (``custom``)."""

    type: ClassVar[Literal["custom"]] = "custom"
    payload: CustomPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: CustomPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, kind: str, provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolCallInputStreamingStart(ChunkBase, kw_only=True, frozen=True):
    """The model starts streaming a tool call's arguments (``tool-call-input-streaming-start``)."""

    type: ClassVar[Literal["tool-call-input-streaming-start"]] = "tool-call-input-streaming-start"
    payload: ToolCallInputStreamingStartPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolCallInputStreamingStartPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, tool_name: str,
                     provider_executed: bool | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     dynamic: bool | UnsetType = ..., title: str | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolCallDelta(ChunkBase, kw_only=True, frozen=True):
    """A piece of a tool call's argument JSON (``tool-call-delta``).

    Example:
        >>> ToolCallDelta(args_text_delta='{"q":', tool_call_id="call-1").payload.args_text_delta
        '{"q":'
    """

    type: ClassVar[Literal["tool-call-delta"]] = "tool-call-delta"
    payload: ToolCallDeltaPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolCallDeltaPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, args_text_delta: str, tool_call_id: str,
                     tool_name: str | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolCallInputStreamingEnd(ChunkBase, kw_only=True, frozen=True):
    """A tool call's arguments are complete (``tool-call-input-streaming-end``)."""

    type: ClassVar[Literal["tool-call-input-streaming-end"]] = "tool-call-input-streaming-end"
    payload: ToolCallInputStreamingEndPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolCallInputStreamingEndPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str,
                     provider_metadata: dict[str, Any] | UnsetType = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class ToolCall(ChunkBase, kw_only=True, frozen=True):
    """The model calls a tool (``tool-call``).

    Example:
        >>> ToolCall(tool_call_id="call-1", tool_name="lookup", args={"id": 42}).payload.args
        {'id': 42}
    """

    type: ClassVar[Literal["tool-call"]] = "tool-call"
    payload: ToolCallPayload

    if TYPE_CHECKING:  # the flattened constructor, for type checkers
        @overload
        def __init__(self, *, payload: ToolCallPayload,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        @overload
        def __init__(self, *, tool_call_id: str, tool_name: str, args: object = ...,
                     provider_executed: bool | UnsetType = ...,
                     provider_metadata: dict[str, Any] | UnsetType = ..., output: object = ...,
                     dynamic: bool | UnsetType = ..., observability: object = ...,
                     extra: dict[str, Any] = ...,
                     **envelope: Unpack[_EnvelopeKeywords]) -> None: ...
        def __init__(self, **kwargs: object) -> None: ...


class Raw(ChunkBase, kw_only=True, frozen=True):
    """A raw provider value (``raw``); ``payload`` is whatever JSON the provider sent.

    Example:
        >>> Raw(payload={"anything": [1, 2]}).payload
        {'anything': [1, 2]}
    """

    type: ClassVar[Literal["raw"]] = "raw"
    payload: Any
