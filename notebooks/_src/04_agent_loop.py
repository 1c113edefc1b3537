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

# %% [markdown]
# ## Tracing with OpenTelemetry
#
# A separate part: the same agent, traced. With `opentelemetry-api` installed
# (`pip install 'streamkit-agents[otel]'`) and a tracer provider configured, every run is a tree of
# spans with the GenAI semantic conventions: `invoke_agent` → `step {n}` → `chat {model}` per
# model call and `execute_tool {tool}` per tool call, plus one span per processor hook call
# (the rows of `result.trace`). Nothing is per chunk. Here the SDK's console exporter prints one
# line per span as it ends (its `formatter` keeps each to one line; without it every span is
# printed as JSON), and an in-memory exporter keeps the spans to draw the tree.
# `streamkit.tracing.instrument(provider)` picks this provider for streamkit alone; setting the
# global one (`opentelemetry.trace.set_tracer_provider`) is enough too.

# %%
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import streamkit.tracing


def one_line(span):
    ms = (span.end_time - span.start_time) / 1e6
    return f"{span.name:<40} {span.kind.name:<8} {ms:8.2f} ms\n"


kept = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout,
                                                                    formatter=one_line)))
provider.add_span_processor(SimpleSpanProcessor(kept))
streamkit.tracing.instrument(provider)

traced = await agent.generate("Where is my order O-7? I am C-42.", model=ScriptedModel([
    [tool_call("lookup_customer", {"customer_id": "C-42"}),
     tool_call("track_order", {"order_id": "O-7"})],
    text("Hi Ada! Order O-7 is in transit with DHL and arrives Friday."),
]))

# %% [markdown]
# The tree, as a trace viewer draws it (a few attributes shown):

# %%
SHOWN = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
         "gen_ai.response.finish_reasons", "streamkit.processor.outcome",
         "streamkit.processor.calls", "streamkit.processor.dropped")


def shown_value(value):
    return list(value) if isinstance(value, tuple) else value


def tree(spans, parent=None, prefix=""):
    kids = sorted((s for s in spans if (s.parent.span_id if s.parent else None) == parent),
                  key=lambda s: s.start_time)
    lines = []
    for i, span in enumerate(kids):
        last = i == len(kids) - 1
        shown = " ".join(f"{key.rsplit('.', 1)[-1]}={shown_value(value)}"
                         for key, value in span.attributes.items() if key in SHOWN)
        lines.append(f"{prefix}{'└─ ' if last else '├─ '}{span.name}  {shown}".rstrip())
        lines += tree(spans, span.context.span_id, prefix + ("   " if last else "│  "))
    return lines


spans = kept.get_finished_spans()
print("\n".join(tree(spans)))

# %% [markdown]
# The run span's attributes: usage equals `result.usage`. No prompt or answer is on any span
# unless content capture is turned on (`capture_content=True`, or
# `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`) — and then only what the
# processors left (here: the tool result without `internal_notes`).

# %%
run_span = next(s for s in spans if s.parent is None)
assert run_span.attributes["gen_ai.usage.output_tokens"] == traced.usage.output_tokens
dict(run_span.attributes)

# %%
streamkit.tracing.uninstrument()  # streamkit emits no spans from here on
