"""Models: the protocol the agent talks to, test doubles, real providers, and router ids.

``resolve_model`` turns what a user passed as ``model=`` into a model object: an object with a
``stream(request)`` method is used as is; a router id string (``"openai/gpt-4o-mini"``,
``"anthropic/claude-..."``, ``"openai-compatible/<model>"``) is resolved from the environment by
``streamkit.models._router``.
"""

from __future__ import annotations

from typing import Any

from ..errors import StreamkitError
from ._base import Model, ModelRequest, ToolSpec
from ._complete import complete
from ._scripted import FunctionModel, ScriptedModel, api_error, reasoning, text, tool_call

_LAZY = {"OpenAIChatModel": "._openai", "AnthropicModel": "._anthropic"}


def __getattr__(name: str) -> Any:
    # The HTTP providers pull in httpx (~80 ms); import them when first used.
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Model", "ModelRequest", "ToolSpec", "ScriptedModel", "FunctionModel", "text",
           "tool_call", "reasoning", "api_error", "resolve_model", "complete",
           "OpenAIChatModel", "AnthropicModel"]


def resolve_model(model: Any, **options: Any) -> Any:
    """A model object for ``model`` (an object with ``stream``, or a router id string).

    Raises:
        StreamkitError: ``model`` is neither; the message says what is accepted.
    """
    if isinstance(model, str):
        from ._router import resolve

        return resolve(model, **options)
    if callable(getattr(model, "stream", None)):
        return model
    raise StreamkitError(
        f"model must be a model object (with a stream(request) method) or a router id such as "
        f"'openai/gpt-4o-mini'; got {type(model).__name__}: {model!r:.60}")
