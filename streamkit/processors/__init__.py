"""Processors: the base class, registration, the fused stream chain and the hook runners.

What belongs here: everything about *calling* processor hooks — validation at registration,
sync/async decided once, per-request state, the one-pass stream chain, the return-shape rules of
each hook, and the trace. What does not: the agent loop (``streamkit.agent``), operators
(``streamkit.ops``), chunk and message types (``streamkit.chunks``, ``streamkit.messages``).
"""

from ..tripwire import TripWire, Violation
from ._base import (ErrorProcessor, InputProcessor, OutputProcessor, Pipeline, Processor,
                    flatten_processors)
from ._runner import (StepOverrides, call_hook, run_api_error, run_input_step, run_llm_request,
                      run_llm_response, run_message_hook)
from ._runtime import RequestRuntime, StreamStats, TraceRecord, Writer
from ._spec import HOOK_PARAMS, HOOKS, HookSpec, ProcessorSpec, is_async_callable, register
from ._stream import StreamChain

__all__ = [
    "Processor", "Pipeline", "InputProcessor", "OutputProcessor", "ErrorProcessor",
    "TripWire", "Violation", "StepOverrides", "TraceRecord", "RequestRuntime", "StreamChain",
    "StreamStats", "Writer", "HOOKS", "HOOK_PARAMS", "HookSpec", "ProcessorSpec", "register",
    "is_async_callable", "flatten_processors", "call_hook", "run_message_hook", "run_input_step",
    "run_llm_request", "run_llm_response", "run_api_error",
]
