"""``AnthropicModel``: the Anthropic Messages API, streamed over ``httpx``.

What belongs here: translating a ``ModelRequest`` into a Messages API body (system messages
gathered into ``system``, tool results as user ``tool_result`` blocks, thinking blocks sent back
with their signatures) and the Messages API event stream (``message_start``,
``content_block_start``/``delta``/``stop`` for text, ``tool_use`` and ``thinking``,
``message_delta``, ``message_stop``, ``ping``, ``error``) into streamkit chunks for one step.
What does not: HTTP errors, retries and the client (``_http``), router ids (``_router``).

Decisions:

* ``structured_output`` has no native Messages API form, so (as the AI SDK does) the schema
  becomes a tool named ``json`` that the model is told to call; its streamed input is emitted as
  text, which the agent parses as the structured answer.
* Token usage counts every input token: ``input_tokens`` is Anthropic's ``input_tokens`` plus
  cache reads and cache writes (what OpenAI's ``prompt_tokens`` means); cache reads are also in
  ``cached_input_tokens``.
* A thinking block's signature ends its reasoning: ``ReasoningEnd.signature`` and
  ``provider_metadata["anthropic"]["signature"]``. Reasoning in the prompt is sent back as a
  ``thinking`` block only with its signature (the API rejects unsigned thinking); redacted
  thinking travels as ``providerMetadata.anthropic.redactedData``.
* Error bodies (``{"type": "error", "error": {"type": ..., "message": ...}}``) keep their text
  in ``APICallError.body``, so a processor can match it (the prefill handler looks for "does not
  support assistant message prefill").
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx
import msgspec

from .._json import JSONDict
from .._prompt import PromptMessage
from ..chunks import (
    Finish,
    FinishPayload,
    ModelChunk,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StepOutputPayload,
    StepResultPayload,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
    UsagePayload,
)
from ..errors import APICallError, InvalidArgument, MessageError, UsageError
from ..wire import DEFAULT_MAX_EVENT_BYTES
from ._base import ModelRequest
from ._http import (
    DEFAULT_DEADLINE,
    Deadline,
    HTTPModel,
    ResponseMetadataFields,
    decode_json,
    error_from_payload,
    json_text,
    retrying,
    split_media,
    stream_error,
    unwrap_provider_options,
)

__all__ = ["AnthropicModel", "to_anthropic_messages", "build_anthropic_body"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
JSON_TOOL = "json"
_AGENT = "AGENT"

_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                 "model_context_window_exceeded": "length", "tool_use": "tool-calls",
                 "refusal": "content-filter"}
# Error types (https://docs.anthropic.com/en/api/errors) → the HTTP status they are sent with.
_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                 "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                 "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                 "overloaded_error": 529}
_SETTINGS = {"temperature": "temperature", "max_tokens": "max_tokens", "maxTokens": "max_tokens",
             "max_output_tokens": "max_tokens", "maxOutputTokens": "max_tokens",
             "top_p": "top_p", "topP": "top_p", "top_k": "top_k", "topK": "top_k",
             "stop": "stop_sequences", "stop_sequences": "stop_sequences",
             "stopSequences": "stop_sequences"}
# Settings the Messages API does not have: dropped rather than sent (it would answer 400).
_UNSUPPORTED = frozenset(("seed", "frequency_penalty", "frequencyPenalty", "presence_penalty",
                          "presencePenalty", "headers", "max_retries", "maxRetries"))


# --- request -------------------------------------------------------------------------------------


def _media_block(part: dict[str, Any], kind: str, where: str) -> JSONDict:
    data = part.get("image") if kind == "image" else part.get("data")
    form, value, mime = split_media(data, part.get("mimeType"))
    mime = mime or ("image/jpeg" if kind == "image" else None)
    if mime and mime.startswith("image/"):
        source = {"type": "url", "url": value} if form == "url" else \
            {"type": "base64", "media_type": mime, "data": value}
        return {"type": "image", "source": source}
    if mime == "application/pdf":
        source = {"type": "url", "url": value} if form == "url" else \
            {"type": "base64", "media_type": mime, "data": value}
        return {"type": "document", "source": source}
    if mime == "text/plain" and form == "base64":
        text = base64.b64decode(value).decode("utf-8", "replace")
        return {"type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": text}}
    raise MessageError(f"{where}: the Anthropic Messages API cannot take a {kind} part of type "
                       f"{mime!r} given as {form}; it takes images, PDF and text/plain")


def _malformed(data: str, exc: Exception, url: str) -> APICallError:
    """The error for data that is not an event: not JSON, an error document of another shape,
    or JSON of the wrong shape (``exc`` says where)."""
    try:
        obj = decode_json(data)
    except msgspec.DecodeError as err:  # too deep is the same on every retry; a cut is not
        return stream_error("Anthropic", f"an event is not valid JSON ({err}): {data[:200]!r}",
                            url, body=data,
                            is_retryable=not isinstance(err.__cause__, RecursionError))
    if isinstance(obj, dict) and obj.get("type") == "error":
        error = obj.get("error")
        status = _ERROR_STATUS.get(str(error.get("type"))) if isinstance(error, dict) else None
        return error_from_payload("Anthropic", obj, data, url, status_code=status)
    what = "is not an object with a type" if not isinstance(obj, dict) \
        or not isinstance(obj.get("type"), str) \
        else f"does not have the shape of a {obj['type']!r} event ({exc})"
    return stream_error("Anthropic", f"an event {what}: {data[:200]!r}", url, body=data,
                        is_retryable=False)


def _tool_input(args: Any) -> JSONDict:  # a prompt's args: any value, as _json.py says
    # tool_use.input must be an object; raw (malformed) argument text is kept under "input".
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        try:
            parsed = decode_json(args) if args.strip() else {}
        except msgspec.DecodeError:
            return {"input": args}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if args is None else {"input": args}


def _assistant_blocks(content: Any, where: str) -> list[JSONDict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[JSONDict] = []
    for part in content or ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if part.get("text"):
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "reasoning":
            if part.get("signature"):
                blocks.append({"type": "thinking", "thinking": part.get("text", ""),
                               "signature": part["signature"]})
        elif kind == "redacted-reasoning":
            blocks.append({"type": "redacted_thinking", "data": part.get("data")})
        elif kind == "tool-call":
            blocks.append({"type": "tool_use", "id": part["toolCallId"],
                           "name": part["toolName"], "input": _tool_input(part.get("args"))})
        elif kind == "file":
            continue  # the assistant cannot send files back
        else:
            raise MessageError(f"{where}: unknown assistant content part {part!r:.80}")
    return blocks


def to_anthropic_messages(prompt: Sequence[PromptMessage]
                          ) -> tuple[list[JSONDict], list[JSONDict]]:
    """Core-format messages as ``(system blocks, messages)`` for the Messages API.

    Every system message (wherever it stands) goes into ``system``; ``tool`` messages become
    user turns of ``tool_result`` blocks; consecutive turns of one role are merged (the API
    wants them alternating); empty text is left out (the API rejects empty text blocks).

    Raises:
        MessageError: an unknown role or part, or a file type the API cannot take.

    Example:
        >>> system, messages = to_anthropic_messages([
        ...     {"role": "system", "content": "Be brief."},
        ...     {"role": "user", "content": "Weather?"},
        ...     {"role": "assistant", "content": [
        ...         {"type": "tool-call", "toolCallId": "t1", "toolName": "w", "args": {}}]},
        ...     {"role": "tool", "content": [
        ...         {"type": "tool-result", "toolCallId": "t1", "toolName": "w",
        ...          "result": "sun"}]}])
        >>> system
        [{'type': 'text', 'text': 'Be brief.'}]
        >>> [m["role"] for m in messages], messages[2]["content"][0]["type"]
        (['user', 'assistant', 'user'], 'tool_result')
    """
    system: list[JSONDict] = []
    # (role, blocks) per turn: push() extends the last turn's blocks in place, typed; the
    # message dicts are made once at the end (same dicts, same order, per request not chunk).
    turns: list[tuple[str, list[JSONDict]]] = []

    def push(role: str, blocks: list[JSONDict]) -> None:
        if not blocks:
            return
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))

    for i, msg in enumerate(prompt):
        where = f"prompt[{i}]"
        if not isinstance(msg, dict):
            raise MessageError(f"{where}: expected a dict with role and content, got "
                               f"{type(msg).__name__}")
        # Read as untrusted: a hook may hand back any prompt; each value is checked below.
        role: object = msg.get("role")
        content: Any = msg.get("content")
        if role == "system":
            text = content if isinstance(content, str) else \
                "".join(p.get("text", "") for p in content or ())
            if text:
                system.append({"type": "text", "text": text})
        elif role == "user":
            if isinstance(content, str):
                push("user", [{"type": "text", "text": content}] if content else [])
                continue
            blocks = []
            for part in content or ():
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    if part.get("text"):
                        blocks.append({"type": "text", "text": part["text"]})
                elif kind in ("image", "file"):
                    blocks.append(_media_block(part, kind, where))
                else:
                    raise MessageError(f"{where}: unknown user content part {part!r:.80}")
            push("user", blocks)
        elif role == "assistant":
            push("assistant", _assistant_blocks(content, where))
        elif role == "tool":
            results = []
            for part in content or ():
                block = {"type": "tool_result", "tool_use_id": part["toolCallId"],
                         "content": json_text(part.get("result"))}
                if part.get("isError"):
                    block["is_error"] = True
                results.append(block)
            push("user", results)
        else:
            raise MessageError(f"{where}: unknown role {role!r}; expected system, user, "
                               f"assistant or tool")
    return system, [{"role": role, "content": blocks} for role, blocks in turns]


def _tool_choice(choice: object) -> JSONDict:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("toolName"):
        return {"type": "tool", "name": choice["toolName"]}
    raise InvalidArgument(f"tool_choice must be 'auto', 'none', 'required' or "
                          f"{{'type': 'tool', 'toolName': name}}, got {choice!r}")


def build_anthropic_body(model_id: str, request: ModelRequest) -> JSONDict:
    """The Messages API request body for ``request`` (always streamed).

    ``max_tokens`` (required by the API) defaults to 4096, plus the thinking budget when
    ``provider_options`` enables thinking without a ``max_tokens`` setting. ``seed`` and the
    penalties do not exist in this API and are dropped.

    Example:
        >>> req = ModelRequest(prompt=[{"role": "system", "content": "Be brief."},
        ...                            {"role": "user", "content": "hi"}],
        ...                    model_settings={"temperature": 0, "stopSequences": ["END"]})
        >>> build_anthropic_body("claude-sonnet-4-5", req)
        {'model': 'claude-sonnet-4-5', 'max_tokens': 4096, 'messages': [{'role': 'user', \
'content': [{'type': 'text', 'text': 'hi'}]}], 'stream': True, 'system': [{'type': 'text', \
'text': 'Be brief.'}], 'temperature': 0, 'stop_sequences': ['END']}
    """
    system, messages = to_anthropic_messages(request.prompt)
    body: JSONDict = {"model": model_id, "max_tokens": DEFAULT_MAX_TOKENS,
                            "messages": messages, "stream": True}
    if system:
        body["system"] = system
    choice = None if request.tool_choice is None else _tool_choice(request.tool_choice)
    # ``tool_choice="none"`` sends no tools (as Mastra strips them). Decision: structured output
    # still gets its answer tool, forced as when no tools are given: "none" is about the
    # caller's tools, and the answer tool is how the schema reaches this API.
    user_tools = [] if request.tool_choice == "none" else request.tools
    if user_tools is not request.tools:
        choice = None
    tools: list[JSONDict] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in user_tools]
    options = unwrap_provider_options(request.provider_options, ("anthropic",))
    thinking = options.get("thinking")
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    is_thinking = isinstance(thinking, dict) and thinking.get("type") == "enabled"
    if request.structured_output is not None:
        if any(t["name"] == JSON_TOOL for t in tools):
            raise InvalidArgument(f"structured output on Anthropic uses a tool named "
                                  f"{JSON_TOOL!r}; rename your tool of that name")
        tools.append({"name": JSON_TOOL, "input_schema": request.structured_output,
                      "description": "Respond with a JSON object matching this schema. Call "
                                     "this tool to give your final answer."})
        if not user_tools and not is_thinking:  # thinking forbids forcing a tool
            choice = {"type": "tool", "name": JSON_TOOL}
    if tools:
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
    has_max = False
    for key, value in request.model_settings.items():
        if key in _UNSUPPORTED or value is None:
            continue
        name = _SETTINGS.get(key, key)
        has_max = has_max or name == "max_tokens"
        body[name] = [value] if name == "stop_sequences" and isinstance(value, str) else value
    if is_thinking and not has_max and isinstance(budget, int):
        body["max_tokens"] = DEFAULT_MAX_TOKENS + budget
    body.update(options)
    return body


# --- response ------------------------------------------------------------------------------------


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _Message(msgspec.Struct):
    id: object = None  # metadata: used when it is a string
    model: object = None
    usage: _Usage | None = None


class _ContentBlock(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str | None = None
    input: object = None
    data: object = None  # redacted thinking, passed on as it came


class _Delta(msgspec.Struct):
    """A ``content_block_delta``'s delta, or a ``message_delta``'s (``stop_reason``)."""

    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    signature: str | None = None
    stop_reason: str | None = None


class _Event(msgspec.Struct):
    """The fields of a Messages API stream event the translator reads; a value of another type
    fails the decode, so an event of the wrong shape is an ``APICallError``, never an
    ``AttributeError`` further on. Unknown keys (and event types) are ignored."""

    type: str
    index: int | None = None
    message: _Message | None = None
    content_block: _ContentBlock | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None
    error: object = None


_decode_event = msgspec.json.Decoder(_Event).decode
_NO_BLOCK = _ContentBlock()
_NO_DELTA = _Delta()


def _counts(usage: _Usage | None) -> dict[str, int]:
    if usage is None:
        return {}
    return {k: v for k, v in msgspec.structs.asdict(usage).items() if v is not None}


class _Block:
    __slots__ = ("kind", "id", "name", "args", "signature")

    def __init__(self, kind: str, block_id: str, name: str = "") -> None:
        self.kind, self.id, self.name = kind, block_id, name
        self.args: list[str] = []
        self.signature: str | None = None


class _MessagesTranslator:
    """Messages API stream events (JSON text) → streamkit chunks, for one step."""

    def __init__(self, run_id: str, url: str, *, is_structured: bool) -> None:
        self.run_id, self.url, self.is_structured = run_id, url, is_structured
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.has_tool_calls = False
        self.is_done = False
        self.metadata: ResponseMetadata | None = None

    def feed(self, data: str) -> list[ModelChunk]:
        """The chunks one event's data makes.

        Raises:
            APICallError: the data is not JSON, not an event of the expected shape, or an
                ``error`` event.
        """
        try:
            event = _decode_event(data)
        except msgspec.DecodeError as exc:
            raise _malformed(data, exc, self.url) from exc
        except RecursionError as exc:  # past msgspec's depth limit: the same on every retry
            raise stream_error("Anthropic", f"an event is nested too deeply to decode: "
                               f"{data[:200]!r}", self.url, is_retryable=False) from exc
        kind = event.type
        out: list[ModelChunk] = []
        if kind == "content_block_delta":
            block = self.blocks.get(event.index) if event.index is not None else None
            if block is not None:  # deltas of skipped blocks (server tools) are skipped too
                self._delta(block, event.delta or _NO_DELTA, out)
        elif kind == "content_block_start":
            self._start(event.index, event.content_block or _NO_BLOCK, out)
        elif kind == "content_block_stop":
            block = self.blocks.pop(event.index, None) if event.index is not None else None
            if block is not None:
                self._stop(block, out)
        elif kind == "message_start":
            message = event.message or _Message()
            self.usage.update(_counts(message.usage))
            fields: ResponseMetadataFields = {}
            if isinstance(message.id, str):
                fields["id"] = message.id
            if isinstance(message.model, str):
                fields["model_id"] = message.model
            # held back like OpenAIChatModel's, so an error right after message_start retries
            self.metadata = ResponseMetadata(run_id=self.run_id, from_=_AGENT, **fields)
        elif kind == "message_delta":
            self.stop_reason = (event.delta or _NO_DELTA).stop_reason or self.stop_reason
            self.usage.update(_counts(event.usage))
        elif kind == "message_stop":
            self.is_done = True
        elif kind == "error":
            error = event.error
            status = _ERROR_STATUS.get(str(error.get("type"))) if isinstance(error, dict) \
                else None
            raise error_from_payload("Anthropic", {"type": "error", "error": error}, data,
                                     self.url, status_code=status)
        if out and self.metadata is not None:
            out.insert(0, self.metadata)
            self.metadata = None
        return out  # ping, and event types added to the API later, are ignored

    def _start(self, index: int | None, block: _ContentBlock, out: list[ModelChunk]) -> None:
        run_id, kind = self.run_id, block.type
        if index is None:
            if kind in ("text", "thinking", "tool_use"):
                raise stream_error("Anthropic", f"a {kind} content_block_start has no index",
                                   self.url, is_retryable=False)
            return
        if kind == "text" or (kind == "tool_use" and self.is_structured
                              and block.name == JSON_TOOL):
            self.blocks[index] = state = _Block("text", f"text-{uuid.uuid4().hex[:12]}")
            out.append(TextStart(id=state.id, run_id=run_id, from_=_AGENT))
            if kind == "text" and block.text:
                out.append(TextDelta(id=state.id, text=block.text, run_id=run_id,
                                     from_=_AGENT))
        elif kind == "thinking":
            self.blocks[index] = state = _Block("thinking", f"reasoning-{uuid.uuid4().hex[:12]}")
            out.append(ReasoningStart(id=state.id, run_id=run_id, from_=_AGENT))
            if block.thinking:
                out.append(ReasoningDelta(id=state.id, text=block.thinking, run_id=run_id,
                                          from_=_AGENT))
        elif kind == "redacted_thinking":
            rid = f"reasoning-{uuid.uuid4().hex[:12]}"
            meta = {"anthropic": {"redactedData": block.data}}
            out.append(ReasoningStart(id=rid, provider_metadata=meta, run_id=run_id,
                                      from_=_AGENT))
            out.append(ReasoningEnd(id=rid, provider_metadata=meta, run_id=run_id,
                                    from_=_AGENT))
        elif kind == "tool_use":
            self.has_tool_calls = True
            self.blocks[index] = state = _Block("tool", block.id or
                                                f"toolu-{uuid.uuid4().hex[:12]}",
                                                block.name or "")
            out.append(ToolCallInputStreamingStart(tool_call_id=state.id, tool_name=state.name,
                                                   run_id=run_id, from_=_AGENT))
            if block.input:  # a non-streamed input (some proxies send it whole)
                state.args.append(json_text(block.input))
                out.append(ToolCallDelta(tool_call_id=state.id, tool_name=state.name,
                                         args_text_delta=state.args[-1], run_id=run_id,
                                         from_=_AGENT))
        # server tool blocks (web search...) are provider-executed and not modelled: skipped

    def _delta(self, block: _Block, delta: _Delta, out: list[ModelChunk]) -> None:
        run_id, kind = self.run_id, delta.type
        if kind == "text_delta" or (kind == "input_json_delta" and block.kind == "text"):
            text = delta.text if kind == "text_delta" else delta.partial_json
            if text:
                out.append(TextDelta(id=block.id, text=text, run_id=run_id, from_=_AGENT))
        elif kind == "input_json_delta":
            text = delta.partial_json
            if text:
                block.args.append(text)
                out.append(ToolCallDelta(tool_call_id=block.id, tool_name=block.name,
                                         args_text_delta=text, run_id=run_id, from_=_AGENT))
        elif kind == "thinking_delta":
            if delta.thinking:
                out.append(ReasoningDelta(id=block.id, text=delta.thinking, run_id=run_id,
                                          from_=_AGENT))
        elif kind == "signature_delta":
            block.signature = (block.signature or "") + (delta.signature or "")

    def _stop(self, block: _Block, out: list[ModelChunk]) -> None:
        run_id = self.run_id
        if block.kind == "text":
            out.append(TextEnd(id=block.id, type="text-end", run_id=run_id, from_=_AGENT))
        elif block.kind == "thinking":
            if block.signature:
                out.append(ReasoningEnd(id=block.id, run_id=run_id, from_=_AGENT,
                                        signature=block.signature, provider_metadata={
                                            "anthropic": {"signature": block.signature}}))
            else:
                out.append(ReasoningEnd(id=block.id, run_id=run_id, from_=_AGENT))
        else:
            text = "".join(block.args)
            try:
                args: object = decode_json(text) if text.strip() else {}
            except msgspec.DecodeError:
                args = text  # passed on raw, like OpenAIChatModel (the tool reports it)
            out.append(ToolCallInputStreamingEnd(tool_call_id=block.id, run_id=run_id,
                                                 from_=_AGENT))
            out.append(ToolCall(tool_call_id=block.id, tool_name=block.name, args=args,
                                run_id=run_id, from_=_AGENT))

    def finish(self) -> list[ModelChunk]:
        u = self.usage
        cache_read = u.get("cache_read_input_tokens") or 0
        inp = u.get("input_tokens")
        if inp is not None:
            inp += cache_read + (u.get("cache_creation_input_tokens") or 0)
        out = u.get("output_tokens")
        usage = UsagePayload(input_tokens=inp, output_tokens=out,
                             total_tokens=inp + out if inp is not None and out is not None
                             else None)
        if cache_read:  # payloads are frozen: a copy with the field set
            usage = msgspec.structs.replace(usage, cached_input_tokens=cache_read)
        reason = _STOP_REASONS.get(self.stop_reason or "", "other")
        if reason == "tool-calls" and not self.has_tool_calls:
            reason = "stop"  # only the structured-output tool was called: that is the answer
        result = StepResultPayload(reason=reason)
        if self.stop_reason is not None:
            result = msgspec.structs.replace(result, raw_reason=self.stop_reason)
        finish = Finish(payload=FinishPayload(step_result=result,
                                              output=StepOutputPayload(usage=usage)),
                        run_id=self.run_id, from_=_AGENT)
        return [finish] if self.metadata is None else [self.metadata, finish]


# --- the model -----------------------------------------------------------------------------------


class AnthropicModel(HTTPModel):
    """Anthropic's Messages API (streaming) as a streamkit model.

    Args:
        model_id: the Anthropic model name (``"claude-sonnet-4-5"``).
        api_key: sent as ``x-api-key``; ``None`` reads ``ANTHROPIC_API_KEY`` at first use.
            Required (a ``UsageError`` naming the variable) for ``api.anthropic.com``.
        base_url: the API root, without ``/v1`` (``ANTHROPIC_BASE_URL``'s convention; a
            trailing ``/v1`` is accepted too).
        anthropic_version: the ``anthropic-version`` header.
        client: as for ``OpenAIChatModel``.
        timeout: as for ``OpenAIChatModel``.
        max_retries: as for ``OpenAIChatModel``.
        backoff: as for ``OpenAIChatModel``.
        max_backoff: as for ``OpenAIChatModel``.
        headers: as for ``OpenAIChatModel``.
        sleep: as for ``OpenAIChatModel``.
        deadline: as for ``OpenAIChatModel``.
        max_event_bytes: as for ``OpenAIChatModel``.

    Extended thinking is a provider option:
    ``provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2048}}}``.

    Example::

        async with AnthropicModel("claude-sonnet-4-5") as model:
            agent = Agent(id="a", instructions="Be brief.", model=model)
            print((await agent.generate("Hi")).text)
    """

    provider = "anthropic"
    label = "Anthropic"

    def __init__(self, model_id: str, *, api_key: str | None = None,
                 base_url: str = ANTHROPIC_BASE_URL, client: httpx.AsyncClient | None = None,
                 timeout: float | httpx.Timeout | None = None, max_retries: int = 2,
                 backoff: float = 0.5, max_backoff: float = 8.0,
                 headers: Mapping[str, str] | None = None,
                 sleep: Callable[[float], Awaitable[object]] | None = None,
                 anthropic_version: str = ANTHROPIC_VERSION,
                 deadline: float | None = DEFAULT_DEADLINE,
                 max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(model_id, base_url=base_url, api_key=api_key, client=client,
                         timeout=timeout, max_retries=max_retries, backoff=backoff,
                         max_backoff=max_backoff, headers=headers, sleep=sleep,
                         deadline=deadline, max_event_bytes=max_event_bytes)
        self._session.key_env = "ANTHROPIC_API_KEY"
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.anthropic_version = anthropic_version

    def _request_headers(self, settings: Mapping[str, object]) -> dict[str, str]:
        key = self.api_key if self.api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        if not key and self.base_url == ANTHROPIC_BASE_URL:
            raise UsageError(
                f"no Anthropic API key for model {self.model_id!r}: set the ANTHROPIC_API_KEY "
                f"environment variable or pass api_key=", env_var="ANTHROPIC_API_KEY")
        headers = {"content-type": "application/json", "accept": "text/event-stream",
                   "anthropic-version": self.anthropic_version}
        if key:
            headers["x-api-key"] = key
        headers.update(self._extra_headers(settings))
        return headers

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream one step for ``request`` (see ``streamkit.models._base``).

        Raises:
            UsageError: no API key for api.anthropic.com, or an invalid ``tool_choice``
                (at once, before any network call).
            MessageError: a prompt the Messages API cannot express (at once).
            APICallError: while iterating, for every HTTP, network or stream failure.
        """
        headers = self._request_headers(request.model_settings)
        body = build_anthropic_body(self.model_id, request)
        url = f"{self.base_url}/v1/messages"
        is_structured = request.structured_output is not None
        run_id = request.run_id
        return retrying(self._policy_for(request.model_settings),
                        lambda deadline: self._step(url, body, headers, run_id, is_structured,
                                                    deadline))

    async def _step(self, url: str, body: Mapping[str, object], headers: dict[str, str],
                    run_id: str,
                    is_structured: bool, deadline: Deadline | None
                    ) -> AsyncGenerator[ModelChunk, None]:
        state = _MessagesTranslator(run_id, url, is_structured=is_structured)
        async for event in self._session.sse(url, body, headers, deadline=deadline,
                                             max_event_bytes=self.max_event_bytes):
            data = event.data
            if state.is_done or not data.strip():
                continue
            for chunk in state.feed(data):
                yield chunk
        if not state.is_done:
            raise stream_error("Anthropic", "the stream ended before message_stop", url)
        for chunk in state.finish():
            yield chunk
