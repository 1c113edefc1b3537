"""Processors: the base class, ``Pipeline`` composition, and what hooks receive and return.

What belongs here: everything about *calling* processor hooks — validation at registration
(``_spec``), sync/async decided once, per-request state (``_runtime``), the fused stream chain
(``_fused`` renders it, ``_chain`` binds and drives it), the return-shape rules of each hook
(``_runner``), and the trace. What does not: the agent loop (``streamkit.agent``), operators
(``streamkit.ops``), chunk and message types (``streamkit.chunks``, ``streamkit.messages``).

Public here is what a processor author needs; the engine lives in the private modules.
"""

from ..tripwire import Abort, TripWire, Violation
from ._base import ErrorProcessor, InputProcessor, OutputProcessor, Pipeline, Processor
from ._runner import APIErrorResult, LLMRequestUpdate, MessagesUpdate, StepOverrides
from ._runtime import TraceRecord, Writer
from ._spec import is_async_callable

__all__ = [
    "Processor", "Pipeline", "InputProcessor", "OutputProcessor", "ErrorProcessor",
    "TripWire", "Violation", "StepOverrides", "MessagesUpdate", "LLMRequestUpdate",
    "APIErrorResult", "TraceRecord", "Writer", "Abort", "is_async_callable",
]
