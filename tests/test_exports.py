"""The public surface, written out: each public module's ``__all__`` is exactly the set below.

A name added to or removed from some ``__all__`` must be added or removed here too, so a change to
what users can import shows up as a visible diff in review (httpx ``tests/test_exports.py``).
Engine internals and private helpers stay out of ``__all__``; they are imported by their module
path where needed (``from streamkit.memory._memory import storable_messages``).
"""

from __future__ import annotations

import importlib

import pytest

INTENDED: dict[str, set[str]] = {
    "streamkit": {
        # processors
        "Processor", "Pipeline", "InputProcessor", "OutputProcessor", "ErrorProcessor",
        "StepOverrides", "MessagesUpdate", "LLMRequestUpdate", "APIErrorResult", "TripWire",
        "Violation", "TraceRecord", "Writer", "Abort",
        # agent
        "Agent", "AgentResult", "AgentStream", "StepResult", "TripwireInfo", "Usage", "Override",
        "Graph", "StepToolCall", "StepToolResult", "ToolOutcome",
        # tools, memory
        "tool", "Tool", "Memory", "SQLiteStore",
        # data
        "Chunk", "DataChunk", "Message", "MessageList", "get_text",
        # errors
        "StreamkitError", "ProcessorDefinitionError", "ProcessorError", "ChunkDecodeError",
        "APICallError", "ToolError", "MaxStepsExceeded", "ScriptExhausted", "MemoryStoreError",
        # modules
        "chunks", "wire", "messages", "ops", "errors", "tokens",
    },
    "streamkit.chunks": {
        # base classes and helpers
        "ChunkBase", "PayloadBase", "Chunk", "ModelChunk", "CHUNK_TYPES", "coerce_chunk", "Stamper",
        # model output
        "ResponseMetadata", "TextStart", "TextDelta", "TextEnd", "ReasoningStart",
        "ReasoningDelta", "ReasoningEnd", "ReasoningSignature", "RedactedReasoning",
        "ReasoningFile", "Source", "File", "Custom", "ToolCallInputStreamingStart",
        "ToolCallDelta", "ToolCallInputStreamingEnd", "ToolCall", "Raw",
        # agent loop
        "Start", "StepStart", "StepFinish", "Finish", "ToolResult", "ToolErrorChunk",
        "ToolOutputDenied", "ToolCallApproval", "ToolCallSuspended", "ToolOutput", "ErrorChunk",
        "AbortChunk", "TripwireChunk", "ObjectChunk", "ObjectResult", "DataChunk",
        # payloads
        "StartPayload", "StepStartPayload", "TextStartPayload", "TextDeltaPayload",
        "TextEndPayload", "ReasoningStartPayload", "ReasoningDeltaPayload", "ReasoningEndPayload",
        "ReasoningSignaturePayload", "RedactedReasoningPayload", "ReasoningFilePayload",
        "SourcePayload", "FilePayload", "CustomPayload", "ToolCallInputStreamingStartPayload",
        "ToolCallDeltaPayload", "ToolCallInputStreamingEndPayload", "ToolCallPayload",
        "ToolResultPayload", "ToolErrorPayload", "ToolOutputDeniedPayload",
        "ToolCallApprovalPayload", "ToolCallSuspendedPayload", "ToolOutputPayload",
        "StepFinishPayload", "FinishPayload", "StepResultPayload", "StepOutputPayload",
        "UsagePayload", "ErrorPayload", "AbortPayload", "TripwirePayload",
        "ResponseMetadataPayload",
    },
    "streamkit.wire": {
        "encode", "decode", "encode_sse", "iter_sse", "SSEParser", "SSEEvent", "encode_jsonl",
        "decode_jsonl", "iter_jsonl", "encode_msgpack", "decode_msgpack", "to_builtins",
        "from_builtins",
    },
    "streamkit.messages": {
        # the model
        "Role", "ToolState", "Message", "MessageContent", "Part", "TextPart", "ReasoningPart",
        "ReasoningText", "RedactedReasoning", "ToolInvocationPart", "ToolInvocation",
        "ToolApproval", "FilePart", "ImagePart", "SourcePart", "SourceInfo", "SourceDocumentPart",
        "StepStartPart", "ErrorPart", "DataPart",
        # JSON
        "MessageEncoder", "message_encoder", "decode_message", "decode_messages",
        "message_to_dict", "message_from_dict", "format_timestamp",
        # loose input, text, formats
        "to_part", "to_message", "to_messages", "get_text", "to_core", "to_ui",
        "PromptMessage", "SystemPromptMessage", "UserPromptMessage", "AssistantPromptMessage",
        "ToolPromptMessage", "TextContent", "FileContent", "ImageContent", "ReasoningContent",
        "RedactedReasoningContent", "ToolCallContent", "ToolResultContent", "UserContent",
        "AssistantContent", "prompt_text",
        # the list
        "MessageList", "MessageView", "MessageListCheckpoint", "SystemSnapshot", "Source",
    },
    "streamkit.ops": {
        "map", "filter", "drop", "abort", "tap", "scan", "batch", "take", "skip", "take_while",
        "distinct_until_changed", "start_with", "flat_map", "map_text", "with_text", "apply",
        "AppliedStream", "fused_source", "to_observable", "from_observable", "merge",
    },
    "streamkit.tools": {"Tool", "tool", "json_schema"},
    "streamkit.tokens": {
        "TokenCounter", "BillingRules", "get_counter", "encoding_for_model",
        "available_encodings", "count_text", "count_messages", "count_tools", "count_request",
        "DEFAULT_ENCODING",
    },
    "streamkit.memory": {"Memory", "SQLiteStore", "PostgresStore", "MessageStore", "Thread"},
    "streamkit.serve": {"create_app", "serve", "load_target", "UIMessageStream", "Limits",
                        "uvicorn_config"},
    "streamkit.models": {
        "Model", "ModelRequest", "ToolSpec", "ScriptedModel", "FunctionModel", "text",
        "tool_call", "reasoning", "api_error", "resolve_model", "complete", "OpenAIChatModel",
        "AnthropicModel",
    },
    "streamkit.testing": {
        "ScriptedModel", "FunctionModel", "RecordedRequest", "text", "tool_call", "reasoning",
        "api_error", "ScriptExhausted",
    },
    "streamkit.display": {
        "graph_html", "graph_svg", "show_processors",
        "ChunkTable", "show_chunks", "collect", "chunks_html",
        "TraceView", "show_trace", "trace_html", "trace_text", "trace_timeline_svg",
        "steps_html", "result_html", "result_text",
        "live", "DisplayHandle",
        "bar_chart", "bar_chart_svg", "HtmlBlock",
    },
    "streamkit.replay": {
        "replay", "ReplayReport", "ProcessorReport", "MemorySource", "RecordedStream",
        "read_streams", "load_pipeline",
    },
    "streamkit.graph": {"Node", "Edge", "Graph", "START", "END"},
    "streamkit.errors": {
        "StreamkitError", "ProcessorDefinitionError", "ProcessorError", "ChunkDecodeError",
        "MessageError", "APICallError", "ToolError", "MaxStepsExceeded", "ScriptExhausted",
        "GraphError", "MemoryStoreError", "UsageError", "InvalidArgument", "InvalidType",
    },
    "streamkit.tripwire": {"Abort", "TripWire", "Violation"},
    "streamkit.tracing": {"instrument", "uninstrument"},
    "streamkit.events": {
        "RunEvent", "RunObserver", "RunStarted", "Transition", "StepStarted", "StepFinished",
        "HookCalled", "ToolCalled", "ToolReturned", "ModelProduced", "ProcessorAction", "ChunkOut",
        "RunFinished", "TripwireDetail", "Action", "EVENT_TYPES", "decode_event", "EventLog",
        "ModelStarted", "ModelFinished", "ErrorDetail", "LoopNode",
    },
    "streamkit_operators": {
        # prompt hygiene, budgets, caching, structuring, provider quirks
        "UnicodeNormalizer", "SystemPromptScrubber", "TokenLimiter", "BatchParts",
        "StructuredOutput", "ToolCallFilter", "CostGuard", "Price", "InMemoryUsageStore",
        "SQLiteUsageStore", "ResponseCache", "InMemoryCache", "SQLiteCache",
        "PrefillErrorHandler", "is_prefill_error", "RedisCache", "RedisUsageStore",
        # guards and the pieces to build your own
        "PIIDetector", "PII_TYPES", "mask_value", "RegexFilter", "PRESETS", "Rule", "Detection",
        "find_all", "HoldbackScanner", "HoldbackGuard", "RedactingGuard", "PlaceholderVault",
        "RestorePlaceholders", "ModerationProcessor", "MODERATION_CATEGORIES",
        "PromptInjectionDetector", "InjectionEvent", "INJECTION_TYPES", "LanguageDetector",
        "LANGUAGES", "Buffering", "StreamGuard", "WindowGuard", "latency_report",
        "format_report",
    },
    "streamkit.agent": {
        "Agent", "AgentResult", "AgentStream", "Override", "StepResult", "TripwireInfo", "Usage",
        "StepToolCall", "StepToolResult", "ToolOutcome", "CallOptions",
    },
    "streamkit.validate": {
        "is_int", "is_number", "int_at_least", "optional_int_at_least", "seconds",
        "optional_seconds", "one_of", "instance_of", "non_empty_str",
    },
    "streamkit.processors": {
        "Processor", "Pipeline", "InputProcessor", "OutputProcessor", "ErrorProcessor",
        "TripWire", "Violation", "StepOverrides", "MessagesUpdate", "LLMRequestUpdate",
        "APIErrorResult", "TraceRecord", "Writer", "Abort", "is_async_callable",
    },
}

@pytest.mark.parametrize("module", list(INTENDED))
def test_all_is_the_intended_public_surface(module: str) -> None:
    exported = importlib.import_module(module).__all__
    assert set(exported) == INTENDED[module]


@pytest.mark.parametrize("module", list(INTENDED))
def test_all_names_exist_once_and_are_public(module: str) -> None:
    mod = importlib.import_module(module)
    names = mod.__all__
    assert len(names) == len(set(names)), f"duplicate names in {module}.__all__"
    missing = [name for name in names if not hasattr(mod, name)]
    assert missing == [], f"{module}.__all__ names what does not exist: {missing}"
    private = [name for name in names if name.startswith("_")]
    assert private == [], f"{module}.__all__ exports private names: {private}"
