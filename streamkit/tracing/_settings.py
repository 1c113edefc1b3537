"""Whether runs are traced and with what: ``instrument()``, ``uninstrument()``, and the
resolution of one run's tracer (``run_tracer``).

Three states, one process-wide settings object replaced whole (so a run never sees half of
a change):

* **automatic** (the start): a run is traced when the application has loaded opentelemetry and
  set a global tracer provider; with no provider set it gets no span tracer.
* **instrumented** (``instrument(provider, capture_content=...)``): that provider, or the global
  one when ``provider`` is ``None``; ``capture_content`` fixed instead of read from the
  environment.
* **off** (``uninstrument()``): no run is traced, whatever provider is configured, until
  ``instrument()`` is called again. (Decision: ``uninstrument`` means "streamkit emits no spans",
  as it does for OpenTelemetry's instrumentors; ``instrument()`` without arguments returns to
  following the global provider.)

opentelemetry is never imported here: a provider can only have been configured by an
application that has loaded ``opentelemetry.trace`` itself, so while that module is not loaded a
run gets no span tracer after one dictionary lookup, and ``import streamkit`` never pays for
opentelemetry's import. ``_spans`` (which imports it) is loaded on the first traced run.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import InvalidType, UsageError
from ..events import RunObserver

__all__ = ["instrument", "uninstrument", "run_tracer", "capture_from_env", "CAPTURE_ENV"]

#: The opt-in for message content that the Python GenAI instrumentations share.
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

#: The module whose presence means an application may have configured a tracer provider
#: (the benchmark points it elsewhere to measure the "opentelemetry absent" path in-process).
OTEL_TRACE = "opentelemetry.trace"


@dataclass(frozen=True, slots=True)
class _Settings:
    enabled: bool = True
    provider: Any = None
    capture_content: bool | None = None


_settings = _Settings()
_spans: ModuleType | None = None


def instrument(tracer_provider: object = None, *, capture_content: bool | None = None) -> None:
    """Trace every agent run with ``tracer_provider`` (default: the global one).

    Without this call, runs are traced automatically once a global tracer provider is set
    (``opentelemetry.trace.set_tracer_provider``); call it to pick another provider, to decide
    content capture in code, or to turn tracing back on after ``uninstrument()``. Each run
    reads these settings once, when ``agent.stream()``/``generate()`` is called.

    Args:
        tracer_provider: an OpenTelemetry ``TracerProvider``; ``None`` follows the global one.
        capture_content: record prompts, answers, tool arguments and results on the spans
            (only what the processors left: a value a guard redacted appears redacted or not at
            all). ``None`` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
            (``true`` turns it on) at each run; off by default.

    Raises:
        UsageError: opentelemetry is not installed (``pip install 'streamkit-agents[otel]'``).
        InvalidType: ``tracer_provider`` has no ``get_tracer``, or ``capture_content`` is
            not a bool.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        >>> streamkit.tracing.instrument(provider, capture_content=True)
    """
    global _settings
    try:
        _load_spans()
    except ImportError as exc:
        raise UsageError("streamkit.tracing.instrument needs opentelemetry-api; install it with "
                         "pip install 'streamkit-agents[otel]' (and an SDK or exporter to send "
                         "spans)"
                         ) from exc
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise InvalidType(f"tracer_provider must be an OpenTelemetry TracerProvider (with "
                          f"get_tracer), got {type(tracer_provider).__name__}")
    if capture_content is not None and not isinstance(capture_content, bool):
        raise InvalidType(f"capture_content must be True, False or None (read "
                          f"{CAPTURE_ENV}), got {type(capture_content).__name__}")
    _settings = _Settings(True, tracer_provider, capture_content)


def uninstrument() -> None:
    """Stop tracing runs: from the next ``agent.stream()``/``generate()`` on, streamkit emits
    no spans, even with a global tracer provider, until ``instrument()`` is called again. Runs
    already going keep their tracer to the end (their span trees stay whole).

    Example:
        >>> streamkit.tracing.uninstrument()  # runs started from here on emit no spans
    """
    global _settings
    _settings = _Settings(enabled=False)


def capture_from_env() -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says ``true``."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def run_tracer() -> RunObserver | None:
    """The span tracer of one run — an observer of its events (``streamkit.events``) — resolved
    when the run is created (its parent span is the caller's current span at that moment):
    ``None`` unless tracing is on and a provider is there."""
    settings = _settings
    if not settings.enabled or (settings.provider is None and OTEL_TRACE not in sys.modules):
        return None
    capture = settings.capture_content
    tracer: RunObserver | None = (_spans or _load_spans()).tracer_for(
        settings.provider, capture_from_env() if capture is None else capture)
    return tracer


def _load_spans() -> ModuleType:
    """``_spans``, imported on first use: it imports opentelemetry (see the module docstring).
    Raises ``ImportError`` when opentelemetry-api is not installed."""
    global _spans
    if _spans is None:
        from . import _spans as loaded

        _spans = loaded
    return _spans
