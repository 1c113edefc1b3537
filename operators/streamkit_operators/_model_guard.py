"""Helpers the model-backed guards share: which messages to check, reading their text, rewriting
it, reading scores out of a model's answer, and calling ``on_detection`` callbacks safely.

What belongs here: message plumbing and answer parsing for ``ModerationProcessor``,
``PromptInjectionDetector`` and ``LanguageDetector``. What does not: the model call and the
``error_strategy`` policy (``_model_check``), and any guard's prompt or decision.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from streamkit import get_text
from streamkit.messages import TextPart
from streamkit.validate import is_number

from ._model_check import on_check_failure

__all__ = ["checked_messages", "message_text", "replace_text", "scores_of", "safe_call",
           "format_scores", "check_each"]

log = logging.getLogger("streamkit_operators")


def checked_messages(messages: Sequence[Any], last_message_only: bool) -> list[Any]:
    """The messages a guard checks: all of them, or only the last one."""
    return list(messages[-1:]) if last_message_only else list(messages)


async def check_each(messages: Sequence[Any], *, last_message_only: bool, min_length: int,
                     check: Callable[[str], Awaitable[Any]], failure_name: str,
                     error_strategy: str, abort: Any, state: dict[str, Any]
                     ) -> AsyncIterator[tuple[Any, str, Any]]:
    """Run ``check(text)`` on each message a guard reads, yielding ``(message, text, result)``
    for every message in order; ``result`` is ``None`` for a message that was not checked (not
    among the checked ones, too short) or whose check failed — a failure is recorded in
    ``state["errors"]`` and handled by ``error_strategy`` (``strict`` aborts here)."""
    targets = {id(m) for m in checked_messages(messages, last_message_only)}
    for message in messages:
        text = message_text(message) if id(message) in targets else ""
        if len(text.strip()) < max(min_length, 1):
            yield message, text, None
            continue
        try:
            result = await check(text)
        except Exception as exc:  # noqa: BLE001 - error_strategy decides
            state.setdefault("errors", []).append(f"{type(exc).__name__}: {exc}")
            on_check_failure(failure_name, exc, error_strategy, abort)
            result = None
        yield message, text, result


def message_text(message: Any) -> str:
    """The text a guard reads: the text parts joined (``content.content`` as a fallback)."""
    return get_text(message)


def replace_text(message: Any, text: str) -> None:
    """Put ``text`` in place of the message's text parts (one text part where the first was;
    other parts, such as files, stay) and in ``content.content``."""
    parts = message.content.parts
    first = next((i for i, p in enumerate(parts) if isinstance(p, TextPart)), len(parts))
    kept = [p for p in parts if not isinstance(p, TextPart)]
    kept.insert(min(first, len(kept)), TextPart(text=text))
    message.content.parts = kept
    if isinstance(message.content.content, str) or not kept[1:]:
        message.content.content = text


def scores_of(value: Any, name_key: str) -> dict[str, float]:
    """``{name: score}`` from a model's list (``[{"category": "hate", "score": 0.9}]``) or dict
    (``{"hate": 0.9}``) answer; ``null`` and malformed entries give nothing.

    Example:
        >>> scores_of([{"category": "hate", "score": 0.9}], "category")
        {'hate': 0.9}
    """
    out: dict[str, float] = {}
    if isinstance(value, dict):
        items: Iterable[Any] = ({name_key: k, "score": v} for k, v in value.items())
    elif isinstance(value, list):
        items = value
    else:
        return out
    for item in items:
        if not isinstance(item, dict):
            continue
        name, score = item.get(name_key), item.get("score")
        if isinstance(name, str) and is_number(score):
            out[name] = max(out.get(name, 0.0), float(score))
    return out


def format_scores(scores: dict[str, float]) -> str:
    """``"hate: 0.91, violence: 0.62"``, highest first."""
    return ", ".join(f"{k}: {v:.2f}" for k, v in sorted(scores.items(), key=lambda kv: -kv[1]))


def safe_call(callback: Callable[[Any], Any] | None, event: Any, owner: str) -> None:
    """Call a user callback; its exceptions are logged and ignored (Mastra swallows them too)."""
    if callback is None:
        return
    try:
        callback(event)
    except Exception:  # noqa: BLE001 - documented: callback errors never change the outcome
        log.exception("on_detection callback of %r raised; ignored", owner)
