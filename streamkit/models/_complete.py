"""``complete(model, prompt)``: one model call, collected to text — for model-backed processors.

Guards such as a moderation or language classifier ask a (small) model one question and read the
answer; they should not re-implement stream handling. This runs one ``model.stream(request)``
and joins its text deltas, raising ``APICallError`` as the model does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._prompt import PromptMessage
from ..chunks import Finish, TextDelta
from ..errors import APICallError
from ._base import ModelRequest
from ._resolve import resolve_model

__all__ = ["complete"]


async def complete(model: object, prompt: str | Sequence[PromptMessage], *,
                   system: str | None = None,
                   model_settings: Mapping[str, object] | None = None,
                   structured_output: dict[str, object] | None = None) -> str:
    """Ask ``model`` once and return its text.

    Args:
        model: a model object or router id.
        prompt: a user message, or a full provider-shaped prompt (core format).
        system: a system message put first.
        model_settings: e.g. ``{"temperature": 0}``.
        structured_output: a JSON schema the answer must follow.

    Raises:
        APICallError: the call failed, or its stream ended without a finish chunk.

    Example:
        >>> await complete(ScriptedModel([text("safe")]), "Is this safe? ...")
        'safe'
    """
    resolved = resolve_model(model)
    messages: list[PromptMessage] = [{"role": "user", "content": prompt}] \
        if isinstance(prompt, str) else list(prompt)
    if system:
        messages.insert(0, {"role": "system", "content": system})
    request = ModelRequest(prompt=messages, model_settings=dict(model_settings or {}),
                           structured_output=structured_output)
    out: list[str] = []
    finished = False
    stream = resolved.stream(request)
    try:
        async for chunk in stream:
            if chunk.__class__ is TextDelta:
                out.append(chunk.payload.text)
            elif chunk.__class__ is Finish:
                finished = True
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()
    if not finished:
        raise APICallError(f"model {getattr(resolved, 'model_id', resolved)!r} ended its stream "
                           f"without a finish chunk", is_retryable=True)
    return "".join(out)
