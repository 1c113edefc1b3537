"""Frozen run configuration (``RunConfig``) and mutable run state (``RunState``, ``StepState``).

Kept apart on purpose (pydantic-ai's ``GraphAgentDeps`` vs ``GraphAgentState``): the config says
what this call asked for and never changes during the run; the state is what the run has done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..processors import ProcessorSpec, RequestRuntime, StreamChain, Writer
from ._result import StepResult, TripwireInfo, Usage

__all__ = ["RunConfig", "RunState", "StepState", "FEEDBACK_TEMPLATE"]

#: How a retry reason is put in front of the model (Mastra 1.71.0's wording, placed after the
#: conversation as [main] does, so the provider's prompt cache for the conversation stays valid).
FEEDBACK_TEMPLATE = ("[Processor Feedback] Your previous response was not accepted: {reason}. "
                     "Please try again with the feedback in mind.")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What one ``generate()``/``stream()`` call asked for, resolved against the agent."""

    agent_id: str
    instructions: tuple[str, ...]
    model: Any
    tools: dict[str, Any]
    input_specs: tuple[ProcessorSpec, ...]
    output_specs: tuple[ProcessorSpec, ...]
    error_specs: tuple[ProcessorSpec, ...]
    prepare_step: ProcessorSpec | None
    max_processor_retries: int | None
    max_steps: int
    tool_choice: Any
    active_tools: tuple[str, ...] | None
    model_settings: dict[str, Any]
    provider_options: dict[str, Any]
    structured_output: Any
    structured_schema: dict[str, Any] | None
    memory: Any
    thread_id: str | None
    resource_id: str | None
    timed: bool

    @property
    def keeps_chunks(self) -> bool:
        """Whether a step must keep every chunk: only for ``process_llm_response``."""
        return any("process_llm_response" in s.hooks for s in self.input_specs)

    @property
    def error_retry_cap(self) -> int | None:
        """Retries granted to error processors: the explicit value, else 10 when any error
        processor exists (the contract's default), else none."""
        if self.max_processor_retries is not None:
            return self.max_processor_retries
        return 10 if self.error_specs else None


@dataclass(slots=True)
class StepState:
    """One attempt at one step."""

    number: int
    retry_count: int
    model: Any = None
    tools: dict[str, Any] = field(default_factory=dict)
    tool_choice: Any = None
    model_settings: dict[str, Any] = field(default_factory=dict)
    provider_options: dict[str, Any] = field(default_factory=dict)
    structured_output: Any = None
    prompt: list[dict[str, Any]] = field(default_factory=list)
    request: Any = None
    source: Any = None
    replay: list[Any] | None = None
    recorder: Any = None
    finish: Any = None
    streamed: bool = False
    checkpoint: Any = None
    message_id: str = ""
    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_outcomes: list[tuple[dict[str, Any], bool, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "unknown"
    api_error: BaseException | None = None


@dataclass(slots=True)
class RunState:
    """Everything the run has done so far; one per call, never shared."""

    run_id: str
    runtime: RequestRuntime
    message_list: Any
    chain: StreamChain
    system_snapshot: Any
    routed: list[Any] = field(default_factory=list)
    direct: list[Any] = field(default_factory=list)
    out: list[Any] = field(default_factory=list)
    routed_writer: Writer | None = None
    direct_writer: Writer | None = None
    step_number: int = 0
    retry_count: int = 0
    step: StepState | None = None
    steps: list[StepResult] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    feedback: list[str] = field(default_factory=list)
    pending_tripwire: TripwireInfo | None = None
    tripwire: TripwireInfo | None = None
    error: BaseException | None = None
    finish_reason: str = "unknown"
    text: str = ""
    object: Any = None
    data_event: Any = None
    next_node: str = ""
    input_messages: Any = None
    delivered: list[Any] = field(default_factory=list)

    def delivered_text(self) -> str:
        """Text the consumer received (each attempt's ``StepRecorder``), minus withdrawn
        (retried) attempts."""
        return "".join(rec.text() for rec in self.delivered)
