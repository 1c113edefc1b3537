"""Router ids: ``"<provider>/<model>"`` strings resolved into model objects from the environment.

What belongs here: the table of known providers, which environment variables each reads, and
checking the options a caller passes. What does not: the providers themselves (``_openai``,
``_anthropic``) and the decision to resolve at all (``resolve_model`` in ``_resolve``).

==========================  =====================================  ==============================
id                          key                                    base URL
==========================  =====================================  ==============================
``openai/<m>``              ``api_key`` or ``OPENAI_API_KEY``      ``base_url``, ``OPENAI_BASE_URL``
                            (required for api.openai.com)          or api.openai.com
``anthropic/<m>``           ``api_key`` or ``ANTHROPIC_API_KEY``   ``base_url``,
                            (required for api.anthropic.com)       ``ANTHROPIC_BASE_URL`` or
                                                                   api.anthropic.com
``openai-compatible/<m>``   ``api_key`` or ``OPENAI_API_KEY``,     ``base_url`` or
                            optional                               ``OPENAI_BASE_URL``, required
==========================  =====================================  ==============================

A missing key is reported when the model is first used (its first ``stream()``), naming the
variable, so an agent can be built before the environment is complete. Everything after the
first ``/`` is the model name, so ``"openai-compatible/meta-llama/Llama-3.1-8B"`` works.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgument, InvalidType
from ._anthropic import AnthropicModel
from ._openai import OpenAIChatModel

__all__ = ["resolve", "PROVIDERS"]

PROVIDERS = ("openai", "anthropic", "openai-compatible")
"""The provider prefixes a router id may start with."""


def _options_of(cls: type) -> frozenset[str]:
    params = inspect.signature(cls).parameters
    return frozenset(name for name, p in params.items() if p.kind is p.KEYWORD_ONLY)


_OPENAI_OPTIONS = _options_of(OpenAIChatModel) - {"provider"}
_ANTHROPIC_OPTIONS = _options_of(AnthropicModel)


def _check(model_id: str, options: Mapping[str, object], allowed: frozenset[str]) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InvalidArgument(f"model {model_id!r}: unknown option(s) {', '.join(unknown)}; "
                              f"accepted: {', '.join(sorted(allowed))}")


def resolve(model_id: str, *, base_url: str | None = None, api_key: str | None = None,
            **options: Any) -> Any:
    """The model object for a router id.

    Args:
        model_id: ``"openai/<model>"``, ``"anthropic/<model>"`` or
            ``"openai-compatible/<model>"``.
        base_url: the API root; defaults from the environment (see the module docstring).
        api_key: the key; ``None`` reads the provider's environment variable at first use.
        **options: passed to the model (``timeout``, ``max_retries``, ``headers``, ``client``,
            ``stream``...).

    Raises:
        InvalidArgument: an id without ``/``, an unknown provider (the message lists the known
            ones), ``openai-compatible`` without a base URL, or an unknown option.

    Example:
        >>> model = resolve("openai-compatible/llama3.1", base_url="http://127.0.0.1:11434/v1")
        >>> model.provider, model.model_id, model.base_url
        ('openai-compatible', 'llama3.1', 'http://127.0.0.1:11434/v1')
        >>> resolve("gemini/flash")
        Traceback (most recent call last):
        ...
        streamkit.errors.InvalidArgument: unknown model provider 'gemini' in 'gemini/flash'; \
known providers: openai, anthropic, openai-compatible
    """
    if not isinstance(model_id, str):
        raise InvalidType(f"a router id is a string like 'openai/gpt-4o-mini', got "
                          f"{type(model_id).__name__}")
    provider, slash, name = model_id.partition("/")
    if not slash or not provider or not name:
        raise InvalidArgument(f"router id {model_id!r} must look like '<provider>/<model>', e.g. "
                              f"'openai/gpt-4o-mini'; known providers: {', '.join(PROVIDERS)}")
    if provider == "openai":
        _check(model_id, options, _OPENAI_OPTIONS)
        if base_url or os.environ.get("OPENAI_BASE_URL"):
            options["base_url"] = base_url or os.environ["OPENAI_BASE_URL"]
        return OpenAIChatModel(name, api_key=api_key, provider="openai", **options)
    if provider == "anthropic":
        _check(model_id, options, _ANTHROPIC_OPTIONS)
        if base_url or os.environ.get("ANTHROPIC_BASE_URL"):
            options["base_url"] = base_url or os.environ["ANTHROPIC_BASE_URL"]
        return AnthropicModel(name, api_key=api_key, **options)
    if provider == "openai-compatible":
        _check(model_id, options, _OPENAI_OPTIONS)
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise InvalidArgument(
                f"router id {model_id!r} needs the server's URL: pass base_url= (e.g. "
                f"'http://127.0.0.1:8000/v1') or set the OPENAI_BASE_URL environment variable",
                env_var="OPENAI_BASE_URL")
        return OpenAIChatModel(name, api_key=api_key, base_url=url,
                               provider="openai-compatible", **options)
    raise InvalidArgument(f"unknown model provider {provider!r} in {model_id!r}; known "
                          f"providers: {', '.join(PROVIDERS)}")
