"""streamkit — Mastra's agent Processor pipeline for Python, as a reactive stream library.

Processors guard and shape an LLM agent's chunk stream at nine fixed points of the agent loop;
the same processors run standalone over any chunk source as fused stream operators.

Quick start::

    from streamkit import Agent, Processor
    from streamkit.testing import ScriptedModel, text

    class Shout(Processor):
        id = "shout"
        def process_output_stream(self, part):
            return part

    agent = Agent(id="demo", instructions="Be brief.", model=ScriptedModel([text("Hello world")]),
                  output_processors=[Shout()])
    result = await agent.generate("Hi")
"""

from . import chunks, errors, messages, ops, tokens, wire
from ._tool_records import StepToolCall, StepToolResult, ToolOutcome
from .agent import Agent, AgentResult, AgentStream, Override, StepResult, TripwireInfo, Usage
from .chunks import Chunk, DataChunk
from .errors import (
                     APICallError,
                     ChunkDecodeError,
                     MaxStepsExceeded,
                     MemoryStoreError,
                     ProcessorDefinitionError,
                     ProcessorError,
                     ScriptExhausted,
                     StreamkitError,
                     ToolError,
)
from .graph import Graph
from .memory import Memory, SQLiteStore
from .messages import Message, MessageList, get_text
from .processors import (
                     Abort,
                     APIErrorResult,
                     ErrorProcessor,
                     InputProcessor,
                     LLMRequestUpdate,
                     MessagesUpdate,
                     OutputProcessor,
                     Pipeline,
                     Processor,
                     StepOverrides,
                     TraceRecord,
                     Violation,
                     Writer,
)
from .tools import Tool, tool
from .tripwire import TripWire

__version__ = "0.1.0"

__all__ = [
    # processors
    "Processor", "Pipeline", "InputProcessor", "OutputProcessor", "ErrorProcessor",
    "StepOverrides", "MessagesUpdate", "LLMRequestUpdate", "APIErrorResult", "TripWire",
    "Violation", "TraceRecord", "Writer", "Abort",
    # agent
    "Agent", "AgentResult", "AgentStream", "StepResult", "TripwireInfo", "Usage", "Override",
    "Graph", "StepToolCall", "StepToolResult", "ToolOutcome",
    # tools, memory
    "tool", "Tool", "Memory", "SQLiteStore",
    # data
    "Chunk", "DataChunk", "Message", "MessageList", "get_text",
    # errors
    "StreamkitError", "ProcessorDefinitionError", "ProcessorError", "ChunkDecodeError",
    "APICallError", "ToolError", "MaxStepsExceeded", "ScriptExhausted", "MemoryStoreError",
    # modules
    "chunks", "wire", "messages", "ops", "errors", "tokens",
]
