# %% [markdown]
# # 02 · Operators
#
# `streamkit.ops` builds stream processors from plain functions: `map`, `filter`, `drop`,
# `abort`, `tap`, `scan`, `batch`, `take`, `map_text`, … Each is a `Processor` with a
# `process_output_stream` hook, so the same object works in three places:
#
# * standalone over any chunk source: `ops.apply(source, pipeline)`;
# * composed with other processors using `|` (fused into **one pass per chunk**);
# * in an agent's `output_processors`.
#
# Marble diagrams read left to right (`|` ends the stream, `X` is a tripwire):
#
# ```
# --a--b--c--|   map(upper)      --A--B--C--|
# --a--b--c--|   drop(is b)      --a-----c--|
# --a--b--c--|   abort(is b)     --a--X|
# ```

# %%
import asyncio

import reactivex
from reactivex import operators as rx

from streamkit import Agent, display, ops
from streamkit.testing import ScriptedModel, reasoning, text

# %% [markdown]
# A source to play with: one scripted model step that reasons, then answers.

# %%
agent = Agent(id="quiz", model=ScriptedModel([[
    reasoning("The user wants the answer."),
    text("The answer is 42. Thanks for asking!"),
]]))
source = await display.collect(agent.stream("What is the answer?"))
source

# %% [markdown]
# ## map, filter, drop
#
# `display.collect(source, pipeline)` runs `ops.apply(source, pipeline)` and shows what comes
# out. Functions may be `def` or `async def` — decided once, when the operator is built.

# %%
shout = ops.map_text(str.upper, id="shout")
await display.collect(source, shout)

# %%
is_text = ops.filter(lambda c: c.type == "text-delta", id="only-text")
await display.collect(source, is_text)

# %%
no_reasoning = ops.drop(lambda c: c.type.startswith("reasoning"), id="no-reasoning")


async def slow_upper(text: str) -> str:
    await asyncio.sleep(0)        # stands in for real async work
    return text.upper()

await display.collect(source, no_reasoning | ops.map_text(slow_upper, id="async-upper"))

# %% [markdown]
# ## Composition with `|`
#
# `a | b | c` is a `Pipeline`: each member keeps its id and state, and the stream hooks run
# fused, one pass per chunk. `batch(sentence=True)` merges text deltas into sentences.

# %%
pipeline = (no_reasoning
            | ops.map_text(str.upper, id="upper")
            | ops.batch(sentence=True, id="sentences"))
display.show_processors(pipeline)

# %%
await display.collect(source, pipeline)

# %% [markdown]
# ## abort
#
# `ops.abort(pred, reason)` trips the wire: the chunk is dropped, a `tripwire` chunk ends the
# stream (shown in red), and `applied.tripwire` says who and why.

# %%
secret = ops.abort(lambda c: c.type == "text-delta" and "42" in c.payload.text,
                   "the answer is a secret", id="secret-guard")
applied = ops.apply(source, no_reasoning | secret)
await display.collect(applied)

# %%
applied.tripwire.processor_id, applied.tripwire.reason

# %% [markdown]
# ## State: `scan`
#
# Every processor gets a `state` dict per request. `scan` folds chunks into it.

# %%
words = ops.scan(lambda n, c: n + len(c.payload.text.split()), 0, types="text-delta", id="words")
applied = ops.apply(source, words)
_ = await display.collect(applied)
applied.state("words")

# %% [markdown]
# ## The same pipeline inside an agent
#
# Operators are processors, so they go straight into `output_processors`. The result shows the
# answer, the steps, and which processor ran when.

# %%
agent = Agent(id="quiz", model=ScriptedModel([[reasoning("Hmm."), text("The answer is 42.")]]),
              output_processors=[pipeline])
await agent.generate("What is the answer?")

# %% [markdown]
# ## reactivex interop
#
# `ops.apply` also reads a reactivex `Observable`, and `ops.to_observable` turns any chunk
# stream back into one — reactivex at the edges, streamkit's fused chain in the middle.

# %%
texts_only = reactivex.from_iterable(source).pipe(rx.filter(lambda c: c.type == "text-delta"))
await display.collect(ops.apply(texts_only, ops.map_text(str.upper, id="upper")))

# %%
seen: list[str] = []
done = asyncio.Event()
ops.to_observable(ops.apply(source, no_reasoning)).pipe(
    rx.map(lambda c: c.type), rx.distinct_until_changed(),
).subscribe(on_next=seen.append, on_completed=done.set)
await done.wait()
seen
