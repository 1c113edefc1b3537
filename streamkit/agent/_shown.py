"""What leaves a run on its error path: the error's text after the output processors (once per
error), and the messages a ``process_api_error`` hook added, after the input guards.

An error's text is one more way out of a run. ``show_error`` builds the run's ``error`` chunk
(``{"name", "message"}``, plus ``statusCode``/``isRetryable`` for an ``APICallError``) and
pushes it through the run's output stream chain like any other chunk — a redacting guard sees
it (``RedactingGuard``: source ``"error"``) and may rewrite it. The one text that comes out is
used by every way the error leaves: the ``error`` chunk, the ``data-step-retry`` reason of an
API error an error processor retried, ``result.error`` (what ``generate()``/``result()``
raise), the HTTP 500 body and the UI stream's ``errorText``, and the spans (with content
capture on; off, they carry the error's type only).

Decisions:

* A processor that drops the error chunk, turns it into another chunk, raises or trips on it
  withholds the text: the client is told the error's type and that its text was withheld
  (the run still ends with its error — a client must know it failed).
* What the chain returns beside the error chunk (text a guard released) is not delivered: the
  attempt failed, and its undelivered rest is discarded, as the outbox's is.
* A ``ProcessorError`` of a stream hook (``process_output_stream``/``flush_output_stream``) is
  not pushed into the chain that just failed (a stuck hook would be waited for twice): its
  text is streamkit's own, without the hook's exception message (which may quote the stream)
  — which processor, which hook, the exception's type, or the timeout it exceeded. One the
  processor raised itself (a ``ProcessorError`` with no cause: a misconfiguration its author
  explains to the developer) keeps its own message.
* Messages a ``process_api_error`` hook adds or changes (``guard_changed``) enter the
  conversation from outside the model's stream, as a caller's input does: they pass the input
  processors' ``process_input`` before they are sent, stored or returned, so a guard in
  ``input_processors`` (where the README puts guards, beside ``output_processors``) redacts
  them, drops them (``filter``) or trips the run (``block``).
* ``result.error`` is the very error raised when the processors left its text unchanged;
  otherwise a copy of the same class and attributes with the shown text as its message and no
  ``body`` (the provider's raw error document). The original is the copy's ``__cause__``, for
  the developer's own logs; nothing streamkit sends reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

import msgspec

from ..chunks import ErrorChunk
from ..errors import APICallError, ProcessorError, StreamkitError
from ..messages import Message, MessageList, Source
from ..processors._chain import StreamChain
from ..processors._runner import run_message_hook
from ..processors._runtime import RequestRuntime
from ..processors._spec import ProcessorSpec

__all__ = ["ShownError", "show_error", "error_body", "WITHHELD", "fingerprint",
           "guard_changed"]

#: The message of an error whose text an output processor withheld.
WITHHELD = "{name}: the error's text was withheld by an output processor"


@dataclass(frozen=True, slots=True)
class ShownError:
    """One error as a client may see it.

    Attributes:
        original: the error as raised.
        chunk: the ``error`` chunk that leaves the run (after the output processors).
        text: its message — the one text every way out uses.
        error: what ``result.error`` holds (``original`` when ``text`` is its own message).
    """

    original: BaseException
    chunk: ErrorChunk
    text: str
    error: BaseException

    def is_of(self, error: BaseException) -> bool:
        """Whether ``error`` is this error (as raised, or the copy ``result.error`` holds)."""
        return error is self.original or error is self.error


class ErrorBody(TypedDict):
    """An ``error`` chunk's ``payload.error`` as a run writes it (Mastra's keys)."""

    name: str
    message: str
    statusCode: NotRequired[int | None]
    isRetryable: NotRequired[bool]


def error_body(error: BaseException, message: str | None = None) -> ErrorBody:
    """The ``error`` chunk's payload for ``error`` (with ``message`` instead of its own)."""
    body: ErrorBody = {"name": type(error).__name__,
                       "message": str(error) if message is None else message}
    if isinstance(error, APICallError):
        body["statusCode"] = error.status_code
        body["isRetryable"] = error.is_retryable
    return body


def _message_of(chunk: ErrorChunk) -> str:
    error = chunk.payload.error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message: str = error["message"]
        return message
    return str(error)


async def show_error(chain: StreamChain, error: BaseException, run_id: str) -> ShownError:
    """``error`` as the output processors of ``chain`` let it out (see the module docstring).
    Never raises (but ``CancelledError``)."""
    if isinstance(error, ProcessorError) and error.hook in _STREAM_HOOKS:
        out: Any = ErrorChunk(error=error_body(error, _stream_hook_text(error)), run_id=run_id,
                              from_="AGENT")
    else:
        try:
            out = chain.push(ErrorChunk(error=error_body(error), run_id=run_id, from_="AGENT"))
            if chain.is_async:
                out = await out
        except Exception:  # noqa: BLE001 - a guard that raises or trips on it withholds the text
            out = None
    if out.__class__ is list:
        out = next((c for c in reversed(out) if c.__class__ is ErrorChunk), None)
    if out.__class__ is not ErrorChunk:
        name = type(error).__name__
        out = ErrorChunk(error=error_body(error, WITHHELD.format(name=name)), run_id=run_id,
                         from_="AGENT")
    text = _message_of(out)
    return ShownError(error, out, text, error if text == str(error) else _copy(error, text))


#: The hooks of the stream chain (its failure is shown without pushing it into the chain).
_STREAM_HOOKS = ("process_output_stream", "flush_output_stream")


def _stream_hook_text(error: ProcessorError) -> str:
    """A stream hook's failure in streamkit's words only (see the module docstring)."""
    if getattr(error, "timeout", None) is not None:
        return str(error)  # "... did not return within N s (hook_timeout) ...": no content
    returned = getattr(error, "returned", None)
    if returned is not None:  # a value that is not a chunk: its type, not its repr (content)
        return (f"processor {error.processor_id!r}, {error.hook}: it returned a {returned}; "
                f"expected a chunk, None to drop it, or a list of chunks")
    cause = error.__cause__
    if cause is None:  # raised as a ProcessorError by the processor: its author's words
        return str(error)
    return f"processor {error.processor_id!r} raised in {error.hook}: {type(cause).__name__}"


def _copy(error: BaseException, text: str) -> BaseException:
    """``error`` with ``text`` as its message (see the module docstring)."""
    if isinstance(error, StreamkitError):
        attrs = dict(error._attrs)
        if "body" in attrs:
            attrs["body"] = None
        copy = type(error).__new__(type(error))
        StreamkitError.__init__(copy, text, **attrs)
    else:
        copy = StreamkitError(text)
    copy.__cause__ = error
    return copy


_encode = msgspec.json.Encoder(enc_hook=repr).encode


def fingerprint(message_list: MessageList) -> dict[str, bytes]:
    """Every conversation message by id, encoded: what a hook added or changed shows against
    it. (Called only on the error path, where its cost does not matter.)"""
    return {m.id: _encode(m) for m in message_list.get.all.db()}


async def guard_changed(runtime: RequestRuntime, input_specs: Sequence[ProcessorSpec],
                        message_list: MessageList, before: dict[str, bytes],
                        available: Mapping[str, object]) -> None:
    """Give the messages added or changed since ``before`` to the input processors'
    ``process_input`` (in a list of their own: the other messages were checked already), and
    put what they return back in their places and sources; a message they removed is removed."""
    changed = [m for m in message_list.get.all.db() if before.get(m.id) != _encode(m)]
    if not changed:
        return
    sources: dict[str, Source] = {m.id: cast(Source, message_list.source_of(m) or "input")
                                  for m in changed}
    checked = MessageList()
    checked.add(changed, "input", merge=False)
    await run_message_hook(runtime, input_specs, "process_input", checked, available,
                           default_source="input")
    kept: list[Message] = checked.get.input.db()
    ids = {m.id for m in kept}
    gone = [m.id for m in changed if m.id not in ids]
    if gone:
        message_list.remove_by_ids(gone)
    for message in kept:  # same id: replaced in place (a new one is appended as input)
        message_list.add(message, sources.get(message.id, "input"), merge=False)
