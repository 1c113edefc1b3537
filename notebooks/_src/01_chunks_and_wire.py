# %% [markdown]
# # 01 · Chunks and the wire format
#
# An agent run is a stream of **chunks**: `start`, `step-start`, `text-delta`, `tool-call`,
# `tool-result`, `step-finish`, `finish`, custom `data-*` chunks, and — when a processor blocks
# something — a `tripwire`. Each chunk is a small `msgspec.Struct`; on the wire it is
# [Mastra](https://mastra.ai)'s JSON, so a Mastra client can read what streamkit sends and back.
#
# Everything here runs offline: the model is `ScriptedModel`, which plays a script.

# %%
from streamkit import Agent, display, tool, wire
from streamkit.chunks import DataChunk, TextDelta, ToolCall, TripwireChunk
from streamkit.testing import ScriptedModel, text, tool_call

# %% [markdown]
# ## Building chunks
#
# Constructors take the payload's fields flattened. Python attributes are snake_case
# (`run_id`, `from_`, `payload.tool_call_id`); the wire form is camelCase.

# %%
hello = TextDelta(text="Hello", id="t1", run_id="run-1", from_="AGENT")
hello.type, hello.payload.text, hello.run_id

# %% [markdown]
# A list of chunks shows as a table with `display.show_chunks` (it is still a plain list).
# Tripwires are highlighted in red.

# %%
chunks = display.show_chunks([
    hello,
    TextDelta(text=" <world>", id="t1", run_id="run-1", from_="AGENT"),
    ToolCall(tool_call_id="call-1", tool_name="lookup", args={"customer_id": "C-42"},
             run_id="run-1", from_="AGENT"),
    DataChunk(type="data-progress", data={"pct": 50}, id="job-7"),
    TripwireChunk(reason="blocked by policy", processor_id="guard", run_id="run-1",
                  from_="AGENT"),
])
chunks

# %% [markdown]
# ## JSON, exactly as Mastra writes it
#
# `encode` gives bytes; `decode` gives the chunk back (round trips are exact, and payload keys
# streamkit does not model are kept).

# %%
for chunk in chunks:
    print(wire.encode(chunk).decode())

# %%
assert [wire.decode(wire.encode(c)) for c in chunks] == chunks
wire.decode(b'{"type":"text-delta","runId":"r9","from":"AGENT","payload":{"id":"t","text":"hi"}}')

# %% [markdown]
# ## Server-sent events, JSON lines, MessagePack
#
# Over HTTP, chunks travel as SSE (`data: <json>\n\n`). Networks deliver bytes in arbitrary
# pieces; `iter_sse` reassembles them. Here the bytes arrive seven at a time.

# %%
sse = b"".join(wire.encode_sse(c) for c in chunks)
print(sse[:160].decode(), "…")


async def trickle(data: bytes, size: int = 7):
    for i in range(0, len(data), size):
        yield data[i:i + size]

decoded = [c async for c in wire.iter_sse(trickle(sse))]
assert decoded == chunks
len(decoded)

# %%
jsonl = b"".join(wire.encode_jsonl(c) for c in chunks)
packed = [wire.encode_msgpack(c) for c in chunks]
assert wire.decode_jsonl(jsonl) == chunks
assert [wire.decode_msgpack(p) for p in packed] == chunks
{"sse bytes": len(sse), "json-lines bytes": len(jsonl),
 "msgpack bytes": sum(len(p) for p in packed)}

# %% [markdown]
# ## A real stream
#
# `display.collect` consumes any chunk source — here an agent's stream — into a table with the
# time each chunk arrived. The scripted model calls a tool in its first step, then answers.


# %%
@tool
def lookup(customer_id: str) -> dict:
    """Look up a customer by id."""
    return {"id": customer_id, "name": "Ada", "tier": "gold"}


agent = Agent(id="support", instructions="Be brief.", tools=[lookup],
              model=ScriptedModel([tool_call("lookup", {"customer_id": "C-42"}),
                                   text("Ada is a gold customer.")]))
table = await display.collect(agent.stream("Who is C-42?"))
table

# %%
table.text, table.types.count("text-delta")
