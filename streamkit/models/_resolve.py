"""``resolve_model``: what counts as a model, and router id strings handed to ``_router``.

What belongs here: the one decision between a model object and a router id. It sits above the
providers (``_router`` imports ``_openai``/``_anthropic``, which build on ``_base``), so the
protocol module ``_base`` never reaches up to the router.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidType

__all__ = ["resolve_model"]


def resolve_model(model: Any, **options: Any) -> Any:
    """A model object for ``model`` (an object with ``stream``, or a router id string).

    Raises:
        InvalidType: ``model`` is neither; the message says what is accepted.
    """
    if isinstance(model, str):
        # The router imports the HTTP providers and with them httpx (a slow import): only a
        # router id needs them, so an agent on a model object never loads httpx.
        from ._router import resolve

        return resolve(model, **options)
    if callable(getattr(model, "stream", None)):
        return model
    raise InvalidType(
        f"model must be a model object (with a stream(request) method) or a router id such as "
        f"'openai/gpt-4o-mini'; got {type(model).__name__}: {model!r:.60}")
