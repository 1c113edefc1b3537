"""Frozen run configuration (``RunConfig``) and mutable run state (``RunState``, ``StepState``).

Kept apart on purpose (pydantic-ai's ``GraphAgentDeps`` vs ``GraphAgentState``): the config says
what this call asked for and never changes during the run; the state is what the run has done.
Both belong to one ``Run`` (``_run.py``), which the ``AgentStream`` owns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from .._prompt import PromptMessage
from .._tool_records import StepToolCall, StepToolResult, ToolOutcome
from ..chunks import Chunk, Finish, ResponseMetadata
from ..events import RunObserver
from ..messages import MessageList
from ..models import Model, ModelRequest
from ..models._base import ToolChoice as _ToolChoice
from ..processors._spec import ProcessorSpec
from ..tools import Tool
from ._build import StepRecorder
from ._result import StepResult, TripwireInfo, Usage
from ._step_end import StepEnd

if TYPE_CHECKING:
    from .._message_list import MessageListCheckpoint, SystemSnapshot
    from ..memory import Memory

__all__ = ["RunConfig", "RunState", "StepState", "ToolChoice", "ToolOutcome",
           "FEEDBACK_TEMPLATE"]

#: How a retry reason is put in front of the model (Mastra 1.71.0's wording, placed after the
#: conversation as [main] does, so the provider's prompt cache for the conversation stays valid).
FEEDBACK_TEMPLATE = ("[Processor Feedback] Your previous response was not accepted: {reason}. "
                     "Please try again with the feedback in mind.")

#: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "tool", "toolName": name}``.
ToolChoice = _ToolChoice

#: What structured output was asked for: a type (msgspec/dataclass/TypedDict...) or a JSON schema.
StructuredOutput = type | Mapping[str, Any]


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What one ``generate()``/``stream()`` call asked for, resolved against the agent.

    A frozen msgspec ``Struct`` rather than a frozen dataclass: as immutable, and built in C
    (a frozen dataclass sets each of its 24 fields through ``object.__setattr__``: ~2 µs per
    call, against ~0.2). Fields are not validated on construction; ``Agent`` checks them."""

    agent_id: str
    instructions: tuple[str, ...]
    model: Model
    tools: Mapping[str, Tool]
    input_specs: tuple[ProcessorSpec, ...]
    output_specs: tuple[ProcessorSpec, ...]
    error_specs: tuple[ProcessorSpec, ...]
    prepare_step: ProcessorSpec | None
    max_processor_retries: int | None
    max_steps: int
    tool_choice: ToolChoice | None
    active_tools: tuple[str, ...] | None
    model_settings: Mapping[str, Any]
    provider_options: Mapping[str, Any]
    structured_output: StructuredOutput | None
    structured_schema: dict[str, object] | None
    memory: Memory | None
    thread_id: str | None
    resource_id: str | None
    request_context: dict[str, object]
    timed: bool
    tool_timeout: float | None = None
    hook_timeout: float | None = None
    #: The agent's display name (``Agent(name=...)``, else its id): spans are named after it.
    agent_name: str = ""
    #: The call's ``observers=`` (``streamkit.events.RunObserver``), checked.
    observers: tuple[RunObserver, ...] = ()
    #: Whether the step-end payloads carry their message snapshots (``CallOptions.
    #: step_snapshots``; always ``True`` when output processors run).
    step_snapshots: bool = True

    @property
    def error_retry_cap(self) -> int | None:
        """Retries granted to error processors: the explicit value, else 10 when any error
        processor exists (the contract's default), else none."""
        if self.max_processor_retries is not None:
            return self.max_processor_retries
        return 10 if self.error_specs else None

    def spec_of(self, processor_id: str | None) -> ProcessorSpec | None:
        """The registered processor with ``processor_id`` in any lane, if there is one."""
        return next((s for s in (*self.input_specs, *self.output_specs, *self.error_specs)
                     if s.id == processor_id), None)


@dataclass(slots=True)
class StepState:
    """One attempt at one step: what ``process_input_step`` decided, and what came back."""

    number: int
    retry_count: int
    checkpoint: MessageListCheckpoint
    model: Model
    tools: dict[str, Tool]
    tool_choice: ToolChoice | None
    model_settings: dict[str, object]
    provider_options: dict[str, object]
    structured_output: StructuredOutput | None
    prompt: list[PromptMessage] = field(default_factory=list)
    request: ModelRequest | None = None
    #: What the model streams for this attempt (``model.stream``, or a probe wrapping it).
    source: AsyncIterator[Chunk] | None = None
    #: The chunks a ``process_llm_request`` cache hit answered with, instead of the model.
    replay: list[Chunk] | None = None
    recorder: StepRecorder | None = None
    finish: Finish | None = None
    #: The model's ``response-metadata`` chunk of this attempt, if it sent one (held back).
    response_metadata: ResponseMetadata | None = None
    streamed: bool = False
    text: str = ""
    reasoning: str = ""
    tool_calls: list[StepToolCall] = field(default_factory=list)
    tool_outcomes: list[ToolOutcome] = field(default_factory=list)
    tool_results: list[StepToolResult] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "unknown"
    api_error: BaseException | None = None


@dataclass(slots=True)
class RunState:
    """Everything the run has done so far; one per call, never shared."""

    message_list: MessageList
    system_snapshot: SystemSnapshot
    input_messages: Any = None
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
    #: ``result.text``: every accepted step's text, joined (Mastra's ``getFullOutput().text``).
    text: str = ""
    #: ``await stream.text``: the final step's text (narration before tool calls excluded).
    final_text: str = ""
    #: ``text`` and ``final_text`` are the run's texts (``process_output_result`` has run).
    has_result_text: bool = False
    object: object = None
    delivered: list[StepRecorder] = field(default_factory=list)
    #: Builds the step-end payloads; keeps the records of ``output.steps``.
    step_end: StepEnd = field(default_factory=StepEnd)

    def delivered_text(self) -> str:
        """Text the consumer received (each attempt's ``StepRecorder``), minus withdrawn
        (retried) attempts."""
        return "".join(rec.text() for rec in self.delivered)
