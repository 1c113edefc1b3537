"""What a run returns: ``AgentResult`` (``generate()``), ``AgentStream`` (``stream()``), steps,
usage.

``AgentStream`` is the live handle: iterate it for the full chunk stream, ``await stream.text``
for the final step's text, ``await stream.result()`` for the same ``AgentResult`` that
``generate()`` returns, ``stream.text_stream`` for text deltas only, ``stream.to_observable()`` for
reactivex. The stream is consumed once; ``result()``/``text`` drain what is left.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .._apply import to_observable
from .._tool_records import StepToolCall, StepToolResult
from ..chunks import Chunk, TextDelta
from ..processors._runtime import RequestRuntime, TraceRecord

if TYPE_CHECKING:
    from ..messages import Message

__all__ = ["Usage", "StepResult", "TripwireInfo", "AgentResult", "AgentStream"]


@dataclass(slots=True)
class Usage:
    """Token usage: ``input_tokens``, ``output_tokens``, ``total_tokens``."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.total_tokens + other.total_tokens)


@dataclass(frozen=True, slots=True)
class TripwireInfo:
    """Why a run (or a step) was stopped: ``reason``, ``retry``, ``metadata``, ``processor_id``,
    and the ``hook`` it came from."""

    reason: str
    retry: bool = False
    metadata: Any = None
    processor_id: str | None = None
    hook: str | None = None


@dataclass(slots=True)
class StepResult:
    """One model step.

    Attributes:
        step_number: 0-based; a retried step keeps its number.
        text: the step's text as the consumer saw it ('' for a rolled-back attempt).
        reasoning: the step's reasoning text.
        tool_calls: ``StepToolCall`` records (``tool_call_id``, ``tool_name``, ``args``; also
            readable as the old dicts, ``call["tool_name"]``).
        tool_results: ``StepToolResult`` records (``tool_call_id``, ``tool_name``, ``args``,
            ``result``, ``is_error``; also readable as the old dicts).
        finish_reason: ``stop``, ``tool-calls``, ``length``, ``retry``, ``error``, ``other``...
        usage: this step's usage.
        tripwire: set on a step that a processor rejected (retried or aborted).
        retry_count: consecutive retries before this attempt.
        from_cache: the step was replayed by ``process_llm_request``.
    """

    step_number: int
    text: str = ""
    reasoning: str = ""
    tool_calls: list[StepToolCall] = field(default_factory=list)
    tool_results: list[StepToolResult] = field(default_factory=list)
    finish_reason: str = "unknown"
    usage: Usage = field(default_factory=Usage)
    tripwire: TripwireInfo | None = None
    retry_count: int = 0
    from_cache: bool = False


@dataclass(slots=True)
class AgentResult:
    """The outcome of one ``generate()``/``stream()`` call.

    Attributes:
        text: the accepted answer: every accepted step's text, joined (Mastra's
            ``getFullOutput().text``; ``await stream.text`` is the final step's alone); ''
            when a tripwire stopped the run (nothing was accepted).
        usage: summed over every model call, retried ones included.
        finish_reason: the last step's reason; ``"other"`` after a tripwire.
        steps: every step, rejected attempts included.
        tripwire: why the run stopped, or ``None``.
        messages: the response messages (what memory stores).
        object: the structured output, when ``structured_output`` was asked for.
        run_id: this run's id (on every chunk as ``runId``).
        trace: one ``TraceRecord`` per hook call (stream hooks: one per processor per step).
        error: the error that ended the run, when one did (``generate()`` raises it instead).
        states: each processor's ``state`` dict at the end of the run, by processor id (what a
            word counter counted, what a guard saw) — readable after ``stream()`` as well.
    """

    text: str
    usage: Usage
    finish_reason: str
    steps: list[StepResult]
    tripwire: TripwireInfo | None
    messages: list[Message]
    object: Any
    run_id: str
    trace: list[TraceRecord]
    error: BaseException | None = None
    states: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tool_calls(self) -> list[StepToolCall]:
        return [c for s in self.steps if s.finish_reason != "retry" for c in s.tool_calls]

    @property
    def tool_results(self) -> list[StepToolResult]:
        return [r for s in self.steps if s.finish_reason != "retry" for r in s.tool_results]

    def trace_table(self) -> list[dict[str, object]]:
        """The trace as plain rows (processor, hook, step, calls, dropped, ms, outcome)."""
        return [r.as_row() for r in self.trace]

    def _repr_html_(self) -> str:
        from ..display import result_html

        return result_html(self)

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        from ..display import result_text

        printer.text("AgentResult(...)" if cycle else result_text(self))


class RunHandle(Protocol):
    """What an ``AgentStream`` needs of its run (``_run.Run``): named here so that this module,
    which the run builds its result from, does not import the run."""

    run_id: str
    runtime: RequestRuntime

    def events(self) -> AsyncGenerator[Chunk, None]: ...

    def result(self) -> AgentResult: ...

    def stream_text(self) -> str: ...


class AgentStream:
    """The live handle ``agent.stream()`` returns (see the module docstring); it owns its run.

    The run starts when first iterated (or when ``text``/``result()`` is awaited). ``async for``
    iterates the run's own generator — no wrapper per chunk. Leaving the loop early and calling
    ``aclose()``, or cancelling, closes the run and the model's stream; ``result()`` after an
    early ``break`` (without ``aclose``) drains the rest of the run.
    """

    def __init__(self, run: RunHandle) -> None:
        self._run = run
        self._events: AsyncGenerator[Chunk, None] | None = None

    @property
    def run_id(self) -> str:
        """This run's id (``runId`` on every chunk), known before the stream starts."""
        return self._run.run_id

    def _ensure(self) -> AsyncGenerator[Chunk, None]:
        if self._events is None:
            probe = self._run.runtime.probe  # an observer wants each chunk the consumer gets
            self._events = self._run.events() if probe is None else \
                probe.out(self._run.events())
        return self._events

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return self._ensure()

    async def __anext__(self) -> Chunk:
        return await self._ensure().__anext__()

    async def aclose(self) -> None:
        """Stop the run early and close the model's stream."""
        if self._events is not None:
            await self._events.aclose()

    async def _drain(self) -> None:
        async for _ in self._ensure():
            pass

    async def result(self) -> AgentResult:
        """Drain the stream and return the ``AgentResult``. Raises the ``APICallError`` (or
        ``ProcessorError``, ``MemoryStoreError``) that ended the run, if one did."""
        await self._drain()
        result = self._run.result()
        if result.error is not None:
            raise result.error
        return result

    @property
    def text(self) -> Awaitable[str]:
        """Awaitable: the final step's text, as Mastra's ``stream.text`` ("narration before
        tool calls is excluded"); ``result.text`` joins every step's text. An edit that
        ``process_output_result`` makes to the response text is included (the text of the
        last assistant message, then). A run that never got there (a tripwire, an error, a
        consumer that closed early) gives the text deltas the consumer received, joined. A
        retried step's withdrawn text is not included either way."""
        async def final() -> str:
            await self._drain()
            return self._run.stream_text()
        return final()

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """Async iterator of the text of each ``text-delta`` chunk."""
        async def texts() -> AsyncIterator[str]:
            async for chunk in self._ensure():
                if chunk.__class__ is TextDelta:
                    yield chunk.payload.text
        return texts()

    def to_observable(self) -> Any:
        """A reactivex ``Observable`` of this stream's chunks (consumed on the asyncio loop)."""
        return to_observable(self)

    async def show(self, **options: Any) -> AgentResult:
        """Consume the stream while showing it live and return the ``AgentResult``: in Jupyter
        one output updated in place (tripwires in red, retried steps withdrawn), elsewhere the
        text printed as it arrives. ``options`` go to ``streamkit.display.live``."""
        from ..display import live

        result: AgentResult = await live(self, **options)
        return result

    def _repr_html_(self) -> str:
        from ..display import stream_html

        return stream_html(self)
