"""Payload structs of the chunk types.

What belongs here: one ``msgspec.Struct`` per chunk payload (``TextDeltaPayload``, ...) and the
nested structs of the step-end payloads (``StepResultPayload``, ``StepOutputPayload``,
``UsagePayload``). What does not: the chunk classes (``streamkit.chunks``) and the unknown-key
machinery they all share (``streamkit._chunk_base``). Import these names from
``streamkit.chunks``; this module is private.

Every payload subclasses ``PayloadBase``: fields are keyword-only in the wire spelling's
snake_case (``tool_call_id`` for ``toolCallId``), optional ones default to ``UNSET`` (absent, not
null), and keys streamkit does not model are kept in ``extra``.
"""

from typing import Any

from msgspec import UNSET, UnsetType, field

from ._chunk_base import JSONObject, PayloadBase, has_extra_keys

__all__ = [
    "StartPayload",
    "StepStartPayload",
    "TextStartPayload",
    "TextDeltaPayload",
    "TextEndPayload",
    "ReasoningStartPayload",
    "ReasoningDeltaPayload",
    "ReasoningEndPayload",
    "ReasoningSignaturePayload",
    "RedactedReasoningPayload",
    "SourcePayload",
    "FilePayload",
    "ReasoningFilePayload",
    "CustomPayload",
    "ToolCallInputStreamingStartPayload",
    "ToolCallDeltaPayload",
    "ToolCallInputStreamingEndPayload",
    "ToolCallPayload",
    "ToolResultPayload",
    "ToolErrorPayload",
    "ToolOutputDeniedPayload",
    "ToolCallApprovalPayload",
    "ToolCallSuspendedPayload",
    "ToolOutputPayload",
    "UsagePayload",
    "StepResultPayload",
    "StepOutputPayload",
    "StepFinishPayload",
    "FinishPayload",
    "ErrorPayload",
    "AbortPayload",
    "TripwirePayload",
    "ResponseMetadataPayload",
]


# --- model stream ----------------------------------------------------------------------------


class ResponseMetadataPayload(PayloadBase, frozen=True):
    """Provider response metadata (``response-metadata``); provider keys go to ``extra``."""

    id: str | UnsetType = UNSET
    timestamp: Any = UNSET
    model_id: str | UnsetType = field(default=UNSET, name="modelId")
    headers: Any = UNSET
    signature: str | UnsetType = UNSET


class TextStartPayload(PayloadBase, frozen=True):
    """A text block opens (``text-start``).

    Example:
        >>> TextStartPayload(id="txt-0")
        TextStartPayload(id='txt-0')
    """

    id: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class TextDeltaPayload(PayloadBase, frozen=True):
    """A piece of text (``text-delta``).

    Example:
        >>> TextDeltaPayload(id="txt-0", text="Hello")
        TextDeltaPayload(id='txt-0', text='Hello')
    """

    id: str
    text: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class TextEndPayload(PayloadBase, frozen=True):
    """A text block closes (``text-end``).

    Mastra spreads the provider part into this payload, so real chunks carry their own
    ``"type": "text-end"`` here; it is kept in ``type`` and written back.
    """

    id: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")
    type: str | UnsetType = UNSET


class ReasoningStartPayload(PayloadBase, frozen=True):
    """A reasoning block opens (``reasoning-start``)."""

    id: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")
    signature: str | UnsetType = UNSET


class ReasoningDeltaPayload(PayloadBase, frozen=True):
    """A piece of reasoning text (``reasoning-delta``)."""

    id: str
    text: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class ReasoningEndPayload(PayloadBase, frozen=True):
    """A reasoning block closes (``reasoning-end``)."""

    id: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")
    signature: str | UnsetType = UNSET


class ReasoningSignaturePayload(PayloadBase, frozen=True):
    """Legacy (AI SDK v1) reasoning signature (``reasoning-signature``)."""

    id: str
    signature: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class RedactedReasoningPayload(PayloadBase, frozen=True):
    """Legacy (AI SDK v1) redacted reasoning (``redacted-reasoning``)."""

    id: str
    data: Any = UNSET
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class SourcePayload(PayloadBase, frozen=True):
    """A cited source (``source``); ``source_type`` is ``"url"`` or ``"document"``.

    Example:
        >>> SourcePayload(id="src-0", source_type="url", url="https://example.com")
        SourcePayload(id='src-0', source_type='url', url='https://example.com')
    """

    id: str
    source_type: str = field(name="sourceType")
    title: str | UnsetType = UNSET
    url: str | UnsetType = UNSET
    mime_type: str | UnsetType = field(default=UNSET, name="mimeType")
    filename: str | UnsetType = UNSET
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class FilePayload(PayloadBase, frozen=True):
    """A generated file (``file``); ``data`` is base64 text in JSON, ``bytes`` in MessagePack."""

    data: Any
    mime_type: str = field(name="mimeType")
    base64: str | UnsetType = UNSET
    filename: str | UnsetType = UNSET
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class ReasoningFilePayload(PayloadBase, frozen=True):
    """A file produced while reasoning (``reasoning-file``)."""

    data: Any
    mime_type: str = field(name="mimeType")
    base64: str | UnsetType = UNSET
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class CustomPayload(PayloadBase, frozen=True):
    """A provider-specific part (``custom``); ``kind`` is the provider's part type."""

    kind: str
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class ToolCallInputStreamingStartPayload(PayloadBase, frozen=True):
    """The model starts streaming a tool call's arguments (``tool-call-input-streaming-start``)."""

    tool_call_id: str = field(name="toolCallId")
    tool_name: str = field(name="toolName")
    provider_executed: bool | UnsetType = field(default=UNSET, name="providerExecuted")
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")
    dynamic: bool | UnsetType = UNSET
    title: str | UnsetType = UNSET


class ToolCallDeltaPayload(PayloadBase, frozen=True):
    """A piece of a tool call's argument JSON text (``tool-call-delta``).

    Example:
        >>> ToolCallDeltaPayload(args_text_delta='{"q":', tool_call_id="call-1")
        ToolCallDeltaPayload(args_text_delta='{"q":', tool_call_id='call-1')
    """

    args_text_delta: str = field(name="argsTextDelta")
    tool_call_id: str = field(name="toolCallId")
    tool_name: str | UnsetType = field(default=UNSET, name="toolName")
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class ToolCallInputStreamingEndPayload(PayloadBase, frozen=True):
    """A tool call's arguments are complete (``tool-call-input-streaming-end``)."""

    tool_call_id: str = field(name="toolCallId")
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class ToolCallPayload(PayloadBase, frozen=True):
    """The model calls a tool (``tool-call``); ``args`` is the parsed argument object."""

    tool_call_id: str = field(name="toolCallId")
    tool_name: str = field(name="toolName")
    args: Any = UNSET
    provider_executed: bool | UnsetType = field(default=UNSET, name="providerExecuted")
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")
    output: Any = UNSET
    dynamic: bool | UnsetType = UNSET
    observability: Any = UNSET


class ToolResultPayload(PayloadBase, frozen=True):
    """A tool's result (``tool-result``).

    Example:
        >>> ToolResultPayload(tool_call_id="call-1", tool_name="lookup", result={"ok": True})
        ToolResultPayload(tool_call_id='call-1', tool_name='lookup', result={'ok': True})
    """

    tool_call_id: str = field(name="toolCallId")
    tool_name: str = field(name="toolName")
    result: Any = UNSET
    is_error: bool | UnsetType = field(default=UNSET, name="isError")
    provider_executed: bool | UnsetType = field(default=UNSET, name="providerExecuted")
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")
    args: Any = UNSET
    dynamic: bool | UnsetType = UNSET


class ToolErrorPayload(PayloadBase, frozen=True):
    """A tool raised, or the model called an unknown tool (``tool-error``)."""

    tool_call_id: str = field(name="toolCallId")
    tool_name: str = field(name="toolName")
    error: Any = UNSET
    args: Any = UNSET
    id: str | UnsetType = UNSET
    provider_executed: bool | UnsetType = field(default=UNSET, name="providerExecuted")
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")


class ToolOutputDeniedPayload(PayloadBase, frozen=True):
    """A tool call whose approval was declined (``tool-output-denied``)."""

    tool_call_id: str = field(name="toolCallId")
    tool_name: str = field(name="toolName")
    args: Any = UNSET
    approval: Any = UNSET


class ToolCallApprovalPayload(PayloadBase, frozen=True):
    """A tool call waits for approval; the run suspends (``tool-call-approval``)."""

    tool_call_id: str = field(name="toolCallId")
    tool_name: str = field(name="toolName")
    args: Any = UNSET
    resume_schema: Any = field(default=UNSET, name="resumeSchema")


class ToolCallSuspendedPayload(PayloadBase, frozen=True):
    """A tool suspended itself; the run suspends (``tool-call-suspended``)."""

    tool_call_id: str = field(name="toolCallId")
    tool_name: str = field(name="toolName")
    suspend_payload: Any = field(default=UNSET, name="suspendPayload")
    args: Any = UNSET
    resume_schema: Any = field(default=UNSET, name="resumeSchema")


class ToolOutputPayload(PayloadBase, frozen=True):
    """Output streamed by a nested run inside a tool (``tool-output``)."""

    tool_call_id: str = field(name="toolCallId")
    output: Any = UNSET
    tool_name: str | UnsetType = field(default=UNSET, name="toolName")


# --- step ends -------------------------------------------------------------------------------


class UsagePayload(PayloadBase, frozen=True):
    """Token usage of a step or a run (AI SDK v5 ``LanguageModelUsage``).

    Example:
        >>> UsagePayload(input_tokens=12, output_tokens=5, total_tokens=17)
        UsagePayload(input_tokens=12, output_tokens=5, total_tokens=17)
    """

    input_tokens: int | None | UnsetType = field(default=UNSET, name="inputTokens")
    output_tokens: int | None | UnsetType = field(default=UNSET, name="outputTokens")
    total_tokens: int | None | UnsetType = field(default=UNSET, name="totalTokens")
    reasoning_tokens: int | None | UnsetType = field(default=UNSET, name="reasoningTokens")
    cached_input_tokens: int | None | UnsetType = field(default=UNSET, name="cachedInputTokens")
    raw: Any = UNSET


class StepResultPayload(PayloadBase, frozen=True):
    """How a step ended: ``reason`` is a finish reason (``stop``, ``tool-calls``, ``length``,
    ``content-filter``, ``error``, ``other``, ``unknown``, ``tripwire``, ``retry``).

    Example:
        >>> StepResultPayload(reason="stop", is_continued=False)
        StepResultPayload(reason='stop', is_continued=False)
    """

    reason: str
    is_continued: bool | UnsetType = field(default=UNSET, name="isContinued")
    warnings: list[Any] | UnsetType = UNSET
    raw_reason: Any = field(default=UNSET, name="rawReason")
    logprobs: Any = UNSET
    retry_reason: str | UnsetType = field(default=UNSET, name="retryReason")
    retry_metadata: Any = field(default=UNSET, name="retryMetadata")
    retry_processor_id: str | UnsetType = field(default=UNSET, name="retryProcessorId")


class StepOutputPayload(PayloadBase, frozen=True):
    """What a step produced: its text, tool calls and usage (``output`` of the step-end payloads).

    Example:
        >>> StepOutputPayload(text="Hi", usage=UsagePayload(total_tokens=3))
        StepOutputPayload(usage=UsagePayload(total_tokens=3), text='Hi')
    """

    usage: UsagePayload
    text: str | UnsetType = UNSET
    tool_calls: list[Any] | UnsetType = field(default=UNSET, name="toolCalls")
    tool_results: list[Any] | UnsetType = field(default=UNSET, name="toolResults")
    steps: list[Any] | UnsetType = UNSET
    object: Any = UNSET


class _StepEndPayload(PayloadBase, frozen=True):
    """Fields shared by ``step-finish`` and ``finish`` payloads."""

    step_result: StepResultPayload = field(name="stepResult")
    output: StepOutputPayload
    message_id: str | UnsetType = field(default=UNSET, name="messageId")
    metadata: Any = UNSET
    messages: Any = UNSET
    processor_retry_count: int | UnsetType = field(default=UNSET, name="processorRetryCount")
    processor_retry_feedback: Any = field(default=UNSET, name="processorRetryFeedback")
    provider_metadata: JSONObject | UnsetType = field(default=UNSET, name="providerMetadata")
    total_usage: UsagePayload | UnsetType = field(default=UNSET, name="totalUsage")
    response: Any = UNSET
    id: str | UnsetType = UNSET

    def has_extra_keys(self) -> bool:
        """Whether this payload, or a payload struct inside it, has ``extra`` keys to write back.

        Spelled out rather than walked generically: ``streamkit.wire`` asks this on every encode
        of a step end, and this is ten times faster. A test checks it covers every nested struct.
        """
        total = self.total_usage
        try:
            return bool(self.extra or self.step_result.extra or self.output.extra
                        or self.output.usage.extra
                        or (isinstance(total, PayloadBase) and total.extra))
        except AttributeError:  # a field holds something else than its declared struct
            return has_extra_keys(self)


class StepFinishPayload(_StepEndPayload, frozen=True):
    """A step ended, after its tools ran (``step-finish``).

    ``metadata`` holds the response metadata (``id``, ``timestamp``, ``modelId``, ``request``...),
    ``messages`` the ``{all, user, nonUser}`` snapshot; both are kept as decoded JSON.

    Example:
        >>> p = StepFinishPayload(step_result=StepResultPayload(reason="stop"),
        ...                       output=StepOutputPayload(usage=UsagePayload(total_tokens=3)))
        >>> p.step_result.reason, p.output.usage.total_tokens
        ('stop', 3)
    """


class FinishPayload(_StepEndPayload, frozen=True):
    """The run (or, from the model, a step) finished (``finish``); same shape as ``step-finish``."""


# --- agent loop ------------------------------------------------------------------------------


class StartPayload(PayloadBase, frozen=True):
    """A run starts (``start``): ``id`` is the agent id."""

    id: str | UnsetType = UNSET
    message_id: str | UnsetType = field(default=UNSET, name="messageId")


class StepStartPayload(PayloadBase, frozen=True):
    """A model step starts (``step-start``); ``started_at`` is epoch milliseconds."""

    request: Any = UNSET
    warnings: list[Any] | UnsetType = UNSET
    message_id: str | UnsetType = field(default=UNSET, name="messageId")
    started_at: int | float | UnsetType = field(default=UNSET, name="startedAt")
    input_messages: Any = field(default=UNSET, name="inputMessages")


class ErrorPayload(PayloadBase, frozen=True):
    """A terminal error (``error``); ``error`` is whatever JSON the producer wrote."""

    error: Any = UNSET


class AbortPayload(PayloadBase, frozen=True):
    """The caller cancelled the run (``abort``); Mastra sends an empty payload."""


class TripwirePayload(PayloadBase, frozen=True):
    """A processor stopped the run (``tripwire``).

    Example:
        >>> TripwirePayload(reason="blocked", retry=False, processor_id="guard")
        TripwirePayload(reason='blocked', retry=False, processor_id='guard')
    """

    reason: str
    retry: bool | UnsetType = UNSET
    metadata: Any = UNSET
    processor_id: str | UnsetType = field(default=UNSET, name="processorId")
