"""``PrefillErrorHandler``: recover once when a provider rejects a prompt that ends on an
assistant turn ("assistant message prefill").

Mastra's ``PrefillErrorHandler`` (id ``prefill-error-handler``, ``process_api_error``;
``docs/mastra-fidelity.md``,
"PrefillErrorHandler"). Put it in ``error_processors`` (or any lane: ``process_api_error``
runs in every lane).
"""

from __future__ import annotations

import json
import re
from typing import Any

from streamkit import Message, MessageList, Processor

__all__ = ["PrefillErrorHandler", "is_prefill_error", "PREFILL_ERROR_PATTERNS"]

#: The provider messages that mean "your prompt may not end with an assistant turn".
PREFILL_ERROR_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Anthropic
    re.compile(r"does not support assistant message prefill", re.I),
    # Qwen / llama.cpp with thinking enabled (Mastra PR #15518)
    re.compile(r"assistant response prefill is incompatible with enable[_ -]?thinking", re.I),
    # Gemini 3+
    re.compile(r"requests ending with a model turn are not supported", re.I),
)

REMINDER_TEXT = "<system-reminder>continue</system-reminder>"
REMINDER_TYPE = "anthropic-prefill-processor-retry"


def _texts(error: BaseException) -> list[str]:
    """Every place a provider puts its message: ``str(error)``, ``error.message``, and the
    response body (a string, bytes or parsed JSON); then the same for ``__cause__``."""
    out: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        out.append(str(current))
        message = getattr(current, "message", None)
        if isinstance(message, str):
            out.append(message)
        body = getattr(current, "body", None)
        if body is None:
            body = getattr(current, "response_body", None)
        if isinstance(body, (bytes, bytearray)):
            out.append(body.decode("utf-8", errors="replace"))
        elif isinstance(body, str):
            out.append(body)
        elif body is not None:
            out.append(json.dumps(body, default=str))
        current = current.__cause__
    return out


def is_prefill_error(error: BaseException) -> bool:
    """Whether ``error`` is a provider's assistant-prefill rejection (case-insensitive, in the
    message or the response body).

    Example:
        >>> is_prefill_error(APICallError("400", status_code=400,
        ...     body='{"error": {"message": "This model does not support assistant message '
        ...          'prefill."}}'))
        True
    """
    return any(p.search(text) for text in _texts(error) for p in PREFILL_ERROR_PATTERNS)


class PrefillErrorHandler(Processor):
    """Retries once, with a "continue" reminder, when a provider rejects an assistant prefill.

    When the model call fails with one of ``PREFILL_ERROR_PATTERNS`` (Anthropic, Qwen/llama.cpp
    with thinking, Gemini 3+) and this is the first attempt (``retry_count == 0``), it adds a
    user message ``<system-reminder>continue</system-reminder>`` — so the prompt ends on a user
    turn — and asks for a retry. Any other error, or a second failure, is left alone.

    Decision: the reminder is added with source ``context``: it is in the retried prompt but is
    never stored in memory or returned in ``result.messages`` (Mastra's older version stored
    it as input and hid it in UI conversions; its newer one sends a transient signal).
    Its ``content.metadata.systemReminder.type`` is ``"anthropic-prefill-processor-retry"``.

    Args:
        reminder: the text of the added user message.
        id: processor id (default ``"prefill-error-handler"``).

    Example:
        >>> agent = Agent(id="a", model="anthropic/claude-sonnet-4-5",
        ...               error_processors=[PrefillErrorHandler()])
    """

    id = "prefill-error-handler"
    name = "Prefill Error Handler"

    def __init__(self, *, reminder: str = REMINDER_TEXT, id: str | None = None) -> None:
        super().__init__(id)
        self.reminder = reminder

    def process_api_error(self, error: BaseException, retry_count: int,
                          message_list: MessageList) -> dict[str, Any] | None:
        if retry_count != 0 or not is_prefill_error(error):
            return None
        message_list.add(Message.user(self.reminder, metadata={
            "systemReminder": {"type": REMINDER_TYPE}}), "context")
        return {"retry": True}
