"""Test doubles that ship with streamkit: deterministic models with no network.

Use them in your own tests, in notebooks, and in the demo::

    from streamkit.testing import ScriptedModel, text, tool_call, api_error

    model = ScriptedModel([tool_call("lookup", {"id": "C-1"}), text("Ada is a gold customer.")])
    result = await Agent(id="a", model=model, tools=[lookup]).generate("Who is C-1?")
    assert model.requests[1].prompt[-1]["role"] == "tool"
"""

from .errors import ScriptExhausted
from .models._scripted import (
                               FunctionModel,
                               RecordedRequest,
                               ScriptedModel,
                               api_error,
                               reasoning,
                               text,
                               tool_call,
)

__all__ = ["ScriptedModel", "FunctionModel", "RecordedRequest", "text", "tool_call", "reasoning",
           "api_error", "ScriptExhausted"]
