"""``OpenAIChatModel``: OpenAI Chat Completions (and every compatible server) over ``httpx``.

What belongs here: translating a ``ModelRequest`` (core prompt, tools, settings) into a Chat
Completions request body, and a Chat Completions response — streamed server-sent events or one
JSON document — into streamkit chunks for one step. What does not: HTTP errors, retries and the
client (``_http``), other providers (``_anthropic``), router ids (``_router``).

Compatible servers (vLLM, Ollama, LM Studio, the LiteLLM proxy) differ in small ways that are all
accepted here: keys left out instead of ``null``, a usage chunk whose ``choices`` is not empty,
tool-call deltas that repeat ``type``/``content``, an error sent as ``data: {"error": ...}``
under HTTP 200, ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (Ollama, OpenRouter)
deltas.

Tool-call arguments that are not valid JSON are passed on as the raw string (``ToolCall.args``
is then a ``str``), not raised: the agent's argument validation turns that into a tool error the
model sees and can correct on its next step, which a failed API call would not allow.
"""

from __future__ import annotations

import builtins
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

from .._json import JSONDict, JSONValue
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
from ..validate import is_int
from ..wire import DEFAULT_MAX_EVENT_BYTES
from ._base import ModelRequest, ToolChoice
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

__all__ = ["OpenAIChatModel", "to_openai_messages", "build_openai_body"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_AGENT = "AGENT"

_FINISH_REASONS = {"stop": "stop", "length": "length", "tool_calls": "tool-calls",
                   "function_call": "tool-calls", "content_filter": "content-filter"}

# model_settings names (streamkit/Mastra spellings) → Chat Completions body keys. Keys not listed
# are sent unchanged, so a server-specific setting (``top_k`` on vLLM) still reaches the server.
_SETTINGS = {"temperature": "temperature", "max_tokens": "max_tokens", "maxTokens": "max_tokens",
             "max_output_tokens": "max_tokens", "maxOutputTokens": "max_tokens",
             "top_p": "top_p", "topP": "top_p", "stop": "stop", "stop_sequences": "stop",
             "stopSequences": "stop", "seed": "seed", "frequency_penalty": "frequency_penalty",
             "frequencyPenalty": "frequency_penalty", "presence_penalty": "presence_penalty",
             "presencePenalty": "presence_penalty"}
# model_settings that shape the call rather than the body.
_CALL_SETTINGS = frozenset(("headers", "max_retries", "maxRetries"))

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3",
                  "audio/mp3": "mp3"}


# --- request -------------------------------------------------------------------------------------


# dict[str, Any]: a text part's text is joined as it came (a non-str fails the join, as before).
def _user_part(part: object, where: str) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise MessageError(f"{where}: unknown user content part {part!r:.80}; expected a dict "
                           f"with type 'text', 'image' or 'file'")
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind in ("image", "file"):
        data = part.get("image") if kind == "image" else part.get("data")
        form, value, mime = split_media(data, part.get("mimeType"))
        mime = mime or ("image/jpeg" if kind == "image" else None)
        if mime and mime.startswith("image/"):
            url = value if form == "url" else f"data:{mime};base64,{value}"
            return {"type": "image_url", "image_url": {"url": url}}
        if mime in _AUDIO_FORMATS and form == "base64":
            return {"type": "input_audio",
                    "input_audio": {"data": value, "format": _AUDIO_FORMATS[mime]}}
        if mime == "application/pdf" and form == "base64":
            return {"type": "file", "file": {"filename": part.get("filename") or "document.pdf",
                                             "file_data": f"data:{mime};base64,{value}"}}
        raise MessageError(f"{where}: OpenAI Chat Completions cannot take a {kind} part of type "
                           f"{mime!r} given as {form}; it takes images, wav/mp3 audio and PDF "
                           f"(as base64)")
    raise MessageError(f"{where}: unknown user content part {part!r:.80}; expected a dict with "
                       f"type 'text', 'image' or 'file'")


def _assistant(content: Any, where: str) -> JSONDict:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[JSONDict] = []
    for part in content or ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(part.get("text", ""))
        elif kind == "tool-call":
            args = part.get("args")
            calls.append({"id": part["toolCallId"], "type": "function",
                          "function": {"name": part["toolName"],
                                       "arguments": args if isinstance(args, str)
                                       else json_text({} if args is None else args)}})
        elif kind in ("reasoning", "redacted-reasoning", "file"):
            continue  # Chat Completions takes no reasoning or files back from the assistant
        else:
            raise MessageError(f"{where}: unknown assistant content part {part!r:.80}")
    message: JSONDict = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def to_openai_messages(prompt: Sequence[PromptMessage]) -> list[JSONDict]:
    """Core-format messages (``docs/DESIGN.md``) as Chat Completions ``messages``.

    System and user messages map one to one (a text-only part list becomes a string, images
    become ``image_url`` parts); an assistant message becomes ``content`` plus ``tool_calls``
    (reasoning is not sent back); each ``tool-result`` part becomes its own ``tool`` message.

    Raises:
        MessageError: an unknown role or part, or a file type Chat Completions cannot take.

    Example:
        >>> to_openai_messages([
        ...     {"role": "assistant", "content": [
        ...         {"type": "tool-call", "toolCallId": "c1", "toolName": "t", "args": {"a": 1}}]},
        ...     {"role": "tool", "content": [
        ...         {"type": "tool-result", "toolCallId": "c1", "toolName": "t", "result": 42}]}])
        [{'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c1', 'type': 'function', \
'function': {'name': 't', 'arguments': '{"a":1}'}}]}, {'role': 'tool', 'tool_call_id': 'c1', \
'content': '42'}]
    """
    out: list[JSONDict] = []
    for i, msg in enumerate(prompt):
        where = f"prompt[{i}]"
        if not isinstance(msg, dict):
            raise MessageError(f"{where}: expected a dict with role and content, got "
                               f"{type(msg).__name__}")
        # Read as untrusted: a hook may hand back any prompt; each value is checked below.
        role: object = msg.get("role")
        content: Any = msg.get("content")
        if role == "system":
            out.append({"role": "system", "content": content if isinstance(content, str) else
                        "".join(p.get("text", "") for p in content or ())})
        elif role == "user":
            if isinstance(content, str):
                out.append({"role": "user", "content": content})
            else:
                parts = [_user_part(p, where) for p in content or ()]
                if all(p["type"] == "text" for p in parts):
                    out.append({"role": "user", "content": "".join(p["text"] for p in parts)})
                else:
                    out.append({"role": "user", "content": parts})
        elif role == "assistant":
            out.append(_assistant(content, where))
        elif role == "tool":
            for part in content or ():
                out.append({"role": "tool", "tool_call_id": part["toolCallId"],
                            "content": json_text(part.get("result"))})
        else:
            raise MessageError(f"{where}: unknown role {role!r}; expected system, user, "
                               f"assistant or tool")
    return out


def _tool_choice(choice: ToolChoice) -> JSONValue:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("toolName"):
        return {"type": "function", "function": {"name": choice["toolName"]}}
    raise InvalidArgument(f"tool_choice must be 'auto', 'none', 'required' or "
                          f"{{'type': 'tool', 'toolName': name}}, got {choice!r}")


def build_openai_body(model_id: str, request: ModelRequest, *, stream: bool,
                      namespaces: tuple[str, ...] = ("openai",)) -> JSONDict:
    """The Chat Completions request body for ``request``.

    ``model_settings`` are renamed where spellings differ (``maxTokens``/``max_output_tokens``
    → ``max_tokens``, ``stopSequences`` → ``stop``...) and otherwise sent unchanged;
    ``provider_options`` go last, so they can override anything.

    Example:
        >>> req = ModelRequest(prompt=[{"role": "user", "content": "hi"}],
        ...                    model_settings={"temperature": 0, "maxTokens": 5})
        >>> build_openai_body("gpt-4o-mini", req, stream=True)
        {'model': 'gpt-4o-mini', 'messages': [{'role': 'user', 'content': 'hi'}], 'stream': True, \
'stream_options': {'include_usage': True}, 'temperature': 0, 'max_tokens': 5}
    """
    body: JSONDict = {"model": model_id, "messages": to_openai_messages(request.prompt)}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if request.tool_choice == "none":
        pass  # no tools at all: some servers reject tools with "none" (Mastra strips them too)
    elif request.tools:
        body["tools"] = [{"type": "function",
                          "function": {"name": t.name, "description": t.description,
                                       "parameters": t.parameters}} for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    elif request.tool_choice is not None:
        _tool_choice(request.tool_choice)  # still validated; without tools there is no choice
    for key, value in request.model_settings.items():
        if key not in _CALL_SETTINGS and value is not None:
            body[_SETTINGS.get(key, key)] = value
    if request.structured_output is not None:
        schema = request.structured_output
        name = schema.get("title") if isinstance(schema.get("title"), str) else "response"
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": name, "schema": schema}}
    body.update(unwrap_provider_options(request.provider_options, namespaces))
    return body


# --- response ------------------------------------------------------------------------------------


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: object = None  # a string; some servers send the arguments as an object


class _CallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Part(msgspec.Struct):
    type: str | None = None
    text: str | None = None


class _Delta(msgspec.Struct):
    """A streamed ``delta`` or a whole ``message`` (the same fields)."""

    content: str | list[_Part] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_CallDelta] | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    message: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct):
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    completion_tokens_details: _Details | None = None
    prompt_tokens_details: _Details | None = None


class _Frame(msgspec.Struct):
    """The fields of a Chat Completions chunk (or response) the translator reads; a value of
    another type fails the decode, so a frame of the wrong shape is an ``APICallError``, never
    an ``AttributeError`` further on. Unknown keys are ignored."""

    # builtins.object: in this class body ``object`` names the field below.
    id: builtins.object = None  # metadata: used when it is a string
    model: builtins.object = None
    created: int | float | None = None
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: builtins.object = None
    object: builtins.object = None


_decode_frame = msgspec.json.Decoder(_Frame).decode

# datetime cannot hold timestamps past the year 9999.
_MAX_TIMESTAMP = 253_402_300_800


def _usage(raw: _Usage | None) -> UsagePayload:
    if raw is None:
        return UsagePayload(input_tokens=None, output_tokens=None, total_tokens=None)
    inp, out = raw.prompt_tokens, raw.completion_tokens
    total = raw.total_tokens
    if total is None and inp is not None and out is not None:
        total = inp + out
    usage = UsagePayload(input_tokens=inp, output_tokens=out, total_tokens=total)
    details = raw.completion_tokens_details
    if details is not None and details.reasoning_tokens is not None:
        usage = msgspec.structs.replace(usage, reasoning_tokens=details.reasoning_tokens)
    details = raw.prompt_tokens_details
    if details is not None and details.cached_tokens is not None:
        usage = msgspec.structs.replace(usage, cached_input_tokens=details.cached_tokens)
    return usage


def _status_of(error: object) -> int | None:
    code: object = error.get("code") if isinstance(error, dict) else None
    if not (is_int(code) or isinstance(code, str)) or len(str(code)) > 3:
        return None
    try:
        status = int(code)  # LiteLLM sends the status as a string, vLLM as an int
    except ValueError:
        return None
    return status if 100 <= status <= 599 else None


_NO_FUNCTION = _Function()


class _PendingCall:
    __slots__ = ("id", "name", "args", "is_started")

    def __init__(self, call_id: str, name: str) -> None:
        self.id, self.name, self.is_started = call_id, name, False
        self.args: list[str] = []


class _ChatTranslator:
    """Chat Completions chunks (JSON text) → streamkit chunks, for one step."""

    def __init__(self, run_id: str, provider: str, url: str) -> None:
        self.run_id, self.provider, self.url = run_id, provider, url
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        self.calls: dict[int, _PendingCall] = {}
        self.raw_finish: str | None = None
        self.usage: _Usage | None = None
        self.has_choices = False
        self.has_metadata = False
        # Held back until the step has something else to say: a step whose only output is its
        # metadata has yielded nothing, so a failure right after the first frame is retried.
        self.metadata: ResponseMetadata | None = None

    def feed(self, data: str | bytes) -> list[ModelChunk]:
        """The chunks one event's data (or a whole response) makes.

        Raises:
            APICallError: the data is not JSON, not a chunk of the expected shape, or an error.
        """
        try:
            frame = _decode_frame(data)
        except msgspec.DecodeError as exc:
            raise self._malformed(data, exc) from exc
        except RecursionError as exc:  # past msgspec's depth limit: the same on every retry
            raise stream_error(self.provider, f"an event is nested too deeply to decode: "
                               f"{data[:200]!r}", self.url, is_retryable=False) from exc
        if frame.error or frame.object == "error":
            self._raise_error(data)
        return self._frame(frame)

    def _malformed(self, data: str | bytes, exc: Exception) -> APICallError:
        """The error for data that is not a frame: an error document of another shape, not
        JSON, or JSON of the wrong shape (``exc`` says where)."""
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        try:
            obj = decode_json(data)
        except msgspec.DecodeError as err:  # too deep is the same on every retry; a cut is not
            return stream_error(self.provider, f"an event is not valid JSON ({err}): "
                                f"{text[:200]!r}", self.url, body=text,
                                is_retryable=not isinstance(err.__cause__, RecursionError))
        if isinstance(obj, dict) and (obj.get("error") or obj.get("object") == "error"):
            error = obj.get("error")
            return error_from_payload(self.provider, obj, text, self.url,
                                      status_code=_status_of(error if isinstance(error, dict)
                                                             else obj))
        what = "is not a JSON object" if not isinstance(obj, dict) else \
            f"does not have the shape of a chat completion chunk ({exc})"
        return stream_error(self.provider, f"an event {what}: {text[:200]!r}", self.url,
                            body=text, is_retryable=False)

    def _raise_error(self, data: str | bytes) -> None:
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        obj = decode_json(data)  # decoded before: cannot fail
        error = obj.get("error")
        raise error_from_payload(self.provider, obj, text, self.url,
                                 status_code=_status_of(error if isinstance(error, dict)
                                                        else obj))

    def _frame(self, frame: _Frame) -> list[ModelChunk]:
        out: list[ModelChunk] = []
        if not self.has_metadata:
            self.has_metadata = True
            self.metadata = self._metadata(frame)
        if frame.usage is not None:
            self.usage = frame.usage
        for choice in frame.choices or ():
            self.has_choices = True
            if choice.index != 0:
                continue  # n > 1 is not supported: one step is one answer
            delta = choice.delta or choice.message
            if delta is not None:
                self._delta(delta, out)
            if choice.finish_reason:
                self.raw_finish = choice.finish_reason
        if out and self.metadata is not None:
            out.insert(0, self.metadata)
            self.metadata = None
        return out

    def _metadata(self, frame: _Frame) -> ResponseMetadata:
        fields: ResponseMetadataFields = {}
        if isinstance(frame.id, str):
            fields["id"] = frame.id
        if isinstance(frame.model, str):
            fields["model_id"] = frame.model
        created = frame.created
        if created is not None:
            if not 0 <= created < _MAX_TIMESTAMP:  # also false for NaN
                raise stream_error(self.provider, f"created is not a Unix timestamp: "
                                   f"{created!r}", self.url, is_retryable=False)
            fields["timestamp"] = datetime.fromtimestamp(created, UTC)
        return ResponseMetadata(run_id=self.run_id, from_=_AGENT, **fields)

    def _delta(self, delta: _Delta, out: list[ModelChunk]) -> None:
        run_id = self.run_id
        reasoning = delta.reasoning_content or delta.reasoning
        if reasoning:
            if self.reasoning_id is None:
                self.reasoning_id = f"reasoning-{uuid.uuid4().hex[:12]}"
                out.append(ReasoningStart(id=self.reasoning_id, run_id=run_id, from_=_AGENT))
            out.append(ReasoningDelta(id=self.reasoning_id, text=reasoning, run_id=run_id,
                                      from_=_AGENT))
        content = delta.content
        if content.__class__ is list:  # content parts (some servers): their text is the text
            content = "".join(p.text for p in content
                              if p.type in (None, "text") and p.text)
        if content:
            self._end_reasoning(out)
            if self.text_id is None:
                self.text_id = f"text-{uuid.uuid4().hex[:12]}"
                out.append(TextStart(id=self.text_id, run_id=run_id, from_=_AGENT))
            out.append(TextDelta(id=self.text_id, text=content,  # type: ignore[arg-type]
                                 run_id=run_id, from_=_AGENT))
        for call in delta.tool_calls or ():
            self._end_reasoning(out)
            self._tool_delta(call, out)

    def _end_reasoning(self, out: list[ModelChunk]) -> None:
        if self.reasoning_id is not None:
            out.append(ReasoningEnd(id=self.reasoning_id, run_id=self.run_id, from_=_AGENT))
            self.reasoning_id = None

    def _tool_delta(self, call: _CallDelta, out: list[ModelChunk]) -> None:
        function = call.function or _NO_FUNCTION
        index = call.index
        if index is None:
            # Without an index (non-streamed messages, some servers): a new id is a new call,
            # a known id or no id continues the call it names or the last one.
            call_id = call.id
            index = next((i for i, c in self.calls.items() if c.id == call_id), None) \
                if call_id else max(self.calls, default=0)
            if index is None:
                index = max(self.calls, default=-1) + 1
        pending = self.calls.get(index)
        if pending is None:
            pending = self.calls[index] = _PendingCall(
                call.id or f"call-{uuid.uuid4().hex[:12]}", function.name or "")
        elif function.name and not pending.name:
            pending.name = function.name
        if pending.name and not pending.is_started:
            pending.is_started = True
            out.append(ToolCallInputStreamingStart(tool_call_id=pending.id, tool_name=pending.name,
                                                   run_id=self.run_id, from_=_AGENT))
            if pending.args:  # arguments that came before the name
                out.append(self._args_delta(pending, "".join(pending.args)))
        args = function.arguments
        if args is not None and not isinstance(args, str):
            args = json_text(args)  # a server that sends the arguments as an object
        if args:
            pending.args.append(args)
            if pending.is_started:
                out.append(self._args_delta(pending, args))

    def _args_delta(self, pending: _PendingCall, text: str) -> ToolCallDelta:
        return ToolCallDelta(tool_call_id=pending.id, tool_name=pending.name,
                             args_text_delta=text, run_id=self.run_id, from_=_AGENT)

    def finish(self) -> list[ModelChunk]:
        run_id = self.run_id
        out: list[ModelChunk] = [] if self.metadata is None else [self.metadata]
        self._end_reasoning(out)
        if self.text_id is not None:
            out.append(TextEnd(id=self.text_id, type="text-end", run_id=run_id, from_=_AGENT))
        for index in sorted(self.calls):
            pending = self.calls[index]
            if not pending.name:
                raise stream_error(self.provider, f"tool call {pending.id!r} has no function name",
                                   self.url, is_retryable=False)
            text = "".join(pending.args)
            try:
                args: object = decode_json(text) if text.strip() else {}
            except msgspec.DecodeError:
                args = text  # see the module docstring: the tool's validation reports it
            out.append(ToolCallInputStreamingEnd(tool_call_id=pending.id, run_id=run_id,
                                                 from_=_AGENT))
            out.append(ToolCall(tool_call_id=pending.id, tool_name=pending.name, args=args,
                                run_id=run_id, from_=_AGENT))
        reason = _FINISH_REASONS.get(self.raw_finish or "", "other")
        if self.calls and reason in ("stop", "other"):
            reason = "tool-calls"  # servers that answer "stop" although they called tools
        result = StepResultPayload(reason=reason)
        if self.raw_finish is not None:  # payloads are frozen: a copy with the field set
            result = msgspec.structs.replace(result, raw_reason=self.raw_finish)
        out.append(Finish(payload=FinishPayload(step_result=result,
                                                output=StepOutputPayload(
                                                    usage=_usage(self.usage))),
                          run_id=run_id, from_=_AGENT))
        return out


# --- the model -----------------------------------------------------------------------------------


class OpenAIChatModel(HTTPModel):
    """OpenAI Chat Completions, or any server that speaks it, as a streamkit model.

    Args:
        model_id: the provider's model name (``"gpt-4o-mini"``, ``"llama3.1"``).
        api_key: sent as ``Authorization: Bearer``; ``None`` reads ``OPENAI_API_KEY`` at first
            use. Required (a ``UsageError`` naming the variable) only for ``api.openai.com``;
            local servers usually need none.
        base_url: the API root, ending before ``/chat/completions``.
        client: an ``httpx.AsyncClient`` to borrow (its limits, proxies, TLS); by default the
            model owns one (close it with ``aclose()`` or ``async with model``).
        timeout: seconds or an ``httpx.Timeout`` (default: 10 s to connect, 30 s to send,
            120 s per read).
        max_retries: retries of transient failures (429, 5xx, timeouts, connection errors)
            before the step's first chunk; ``Retry-After`` is honoured.
        deadline: seconds one model call may take in all — every attempt, the waits between
            them and the whole streamed answer (default 600; ``None``: no deadline). A server
            that drips bytes slowly enough never trips a read timeout; the deadline ends it
            with a non-retryable ``APICallError``.
        max_event_bytes: the largest server-sent event (or non-streamed response) accepted,
            in bytes (default 16 MiB; ``None``: no limit); a larger one is an ``APICallError``.
        backoff: the first retry delay in seconds (doubling, with jitter).
        max_backoff: the cap on one retry delay.
        headers: extra request headers.
        stream: ``False`` asks for one JSON response and synthesises the same chunks from it.
        sleep: the async function used to wait between retries (tests record the delays).
        provider: the provider name shown in traces and errors.

    Example::

        async with OpenAIChatModel("llama3.1", base_url="http://127.0.0.1:11434/v1") as model:
            agent = Agent(id="a", instructions="Be brief.", model=model)
            print((await agent.generate("Hi")).text)
    """

    label = "OpenAI"

    def __init__(self, model_id: str, *, api_key: str | None = None,
                 base_url: str = OPENAI_BASE_URL, client: httpx.AsyncClient | None = None,
                 timeout: float | httpx.Timeout | None = None, max_retries: int = 2,
                 backoff: float = 0.5, max_backoff: float = 8.0,
                 headers: Mapping[str, str] | None = None, stream: bool = True,
                 sleep: Callable[[float], Awaitable[object]] | None = None,
                 provider: str = "openai", deadline: float | None = DEFAULT_DEADLINE,
                 max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.provider = provider
        self.label = {"openai": "OpenAI", "openai-compatible": "OpenAI-compatible"}.get(
            provider, provider)
        super().__init__(model_id, base_url=base_url, api_key=api_key, client=client,
                         timeout=timeout, max_retries=max_retries, backoff=backoff,
                         max_backoff=max_backoff, headers=headers, sleep=sleep,
                         deadline=deadline, max_event_bytes=max_event_bytes)
        self._session.key_env = "OPENAI_API_KEY"
        self.is_streaming = stream

    def _request_headers(self, settings: Mapping[str, object]) -> dict[str, str]:
        key = self.api_key if self.api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url == OPENAI_BASE_URL:
            raise UsageError(
                f"no OpenAI API key for model {self.model_id!r}: set the OPENAI_API_KEY "
                f"environment variable or pass api_key=", env_var="OPENAI_API_KEY")
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.is_streaming:
            headers["accept"] = "text/event-stream"
        if key:
            headers["authorization"] = f"Bearer {key}"
        headers.update(self._extra_headers(settings))
        return headers

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream one step for ``request`` (see ``streamkit.models._base``).

        Raises:
            UsageError: no API key for api.openai.com, or an invalid ``tool_choice``
                (at once, before any network call).
            MessageError: a prompt Chat Completions cannot express (at once).
            APICallError: while iterating, for every HTTP, network or stream failure.
        """
        settings = request.model_settings
        headers = self._request_headers(settings)
        namespaces = ("openai",) if self.provider == "openai" else \
            ("openai", "openai-compatible", "openaiCompatible")
        body = build_openai_body(self.model_id, request, stream=self.is_streaming,
                                 namespaces=namespaces)
        url = f"{self.base_url}/chat/completions"
        policy = self._policy_for(settings)
        run_id = request.run_id
        if self.is_streaming:
            return retrying(policy, lambda deadline: self._stream_step(url, body, headers, run_id,
                                                                       deadline))
        return retrying(policy, lambda deadline: self._json_step(url, body, headers, run_id,
                                                                 deadline))

    async def _stream_step(self, url: str, body: Mapping[str, object], headers: dict[str, str],
                           run_id: str, deadline: Deadline | None
                           ) -> AsyncGenerator[ModelChunk, None]:
        provider = self._session.provider
        state = _ChatTranslator(run_id, provider, url)
        is_done = False
        # After [DONE] the body is still read to its end, so the connection goes back to the
        # pool instead of being closed half-read.
        async for event in self._session.sse(url, body, headers, deadline=deadline,
                                             max_event_bytes=self.max_event_bytes):
            data = event.data
            if is_done or not data.strip():
                continue
            if data.strip() == "[DONE]":
                is_done = True
                continue
            for chunk in state.feed(data):
                yield chunk
        if not is_done and state.raw_finish is None:
            raise stream_error(provider, "the stream ended without a finish_reason or [DONE]",
                               url)
        for chunk in state.finish():
            yield chunk

    async def _json_step(self, url: str, body: Mapping[str, object], headers: dict[str, str],
                         run_id: str, deadline: Deadline | None
                         ) -> AsyncGenerator[ModelChunk, None]:
        data = await self._session.post(url, body, headers, deadline=deadline,
                                        max_bytes=self.max_event_bytes)
        state = _ChatTranslator(run_id, self._session.provider, url)
        chunks = state.feed(data)
        if state.raw_finish is None and not state.has_choices:
            raise stream_error(self._session.provider, "the response has no choices", url,
                               body=data.decode("utf-8", "replace"))
        for chunk in chunks + state.finish():
            yield chunk
