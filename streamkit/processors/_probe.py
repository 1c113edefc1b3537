"""The per-chunk view of a run for observers that ask for it (``chunk_detail``): what the
model produced, what each stream processor did to each chunk, and what the consumer got.

What belongs here: ``ChunkProbe``, which a run creates only when one of its observers wants
chunk detail. ``StreamChain`` then binds every stream hook through ``ChunkProbe.hook`` (a
wrapper that reports each call's result) instead of the hook itself: the fused code is the
same, only the functions it calls differ, so a run without the probe is untouched and pays
nothing per chunk. The rules that turn a hook's result into an action are in
``streamkit.events``' docstring.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..chunks import Chunk, ReasoningDelta, TextDelta
from ..events import Action, ChunkOut, ModelProduced, ProcessorAction, RunEvent
from ..messages import Message, TextPart, ToolInvocationPart
from ..tripwire import TripWire
from ..wire import to_builtins
from ._fused import HookShape
from ._spec import HookSpec, ProcessorSpec
from ._writer import Writer

__all__ = ["ChunkProbe", "MASK", "holds_back", "is_redactor"]

#: A mask in new text (``[EMAIL]``, ``[redacted]``, ``***``, ``█``): a change that brings one
#: where there was none is reported as ``redacted`` (``brings_mask``).
MASK = re.compile(r"\[[A-Za-z][\w .:-]{0,40}\]|\*{3,}|█+|<redacted>", re.IGNORECASE)

_TEXT_CLASSES = (TextDelta, ReasoningDelta)


def holds_back(processor: object) -> bool:
    """Whether ``processor`` may hold chunks back (a chunk it returns nothing for is ``held``,
    not ``dropped``): a true ``holds`` attribute, or a ``buffering`` whose ``holds`` is true
    (the operators' guards declare theirs)."""
    holds = getattr(processor, "holds", None)
    if isinstance(holds, bool):
        return holds
    buffering = getattr(processor, "buffering", None)
    return bool(getattr(buffering, "holds", False))


def brings_mask(before: str, after: str) -> bool:
    """Whether ``after`` holds a mask that ``before`` did not, compared without case: a change
    of case (``[a]`` -> ``[A]``) brings no mask, ``ada@example.com`` -> ``[email]`` does."""
    old = before.casefold()
    return any(m.group().casefold() not in old for m in MASK.finditer(after))


def is_redactor(processor: object) -> bool:
    """Whether ``processor`` says it redacts (a true ``redacts`` attribute)."""
    return getattr(processor, "redacts", False) is True


def _text(chunk: object) -> str | None:
    return chunk.payload.text if isinstance(chunk, _TEXT_CLASSES) else None


def _shown(chunk: Any) -> str:
    """A chunk as before/after text: its text for a delta, else its JSON (no run id)."""
    text = _text(chunk)
    if text is not None:
        return text
    try:
        data = to_builtins(chunk)
    except Exception:  # noqa: BLE001 - a value with no JSON form is shown by its repr
        return repr(chunk)
    data.pop("runId", None)
    data.pop("from", None)
    return msgspec.json.encode(data).decode()


def _wire(chunk: Any) -> dict[str, Any]:
    """The chunk's wire dict; one with a value that has no JSON form (a tool's result object)
    or that is not a chunk at all is ``{"type", "repr"}`` (the chain reports a non-chunk)."""
    try:
        return to_builtins(chunk)
    except Exception:  # noqa: BLE001 - watching must not fail the run
        return {"type": _type(chunk), "repr": repr(chunk)[:2000]}


def _json(value: object) -> str:
    return msgspec.json.encode(value, enc_hook=repr).decode()


def _message_text(message: Message) -> str:
    out = []
    for part in message.content.parts:
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ToolInvocationPart) and part.state == "result":
            result = part.tool_invocation.result
            out.append(f"{part.tool_invocation.tool_name}: {_json(result)}")
    if not out and isinstance(message.content.content, str):
        out.append(message.content.content)
    return "".join(out)


def _tail(before: str, after: str) -> str:
    """What a holding processor still holds of ``before`` after letting out ``after``, a
    changed version of a prefix of it: what follows the longest end of ``after`` found in
    ``before`` (nothing when ``after`` ends with text that is not in ``before``, a mask)."""
    for k in range(len(after), 0, -1):
        at = before.rfind(after[-k:])
        if at >= 0:
            return before[at + k:]
    return ""


def _type(chunk: object) -> str:
    return str(getattr(chunk, "type", type(chunk).__name__))


class _Slot:
    """What the probe knows of one stream processor: whether it holds back or redacts, and
    the text it holds (reported ``held``, not released yet)."""

    __slots__ = ("spec", "holds", "redacts", "held")

    def __init__(self, spec: ProcessorSpec) -> None:
        self.spec = spec
        self.holds = holds_back(spec.processor)
        self.redacts = is_redactor(spec.processor)
        self.held = ""


class ChunkProbe:
    """Turns the chunk path of one run into ``model-chunk``, ``action`` and ``chunk`` events,
    handed to ``emit``.

    Args:
        run_id: the run.
        emit: where each event goes (the run's observers).
        step_number: returns the step the run is in.
    """

    def __init__(self, run_id: str, emit: Callable[[RunEvent], None],
                 step_number: Callable[[], int | None]) -> None:
        self.run_id = run_id
        self.emit = emit
        self.step_number = step_number
        self.seq: int | None = None  # the model chunk being processed
        self._model_seq = 0
        self._out_seq = 0
        self._slots: dict[str, _Slot] = {}

    def _slot(self, spec: ProcessorSpec) -> _Slot:
        slot = self._slots.get(spec.id)
        if slot is None:
            slot = self._slots[spec.id] = _Slot(spec)
        return slot

    # ------------------------------------------------------------------ binding

    @staticmethod
    def shape(hook: HookSpec, multi: bool) -> HookShape:
        """The shape the fused code calls a ``hook``'d wrapper with: every argument by name,
        ``part`` always among them."""
        params = hook.params if "part" in hook.params else ("part", *hook.params)
        return HookShape(hook.is_async, params, hook.wants_all, False, multi)

    def hook(self, spec: ProcessorSpec, hook: HookSpec, fn: Callable[..., Any]
             ) -> Callable[..., Any]:
        """``fn`` (``spec``'s stream hook, as the chain would call it) wrapped to report what
        each call did; called with the arguments ``shape`` names."""
        slot = self._slot(spec)
        params, positional, wants_part = hook.params, hook.positional and not hook.wants_all, \
            hook.wants_all or "part" in hook.params

        def args(kw: dict[str, object]) -> tuple[tuple[object, ...], dict[str, object]]:
            if positional:
                return tuple(kw[n] for n in params), {}
            if not wants_part:
                kw = {n: v for n, v in kw.items() if n != "part"}
            return (), kw

        if hook.is_async:
            async def acall(**kw: object) -> Any:
                part = kw["part"]
                a, k = args(kw)
                try:
                    out = await fn(*a, **k)
                except BaseException as exc:
                    self._failed(slot, part, exc)
                    raise
                self._result(slot, part, out)
                return out
            return acall

        def call(**kw: object) -> Any:
            part = kw["part"]
            a, k = args(kw)
            try:
                out = fn(*a, **k)
            except BaseException as exc:
                self._failed(slot, part, exc)
                raise
            self._result(slot, part, out)
            return out
        return call

    def writer(self, spec: ProcessorSpec, writer: Writer) -> Writer:
        """``spec``'s stream-hook writer, reporting each chunk written as ``emitted``."""
        slot = self._slot(spec)

        def sink(chunk: object) -> None:
            self._action(slot, "emitted", chunk, after=_shown(chunk))
            writer.custom(chunk)
        return Writer(sink)

    # ------------------------------------------------------------------ what happened

    def _action(self, slot: _Slot, action: Action, chunk: object, *, before: str | None = None,
                after: str | None = None, reason: str | None = None,
                seq: int | None | bool = True) -> None:
        self.emit(ProcessorAction(
            run_id=self.run_id, step_number=self.step_number(),
            seq=self.seq if seq is True else None if seq is False else seq,
            processor_id=slot.spec.id, action=action, chunk_type=_type(chunk), before=before,
            after=after, reason=reason))

    def _failed(self, slot: _Slot, part: object, exc: BaseException) -> None:
        if isinstance(exc, TripWire):
            reason: str | None = exc.reason or str(exc)
        elif isinstance(exc, Exception):
            reason = f"{type(exc).__name__}: {exc}"
        else:
            return  # cancelled or closed: the hook did nothing to the chunk
        self._action(slot, "aborted", part, before=slot.held + _shown(part), reason=reason)
        slot.held = ""

    def _result(self, slot: _Slot, part: object, out: object) -> None:
        if out is part:
            self._action(slot, "passed", part)
            return
        if out is None or (out.__class__ is list and not out):
            if slot.holds:
                text = _text(part)
                if text is not None:
                    slot.held += text
                    self._action(slot, "held", part, before=text)
                    return
                self._action(slot, "held", part, before=_shown(part))
                return
            self._action(slot, "dropped", part, before=_shown(part))
            return
        items = out if out.__class__ is list else [out]
        if any(item is part for item in items):
            extra = [item for item in items if item is not part]
            if slot.held and extra and all(_text(i) is not None for i in extra):
                # What it held, let out beside the chunk (a guard closing a part at its end).
                self.changed(slot, None, extra, seq=True)
                extra = []
            for item in items:
                if item is part:
                    self._action(slot, "passed", part)
                elif any(item is e for e in extra):
                    self._action(slot, "emitted", item, after=_shown(item))
            return
        self.changed(slot, part, items)

    def changed(self, slot: _Slot, part: object | None, items: list[Any], *,
                seq: bool | None = None) -> None:
        """``part`` (``None``: no chunk, what was held is let out) became ``items``; ``seq``:
        whether the action belongs to the model chunk being processed (default: when there is
        a ``part``)."""
        texts = [_text(i) for i in items]
        if all(t is not None for t in texts) and (part is None or _text(part) is not None):
            before = slot.held + ((_text(part) or "") if part is not None else "")
            after = "".join(t or "" for t in texts)
            kind = items[0]
        else:
            before = slot.held + (_shown(part) if part is not None else "")
            after = "".join(_shown(i) for i in items)
            kind = part if part is not None else items[0]
        held = bool(slot.held)
        slot.held = ""
        action: Action
        if after == before:
            action = "released" if held or part is None else "passed"
        elif slot.holds and before.startswith(after):
            action = "released"  # a part of it: the rest is still held
            before, slot.held = after, before[len(after):]
        else:
            if slot.holds:  # it may still hold the end of what it was given
                slot.held = _tail(before, after)
                before = before[:len(before) - len(slot.held)]
            action = "redacted" if slot.redacts or brings_mask(before, after) else "changed"
        if action == "passed":  # an equal copy of the chunk
            self._action(slot, "passed", kind)
        else:
            self._action(slot, action, kind, before=before, after=after,
                         seq=(part is not None) if seq is None else seq)

    @staticmethod
    def texts(messages: Sequence[Message]) -> list[str]:
        """Each message as text (its text parts, and each tool result as ``name: <JSON>``):
        what ``message_hook`` compares."""
        return [_message_text(m) for m in messages]

    def message_hook(self, spec: ProcessorSpec, hook: str, before: list[str],
                     after: Sequence[Message]) -> None:
        """A message hook (``process_input``, ``process_tool_result``...) of ``spec`` ran:
        an action (``chunk_type``: the hook) for each message whose text it changed — all of
        them as one when it added or removed messages; nothing when it changed no text."""
        now = self.texts(after)
        if now == before:
            return
        pairs = [(b, a) for b, a in zip(before, now) if b != a] if len(now) == len(before) \
            else [("\n".join(before), "\n".join(now))]
        self._changed_text(spec, hook, pairs)

    @staticmethod
    def tool_result(call: Mapping[str, object], messages: Sequence[Message], default: Any) -> str:
        """The JSON of the result the message list holds for ``call`` (its
        ``tool_call_id``), or of ``default`` (what the tool returned) when it holds none."""
        cid = call.get("tool_call_id")
        for message in reversed(messages):
            for part in message.content.parts:
                if isinstance(part, ToolInvocationPart) and part.tool_call_id == cid:
                    if part.state == "result":
                        return _json(part.tool_invocation.result)
                    return _json(default)
        return _json(default)

    def tool_hook(self, spec: ProcessorSpec, call: Mapping[str, object], before: str, after: str
                  ) -> None:
        """``spec``'s ``process_tool_result`` ran for ``call``: an action when it changed the
        call's result (``tool_result`` before and after; shown as ``name: <JSON>``)."""
        if before != after:
            name = call.get("tool_name")
            self._changed_text(spec, "process_tool_result",
                               [(f"{name}: {before}", f"{name}: {after}")])

    def _changed_text(self, spec: ProcessorSpec, hook: str,
                      pairs: list[tuple[str, str]]) -> None:
        slot = self._slot(spec)
        for old, new in pairs:
            action: Action = "redacted" if slot.redacts or brings_mask(old, new) else "changed"
            self.emit(ProcessorAction(
                run_id=self.run_id, step_number=self.step_number(), seq=None,
                processor_id=spec.id, action=action, chunk_type=hook, before=old, after=new))

    def flushed(self, spec: ProcessorSpec, items: Iterable[object]) -> None:
        """What ``spec``'s ``flush_output_stream`` let out at the end of a step."""
        items = list(items)
        if items:
            self.changed(self._slot(spec), None, items)

    # ------------------------------------------------------------------ the two ends

    async def model(self, source: Iterable[Chunk] | AsyncIterator[Chunk], step_number: int
                    ) -> AsyncGenerator[Chunk, None]:
        """``source`` (the model's stream of a step), reporting each chunk as ``model-chunk``
        before the chain sees it. Closing this closes ``source``."""
        try:
            if isinstance(source, (list, tuple)):
                for chunk in source:
                    self._model(chunk, step_number)
                    yield chunk
            else:
                async for chunk in source:  # type: ignore[union-attr]
                    self._model(chunk, step_number)
                    yield chunk
        finally:
            self.seq = None  # what comes after the model's chunks is not one of them
            closer = getattr(source, "aclose", None)
            if closer is not None:
                await closer()

    def _model(self, chunk: object, step_number: int) -> None:
        self.seq = seq = self._model_seq
        self._model_seq += 1
        self.emit(ModelProduced(run_id=self.run_id, step_number=step_number, seq=seq,
                             chunk=_wire(chunk)))

    async def out(self, chunks: AsyncGenerator[Chunk, None]) -> AsyncGenerator[Chunk, None]:
        """``chunks`` (the run's), reporting each as ``chunk`` just before the consumer gets
        it. Closing this closes ``chunks``."""
        try:
            async for chunk in chunks:
                seq = self._out_seq
                self._out_seq += 1
                self.emit(ChunkOut(run_id=self.run_id, seq=seq, chunk=_wire(chunk)))
                yield chunk
        finally:
            await chunks.aclose()


def now_ms() -> float:
    """Epoch milliseconds (the events' ``at``)."""
    return time.time() * 1000.0
