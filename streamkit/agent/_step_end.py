"""The step-end payloads (``step-finish``, ``finish``) with everything Mastra puts in them.

What belongs here: the response metadata of a step (``metadata``), the step records of
``output.steps``, the message snapshot (``messages: {all, user, nonUser}``) in the AI SDK v5
``ModelMessage`` form Mastra writes, and the payload built from them. What does not: reading
usage and reasons off the model's ``finish`` and recording a streamed step (``_build``).

Everything here runs once per step (and once at the end of the run), never per chunk: the
snapshot costs a walk of the conversation, as Mastra's does.

Where Mastra's own payloads are inconsistent, one form is kept (a decision, see the README's
"Decisions"): every content part carries ``providerOptions.mastra.createdAt`` (its message's
creation time; Mastra sets it on some parts only), ``response.messages`` of a step holds the
response so far (Mastra's first step shows an empty ``tool`` message there), and a step's
``request`` is ``{}`` (streamkit does not echo the provider request body into the stream).
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from msgspec import UNSET, UnsetType

from .._message_formats import OUTCOME_STATES, core_reasoning, core_result
from .._message_model import _new_id, _now
from .._tool_records import StepToolCall
from ..chunks import (
    Finish,
    FinishPayload,
    ResponseMetadata,
    StepFinishPayload,
    StepOutputPayload,
    StepResultPayload,
    UsagePayload,
)
from ..messages import (
    DataPart,
    FilePart,
    ImagePart,
    Message,
    MessageList,
    ReasoningPart,
    SourcePart,
    StepStartPart,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    format_timestamp,
)
from ._result import Usage

__all__ = ["StepEnd", "response_metadata", "model_messages", "message_snapshot", "raw_usage_of",
           "ui_message"]

#: ``modelMetadata.modelVersion``: the AI SDK language model specification streamkit's models
#: speak (LanguageModelV2, the AI SDK 5 stream parts), as Mastra reports ``specificationVersion``.
MODEL_VERSION = "v2"


class ModelMetadata(TypedDict):
    """``metadata.modelMetadata`` of a step: which model answered."""

    modelId: str
    modelVersion: str
    modelProvider: str


class StepMetadata(TypedDict):
    """A step's response ``metadata`` (``response_metadata``), read back for the step record,
    the ``finish`` and the UI message."""

    id: str
    timestamp: str
    modelId: str
    modelMetadata: ModelMetadata
    request: dict[str, object]


#: One content part of a ``ModelMessage``: JSON built here and only passed on.
ModelPart = dict[str, object]
#: ``providerOptions`` of a message's parts: ``{"mastra": {"createdAt": <epoch ms>}}``.
_Stamp = dict[str, dict[str, int]]


class ModelMessage(TypedDict):
    """One message of the snapshot, in the AI SDK v5 ``ModelMessage`` form."""

    role: str
    content: list[ModelPart]


class Snapshot(TypedDict):
    """``messages`` of the step-end payloads: the conversation, the input, and the rest."""

    all: list[ModelMessage]
    user: list[ModelMessage]
    nonUser: list[ModelMessage]


def response_metadata(model: object, held: ResponseMetadata | None) -> StepMetadata:
    """A step's ``metadata``: the provider's response id, time and model when it sent them (the
    held ``response-metadata`` chunk), else a fresh id, now, and the model object's id.

    Example:
        >>> from streamkit.testing import ScriptedModel
        >>> meta = response_metadata(ScriptedModel([]), None)
        >>> meta["modelMetadata"]
        {'modelId': 'scripted-model', 'modelVersion': 'v2', 'modelProvider': 'scripted'}
    """
    model_id = str(getattr(model, "model_id", type(model).__name__))
    payload = held.payload if held is not None else None
    rid = payload.id if payload is not None and isinstance(payload.id, str) else None
    stamp = payload.timestamp if payload is not None else UNSET
    mid = payload.model_id if payload is not None and isinstance(payload.model_id, str) \
        else model_id
    if isinstance(stamp, datetime):
        stamp = format_timestamp(stamp)
    elif not isinstance(stamp, str):
        # Now, in whole milliseconds as JavaScript writes it (``datetime.now()`` wrote six
        # fractional digits); the id from the same pool of random bytes as message ids (a
        # ``uuid4()`` was a system call per step).
        stamp = format_timestamp(_now())
    return {"id": rid or f"resp-{_new_id().replace('-', '')[:24]}", "timestamp": stamp,
            "modelId": mid,
            "modelMetadata": {"modelId": model_id, "modelVersion": MODEL_VERSION,
                              "modelProvider": str(getattr(model, "provider", "unknown"))},
            "request": {}}


def model_messages(message: Message) -> list[ModelMessage]:
    """One stored message in the AI SDK v5 ``ModelMessage`` form of Mastra's snapshots: the
    provider prompt's messages for it (``to_core``: an assistant message split at its
    ``step-start`` parts, each step's tool results in a ``tool`` message after it, calls
    without an outcome left out, a text-only message as one text part), with content always a
    list of parts, a tool call's arguments as its ``input``, a tool result's value as its
    ``output`` (``{"type": "json" | "error-text" | "error-json", "value": ...}``), and every
    part carrying ``providerOptions.mastra.createdAt`` (epoch milliseconds). System messages
    are not part of the snapshot (Mastra keeps them apart too).

    Built from the message's parts in one walk, not through ``to_core``'s prompt dicts (which
    were then rebuilt part by part): the snapshot is taken at every step end. A property test
    holds the two to the same JSON (tests/test_model_messages.py).

    Example:
        >>> from streamkit.messages import ToolInvocationPart
        >>> msg = Message.assistant([ToolInvocationPart.returned("c1", "t", 42, {"x": 1})])
        >>> [(m["role"], [p["type"] for p in m["content"]]) for m in model_messages(msg)]
        [('assistant', ['tool-call']), ('tool', ['tool-result'])]
    """
    role = message.role
    if role == "system":
        return []
    # One dict per message, shared by its parts (read-only JSON).
    stamp = {"mastra": {"createdAt": int(message.created_at.timestamp() * 1000)}}
    if role == "assistant":
        return _assistant_messages(message, stamp)
    return _user_messages(message, stamp)


def _user_messages(message: Message, stamp: _Stamp) -> list[ModelMessage]:
    """A user (or any non-assistant) message: one text part when it is text only, else its
    text, file and image parts (``to_core``'s user turn)."""
    texts: list[str] = []
    media = False
    for part in message.content.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, (FilePart, ImagePart)):
            media = True
    if not media:
        text = "".join(texts)
        if not text and isinstance(message.content.content, str):
            text = message.content.content
        if not text and not texts:
            return []
        return [{"role": "user", "content": [
            {"type": "text", "text": text, "providerOptions": stamp}]}]
    content: list[ModelPart] = []
    for part in message.content.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text, "providerOptions": stamp})
        elif isinstance(part, FilePart):
            content.append({"type": "file", "data": part.data, "mimeType": part.mime_type,
                            "providerOptions": stamp})
        elif isinstance(part, ImagePart):
            image: ModelPart = {"type": "image", "image": part.image}
            if part.mime_type is not UNSET:
                image["mimeType"] = part.mime_type
            image["providerOptions"] = stamp
            content.append(image)
    return [{"role": "user", "content": content}]


def _assistant_messages(message: Message, stamp: _Stamp) -> list[ModelMessage]:
    """An assistant message: per step (split at ``step-start``), its assistant turn and the
    ``tool`` turn with its results (``to_core``'s assistant turns)."""
    out: list[ModelMessage] = []
    content: list[ModelPart] = []
    texts: list[str] = []  # the step's text parts' texts, while every part is text
    outcomes: list[ToolInvocation] = []
    inputs: dict[str, object] = {}
    for part in message.content.parts:
        if isinstance(part, StepStartPart):
            _end_step(out, content, texts, outcomes, inputs, stamp)
            content, texts, outcomes = [], [], []
        elif isinstance(part, TextPart):
            if part.text:
                content.append({"type": "text", "text": part.text, "providerOptions": stamp})
                texts.append(part.text)
        elif isinstance(part, ReasoningPart):
            for item in core_reasoning(part):
                model_part: ModelPart = dict(item)
                model_part["providerOptions"] = stamp
                content.append(model_part)
        elif isinstance(part, FilePart):
            content.append({"type": "file", "data": part.data, "mimeType": part.mime_type,
                            "providerOptions": stamp})
        elif isinstance(part, ToolInvocationPart):
            invocation = part.tool_invocation
            if invocation.state in OUTCOME_STATES:
                content.append({"type": "tool-call", "toolCallId": invocation.tool_call_id,
                                "toolName": invocation.tool_name, "input": invocation.args,
                                "providerOptions": stamp})
                inputs[invocation.tool_call_id] = invocation.args
                outcomes.append(invocation)
    _end_step(out, content, texts, outcomes, inputs, stamp)
    if not out and not message.content.parts and isinstance(message.content.content, str) \
            and message.content.content:
        out.append({"role": "assistant", "content": [
            {"type": "text", "text": message.content.content, "providerOptions": stamp}]})
    return out


def _end_step(out: list[ModelMessage], content: list[ModelPart], texts: list[str],
              outcomes: list[ToolInvocation], inputs: dict[str, object],
              stamp: _Stamp) -> None:
    """Close one step of an assistant message: its turn (text only: one text part) and its
    ``tool`` turn."""
    if content:
        if len(texts) == len(content):
            out.append({"role": "assistant", "content": [
                {"type": "text", "text": "".join(texts), "providerOptions": stamp}]})
        else:
            out.append({"role": "assistant", "content": content})
    if outcomes:
        results: list[ModelPart] = []
        for invocation in outcomes:
            core = core_result(invocation)
            value = core["result"]
            kind = ("error-text" if isinstance(value, str) else "error-json") \
                if core.get("isError") is True else "json"
            results.append({"type": "tool-result", "toolCallId": invocation.tool_call_id,
                            "toolName": invocation.tool_name,
                            "output": {"type": kind, "value": value},
                            "input": inputs.get(invocation.tool_call_id),
                            "providerOptions": stamp})
        out.append({"role": "tool", "content": results})


def message_snapshot(message_list: MessageList) -> Snapshot:
    """``{all, user, nonUser}``: the conversation, the input, and everything else (memory and
    response), each message converted once."""
    every: list[ModelMessage] = []
    user: list[ModelMessage] = []
    non_user: list[ModelMessage] = []
    for message, source in message_list.with_sources():
        converted = model_messages(message)
        every.extend(converted)
        if source == "input":
            user.extend(converted)
        elif source == "response":
            non_user.extend(converted)
    return {"all": every, "user": user, "nonUser": non_user}


def _ui_part(part: object, created: int, stamp: dict[str, dict[str, int]],
             model: str) -> dict[str, object] | None:
    """One stored part as an AI SDK v5 ``UIMessage`` part (``None``: not shown to a UI);
    ``stamp`` is its message's ``providerMetadata`` (one dict per message, shared by its parts:
    read-only JSON, as in ``model_messages``)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text, "providerMetadata": stamp}
    if isinstance(part, ReasoningPart):
        return {"type": "reasoning", "text": part.reasoning, "state": "done",
                "providerMetadata": stamp}
    if isinstance(part, ToolInvocationPart):
        inv = part.tool_invocation
        ui: dict[str, object] = {"type": f"tool-{inv.tool_name}", "toolCallId": inv.tool_call_id,
                              "input": inv.args}
        if inv.state == "result":
            ui.update(output=None if inv.result is UNSET else inv.result,
                      state="output-available")
        elif inv.state in ("output-error", "output-denied"):
            error = inv.error_text if inv.error_text is not UNSET else inv.result
            ui.update(errorText="" if error is UNSET else str(error), state="output-error")
        else:
            ui["state"] = "input-available"
        return ui
    if isinstance(part, DataPart):
        return {"type": part.type, "data": part.data, "createdAt": created}
    if isinstance(part, StepStartPart):
        return {"type": "step-start", "createdAt": created, "model": model}
    if isinstance(part, SourcePart):
        source = part.source
        ui = {"type": "source-url", "sourceId": source.id, "url": source.url}
        if source.title is not UNSET:
            ui["title"] = source.title
        return ui
    if isinstance(part, FilePart):
        return {"type": "file", "mediaType": part.mime_type, "url": part.data}
    return None


def ui_message(message_list: MessageList, *, message_id: str, metadata: StepMetadata,
               thread_id: str | None, resource_id: str | None) -> dict[str, object]:
    """The response of the run as one AI SDK v5 ``UIMessage`` (``response.uiMessages`` of the
    ``finish``): every response part in order, the model in ``metadata``."""
    model = metadata["modelMetadata"]
    model_name = f"{model['modelProvider']}/{model['modelId']}"
    responses = [m for m in message_list.get.response.db() if m.role == "assistant"]
    parts: list[dict[str, object]] = []
    for message in responses:
        created = int(message.created_at.timestamp() * 1000)
        stamp = {"mastra": {"createdAt": created}}
        for part in message.content.parts:
            ui = _ui_part(part, created, stamp, model_name)
            if ui is not None:
                parts.append(ui)
    meta: dict[str, str] = {
        "modelId": model["modelId"], "provider": model["modelProvider"],
        "createdAt": format_timestamp(responses[0].created_at) if responses
        else metadata["timestamp"]}
    if thread_id is not None:
        meta["threadId"] = thread_id
    if resource_id is not None:
        meta["resourceId"] = resource_id
    return {"id": message_id, "role": "assistant", "metadata": meta, "parts": parts}


def _step_content(response: list[ModelMessage]) -> list[ModelPart]:
    """The parts of the last step: the trailing assistant message and its ``tool`` message."""
    if not response:
        return []
    tail = response[-2:] if response[-1]["role"] == "tool" and len(response) > 1 else response[-1:]
    return [part for message in tail for part in message["content"]]


def _usage(usage: Usage, raw: object) -> UsagePayload:
    return UsagePayload(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                        total_tokens=usage.total_tokens,
                        raw=raw if raw is not UNSET and raw is not None else {
                            "inputTokens": usage.input_tokens,
                            "outputTokens": usage.output_tokens,
                            "totalTokens": usage.total_tokens})


def _usage_dict(usage: UsagePayload) -> dict[str, object]:
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.total_tokens, "raw": usage.raw}


def raw_usage_of(finish: Finish | None) -> object:
    """The provider's raw usage on the model's ``finish`` (``UNSET`` when it sent none)."""
    if finish is None:
        return UNSET
    try:
        return finish.payload.output.usage.raw
    except AttributeError:
        return UNSET


class StepEnd:
    """The run's step-end reports: builds each ``step-finish`` payload and the ``finish``.

    It keeps the step records (``output.steps`` grows by one per accepted step) and the last
    step's metadata and raw usage, which the ``finish`` repeats (as Mastra's does).
    """

    __slots__ = ("steps", "metadata", "raw", "snapshot")

    def __init__(self) -> None:
        self.steps: list[dict[str, object]] = []
        self.metadata: StepMetadata | None = None
        self.raw: object = UNSET
        #: The last step-finish's message snapshot, which ``finish`` may reuse.
        self.snapshot: Snapshot | None = None

    def step_finish(self, *, reason: str, continued: bool, text: str,
                    tool_calls: list[StepToolCall], usage: Usage, message_id: str,
                    metadata: StepMetadata | None, raw_usage: object,
                    message_list: MessageList, retry_count: int,
                    is_accepted: bool = True) -> StepFinishPayload:
        """The ``step-finish`` payload of a step; ``is_accepted=False`` for an attempt that is
        withdrawn (its record is not kept in ``output.steps``). ``metadata=None``: the run
        takes no snapshots (``CallOptions.step_snapshots``): no ``messages``, ``metadata``
        nor ``output.steps``."""
        step_usage = _usage(usage, raw_usage)
        if metadata is None:
            if is_accepted:
                self.raw = step_usage.raw  # the finish repeats the last step's raw usage
            return StepFinishPayload(
                message_id=message_id, step_result=StepResultPayload(
                    reason=reason, is_continued=continued, warnings=[]),
                output=_output(text, tool_calls, step_usage, UNSET),
                processor_retry_count=retry_count)
        snapshot = self.snapshot = message_snapshot(message_list)
        if is_accepted:
            self.steps.append({
                "content": _step_content(snapshot["nonUser"]), "usage": _usage_dict(step_usage),
                "warnings": [], "request": {},
                "response": {"id": metadata["id"], "timestamp": metadata["timestamp"],
                             "modelId": metadata["modelId"], "messages": snapshot["nonUser"]}})
            self.metadata, self.raw = metadata, step_usage.raw
        return StepFinishPayload(
            message_id=message_id,
            step_result=StepResultPayload(reason=reason, is_continued=continued, warnings=[]),
            metadata=metadata, output=_output(text, tool_calls, step_usage, list(self.steps)),
            messages=snapshot, processor_retry_count=retry_count)

    def finish(self, *, reason: str, text: str, usage: Usage, message_id: str, model: object,
               message_list: MessageList, thread_id: str | None = None,
               resource_id: str | None = None, unchanged: bool = False,
               snapshots: bool = True) -> FinishPayload:
        """The ``finish`` payload: the run's usage, the last step's metadata and raw usage, and
        (as Mastra's server adds) ``response``: the metadata with the response's model messages
        and its ``uiMessages``.

        ``unchanged=True``: nothing could have changed the messages since the last
        ``step-finish`` (no processor hook ran after it), so its snapshot is reused instead of
        walked again — the same dicts, which both chunks then share (chunk containers are
        read-only, ``streamkit.chunks``). Measured: the snapshot was ~10 % of a served
        3-delta request's Python time, built twice.

        ``snapshots=False`` (``CallOptions.step_snapshots``): no ``messages``, ``metadata``,
        ``output.steps`` nor ``response``."""
        if not snapshots:
            return FinishPayload(
                message_id=message_id,
                step_result=StepResultPayload(reason=reason, is_continued=False, warnings=[]),
                output=_output(text, [], _usage(usage, self.raw), UNSET),
                processor_retry_count=0)
        metadata = self.metadata if self.metadata is not None else response_metadata(model, None)
        snapshot = self.snapshot if unchanged and self.snapshot is not None else \
            message_snapshot(message_list)
        response: dict[str, object] = {
            **metadata, "messages": snapshot["nonUser"], "uiMessages": [ui_message(
                message_list, message_id=message_id, metadata=metadata, thread_id=thread_id,
                resource_id=resource_id)]}
        response.pop("request", None)
        return FinishPayload(
            message_id=message_id,
            step_result=StepResultPayload(reason=reason, is_continued=False, warnings=[]),
            metadata=metadata,
            output=_output(text, [], _usage(usage, self.raw), list(self.steps)),
            messages=snapshot, processor_retry_count=0, response=response)


def _output(text: str, tool_calls: list[StepToolCall], usage: UsagePayload,
            steps: list[dict[str, object]] | UnsetType) -> StepOutputPayload:
    return StepOutputPayload(
        text=text, usage=usage, steps=steps,
        tool_calls=[{"toolCallId": c.tool_call_id, "toolName": c.tool_name,
                     "args": c.args} for c in tool_calls])
