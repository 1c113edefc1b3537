"""The agent: configuration, the loop graph, and results.

What belongs here: ``Agent``, ``Override``, the loop's node table/edge table, the run and its
routing table, and the result/stream handles. Processor calling lives in
``streamkit.processors``; models in
``streamkit.models``; storage in ``streamkit.memory``.
"""

from .._tool_records import StepToolCall, StepToolResult, ToolOutcome
from ._agent import Agent, CallOptions, Override
from ._result import AgentResult, AgentStream, StepResult, TripwireInfo, Usage

__all__ = ["Agent", "Override", "CallOptions", "AgentResult", "AgentStream", "StepResult",
           "TripwireInfo", "Usage", "StepToolCall", "StepToolResult", "ToolOutcome"]
