"""Deterministic models with no network: ``ScriptedModel`` and ``FunctionModel``.

They ship in the library (not only in tests) because the demo, the notebooks and users' own tests
need a model that behaves exactly as scripted. Step builders: ``text``, ``tool_call``,
``reasoning``,
``api_error``; a list of builders is one step that does several things (text, then tool calls).
"""

from __future__ import annotations

import inspect
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .._prompt import PromptMessage
from ..chunks import (
    Finish,
    FinishPayload,
    ModelChunk,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    Stamper,
    StepOutputPayload,
    StepResultPayload,
    TextDelta,
    TextDeltaPayload,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
    UsagePayload,
)
from ..errors import APICallError, InvalidType, ScriptExhausted
from ..tokens import get_counter
from ._base import ModelRequest, ToolChoice, ToolSpec

__all__ = ["ScriptedModel", "FunctionModel", "text", "tool_call", "reasoning", "api_error",
           "ScriptStep"]


@dataclass(frozen=True, slots=True)
class _Text:
    text: str
    chunk: int | None = None


@dataclass(frozen=True, slots=True)
class _Reasoning:
    text: str


@dataclass(frozen=True, slots=True)
class _ToolCall:
    name: str
    args: Any
    id: str | None = None


@dataclass(frozen=True, slots=True)
class _APIError:
    status_code: int
    message: str
    body: str | None = None
    is_retryable: bool | None = None


def text(content: str, *, chunk_size: int | None = None) -> _Text:
    """A step that streams ``content`` as word deltas: ``"Hello world"`` → ``"Hello"``,
    ``" world"``. With ``chunk_size`` it streams fixed-size character slices instead."""
    if not isinstance(content, str):
        raise InvalidType(f"text() takes a str, got {type(content).__name__}")
    return _Text(content, chunk_size)


def reasoning(content: str) -> _Reasoning:
    """A step part that streams ``content`` as reasoning deltas (before the text)."""
    return _Reasoning(content)


def tool_call(name: str, args: object = None, id: str | None = None) -> _ToolCall:
    """A step part that calls tool ``name`` with ``args`` (a dict; streamed as JSON deltas)."""
    return _ToolCall(name, {} if args is None else args, id)


def api_error(status_code: int, message: str, body: str | None = None, *,
              is_retryable: bool | None = None) -> _APIError:
    """A step whose call raises ``APICallError(status_code, body)``."""
    return _APIError(status_code, message, body, is_retryable)


#: One part of a scripted step (what ``text``, ``reasoning``, ``tool_call``, ``api_error`` return).
ScriptPart: TypeAlias = "_Text | _Reasoning | _ToolCall | _APIError"
#: A scripted step: one part, or a list of them (streamed in order).
ScriptStep: TypeAlias = "ScriptPart | Sequence[ScriptPart]"


_DELTA = re.compile(r"\s*\S+|\s+")


def _split_words(content: str) -> list[str]:
    """Word deltas: each is leading whitespace + one word (``"Hello world"`` → ``"Hello"``,
    ``" world"``); trailing whitespace is a delta of its own, so nothing is lost."""
    return _DELTA.findall(content)


def _input_tokens(request: ModelRequest) -> int:
    """What a provider would bill as input: the prompt's messages plus the tool schemas, counted
    by ``streamkit.tokens`` (so processors that count tokens agree with the reported usage)."""
    return get_counter().count_request(request.prompt, request.tools)


def _output_tokens(texts: list[str], tool_calls: list[tuple[str, str]]) -> int:
    """Tokens of the streamed text (text and reasoning) plus each tool call's name and args."""
    counter = get_counter()
    return counter.count_text("".join(texts)) + sum(
        counter.count_text(name) + counter.count_text(args) for name, args in tool_calls)


@dataclass(slots=True)
class RecordedRequest:
    """What a scripted model got: the provider-shaped ``prompt``, ``tools`` (names),
    ``tool_choice``, ``model_settings``, ``provider_options``, ``structured_output``."""

    prompt: list[PromptMessage]
    tools: list[str]
    tool_choice: ToolChoice | None
    model_settings: dict[str, object]
    provider_options: dict[str, object]
    structured_output: dict[str, object] | None
    step_number: int = 0
    tool_specs: list[ToolSpec] = field(default_factory=list)


def _record(request: ModelRequest) -> RecordedRequest:
    return RecordedRequest(
        prompt=json.loads(json.dumps(request.prompt, default=str)),
        tools=[t.name for t in request.tools], tool_choice=request.tool_choice,
        model_settings=dict(request.model_settings),
        provider_options=dict(request.provider_options),
        structured_output=request.structured_output, step_number=request.step_number,
        tool_specs=list(request.tools))


async def _emit_step(step: object, request: ModelRequest) -> AsyncIterator[ModelChunk]:
    # object: a FunctionModel's function returns any value; each part is checked below.
    parts = step if isinstance(step, (list, tuple)) else [step]
    run_id = request.run_id
    frm = "AGENT"
    streamed: list[str] = []
    calls: list[tuple[str, str]] = []
    has_tools = False
    for part in parts:
        if isinstance(part, _APIError):
            raise APICallError(part.message, status_code=part.status_code, body=part.body,
                               is_retryable=part.is_retryable, url="scripted://model")
        if isinstance(part, _Reasoning):
            rid = f"reasoning-{uuid.uuid4().hex[:8]}"
            yield ReasoningStart(id=rid, run_id=run_id, from_=frm)
            for piece in _split_words(part.text):
                streamed.append(piece)
                yield ReasoningDelta(id=rid, text=piece, run_id=run_id, from_=frm)
            yield ReasoningEnd(id=rid, run_id=run_id, from_=frm)
        elif isinstance(part, _Text):
            tid = f"text-{uuid.uuid4().hex[:8]}"
            yield TextStart(id=tid, run_id=run_id, from_=frm)
            if part.chunk:
                pieces = [part.text[i:i + part.chunk] for i in range(0, len(part.text), part.chunk)]
            else:
                pieces = _split_words(part.text)
            delta = Stamper(TextDelta, run_id=run_id, from_=frm)  # ~0.1 µs a chunk
            streamed.extend(pieces)
            for piece in pieces:
                yield delta(TextDeltaPayload(id=tid, text=piece))
            yield TextEnd(id=tid, type="text-end", run_id=run_id, from_=frm)
        elif isinstance(part, _ToolCall):
            has_tools = True
            cid = part.id or f"call-{uuid.uuid4().hex[:12]}"
            args_json = json.dumps(part.args)
            yield ToolCallInputStreamingStart(tool_call_id=cid, tool_name=part.name,
                                              run_id=run_id, from_=frm)
            yield ToolCallDelta(tool_call_id=cid, tool_name=part.name, args_text_delta=args_json,
                                run_id=run_id, from_=frm)
            yield ToolCallInputStreamingEnd(tool_call_id=cid, run_id=run_id, from_=frm)
            calls.append((part.name, args_json))
            yield ToolCall(tool_call_id=cid, tool_name=part.name, args=part.args,
                           run_id=run_id, from_=frm)
        else:
            raise InvalidType(
                f"unknown scripted step part {part!r}; expected text(...), tool_call(...), "
                f"reasoning(...), api_error(...) or a list of them")
    input_tokens = _input_tokens(request)
    output_tokens = _output_tokens(streamed, calls)
    yield Finish(payload=FinishPayload(
        step_result=StepResultPayload(reason="tool-calls" if has_tools else "stop"),
        output=StepOutputPayload(usage=UsagePayload(
            input_tokens=input_tokens, output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens))),
        run_id=run_id, from_=frm)


class ScriptedModel:
    """A model that plays scripted steps in order, one per call, and records every request.

    Args:
        steps: one entry per model call: ``text("...")``, ``tool_call(name, args)``,
            ``reasoning("...")``, ``api_error(status, message)``, or a list mixing them.
        model_id: shown in traces and graphs.

    Raises:
        ScriptExhausted: when called more times than it has steps.

    Example:
        >>> model = ScriptedModel([tool_call("lookup", {"id": "C-1"}), text("Found it.")])
        >>> result = await Agent(id="a", instructions="...", model=model,
        ...                      tools=[lookup]).generate("Who is C-1?")
        >>> model.requests[1].prompt[-1]["role"]
        'tool'
    """

    provider = "scripted"

    def __init__(self, steps: Sequence[ScriptStep], *, model_id: str = "scripted-model") -> None:
        self.steps = list(steps)
        self.model_id = model_id
        self.requests: list[RecordedRequest] = []
        self.calls = 0

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.steps)} steps, {self.calls} calls)"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.requests.append(_record(request))
        index = self.calls
        self.calls += 1
        if index >= len(self.steps):
            raise ScriptExhausted(
                f"ScriptedModel {self.model_id!r} has {len(self.steps)} scripted step(s) and was "
                f"called a {ordinal(index + 1)} time; add a step for every model call the run "
                f"makes")
        return _emit_step(self.steps[index], request)


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``, ``101st``…"""
    if n % 100 in (11, 12, 13):
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


class FunctionModel:
    """A model whose every step is built by ``fn(request) -> step`` (sync or async), where a step
    is what ``ScriptedModel`` takes. Records requests like ``ScriptedModel``.

    Example:
        >>> def echo(request):
        ...     return text("You said: " + request.prompt[-1]["content"])
        >>> model = FunctionModel(echo)
    """

    provider = "function"

    def __init__(self, fn: Callable[[ModelRequest], object], *, model_id: str = "function-model"
                 ) -> None:
        if not callable(fn):
            raise InvalidType(f"FunctionModel takes a function, got {type(fn).__name__}")
        self.fn = fn
        self.model_id = model_id
        self.requests: list[RecordedRequest] = []
        self.calls = 0

    async def _run(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        step = self.fn(request)
        if inspect.isawaitable(step):
            step = await step
        async for chunk in _emit_step(step, request):
            yield chunk

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.requests.append(_record(request))
        self.calls += 1
        return self._run(request)
