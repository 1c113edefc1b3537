"""Models: the protocol the agent talks to, test doubles, real providers, and router ids.

``resolve_model`` turns what a user passed as ``model=`` into a model object: an object with a
``stream(request)`` method is used as is; a router id string (``"openai/gpt-4o-mini"``,
``"anthropic/claude-..."``, ``"openai-compatible/<model>"``) is resolved from the environment by
``streamkit.models._router``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._base import Model, ModelRequest, ToolSpec
from ._complete import complete
from ._resolve import resolve_model
from ._scripted import FunctionModel, ScriptedModel, api_error, reasoning, text, tool_call

if TYPE_CHECKING:  # at run time __getattr__ below imports them on first use
    from ._anthropic import AnthropicModel
    from ._openai import OpenAIChatModel

_LAZY = {"OpenAIChatModel": "._openai", "AnthropicModel": "._anthropic"}


def __getattr__(name: str) -> Any:
    # The HTTP providers pull in httpx (~80 ms); import them when first used.
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Model", "ModelRequest", "ToolSpec", "ScriptedModel", "FunctionModel", "text",
           "tool_call", "reasoning", "api_error", "resolve_model", "complete",
           "OpenAIChatModel", "AnthropicModel"]
