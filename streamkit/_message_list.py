"""The ``MessageList``: the live conversation of one request.

Private module: import these names from ``streamkit.messages``. It holds the list with its
sources, system buckets, merge of assistant steps, tool-invocation patches, the reconcile rules
for hook return values, and checkpoints; the provider/UI formats it renders with live in
``streamkit._message_formats``. It knows nothing of processors, models or storage.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET

from streamkit._message_formats import UIMessage, to_core, to_ui
from streamkit._message_model import (
    _MS,
    Message,
    MessageInput,
    StepStartPart,
    ToolInvocation,
    ToolInvocationPart,
    _new_id,
    _now_ms,
    get_text,
    to_message,
    to_messages,
    to_part,
)
from streamkit._prompt import PromptMessage
from streamkit.errors import MessageError, ProcessorError

__all__ = ["MessageList", "MessageView", "MessageListCheckpoint", "SystemSnapshot", "Source"]

Source: TypeAlias = Literal["input", "response", "memory", "system", "context", "user"]

_SOURCES = frozenset(("input", "response", "memory", "system", "context"))
_CONVERSATION = frozenset(("memory", "context", "input", "response"))
_LIVE = frozenset(("input", "response"))
# A merge or patch never moves a tool invocation backwards (a late "call" does not undo a result).
_STATE_RANK = {"partial-call": 0, "call": 1, "approval-requested": 2, "approval-responded": 3,
               "result": 4, "output-error": 4, "output-denied": 4}
_HOOK_RESULT_KEYS = frozenset(("messages", "system_messages", "systemMessages", "message_list"))
_EXPECTED_RESULT = ("None, the same message_list it was given (changed in place), a list of "
                    "messages, or a dict {'messages': [...], 'system_messages': [...]}")


def _source(source: str) -> str:
    if source == "user":
        return "input"
    if source not in _SOURCES:
        raise MessageError(f"unknown message source {source!r}; expected one of input, response, "
                           "memory, system, context (or 'user', an alias of 'input')")
    return source


def _is_sealed(message: Message) -> bool:
    metadata = message.content.metadata
    mastra = metadata.get("mastra") if isinstance(metadata, dict) else None
    return isinstance(mastra, dict) and mastra.get("sealed") is True


def _restore_fields(target: msgspec.Struct, saved: msgspec.Struct) -> None:
    for name in target.__struct_fields__:
        setattr(target, name, getattr(saved, name))


class MessageView:
    """The messages of some sources, in conversation order (``message_list.get.<name>``).

    Example:
        >>> ml = MessageList("hi")
        >>> ml.get.input.core()
        [{'role': 'user', 'content': 'hi'}]
    """

    __slots__ = ("_list", "_sources", "name")

    def __init__(self, message_list: MessageList, name: str, sources: frozenset[str]) -> None:
        self._list = message_list
        self._sources = sources
        self.name = name

    def db(self) -> list[Message]:
        """The live ``Message`` objects (a fresh list; editing a message edits the list's)."""
        sources = self._list._sources
        return [m for m in self._list._conversation if sources[m.id] in self._sources]

    def ui(self) -> list[UIMessage]:
        """UI dicts (see ``to_ui``): ``id``, ``role``, ``createdAt``, ``content``, ``parts``."""
        return to_ui(self.db())

    def core(self) -> list[PromptMessage]:
        """The provider ("core") format (see ``to_core``); no system messages."""
        return to_core(self.db())

    def __len__(self) -> int:
        return len(self.db())

    def __repr__(self) -> str:
        return f"<MessageView {self.name}: {len(self)} messages>"


class MessageViews:
    """``message_list.get``: the views ``input``, ``response``, ``remembered`` (source
    ``memory``), ``context`` and ``all`` (every non-system message).

    Decision (issue 28): the views are made when read, and the list does not keep them. A list
    holding views that hold the list was a reference cycle, so every run's messages waited for
    the cyclic garbage collector instead of being freed when the run ended (21 objects per
    served request, and the collector's pauses in the tail of the first-chunk latency).
    """

    __slots__ = ("_list",)

    def __init__(self, message_list: MessageList) -> None:
        self._list = message_list

    @property
    def input(self) -> MessageView:
        return MessageView(self._list, "input", _INPUT)

    @property
    def response(self) -> MessageView:
        return MessageView(self._list, "response", _RESPONSE)

    @property
    def remembered(self) -> MessageView:
        return MessageView(self._list, "remembered", _MEMORY)

    @property
    def context(self) -> MessageView:
        return MessageView(self._list, "context", _CONTEXT)

    @property
    def all(self) -> MessageView:
        return MessageView(self._list, "all", _CONVERSATION)


# The sources of each view (every MessageList has the five views: built once, not per list).
_INPUT = frozenset(("input",))
_RESPONSE = frozenset(("response",))
_MEMORY = frozenset(("memory",))
_CONTEXT = frozenset(("context",))


_S = TypeVar("_S", bound=msgspec.Struct)
#: A shallow copy of a msgspec struct: the struct's own ``__copy__`` (~70 ns), without
#: ``copy.copy``'s dispatch (~160 ns); a checkpoint is taken at every step. (msgspec's stubs do
#: not declare the method.)
_copy: Callable[[_S], _S] = msgspec.Struct.__copy__  # type: ignore[attr-defined]


#: The role a message added without one gets, by source (``MessageList.add``); else user.
_DEFAULT_ROLE = {"response": "assistant", "system": "system"}


class MessageListCheckpoint:
    """Opaque token from ``MessageList.checkpoint()``; pass it to ``rollback()``."""

    __slots__ = ("_owner", "_conversation", "_sources", "_messages")

    def __init__(self, owner: MessageList) -> None:
        self._owner = owner
        self._conversation = list(owner._conversation)
        self._sources = dict(owner._sources)
        # Shallow copies of every struct a later change may touch: the message, its content,
        # each part and each tool invocation. Nested dicts (args, result, metadata) are shared.
        self._messages = [
            (m, _copy(m), m.content, _copy(m.content), list(m.content.parts),
             [(p, _copy(p), _copy(p.tool_invocation)
               if isinstance(p, ToolInvocationPart) else None) for p in m.content.parts],
             list(m.content.tool_invocations) if isinstance(m.content.tool_invocations, list)
             else None)
            for m in self._conversation
        ]


class SystemSnapshot:
    """Opaque copy of the untagged system bucket from ``MessageList.snapshot_system()``.

    Kept as the messages' msgspec JSON (the structs as they are, not Mastra's wire form: no
    timestamp formatting, ~0.2 µs a message): ``restore_system`` compares encodings and decodes
    fresh messages only when a step changed the bucket (a msgspec round trip: ~5x faster than
    ``copy.deepcopy``).
    """

    __slots__ = ("_encoded",)

    def __init__(self, messages: Iterable[Message]) -> None:
        self._encoded = _snapshot_encode(list(messages))


_snapshot_encode = msgspec.json.Encoder().encode
_snapshot_decode = msgspec.json.Decoder(list[Message]).decode


class MessageList:
    """The conversation of one request: messages by source, plus system messages.

    Sources: ``input`` (this call's new messages; ``user`` is an alias), ``response`` (what
    this call produced), ``memory`` (history), ``context`` (in the prompt, never stored) and
    ``system``. The conversation (every non-system message) is kept in ``created_at`` order;
    each new non-memory message gets a ``created_at`` strictly after every message already in
    the list (memory messages keep theirs). System messages live apart: one untagged bucket
    (agent instructions) and tagged buckets in the order their tags first appeared; the prompt
    is untagged system, tagged system, then the conversation.

    Assistant steps merge: an assistant message added with source ``response`` joins the last
    message of the conversation when that is an assistant ``response`` message of the same
    thread (not sealed via ``metadata.mastra.sealed``) — its parts are appended, tool
    invocations already present (same ``tool_call_id``) are patched instead, and the target
    keeps its id and ``created_at``. The caller marks a new model step: ``add(...,
    new_step=True)`` puts a ``StepStartPart`` before the appended parts (or the added message
    starts with its own ``StepStartPart``). ``merge=False`` always adds a separate message.

    Example:
        >>> ml = MessageList(thread_id="t1")
        >>> _ = ml.add("Who is customer C-42?", "input")
        >>> _ = ml.add(Message.assistant([ToolInvocationPart.call("c1", "lookupCustomer",
        ...                                                        {"customerId": "C-42"})]),
        ...            "response")
        >>> ml.update_tool_invocation(ToolInvocationPart.returned("c1", "lookupCustomer",
        ...                                                       {"name": "Ada"}))
        True
        >>> _ = ml.add(Message.assistant("Ada Lovelace."), "response", new_step=True)
        >>> [p.type for p in ml.get.response.db()[0].content.parts]
        ['tool-invocation', 'step-start', 'text']
        >>> [m["role"] for m in ml.prompt()]
        ['user', 'assistant', 'tool', 'assistant']
    """

    def __init__(self, messages: MessageInput | None = None, source: Source = "input", *,
                 thread_id: str | None = None, resource_id: str | None = None) -> None:
        """Create a list, optionally adding ``messages`` with ``source`` right away.

        ``thread_id``/``resource_id`` are stamped on added messages that have none.
        """
        self.thread_id = thread_id
        self.resource_id = resource_id
        self._conversation: list[Message] = []
        self._by_id: dict[str, Message] = {}
        self._sources: dict[str, str] = {}
        self._untagged: list[Message] = []
        self._tagged: dict[str, list[Message]] = {}
        self._watermark: datetime | None = None
        if messages is not None:
            self.add(messages, source)

    @property
    def get(self) -> MessageViews:
        """The views of the list: ``get.input``, ``get.response``, ``get.remembered``,
        ``get.context``, ``get.all`` (see ``MessageViews``)."""
        return MessageViews(self)

    def __len__(self) -> int:
        return len(self._conversation)

    def __contains__(self, item: object) -> bool:
        return self.source_of(item) is not None if isinstance(item, (str, Message)) else False

    def __repr__(self) -> str:
        counts = {s: 0 for s in ("memory", "context", "input", "response")}
        for source in self._sources.values():
            counts[source] += 1
        system = len(self._untagged) + sum(len(b) for b in self._tagged.values())
        return (f"<MessageList {' '.join(f'{k}={v}' for k, v in counts.items())} "
                f"system={system}>")

    # -- adding and removing -----------------------------------------------------------------

    def add(self, messages: MessageInput, source: Source = "input", *, new_step: bool = False,
            merge: bool = True) -> list[Message]:
        """Add messages from ``source``; returns the stored messages that now hold them.

        ``messages`` is a str (a user message; an assistant message for source ``response``),
        a ``Message``, a dict (Mastra DB, UI or provider shape, see ``to_message``) or a list
        of these. Messages get a uuid4 id when they have none. ``role: system`` messages go to
        the untagged system bucket (and are ignored from ``memory``); source ``system`` takes
        only system messages. Adding a message whose id is already in the list replaces it in
        place (it keeps its position); the new source wins, except that a ``memory`` copy never
        demotes a live ``input``/``response`` message. See the class docstring for merging;
        ``new_step`` applies to the first message added.

        Raises:
            MessageError: an unknown source or a value that is not a message (nothing is added).

        Example:
            >>> ml = MessageList()
            >>> [m.role for m in ml.add(["hi", {"role": "assistant", "content": "hello"}])]
            ['user', 'assistant']
        """
        canonical = _source(source)
        default_role = _DEFAULT_ROLE.get(canonical, "user")
        items = to_messages(messages, default_role=default_role)
        if canonical == "system":
            return self.add_system(items)
        stored: list[Message] = []
        for message in items:
            if message.role == "system":
                if canonical != "memory":  # Mastra ignores system messages loaded from memory
                    self.add_system(message)
                continue
            target = self._add_one(message, canonical, new_step=new_step, merge=merge)
            new_step = False
            if not stored or not any(target is m for m in stored):  # a merge: already there
                stored.append(target)
        return stored

    def _add_one(self, message: Message, source: str, *, new_step: bool, merge: bool) -> Message:
        if not message.id:
            message.id = _new_id()
        if message.thread_id is UNSET and self.thread_id is not None:
            message.thread_id = self.thread_id
        if message.resource_id is UNSET and self.resource_id is not None:
            message.resource_id = self.resource_id
        existing = self._by_id.get(message.id)
        if existing is not None:
            return self._replace(existing, message, source)
        if merge and source == "response" and message.role == "assistant":
            target = self._merge_target(message)
            if target is not None:
                self._merge(target, message, new_step)
                return target
        watermark = self._watermark
        if source != "memory" and watermark is not None and message.created_at <= watermark:
            message.created_at = watermark + _MS
        self._conversation.append(message)
        self._by_id[message.id] = message
        self._sources[message.id] = source
        self._settle(len(self._conversation) - 1)
        return message

    def _settle(self, index: int) -> None:
        """Keep the conversation in ``created_at`` order after placing a message at ``index``."""
        conversation = self._conversation
        message = conversation[index]
        if self._watermark is None or message.created_at > self._watermark:
            self._watermark = message.created_at
        if ((index > 0 and conversation[index - 1].created_at > message.created_at)
                or (index + 1 < len(conversation)
                    and conversation[index + 1].created_at < message.created_at)):
            del conversation[index]
            # insort_right: a message with an equal timestamp goes after the ones already there
            bisect.insort_right(conversation, message, key=lambda m: m.created_at)

    def _replace(self, existing: Message, message: Message, source: str) -> Message:
        old = self._sources[existing.id]
        self._sources[message.id] = old if source == "memory" and old in _LIVE else source
        if existing is not message:
            index = next(i for i, m in enumerate(self._conversation) if m is existing)
            self._conversation[index] = message
            self._by_id[message.id] = message
            self._settle(index)
        return message

    def _merge_target(self, message: Message) -> Message | None:
        if not self._conversation:
            return None
        last = self._conversation[-1]
        if (last.role != "assistant" or self._sources[last.id] != "response"
                or last.thread_id != message.thread_id or _is_sealed(last)):
            return None
        return last

    def _merge(self, target: Message, incoming: Message, new_step: bool) -> None:
        parts = target.content.parts
        incoming_parts = incoming.content.parts
        if (new_step and parts and not isinstance(parts[-1], StepStartPart)
                and not (incoming_parts and isinstance(incoming_parts[0], StepStartPart))):
            parts.append(StepStartPart(created_at=_now_ms()))
        for part in incoming_parts:
            if isinstance(part, ToolInvocationPart):
                existing = self._find_tool_part(target, part.tool_call_id)
                if existing is not None:
                    self._patch(target, existing, part)
                    continue
            parts.append(part)
        text = incoming.content.content
        if isinstance(text, str) and text:  # like Mastra: the mirror holds the latest text
            target.content.content = text
        metadata = incoming.content.metadata
        if isinstance(metadata, dict) and metadata:
            current = target.content.metadata
            target.content.metadata = {**(current if isinstance(current, dict) else {}),
                                       **metadata}

    @staticmethod
    def _find_tool_part(message: Message, tool_call_id: str) -> ToolInvocationPart | None:
        for part in reversed(message.content.parts):
            if isinstance(part, ToolInvocationPart) and part.tool_call_id == tool_call_id:
                return part
        return None

    def _patch(self, message: Message, part: ToolInvocationPart, update: ToolInvocationPart,
               keep_id: bool = False) -> None:
        old, new = part.tool_invocation, update.tool_invocation
        if _STATE_RANK.get(new.state, 0) < _STATE_RANK.get(old.state, 0):
            return
        values = {name: getattr(old, name) if getattr(new, name) is UNSET else getattr(new, name)
                  for name in ToolInvocation.__struct_fields__}
        if isinstance(old.args, dict) and isinstance(new.args, dict):
            values["args"] = {**old.args, **new.args}
        if keep_id:
            values["tool_call_id"] = old.tool_call_id
        # A new object, not an in-place edit: checkpoints hold the old one.
        invocation = part.tool_invocation = ToolInvocation(**values)
        for name in ("provider_executed", "title", "preliminary"):
            if getattr(update, name) is not UNSET:
                setattr(part, name, getattr(update, name))
        if isinstance(update.provider_metadata, dict):
            current = part.provider_metadata
            part.provider_metadata = {**(current if isinstance(current, dict) else {}),
                                      **update.provider_metadata}
        mirror = message.content.tool_invocations  # Mastra's legacy copy, kept in step
        if isinstance(mirror, list):
            found = any(t.tool_call_id == invocation.tool_call_id for t in mirror)
            message.content.tool_invocations = [
                invocation if t.tool_call_id == invocation.tool_call_id else t for t in mirror
            ] + ([] if found or invocation.state != "result" else [invocation])
        elif invocation.state == "result":
            message.content.tool_invocations = [invocation]

    def remove_by_ids(self, ids: str | Iterable[str]) -> list[Message]:
        """Remove conversation messages by id; returns the removed ones in conversation order.

        Unknown ids are skipped; system messages are not touched.

        Example:
            >>> ml = MessageList(Message.user("hi", id="m1"))
            >>> [m.id for m in ml.remove_by_ids(["m1", "nope"])], len(ml)
            (['m1'], 0)
        """
        wanted = {ids} if isinstance(ids, str) else set(ids)
        for item in wanted:
            if not isinstance(item, str):
                raise MessageError(f"remove_by_ids() takes message ids (str), "
                                   f"got {type(item).__name__}")
        removed = [m for m in self._conversation if m.id in wanted]
        if removed:
            self._conversation = [m for m in self._conversation if m.id not in wanted]
            for message in removed:
                del self._by_id[message.id]
                del self._sources[message.id]
        return removed

    def update_tool_invocation(self, part: ToolInvocationPart | Mapping[str, object]) -> bool:
        """Patch the stored tool invocation with ``part``'s ``tool_call_id``; ``False`` if none.

        Walks the conversation backwards. Keys set on ``part.tool_invocation`` replace the
        stored ones (``args`` are merged); a state never moves backwards. When no invocation
        has that id, a pending provider-executed call of the same tool is patched instead. A
        patched ``memory`` message moves to ``response`` so that it is stored again.

        Raises:
            MessageError: ``part`` is not a tool-invocation part (or its dict).

        Example:
            >>> ml = MessageList(Message.assistant([ToolInvocationPart.call("c1", "t")]),
            ...                  "response")
            >>> ml.update_tool_invocation(ToolInvocationPart.returned("c1", "t", 42))
            True
            >>> ml.get.response.db()[0].content.parts[0].tool_invocation.result
            42
        """
        patch = to_part(part) if isinstance(part, Mapping) else part
        if not isinstance(patch, ToolInvocationPart):
            raise MessageError(f"update_tool_invocation() takes a ToolInvocationPart, "
                               f"got {type(patch).__name__}")
        for by_name in (False, True):
            for message in reversed(self._conversation):
                for stored in reversed(message.content.parts):
                    if not isinstance(stored, ToolInvocationPart):
                        continue
                    if (stored.provider_executed is True and stored.state == "call"
                            and stored.tool_name == patch.tool_name) if by_name \
                            else stored.tool_call_id == patch.tool_call_id:
                        self._patch(message, stored, patch, keep_id=by_name)
                        if self._sources[message.id] == "memory":
                            self._sources[message.id] = "response"
                        return True
        return False

    # -- system messages ---------------------------------------------------------------------

    def add_system(self, messages: MessageInput, tag: str | None = None) -> list[Message]:
        """Add system messages (text, a system ``Message``/dict, or a list) to a bucket.

        ``tag=None`` is the untagged bucket (agent instructions). A message whose text is
        already in the bucket is skipped; returns the messages actually added.

        Raises:
            MessageError: a non-system message, a bad tag, or a value that is not a message.

        Example:
            >>> ml = MessageList()
            >>> len(ml.add_system(["Be brief.", "Be brief."]))
            1
        """
        if tag is not None and (not isinstance(tag, str) or not tag):
            raise MessageError(f"a system message tag must be a non-empty str, got {tag!r}")
        if isinstance(messages, str):  # an agent's instructions, every run: one text, no lists
            bucket = self._untagged if tag is None else self._tagged.setdefault(tag, [])
            if any(get_text(m) == messages for m in bucket):
                return []
            bucket.append(message := to_message(messages, default_role="system"))
            return [message]
        items = to_messages(messages, default_role="system")
        for message in items:
            if message.role != "system":
                raise MessageError(f"add_system() takes system messages, got a "
                                   f"{message.role!r} message")
        bucket = self._untagged if tag is None else self._tagged.setdefault(tag, [])
        seen = {get_text(m) for m in bucket}
        added: list[Message] = []
        for message in items:
            text = get_text(message)
            if text not in seen:
                seen.add(text)
                bucket.append(message)
                added.append(message)
        return added

    def get_system_messages(self, tag: str | None = None) -> list[Message]:
        """The messages of one bucket (untagged when ``tag`` is None), as a fresh list."""
        return list(self._untagged if tag is None else self._tagged.get(tag, ()))

    def get_all_system_messages(self) -> list[Message]:
        """Untagged system messages, then each tagged bucket in the order tags appeared."""
        result = list(self._untagged)
        for bucket in self._tagged.values():
            result.extend(bucket)
        return result

    def replace_all_system_messages(self, messages: MessageInput) -> None:
        """Replace the **untagged** bucket; tagged buckets are kept.

        Takes what ``add_system`` takes; as in Mastra, entries whose role is not ``system``
        are ignored and duplicates (by text) are dropped.

        Raises:
            MessageError: a value that is not a message (the bucket is left unchanged).
        """
        items = to_messages(messages, default_role="system")
        self._untagged = []
        self.add_system([m for m in items if m.role == "system"])

    def clear_system_messages(self, tag: str | None = None) -> None:
        """Empty the untagged bucket (``tag=None``) or drop the bucket of ``tag``."""
        if tag is None:
            self._untagged = []
        else:
            self._tagged.pop(tag, None)

    def snapshot_system(self) -> SystemSnapshot:
        """A copy of the untagged bucket, to reset it at the start of every step.

        Example:
            >>> ml = MessageList()
            >>> _ = ml.add_system("You are helpful.")
            >>> snap = ml.snapshot_system()
            >>> ml.replace_all_system_messages(["Changed for one step."])
            >>> ml.restore_system(snap)
            >>> [get_text(m) for m in ml.get_system_messages()]
            ['You are helpful.']
        """
        return SystemSnapshot(self._untagged)

    def restore_system(self, snapshot: SystemSnapshot) -> None:
        """Reset the untagged bucket to ``snapshot`` (fresh copies: it can be reused)."""
        if not isinstance(snapshot, SystemSnapshot):
            raise MessageError(f"restore_system() takes a SystemSnapshot from snapshot_system(), "
                               f"got {type(snapshot).__name__}")
        if _snapshot_encode(self._untagged) == snapshot._encoded:
            return  # unchanged (compared by value): the bucket's messages stay as they are
        self._untagged = _snapshot_decode(snapshot._encoded)

    # -- reading -----------------------------------------------------------------------------

    def prompt(self) -> list[PromptMessage]:
        """The provider ("core") prompt: untagged system, tagged system, then the conversation
        (memory, context, input and response messages in ``created_at`` order)."""
        return to_core(self.get_all_system_messages()) + to_core(self._conversation)

    def with_sources(self) -> list[tuple[Message, str]]:
        """The messages of the ``all`` view, in order, each with its source (``input``,
        ``response``, ``memory`` or ``context``): one walk where reading the views one by one
        would take several (the step ends' snapshot splits the conversation this way)."""
        sources = self._sources
        return [(m, source) for m in self._conversation
                if (source := sources[m.id]) in _CONVERSATION]

    def source_of(self, message: Message | str | object) -> str | None:
        """The source of a message (or message id): ``input``, ``response``, ``memory``,
        ``context``, ``system``, or ``None`` when it is not in the list."""
        key = message.id if isinstance(message, Message) else message
        if not isinstance(key, str):
            return None
        source = self._sources.get(key)
        if source is not None:
            return source
        if any(m.id == key for m in self.get_all_system_messages()):
            return "system"
        return None

    # -- hook results ------------------------------------------------------------------------

    def apply_hook_result(self, result: object, given: Sequence[Message], default_source: Source,
                          *, processor_id: str | None = None, hook: str | None = None) -> None:
        """Apply what a message hook returned (Mastra's rules).

        * ``None`` or this same list: nothing to do (the hook changed the list in place).
        * a list of messages (``Message``, dict or str): the complete new set of ``given``.
          Given messages whose id is missing are removed — **returning** ``[]`` **deletes every
          message the hook was given**. Returned messages replace the stored ones with their id,
          keeping their source (``default_source`` for new ones); the identical stored object
          is skipped. ``role: system`` messages become untagged system messages.
        * a dict with ``messages`` (as above) and/or ``system_messages`` (replaces the untagged
          system bucket); ``systemMessages`` and ``message_list`` (must be this list) are
          accepted too.

        Nothing is changed when the value is rejected.

        Raises:
            ProcessorError: a different ``MessageList``, a value of another type, an unknown
                dict key, or an entry that is not a message.

        Example:
            >>> ml = MessageList(["a", "b"])
            >>> given = ml.get.input.db()
            >>> ml.apply_hook_result(given[1:], given, "input")
            >>> [get_text(m) for m in ml.get.all.db()]
            ['b']
        """
        if result is None or result is self:
            return

        def reject(problem: str) -> ProcessorError:
            where = f"{processor_id}.{hook}" if processor_id and hook else (hook or processor_id)
            return ProcessorError(f"{where + ' ' if where else 'a hook '}{problem}; a message hook "
                                  f"must return {_EXPECTED_RESULT}",
                                  processor_id=processor_id, hook=hook)

        if isinstance(result, MessageList):
            raise reject("returned a different MessageList than the one it was given")
        system: object = None
        messages: object
        if isinstance(result, (list, tuple)):
            messages = result
        elif isinstance(result, Mapping):
            unknown = sorted(str(k) for k in result if k not in _HOOK_RESULT_KEYS)
            if unknown:
                raise reject(f"returned a dict with unknown key(s) {', '.join(unknown)}")
            if "message_list" in result:
                if "messages" in result:
                    raise reject("returned both 'messages' and 'message_list'")
                if result["message_list"] is not self:
                    raise reject("returned a different MessageList than the one it was given")
            messages = result.get("messages")
            system = result.get("system_messages", result.get("systemMessages"))
            for key, value in (("messages", messages), ("system_messages", system)):
                if value is not None and not isinstance(value, (list, tuple)):
                    raise reject(f"returned {key!r} as a {type(value).__name__}, not a list")
        else:
            raise reject(f"returned a {type(result).__name__}")
        canonical = _source(default_source)
        try:
            # Both were checked above to be None or a list/tuple.
            returned = None if not isinstance(messages, (list, tuple)) else to_messages(
                list(messages), default_role="assistant" if canonical == "response" else "user")
            system_messages = None if not isinstance(system, (list, tuple)) else to_messages(
                list(system), default_role="system")
        except MessageError as exc:
            raise reject(f"returned an invalid message ({exc.message})") from exc
        if returned is not None:
            self._reconcile(returned, given, canonical)
        if system_messages is not None:
            self.replace_all_system_messages(system_messages)

    def _reconcile(self, returned: list[Message], given: Sequence[Message], default: str) -> None:
        kept = {m.id for m in returned if m.role != "system"}
        self.remove_by_ids([m.id for m in given if m.id not in kept])
        for message in returned:
            if message.role == "system":
                self.add_system(message)
            elif self._by_id.get(message.id) is not message:
                source = self._sources.get(message.id, default)
                self._add_one(message, source, new_step=False, merge=False)

    # -- checkpoints -------------------------------------------------------------------------

    def checkpoint(self) -> MessageListCheckpoint:
        """Remember the conversation so that ``rollback`` can undo a rejected step.

        Example:
            >>> ml = MessageList("hi")
            >>> token = ml.checkpoint()
            >>> _ = ml.add("a rejected answer", "response")
            >>> ml.rollback(token)
            >>> len(ml.get.response)
            0
        """
        return MessageListCheckpoint(self)

    def rollback(self, token: MessageListCheckpoint) -> None:
        """Undo every change to the conversation since ``checkpoint()`` returned ``token``.

        Messages added since are removed (a merged message loses the parts appended to it),
        removed ones come back, sources, parts, tool invocation states, the ``content`` mirrors
        and every field of the messages, contents, parts and tool invocations are restored.
        Nested values (dicts such as ``args``, ``result`` or ``metadata``) edited in place are
        not. System messages are not touched (see ``snapshot_system``). A token can be used
        more than once; new messages still get timestamps after everything ever added.

        Raises:
            MessageError: ``token`` is not a checkpoint of this list.
        """
        if not isinstance(token, MessageListCheckpoint) or token._owner is not self:
            raise MessageError("rollback() takes a checkpoint made by this MessageList's "
                               "checkpoint()")
        for message, saved, content, saved_content, parts, saved_parts, mirror in token._messages:
            _restore_fields(message, saved)
            _restore_fields(content, saved_content)
            content.parts[:] = parts
            for part, saved_part, saved_invocation in saved_parts:
                _restore_fields(part, saved_part)
                if isinstance(part, ToolInvocationPart) and saved_invocation is not None:
                    _restore_fields(part.tool_invocation, saved_invocation)
            if mirror is not None and isinstance(content.tool_invocations, list):
                content.tool_invocations[:] = mirror
        self._conversation = list(token._conversation)
        self._by_id = {m.id: m for m in self._conversation}
        self._sources = dict(token._sources)
