# %% [markdown]
# # 04 · The agent loop
#
# An `Agent` runs an explicit graph: `process_input` once, then per step
# `process_input_step` → `prepare_step` → `process_llm_request` → model →
# `process_output_stream` (per chunk) → `process_llm_response` → `process_output_step` →
# tools → `process_tool_result`, looping while the model calls tools; then
# `process_output_result`. The run walks exactly the graph `agent.graph()` returns.

# %%
import tempfile
from pathlib import Path

from streamkit import Agent, Processor, display, get_text, ops, tool
from streamkit.memory import Memory, SQLiteStore
from streamkit.messages import ToolInvocationPart
from streamkit.testing import ScriptedModel, reasoning, text, tool_call

# %% [markdown]
# ## Tools that write data chunks
#
# A tool may ask for a `writer` and emit custom `data-*` chunks while it runs: `transient`
# ones are streamed only (progress), the others are also stored with the assistant message.


# %%
@tool
def lookup_customer(customer_id: str) -> dict:
    """Look up a customer by id."""
    return {"id": customer_id, "name": "Ada", "tier": "gold", "internal_notes": "VIP, churn risk"}


@tool
async def track_order(order_id: str, writer) -> dict:
    """Where an order is."""
    for pct in (30, 70, 100):
        writer.custom({"type": "data-progress", "data": {"order": order_id, "pct": pct},
                       "transient": True})
    writer.custom({"type": "data-shipment", "data": {"order": order_id, "carrier": "DHL"}})
    return {"order": order_id, "status": "in transit", "eta": "Friday"}

# %% [markdown]
# ## Processors and memory
#
# An input processor adds a rule for the model; output processors hide the model's reasoning
# and keep an internal field out of the tool result (the model and the stream see the clean
# result). Memory keeps the conversation in a
# SQLite file.


# %%
class TierRules(Processor):
    id = "tier-rules"

    def process_input(self, message_list):
        message_list.add_system("Gold customers get free express shipping.", tag="rules")


class HideInternal(Processor):
    id = "hide-internal"

    def process_tool_result(self, tool_name, tool_call_id, args, result, message_list):
        if isinstance(result, dict) and "internal_notes" in result:
            clean = {k: v for k, v in result.items() if k != "internal_notes"}
            message_list.update_tool_invocation(
                ToolInvocationPart.returned(tool_call_id, tool_name, clean, args))


memory = Memory(store=SQLiteStore(Path(tempfile.mkdtemp()) / "memory.db"), last_messages=10)
model = ScriptedModel([
    [reasoning("Look up both."),
     tool_call("lookup_customer", {"customer_id": "C-42"}),
     tool_call("track_order", {"order_id": "O-7"})],
    text("Hi Ada! Order O-7 is in transit with DHL and arrives Friday."),
    text("You asked about order O-7, which arrives Friday."),
])
agent = Agent(
    id="support", instructions="You are a support agent. Be brief.", model=model,
    tools=[lookup_customer, track_order], memory=memory,
    input_processors=[TierRules()],
    output_processors=[ops.drop(lambda c: c.type.startswith("reasoning"), id="hide-reasoning"),
                       HideInternal()],
)

# %% [markdown]
# ## The graph
#
# Drawn as SVG: the default path top to bottom, the step loop inside the dashed frame, the
# processors that run at each node as chips, and the tripwire / error / retry edges gathered on
# the right (hover an edge or a node for details). The Mermaid source and a text form are
# underneath.

# %%
agent.graph()

# %% [markdown]
# ## A run, chunk by chunk
#
# Both tools run concurrently in step 0; their `data-*` chunks stream while they run. The
# `lookup_customer` result has no `internal_notes`.

# %%
stream = agent.stream("Where is my order O-7? I am C-42.", thread_id="t1", resource_id="C-42")
chunks = await display.collect(stream)
chunks

# %% [markdown]
# ## The result: steps, timeline, trace

# %%
result = await stream.result()
result

# %%
display.show_trace(result.trace)

# %% [markdown]
# ## Data chunks
#
# Streamed: every `data-*` chunk. Stored with the assistant message: only the non-transient
# ones.

# %%
display.show_chunks([c for c in chunks if c.type.startswith("data-")])

# %%
[part.type for message in result.messages for part in message.content.parts]

# %% [markdown]
# ## Memory
#
# The next turn on the same thread recalls the conversation. `stream.show()` displays the text
# live as it arrives (updated in place).

# %%
result = await agent.stream("What did I ask about?", thread_id="t1", resource_id="C-42").show()

# %%
[(m["role"], str(m["content"])[:60]) for m in model.requests[-1].prompt]

# %%
[(m.role, get_text(m)[:60]) for m in await memory.get_messages("t1")]

# %%
await memory.close()
