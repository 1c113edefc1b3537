"""The message model: Mastra's stored message (``MastraDBMessage``) and its parts.

Private module: import these names from ``streamkit.messages``. What belongs here: the message
and part structs, their JSON form (Mastra's camelCase, so a message stored by Mastra decodes and
re-encodes to equal JSON), turning loose input (strings, dicts in Mastra / UI / provider shape)
into messages, and ``get_text``. It is the bottom of the message modules: the provider/UI
formats (``_message_formats``) and the ``MessageList`` (``_message_list``) build on it, and it
imports neither. What does not belong: chunks (``streamkit.chunks``), storage
(``streamkit.memory``).

Absent is not null: optional keys default to ``msgspec.UNSET`` and are left out on encode, so
``decode_message(raw)`` re-encodes to the same JSON.

Example:
    >>> msg = Message.user("Who is customer C-42?")
    >>> get_text(msg)
    'Who is customer C-42?'
    >>> decode_message(message_encoder.encode(msg)) == msg
    True
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from streamkit.errors import MessageError
from streamkit.validate import is_number

__all__ = [
    # the model
    "Role", "ToolState", "Message", "MessageContent", "Part", "TextPart", "ReasoningPart",
    "ReasoningText", "RedactedReasoning", "ToolInvocationPart", "ToolInvocation", "ToolApproval",
    "FilePart", "ImagePart", "SourcePart", "SourceInfo", "SourceDocumentPart", "StepStartPart",
    "ErrorPart", "DataPart",
    # JSON
    "MessageEncoder", "message_encoder", "decode_message", "decode_messages", "message_to_dict",
    "message_from_dict", "format_timestamp",
    # loose input, text
    "to_part", "to_message", "to_messages", "get_text",
]

Role: TypeAlias = Literal["user", "assistant", "system", "signal"]
ToolState: TypeAlias = Literal[
    "partial-call", "call", "result", "output-error", "output-denied",
    "approval-requested", "approval-responded",
]
_ROLES = frozenset(("user", "assistant", "system", "signal"))
_UTC = UTC
_MS = timedelta(milliseconds=1)


#: Ids made per ``os.urandom`` call: one system call for many ids instead of one each.
_IDS_PER_DRAW = 64
#: Ready ids. ``deque.popleft`` is atomic, so threads never take the same one; two threads that
#: find it empty at once both refill it, which only makes more ids. Emptied in a forked child,
#: which would otherwise hand out its parent's next ids.
_ids: deque[str] = deque()
os.register_at_fork(after_in_child=_ids.clear)


#: A draw's version and variant bits, set in all of its ids at once (the draw as one integer:
#: one AND, one OR): byte 6 becomes ``4x`` (version 4), byte 8 ``10xxxxxx`` (RFC 4122 variant),
#: as ``uuid4`` sets them.
_V4_KEEP = int.from_bytes((b"\xff" * 6 + b"\x0f\xff\x3f" + b"\xff" * 7) * _IDS_PER_DRAW)
_V4_SET = int.from_bytes((b"\x00" * 6 + b"\x40\x00\x80" + b"\x00" * 7) * _IDS_PER_DRAW)
#: The five groups of an id's 32 hex digits (8-4-4-4-12).
_UUID_GROUPS = re.compile("(.{8})(.{4})(.{4})(.{4})(.{12})")


def _new_id() -> str:
    """A random (version 4) UUID as text, the same as ``str(uuid.uuid4())`` made from the same
    random bytes (``os.urandom``, the source ``uuid4`` uses), drawn 64 at a time and formatted
    in C (the bits set on the draw as one integer, the groups cut by one ``findall`` and joined
    by ``map``): ~0.5 µs an id, ~2.8 for ``uuid4``; a request makes several: its run id, its
    messages' ids."""
    try:
        return _ids.popleft()
    except IndexError:
        _ids.extend(_v4_texts(os.urandom(16 * _IDS_PER_DRAW)))
        return _ids.popleft()


def _v4_texts(draw: bytes) -> map[str]:
    """The ids of one draw (``16 * _IDS_PER_DRAW`` random bytes), each what
    ``str(uuid.UUID(bytes=<its 16 bytes>, version=4))`` gives (tests/test_message_ids.py)."""
    bits = (int.from_bytes(draw) & _V4_KEEP) | _V4_SET
    return map("-".join, _UUID_GROUPS.findall(bits.to_bytes(len(draw)).hex()))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


#: The last ``_now()``: its millisecond and its datetime (immutable, so shared). A request makes
#: several timestamps (its messages', its step's), mostly in one millisecond.
_last_now: tuple[int, datetime] = (-1, _EPOCH)


def _now() -> datetime:
    # JavaScript dates have millisecond precision; staying there keeps timestamps exact on the
    # wire. (The epoch plus whole milliseconds, as a product of one millisecond: ~0.34 µs;
    # ``timedelta(milliseconds=...)`` ~0.6, ``now().replace()`` ~0.9; the same millisecond
    # again: ~0.1.) A thread that reads the pair while another replaces it gets one pair or the
    # other, both true.
    global _last_now
    ms = time.time_ns() // 1_000_000
    last = _last_now
    if last[0] == ms:
        return last[1]
    now = _EPOCH + _MS * ms
    _last_now = (ms, now)
    return now


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------------------------
# Parts
# --------------------------------------------------------------------------------------------


class _PartBase(msgspec.Struct, rename="camel", kw_only=True, repr_omit_defaults=True):
    """Fields every part may carry: ``providerMetadata`` and ``createdAt`` (epoch milliseconds)."""

    provider_metadata: dict[str, Any] | UnsetType = UNSET
    created_at: int | UnsetType = UNSET


class TextPart(_PartBase, tag_field="type", tag="text"):
    """Plain text. ``TextPart("hi")`` ↔ ``{"type": "text", "text": "hi"}``."""

    type: ClassVar[str] = "text"
    text: str


class ReasoningText(msgspec.Struct, tag_field="type", tag="text", repr_omit_defaults=True):
    """One visible reasoning block: ``{"type": "text", "text": ..., "signature"?: ...}``."""

    text: str
    signature: str | UnsetType = UNSET


class RedactedReasoning(msgspec.Struct, tag_field="type", tag="redacted"):
    """A reasoning block the provider redacted: ``{"type": "redacted", "data": ...}``."""

    data: str


class ReasoningPart(_PartBase, tag_field="type", tag="reasoning"):
    """Model reasoning: ``{"type": "reasoning", "reasoning": ..., "details": [...]}``.

    Example:
        >>> ReasoningPart("Look the customer up first.").text
        'Look the customer up first.'
    """

    type: ClassVar[str] = "reasoning"
    reasoning: str
    details: list[ReasoningText | RedactedReasoning] | UnsetType = UNSET

    @property
    def text(self) -> str:
        """The reasoning text: ``reasoning``, or the joined visible ``details`` when it is empty."""
        if self.reasoning or self.details is UNSET:
            return self.reasoning
        return "".join(d.text for d in self.details if isinstance(d, ReasoningText))


class ToolApproval(msgspec.Struct, rename="camel", repr_omit_defaults=True):
    """Approval state of a tool call that needs a human decision."""

    id: str
    approved: bool | UnsetType = UNSET
    reason: str | UnsetType = UNSET


class ToolInvocation(msgspec.Struct, rename="camel", kw_only=True, repr_omit_defaults=True):
    """A tool call and, once known, its outcome (``toolInvocation`` of a tool-invocation part).

    ``state`` moves ``partial-call`` → ``call`` → ``result`` (or ``output-error`` /
    ``output-denied``; ``approval-requested`` → ``approval-responded`` for approvals).
    """

    state: ToolState
    tool_call_id: str
    tool_name: str
    args: Any = msgspec.field(default_factory=dict)
    result: Any = UNSET
    is_error: bool | UnsetType = UNSET
    error_text: str | UnsetType = UNSET
    raw_input: Any = UNSET
    approval: ToolApproval | UnsetType = UNSET
    step: int | UnsetType = UNSET


class ToolInvocationPart(_PartBase, tag_field="type", tag="tool-invocation"):
    """A tool call with its state and result; tool results live inside the assistant message.

    Example:
        >>> part = ToolInvocationPart.call("call-1", "lookupCustomer", {"customerId": "C-42"})
        >>> part.state, part.tool_call_id
        ('call', 'call-1')
    """

    type: ClassVar[str] = "tool-invocation"
    tool_invocation: ToolInvocation
    provider_executed: bool | UnsetType = UNSET
    title: str | UnsetType = UNSET
    preliminary: bool | UnsetType = UNSET

    @property
    def state(self) -> str:
        """Shortcut for ``tool_invocation.state``."""
        return self.tool_invocation.state

    @property
    def tool_call_id(self) -> str:
        """Shortcut for ``tool_invocation.tool_call_id``."""
        return self.tool_invocation.tool_call_id

    @property
    def tool_name(self) -> str:
        """Shortcut for ``tool_invocation.tool_name``."""
        return self.tool_invocation.tool_name

    @classmethod
    def call(cls, tool_call_id: str, tool_name: str, args: object = None) -> ToolInvocationPart:
        """A tool call waiting for its result (state ``call``)."""
        return cls(ToolInvocation(state="call", tool_call_id=tool_call_id, tool_name=tool_name,
                                  args={} if args is None else args))

    @classmethod
    def returned(cls, tool_call_id: str, tool_name: str, result: object,
                 args: object = None) -> ToolInvocationPart:
        """A tool call with its result (state ``result``)."""
        return cls(ToolInvocation(state="result", tool_call_id=tool_call_id, tool_name=tool_name,
                                  args={} if args is None else args, result=result))

    @classmethod
    def failed(cls, tool_call_id: str, tool_name: str, error_text: str,
               args: object = None) -> ToolInvocationPart:
        """A tool call whose tool raised (state ``output-error``)."""
        return cls(ToolInvocation(state="output-error", tool_call_id=tool_call_id,
                                  tool_name=tool_name, args={} if args is None else args,
                                  error_text=error_text))


class FilePart(_PartBase, tag_field="type", tag="file"):
    """A file: ``data`` is base64, a data URI or a URL. ``FilePart("image/png", "https://…")``."""

    type: ClassVar[str] = "file"
    mime_type: str
    data: str
    filename: str | UnsetType = UNSET


class ImagePart(_PartBase, tag_field="type", tag="image"):
    """An image in an input message (``image`` is base64, a data URI or a URL)."""

    type: ClassVar[str] = "image"
    image: str
    mime_type: str | UnsetType = UNSET


class SourceInfo(msgspec.Struct, rename="camel", kw_only=True, repr_omit_defaults=True):
    """A cited source (``source`` of a source part)."""

    id: str
    url: str
    source_type: str = "url"
    title: str | UnsetType = UNSET
    provider_metadata: dict[str, Any] | UnsetType = UNSET


class SourcePart(_PartBase, tag_field="type", tag="source"):
    """A URL source the model cited. ``SourcePart(SourceInfo(id="src-0", url="https://…"))``."""

    type: ClassVar[str] = "source"
    source: SourceInfo


class SourceDocumentPart(_PartBase, tag_field="type", tag="source-document"):
    """A document source the model cited."""

    type: ClassVar[str] = "source-document"
    source_id: str
    media_type: str
    title: str
    filename: str | UnsetType = UNSET


class StepStartPart(_PartBase, tag_field="type", tag="step-start"):
    """Boundary between two loop steps inside one assistant message."""

    type: ClassVar[str] = "step-start"
    model: str | UnsetType = UNSET


class ErrorPart(_PartBase, tag_field="type", tag="error"):
    """A terminal error recorded on the attempt: ``error`` is ``{"name": ..., "message": ...}``."""

    type: ClassVar[str] = "error"
    error: dict[str, Any]

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorPart:
        """``ErrorPart`` for an exception: its class name and message."""
        return cls({"name": type(exc).__name__, "message": str(exc)})


class DataPart(_PartBase):
    """A custom ``data-*`` part (written by ``writer.custom``); ``type`` is the full string.

    Example:
        >>> DataPart("data-progress", {"pct": 50}).type
        'data-progress'
    """

    type: str
    data: Any
    id: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type.startswith("data-"):
            raise MessageError(f"a data part's type must start with 'data-', got {self.type!r}")


Part: TypeAlias = (TextPart | ReasoningPart | ToolInvocationPart | FilePart | ImagePart | SourcePart
                   | SourceDocumentPart | StepStartPart | ErrorPart | DataPart)
# Spelled out (not built from _TAGGED_PARTS) so isinstance(x, _PART_CLASSES) narrows to Part.
_PART_CLASSES = (TextPart, ReasoningPart, ToolInvocationPart, FilePart, ImagePart, SourcePart,
                 SourceDocumentPart, StepStartPart, ErrorPart, DataPart)
_TAGGED_PARTS: dict[str, type[Part]] = {
    cls.type: cls for cls in _PART_CLASSES if cls is not DataPart
}


def to_part(value: Part | Mapping[str, object] | str) -> Part:
    """Turn a part struct, a Mastra part dict (camelCase) or a string into a part.

    Raises:
        MessageError: unknown ``type`` or a field of the wrong shape.

    Example:
        >>> to_part({"type": "data-progress", "data": {"pct": 50}})
        DataPart(type='data-progress', data={'pct': 50})
        >>> to_part("hi")
        TextPart(text='hi')
    """
    if isinstance(value, _PART_CLASSES):
        return value
    if isinstance(value, str):
        return TextPart(value)
    if not isinstance(value, Mapping):
        raise MessageError(f"a message part must be a part struct, a dict or a str, "
                           f"got {type(value).__name__}")
    kind = value.get("type")
    if isinstance(kind, str) and kind.startswith("data-"):
        cls: type[Part] = DataPart
    elif kind in _TAGGED_PARTS:
        cls = _TAGGED_PARTS[kind]
    else:
        raise MessageError(f"unknown message part type {kind!r}; expected one of "
                           f"{', '.join(sorted(_TAGGED_PARTS))} or 'data-*'")
    try:
        return msgspec.convert(value, cls)
    except msgspec.ValidationError as exc:
        raise MessageError(f"invalid {kind!r} part: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Message
# --------------------------------------------------------------------------------------------


class MessageContent(msgspec.Struct, rename="camel", kw_only=True, repr_omit_defaults=True):
    """``content`` of a message (format 2). ``parts`` is what counts; the rest are mirrors and
    metadata Mastra keeps (``content`` is the legacy plain-text mirror, ``tool_invocations`` the
    legacy AI-SDK-v4 mirror). Dicts and strings in ``parts`` are turned into part structs.
    """

    format: Literal[2] = 2
    # At run time parts arrive as dicts when decoded (data parts have a variable ``type``, so a
    # msgspec tagged union cannot describe them); __post_init__ turns them into part structs.
    if TYPE_CHECKING:
        parts: list[Part] = msgspec.field(default_factory=list)
    else:
        parts: list[Any] = msgspec.field(default_factory=list)
    content: str | None | UnsetType = UNSET
    metadata: dict[str, Any] | None | UnsetType = UNSET
    tool_invocations: list[ToolInvocation] | UnsetType = UNSET
    reasoning: str | UnsetType = UNSET
    annotations: list[Any] | UnsetType = UNSET
    experimental_attachments: list[Any] | UnsetType = msgspec.field(
        default=UNSET, name="experimental_attachments")
    provider_metadata: dict[str, Any] | UnsetType = UNSET

    def __post_init__(self) -> None:
        parts = self.parts
        if not isinstance(parts, list):
            if not isinstance(parts, tuple):
                raise MessageError(f"MessageContent.parts must be a list, "
                                   f"got {type(parts).__name__}")
            self.parts = parts = list(parts)
        for i, part in enumerate(parts):
            if not isinstance(part, _PART_CLASSES):
                parts[i] = to_part(part)


class Message(msgspec.Struct, rename="camel", kw_only=True, repr_omit_defaults=True):
    """A stored message (Mastra's ``MastraDBMessage``).

    Build one with ``Message.user(...)``, ``Message.assistant(...)``, ``Message.system(...)``,
    or ``to_message(...)`` for loose input. ``id`` defaults to a new uuid4 and ``created_at`` to
    now (UTC, millisecond precision); a naive ``created_at`` is taken as local time.

    Example:
        >>> m = Message.assistant([TextPart("Looking it up."),
        ...                        ToolInvocationPart.call("c1", "lookupCustomer", {"id": 1})])
        >>> [p.type for p in m.content.parts]
        ['text', 'tool-invocation']
    """

    id: str = msgspec.field(default_factory=_new_id)
    role: Role
    created_at: datetime = msgspec.field(default_factory=_now)
    content: MessageContent = msgspec.field(default_factory=MessageContent)
    thread_id: str | UnsetType = UNSET
    resource_id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise MessageError(f"unknown message role {self.role!r}; expected one of "
                               f"{', '.join(sorted(_ROLES))}")
        if not isinstance(self.id, str):
            raise MessageError(f"Message.id must be a str, got {type(self.id).__name__}")
        if not isinstance(self.content, MessageContent):
            raise MessageError(
                f"Message.content must be a MessageContent, got {type(self.content).__name__}; "
                "use Message.user()/Message.assistant() or to_message() to build one from text")
        if not isinstance(self.created_at, datetime):
            raise MessageError(f"Message.created_at must be a datetime, "
                               f"got {type(self.created_at).__name__}")
        if self.created_at.tzinfo is None:
            self.created_at = self.created_at.astimezone(_UTC)

    @classmethod
    def _build(cls, role: Role, content: str | Part | Sequence[Part | str | Mapping[str, object]],
               *, id: str | None, created_at: datetime | None, thread_id: str | None,
               resource_id: str | None, metadata: dict[str, object] | None) -> Message:
        if isinstance(content, str):
            body = MessageContent(parts=[TextPart(content)], content=content)
        elif isinstance(content, (list, tuple)):
            body = MessageContent(parts=[to_part(p) for p in content])
        else:  # one part or part dict; to_part rejects anything else with a MessageError
            body = MessageContent(parts=[to_part(content)])  # type: ignore[arg-type]
        if metadata is not None:
            body.metadata = metadata
        return cls(id=id or _new_id(), role=role, created_at=created_at or _now(), content=body,
                   thread_id=UNSET if thread_id is None else thread_id,
                   resource_id=UNSET if resource_id is None else resource_id)

    @classmethod
    def user(cls, content: str | Part | Sequence[Part | str | Mapping[str, object]], *,
             id: str | None = None, created_at: datetime | None = None,
             thread_id: str | None = None, resource_id: str | None = None,
             metadata: dict[str, Any] | None = None) -> Message:
        """A user message from text, a part, or a list of parts (dicts and strings allowed).

        Example:
            >>> Message.user("hi").content.parts
            [TextPart(text='hi')]
        """
        return cls._build("user", content, id=id, created_at=created_at, thread_id=thread_id,
                          resource_id=resource_id, metadata=metadata)

    @classmethod
    def assistant(cls, content: str | Part | Sequence[Part | str | Mapping[str, object]], *,
                  id: str | None = None, created_at: datetime | None = None,
                  thread_id: str | None = None, resource_id: str | None = None,
                  metadata: dict[str, Any] | None = None) -> Message:
        """An assistant message; see ``Message.user``.

        Example:
            >>> get_text(Message.assistant("Hello"))
            'Hello'
        """
        return cls._build("assistant", content, id=id, created_at=created_at,
                          thread_id=thread_id, resource_id=resource_id, metadata=metadata)

    @classmethod
    def system(cls, text: str, *, id: str | None = None,
               created_at: datetime | None = None) -> Message:
        """A system message holding ``text``.

        Example:
            >>> get_text(Message.system("Be brief."))
            'Be brief.'
        """
        return cls._build("system", text, id=id, created_at=created_at, thread_id=None,
                          resource_id=None, metadata=None)


def get_text(message: Message) -> str:
    """The message's text: its text parts joined, falling back to ``content.content``.

    Example:
        >>> get_text(Message.user([TextPart("a"), FilePart("image/png", "…"), TextPart("b")]))
        'ab'
    """
    if not isinstance(message, Message):
        raise MessageError(f"get_text() expects a Message, got {type(message).__name__}")
    text = "".join([p.text for p in message.content.parts if isinstance(p, TextPart)])
    if not text and isinstance(message.content.content, str):
        return message.content.content
    return text


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------


#: UTC timestamps already formatted, by value (a request formats its step's time and its
#: response message's, mostly in one millisecond; requests in the same millisecond share them):
#: ~0.08 µs for a hit against ~1.2 µs to format. Only exact ``datetime``s in UTC are kept (a
#: naive one depends on the local zone, which can change; a subclass may format otherwise).
#: Emptied when it reaches ``_STAMPS_KEPT``.
_stamps: dict[datetime, str] = {}
_STAMPS_KEPT = 256


def format_timestamp(value: datetime) -> str:
    """ISO-8601 in UTC the way JavaScript writes it (``2026-12-02T11:24:01.252Z``).

    Millisecond precision when that is exact, microseconds otherwise (nothing is lost).
    """
    if value.__class__ is not datetime or value.tzinfo is not _UTC:
        return _format_timestamp(value)
    text = _stamps.get(value)
    if text is None:
        text = _format_timestamp(value)
        if len(_stamps) >= _STAMPS_KEPT:
            _stamps.clear()
        _stamps[value] = text
    return text


def _format_timestamp(value: datetime) -> str:
    if value.tzinfo is not _UTC:
        value = value.astimezone(_UTC)  # a naive datetime is taken as local time
    if value.microsecond % 1000:
        return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    # In UTC, isoformat ends with "+00:00": cut, not replace(tzinfo=None) (~1.2 vs ~1.5 µs).
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"


class _MessageWire(msgspec.Struct, rename="camel", kw_only=True):
    # Same keys as Message, with createdAt pre-formatted: msgspec always writes six fractional
    # digits, JavaScript writes three, and stored messages must re-encode to equal JSON.
    id: str
    role: str
    created_at: str
    content: MessageContent
    thread_id: str | UnsetType = UNSET
    resource_id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET


def _wire(message: Message) -> _MessageWire:
    if not isinstance(message, Message):
        raise MessageError(f"expected a Message, got {type(message).__name__}")
    return _MessageWire(id=message.id, role=message.role,
                        created_at=format_timestamp(message.created_at), content=message.content,
                        thread_id=message.thread_id, resource_id=message.resource_id,
                        type=message.type)


class MessageEncoder:
    """Encodes messages to Mastra's JSON. Use the shared ``message_encoder`` instance.

    Example:
        >>> message_encoder.encode(Message.user("hi", id="m1",
        ...     created_at=datetime(2026, 1, 1, tzinfo=timezone.utc)))[:63]
        b'{"id":"m1","role":"user","createdAt":"2026-01-01T00:00:00.000Z"'
    """

    __slots__ = ("_encoder",)

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()

    def encode(self, value: Message | Iterable[Message]) -> bytes:
        """One message → a JSON object; an iterable of messages → a JSON array."""
        if isinstance(value, Message):
            return self._encoder.encode(_wire(value))
        return self._encoder.encode([_wire(m) for m in value])


message_encoder = MessageEncoder()
_decoder = msgspec.json.Decoder(Message)
_list_decoder = msgspec.json.Decoder(list[Message])


def decode_message(data: bytes | str) -> Message:
    """Decode one message from Mastra's JSON.

    Raises:
        MessageError: malformed JSON (or nested past msgspec's depth limit), a missing field,
            or an unknown role or part type.
    """
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise MessageError(f"invalid message JSON: {exc}") from exc


def decode_messages(data: bytes | str) -> list[Message]:
    """Decode a JSON array of messages (see ``decode_message``)."""
    try:
        return _list_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise MessageError(f"invalid message JSON: {exc}") from exc


def message_to_dict(message: Message) -> dict[str, Any]:
    """The message as a JSON-ready dict in Mastra's shape (camelCase, absent keys left out)."""
    result: dict[str, Any] = msgspec.to_builtins(_wire(message))
    return result


def message_from_dict(data: Mapping[str, object]) -> Message:
    """A message from a dict in Mastra's shape (``createdAt`` may be a str or a datetime).

    Raises:
        MessageError: a missing or malformed field.
    """
    try:
        return msgspec.convert(data, Message)
    except msgspec.ValidationError as exc:
        raise MessageError(f"invalid Mastra message: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Loose input → Message
# --------------------------------------------------------------------------------------------


def _coerce_datetime(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    if is_number(value):
        return datetime.fromtimestamp(value / 1000, _UTC)
    if isinstance(value, str):
        try:
            return msgspec.convert(value, datetime)
        except msgspec.ValidationError as exc:
            raise MessageError(f"createdAt {value!r} is not an ISO-8601 timestamp") from exc
    raise MessageError(f"createdAt must be a datetime, an ISO string or epoch ms, "
                       f"got {type(value).__name__}")


def _core_tool_result(item: Mapping[str, Any]) -> ToolInvocationPart:
    if "result" in item:
        value, is_error = item["result"], bool(item.get("isError"))
    elif isinstance(item.get("output"), Mapping):  # AI SDK v5: {"type": "json", "value": ...}
        output = item["output"]
        value = output.get("value", output.get("reason"))
        is_error = output.get("type") in ("error-text", "error-json", "execution-denied")
    else:
        raise MessageError("a tool-result part needs 'result' (or an AI SDK 'output')")
    args = item.get("args", item.get("input"))
    invocation = ToolInvocation(state="output-error" if is_error else "result",
                                tool_call_id=item["toolCallId"], tool_name=item["toolName"],
                                args={} if args is None else args)
    if is_error and isinstance(value, str):
        invocation.error_text = value
    else:
        invocation.result = value
    return ToolInvocationPart(invocation)


def _core_part(item: object) -> Part:
    """One part of a provider-shaped ("core") content list → a stored part."""
    if isinstance(item, (str, *_PART_CLASSES)):
        return to_part(item)
    if not isinstance(item, Mapping):
        raise MessageError(f"a content part must be a dict, a part or a str, "
                           f"got {type(item).__name__}")
    kind = item.get("type")
    try:
        if kind == "image":
            mime = item.get("mimeType", item.get("mediaType", UNSET))
            return ImagePart(item["image"], mime_type=mime)
        if kind == "file" and "data" in item and "mimeType" not in item and "mediaType" in item:
            return FilePart(item["mediaType"], item["data"])
        if kind == "reasoning" and "reasoning" not in item:
            detail = ReasoningText(item["text"], signature=item.get("signature", UNSET))
            return ReasoningPart(item["text"], details=[detail])
        if kind == "redacted-reasoning":
            return ReasoningPart("", details=[RedactedReasoning(item["data"])])
        if kind == "tool-call":
            args = item.get("args", item.get("input"))
            return ToolInvocationPart(ToolInvocation(
                state="call", tool_call_id=item["toolCallId"], tool_name=item["toolName"],
                args={} if args is None else args))
        if kind == "tool-result":
            return _core_tool_result(item)
    except KeyError as exc:
        raise MessageError(f"a {kind!r} content part is missing {exc.args[0]!r}") from None
    return to_part(item)


def _from_mapping(data: Mapping[str, Any], default_role: str) -> Message:
    role = data.get("role", default_role)
    if role not in _ROLES and role != "tool":
        raise MessageError(f"unknown message role {role!r}; expected one of "
                           f"{', '.join(sorted(_ROLES | {'tool'}))}")
    content = data.get("content")
    if isinstance(content, Mapping):  # Mastra DB shape
        return message_from_dict({**data, "role": role} if "role" not in data else data)
    if "parts" in data:  # UI shape: {"id"?, "role", "parts": [...], "content"?: str}
        if not isinstance(data["parts"], (list, tuple)):
            raise MessageError(f"'parts' must be a list, got {type(data['parts']).__name__}")
        body = MessageContent(parts=list(data["parts"]))
        if isinstance(content, str):
            body.content = content
        if isinstance(data.get("metadata"), dict):
            body.metadata = data["metadata"]
    elif isinstance(content, str):
        body = MessageContent(parts=[TextPart(content)], content=content)
    elif isinstance(content, (list, tuple)):
        body = MessageContent(parts=[_core_part(item) for item in content])
    else:
        raise MessageError(
            "a message dict needs 'content' (a str, a list of parts, or Mastra's "
            f"{{'format': 2, 'parts': [...]}}) or 'parts'; got content of type "
            f"{type(content).__name__}")
    message = Message(id=data.get("id") or _new_id(),
                      role="assistant" if role == "tool" else role,
                      created_at=_coerce_datetime(data["createdAt"]) if data.get("createdAt")
                      else _now(), content=body)
    for key, attr in (("threadId", "thread_id"), ("resourceId", "resource_id")):
        if isinstance(data.get(key), str):
            setattr(message, attr, data[key])
    return message


def to_message(value: Message | str | Mapping[str, object], *,
               default_role: str = "user") -> Message:
    """Turn loose input into a ``Message``.

    Accepts a ``Message`` (returned as is), a string (a ``default_role`` text message), or a
    dict in one of three shapes:

    * Mastra DB: ``{"id", "role", "createdAt", "content": {"format": 2, "parts": [...]}}``;
    * UI: ``{"role", "parts": [...], "id"?, "content"?, "metadata"?}``;
    * provider ("core"): ``{"role", "content": "text" | [parts]}`` with ``text``, ``image``,
      ``file``, ``reasoning``, ``tool-call`` and ``tool-result`` parts. ``role: "tool"``
      becomes an assistant message whose tool invocations carry the results.

    Raises:
        MessageError: the value has none of these shapes; the message says what was expected.

    Example:
        >>> to_message({"role": "assistant", "content": [
        ...     {"type": "tool-call", "toolCallId": "c1", "toolName": "t", "args": {}}]}
        ... ).content.parts[0].state
        'call'
    """
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        # default_role is a plain str; Message.__post_init__ rejects one that is not a Role.
        return Message(role=default_role, content=MessageContent(  # type: ignore[arg-type]
            parts=[TextPart(value)], content=value))
    if isinstance(value, Mapping):
        return _from_mapping(value, default_role)
    raise MessageError(f"cannot turn a {type(value).__name__} into a message; expected a str, "
                       "a Message, or a dict with 'role' and 'content'")


#: What ``to_messages`` (and ``MessageList.add``) take: one message or an iterable of them, each
#: a ``Message``, a str or a dict.
MessageInput: TypeAlias = (Message | str | Mapping[str, object]
                           | Iterable[Message | str | Mapping[str, object]])


def to_messages(value: MessageInput, *, default_role: str = "user") -> list[Message]:
    """``to_message`` for one value or a list/tuple of values; errors name the bad item.

    Example:
        >>> [m.role for m in to_messages(["hi", {"role": "assistant", "content": "hello"}])]
        ['user', 'assistant']
    """
    if isinstance(value, (str, Message, Mapping)):
        return [to_message(value, default_role=default_role)]
    if not isinstance(value, (list, tuple)):
        raise MessageError(f"expected a message or a list of messages, got "
                           f"{type(value).__name__}")
    result: list[Message] = []
    for index, item in enumerate(value):
        try:
            result.append(to_message(item, default_role=default_role))
        except MessageError as exc:
            raise MessageError(f"message #{index}: {exc.message}") from exc
    return result

