"""The agent: configuration, the loop graph, and results.

What belongs here: ``Agent``, ``Override``, the loop's node table/edge table and driver, and the
result/stream handles. Processor calling lives in ``streamkit.processors``; models in
``streamkit.models``; storage in ``streamkit.memory``.
"""

from ._agent import Agent, Override, tools_by_name
from ._loop import build_graph
from ._result import AgentResult, AgentStream, StepResult, TripwireInfo, Usage

__all__ = ["Agent", "Override", "AgentResult", "AgentStream", "StepResult", "TripwireInfo",
           "Usage", "build_graph", "tools_by_name"]
