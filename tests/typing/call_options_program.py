"""Call options as a user's type checker sees them (``tests/test_call_options_typing.py``):
each keyword of ``Agent.stream``/``generate`` is checked by name and type, and ``CallOptions``
types a dict of them. Each line marked ``# E: <code>`` must be reported by ``mypy --strict``;
no other line may be.
"""

from __future__ import annotations

from streamkit import Agent
from streamkit.agent import AgentResult, AgentStream, CallOptions

agent = Agent(id="a", model="openai/gpt-4o-mini")


async def main() -> AgentResult:
    stream: AgentStream = agent.stream("hi", max_steps=2, thread_id="t1", resource_id="u1",
                                       request_context={"tenant": "acme"}, trace=False)
    options: CallOptions = {"max_steps": 3, "tool_choice": "auto"}
    agent.stream("hi", **options)
    agent.stream("hi", max_step=3)  # E: call-arg
    agent.stream("hi", max_steps="3")  # E: arg-type
    await agent.generate("hi", thread_id=7)  # E: arg-type
    wrong: CallOptions = {"max_stepz": 2}  # E: typeddict-unknown-key
    print(stream, wrong)
    return await agent.generate("hi", max_processor_retries=None, model="openai/gpt-4o")
