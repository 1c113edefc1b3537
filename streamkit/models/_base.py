"""The model protocol the agent loop talks to, and the request it sends.

A model turns a ``ModelRequest`` into an async iterator of chunks for one step: any of
``response-metadata``, ``text-start``/``text-delta``/``text-end``, ``reasoning-*``,
``tool-call-input-streaming-start``/``tool-call-delta``/``tool-call-input-streaming-end``,
``tool-call``, ``source``, ``file``, ``raw``, and exactly one final per-step ``finish`` chunk whose
``payload.step_result.reason`` is the finish reason (``stop``, ``length``, ``tool-calls``,
``content-filter``, ``other``...) and ``payload.output.usage`` the token usage. Chunks carry
``request.run_id`` and ``from_="AGENT"``. Failures raise ``streamkit.errors.APICallError``; a stream
that ends without its ``finish`` is an ``APICallError`` too (the agent checks).

``resolve_model`` decides what counts as a model: an object with ``stream`` is one; a router id
string is handed to ``streamkit.models._router``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import InvalidType

__all__ = ["Model", "ModelRequest", "ToolSpec", "resolve_model"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a model sees it: ``name``, ``description``, ``parameters`` (JSON schema)."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters}


@dataclass(slots=True)
class ModelRequest:
    """Everything one model call gets.

    Attributes:
        prompt: provider-shaped messages (the "core" format of ``MessageList.get.all.core()``:
            ``{"role": "system"|"user"|"assistant"|"tool", "content": ...}``).
        tools: the tools the model may call this step.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "tool", "toolName": n}``.
        model_settings: ``temperature``, ``max_tokens``, ``top_p``, ``stop``, ``seed``, ...
        provider_options: passed through to the provider unchanged.
        structured_output: a JSON schema the answer must follow, or ``None``.
        run_id: put on every chunk the model emits.
        step_number: the agent step this call belongs to.
    """

    prompt: list[dict[str, Any]]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: Any = None
    model_settings: dict[str, Any] = field(default_factory=dict)
    provider_options: dict[str, Any] = field(default_factory=dict)
    structured_output: dict[str, Any] | None = None
    run_id: str = ""
    step_number: int = 0


@runtime_checkable
class Model(Protocol):
    """What the agent needs of a model: ids for display and ``stream(request)``."""

    provider: str
    model_id: str

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        """Stream one step's chunks (see the module docstring). Raises ``APICallError``."""
        ...


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
