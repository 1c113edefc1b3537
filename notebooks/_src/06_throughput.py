# %% [markdown]
# # 06 · Throughput
#
# Stream processors run **fused**: one pass per chunk through every processor, sync hooks called
# without an `await`, no async generator or task per processor. This notebook measures what that
# costs — chunks per second through `ops.apply` as pass-through processors are added — right here,
# in-process. Numbers depend on the machine; the shape is what matters. (The full benchmark suite,
# with baselines and memory, is `python -m benchmarks`.)

# %%
import time

from tqdm.notebook import tqdm

from streamkit import Processor, display, ops
from streamkit.chunks import TextDelta

N = 20_000
chunks = [TextDelta(text="tok ", id="t1", run_id="bench", from_="AGENT") for _ in range(N)]


class PassThrough(Processor):
    def process_output_stream(self, part):
        return part


class AsyncPassThrough(Processor):
    async def process_output_stream(self, part):
        return part


async def chunks_per_second(pipeline, repeat: int = 3) -> float:
    """Best of ``repeat`` runs of ``N`` chunks through ``pipeline``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        async for _ in ops.apply(chunks, pipeline):
            pass
        best = min(best, time.perf_counter() - start)
    return N / best

# %% [markdown]
# ## Chunks/s vs number of processors
#
# The sweep is the longest cell here (a few seconds on a loaded machine), so it shows a progress
# bar; the bar moves between measurements, never inside one.

# %%
counts = [0, 1, 2, 4, 8, 16, 32]
rates = [await chunks_per_second([PassThrough(f"p{i}") for i in range(k)])
         for k in tqdm(counts, desc="pipelines measured", unit="pipeline")]
display.bar_chart([f"{k} processors" for k in counts], rates, unit="chunks/s",
                  title=f"sync pass-through processors, {N:,} chunks, best of 3")

# %% [markdown]
# The marginal cost of one more processor, in nanoseconds per chunk:

# %%
per_chunk_ns = [1e9 / r for r in rates]
marginal = (per_chunk_ns[-1] - per_chunk_ns[0]) / counts[-1]
display.bar_chart([f"{k} processors" for k in counts], per_chunk_ns, unit="ns/chunk",
                  title=f"time per chunk — about {marginal:.0f} ns per added processor")

# %% [markdown]
# ## Sync vs async hooks
#
# An `async def` hook must be awaited on every chunk; sync hooks are called inline. Which one a
# hook is was decided once, at registration — never checked per chunk.

# %%
k = 8
sync_rate = await chunks_per_second([PassThrough(f"s{i}") for i in range(k)])
async_rate = await chunks_per_second([AsyncPassThrough(f"a{i}") for i in range(k)])
display.bar_chart([f"{k} sync hooks", f"{k} async hooks"], [sync_rate, async_rate],
                  unit="chunks/s", title="sync vs async stream hooks")

# %% [markdown]
# ## Operators cost about the same as hand-written processors

# %%
ops_rate = await chunks_per_second([ops.map(lambda c: c, id=f"m{i}") for i in range(k)])
display.bar_chart([f"{k} Processor subclasses", f"{k} ops.map"], [sync_rate, ops_rate],
                  unit="chunks/s", title="processors vs operators")
