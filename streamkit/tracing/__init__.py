"""OpenTelemetry tracing of agent runs, with the GenAI semantic conventions
(``docs/tracing.md``).

Every ``Agent.stream()``/``generate()`` run becomes a tree of spans — ``invoke_agent {agent}`` →
``step {n}`` → ``chat {model}`` per model call, ``execute_tool {tool}`` per tool call, and one span
per processor hook call mirroring ``result.trace`` — once opentelemetry is installed
(``pip install 'streamkit-agents[otel]'``) and a tracer provider is configured. Nothing is per
chunk: the number of spans depends on steps, tools and processors only.

* Automatic: with a global provider set (``opentelemetry.trace.set_tracer_provider``), runs are
  traced; without one, or without opentelemetry, nothing changes and nothing is imported.
* ``instrument(tracer_provider=None, *, capture_content=None)``: pick a provider and the content
  opt-in in code; ``uninstrument()``: stop tracing.
* Content (prompts, answers, tool arguments and results) only with ``capture_content=True`` or
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, and only as the processors left
  it: a value a guard redacted never reaches a span.

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    >>> provider = TracerProvider()
    >>> provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    >>> streamkit.tracing.instrument(provider)
    >>> await agent.generate("Where is my order?")   # spans printed as each one ends

What belongs here: the public switches. The settings are ``_settings`` (a run asks it for its
span tracer), the span tree ``_spans`` (the only module importing opentelemetry: an observer of
the run's events, ``streamkit.events``, which reads nothing of a run but them), and the content
JSON ``_content``.
"""

from ._settings import instrument, uninstrument

__all__ = ["instrument", "uninstrument"]
