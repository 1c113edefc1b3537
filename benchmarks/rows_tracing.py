"""Tracing rows: what OpenTelemetry costs a run, per chunk, in one interleaved group.

What belongs here: one group, ``agent.stream`` over one step of ``text(long_text(n),
chunk_size=4)`` with 3 pass-through stream processors (so there are processor spans), read with
``async for`` through the public API, in four states of ``streamkit.tracing``:

* **otel absent** (baseline): the path a run takes when opentelemetry is not installed.
  In one process opentelemetry cannot be uninstalled, so the row points
  ``streamkit.tracing._settings.OTEL_TRACE`` at a module name that is not loaded — exactly
  the check a run makes (``run_tracer``), so the code run is the one an interpreter without
  opentelemetry runs. (``python -m benchmarks.instructions`` counts it in a real interpreter
  without opentelemetry, see its ``otel`` rows.)
* **otel installed, unconfigured** (vs absent): opentelemetry loaded, no provider set — the
  run asks the global provider once, finds the proxy, and is not traced.
* **tracing on** (vs unconfigured = off): an SDK ``TracerProvider`` with a
  ``SimpleSpanProcessor`` into an ``InMemorySpanExporter`` (cleared each run), content capture
  off (the default).
* **tracing on · content capture** (vs off): the same with prompts and answers recorded.

The targets (issue 19): unconfigured ≤ 1.1× absent, tracing on ≤ 1.1× off. Spans are per
step, tool and processor, so what tracing adds is per run; at 10k chunks a run's ~10 spans are
a small part of it (the ``early_us``/``late_us`` metrics, µs/chunk measured inside the stream,
show the per-chunk cost itself). Needs opentelemetry-sdk (the test extra); without it the group
is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamkit import Agent
from streamkit.testing import ScriptedModel, text
from streamkit.tracing import _settings, instrument

from .harness import Case, Group, Outcome
from .rows_agent import CHUNK_SIZE, FRAMING, INSTRUCTIONS, _consume, _label
from .workloads import PassThrough, long_text

try:
    import opentelemetry.trace  # noqa: F401 - the "installed" rows have it loaded
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError:  # the group is left out
    TracerProvider = None  # type: ignore[assignment,misc]

__all__ = ["tracing_groups"]

_ABSENT = "streamkit-benchmark: opentelemetry is not installed"


def _states() -> dict[str, Callable[[], None]]:
    """Row name → what puts ``streamkit.tracing`` in that state (before ``agent.stream``)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def automatic(module: str) -> Callable[[], None]:
        def set_state() -> None:
            _settings.OTEL_TRACE = module
            _settings._settings = _settings._Settings()
        return set_state

    def on(capture: bool) -> Callable[[], None]:
        def set_state() -> None:
            _settings.OTEL_TRACE = "opentelemetry.trace"
            instrument(provider, capture_content=capture)
            exporter.clear()
        return set_state

    return {"otel absent": automatic(_ABSENT),
            "otel installed, unconfigured": automatic("opentelemetry.trace"),
            "tracing on": on(False), "tracing on · content capture": on(True)}


def _restore() -> None:
    _settings.OTEL_TRACE = "opentelemetry.trace"
    _settings._settings = _settings._Settings()


def tracing_groups(n: int, repeat: int) -> list[Group]:
    """The tracing group at ``n`` text deltas, or none without opentelemetry-sdk."""
    if TracerProvider is None:
        return []
    states = _states()
    agent = Agent(id="bench", instructions=INSTRUCTIONS,
                  output_processors=[PassThrough(f"pass-{i}") for i in range(3)])
    label = _label(n)
    baselines = {"otel absent": None, "otel installed, unconfigured": "otel absent",
                 "tracing on": "otel installed, unconfigured",
                 "tracing on · content capture": "otel installed, unconfigured"}

    def case(name: str) -> Case:
        set_state = states[name]

        async def run_at(size: int) -> Outcome:
            set_state()
            try:
                model = ScriptedModel([text(long_text(size, CHUNK_SIZE), chunk_size=CHUNK_SIZE)])
                stream: Any = agent.stream("hi", model=model)
                return await _consume(stream, size)
            finally:
                _restore()

        async def run() -> Outcome:
            return await run_at(n)

        base = baselines[name]
        return Case(f"{name} · {label}", run, n, is_async=True,
                    baseline=f"{base} · {label}" if base else None, expect=n + FRAMING,
                    memory=False, note="agent.stream, 3 pass-through processors")

    return [Group(f"tracing · agent.stream · 3 pass-through · {label} chunks",
                  [case(name) for name in baselines], repeat=repeat)]
