"""Standalone runner rows: streamkit's fused chain against hand-written loops, reactivex, aiostream.

What belongs here: the groups comparing, over the *same* list of chunk objects, with the same
per-chunk work:

* **hand loop** (the baseline): a plain ``for`` loop. With pass-through processors it calls the
  same hook functions in sequence (the least any runner must do: a pass-through's work *is* the
  call); with the three sync transforms the work is written inline, no calls at all (the strictest
  baseline; the uppercased chunk is built with ``msgspec.structs.replace``); with async hooks it
  awaits the same hooks in sequence.
* **StreamChain.push loop**: the fused chain ``ops.apply`` and the agent use, driven by a plain
  ``for`` loop (``out = push(chunk)``); this is the engine's own cost.
* **hand async gen**: the hand loop as an async generator consumed with ``async for`` -- what a
  user writes to get an async iterator; the like-for-like baseline of ``ops.apply``.
* **ops.apply**: the public standalone API (an async iterator over the source).
* **reactivex**: ``reactivex.from_iterable(chunks).pipe(ops.map(...), ops.filter(...), ...)``
  with the same functions (sync rows only: Rx cannot await per item).
* **aiostream**: ``stream.iterate(chunks) | pipe.map(...) | pipe.filter(...)`` (async functions
  with ``task_limit=1`` so chunks stay in order, as the chain keeps them).

Consumers only count what comes out, so no contender pays for keeping its output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reactivex
from aiostream import pipe, stream
from reactivex import operators as rx_ops

from streamkit import ops
from streamkit.chunks import TextDelta
from streamkit.processors._chain import StreamChain
from streamkit.processors._runtime import RequestRuntime
from streamkit.processors._spec import register

from .harness import Case, Group
from .workloads import (
    DROP_EVERY,
    AsyncPassThrough,
    PassThrough,
    acount_words,
    async_transforms,
    aupper_chunk,
    count_words,
    expected_transform,
    replace,
    text_chunks,
    transforms,
    upper_chunk,
)

__all__ = ["runner_groups"]

HAND = "hand loop"
HAND_GEN = "hand async gen"
SAME_FNS = "for loop · same functions"


def _chain(processors: list[Any]) -> StreamChain:
    """A fused chain for one request, trace off (as ``ops.apply`` builds it by default)."""
    return StreamChain([register(p) for p in processors], RequestRuntime(timed=False))


def _words_state(chain_or_applied: Any) -> int:
    return int(chain_or_applied.runtime.state("words").get("words", 0))


# --------------------------------------------------------------------------- pass-through


def _unrolled(k: int, is_async: bool, gen: bool) -> Callable[..., Any]:
    """``make(chunks, f0, ..., fk-1) -> hand`` where ``hand`` is the loop a person writes for
    ``k`` hooks: one line per hook, each followed by the drop check (no inner loop over a list,
    which would flatter the chain). ``gen`` makes it an async generator yielding the survivors;
    otherwise it returns how many survived."""
    aw = "await " if is_async else ""
    names = [f"f{i}" for i in range(k)]
    lines = [f"def make(chunks{''.join(', ' + f for f in names)}):",
             f"    {'async def' if is_async or gen else 'def'} hand():"]
    if not gen:
        lines.append("        out = 0")
    lines.append("        for c in chunks:")
    for f in names:
        lines += [f"            c = {aw}{f}(c)", "            if c is None:",
                  "                continue"]
    lines.append("            yield c" if gen else "            out += 1")
    if not gen:
        lines.append("        return out")
    lines.append("    return hand")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<hand loop x{k}>", "exec"), namespace)
    return namespace["make"]  # type: ignore[no-any-return]


def _pass_group(chunks: list[Any], k: int, is_async: bool, repeat: int) -> Group:
    n = len(chunks)
    procs: list[Any] = [(AsyncPassThrough if is_async else PassThrough)(f"pass-{i}")
                        for i in range(k)]
    hooks = [p.process_output_stream for p in procs]
    kind = "async" if is_async else "sync"
    title = f"runner · {k} pass-through · {kind}" if k else "runner · 0 processors"
    cases: list[Case] = []

    hand = _unrolled(k, is_async, gen=False)(chunks, *hooks)
    hand_gen_source = _unrolled(k, is_async, gen=True)(chunks, *hooks)

    if not is_async:
        def push_loop() -> int:
            push = _chain(procs).push
            out = 0
            for c in chunks:
                if push(c) is not None:
                    out += 1
            return out

        def rx_run() -> int:
            out = [0]

            def sink(_: Any) -> None:
                out[0] += 1
            reactivex.from_iterable(chunks).pipe(*[rx_ops.map(f) for f in hooks]).subscribe(
                on_next=sink)
            return out[0]

        cases += [Case(HAND, hand, n, expect=n),
                  Case("StreamChain.push loop", push_loop, n, baseline=HAND, expect=n)]
    else:
        async def push_loop() -> int:  # type: ignore[misc]
            push = _chain(procs).push
            out = 0
            for c in chunks:
                if await push(c) is not None:
                    out += 1
            return out

        cases += [Case(HAND, hand, n, is_async=True, expect=n),
                  Case("StreamChain.push loop", push_loop, n, is_async=True, baseline=HAND,
                       expect=n)]

    async def hand_gen() -> int:
        out = 0
        async for _ in hand_gen_source():
            out += 1
        return out

    async def apply() -> int:
        out = 0
        async for _ in ops.apply(chunks, procs):
            out += 1
        return out

    async def aio() -> int:
        xs = stream.iterate(chunks)
        for f in hooks:
            xs = xs | (pipe.map(f, task_limit=1) if is_async else pipe.map(f))
        out = 0
        async with xs.stream() as items:
            async for _ in items:
                out += 1
        return out

    cases += [Case(HAND_GEN, hand_gen, n, is_async=True, baseline=HAND, expect=n),
              Case("ops.apply", apply, n, is_async=True, baseline=HAND_GEN, expect=n)]
    if not is_async:
        cases.append(Case("reactivex", rx_run, n, baseline=HAND, expect=n))
    cases.append(Case("aiostream", aio, n, is_async=True, baseline=HAND_GEN, expect=n))
    return Group(title, cases, repeat=repeat)


# --------------------------------------------------------------------------- real transforms


def _sync_transform_group(chunks: list[Any], repeat: int) -> Group:
    n = len(chunks)
    expect = expected_transform(chunks)
    every = DROP_EVERY

    def hand() -> tuple[int, int]:
        out = words = seen = 0
        for c in chunks:
            if c.__class__ is TextDelta:
                p = c.payload
                c = replace(c, payload=replace(p, text=p.text.upper()))
            seen += 1
            if seen % every == 0:
                continue
            if c.__class__ is TextDelta:
                words += len(c.payload.text.split())
            out += 1
        return out, words

    async def hand_gen_source(box: list[int]) -> Any:
        seen = 0
        for c in chunks:
            if c.__class__ is TextDelta:
                p = c.payload
                c = replace(c, payload=replace(p, text=p.text.upper()))
            seen += 1
            if seen % every == 0:
                continue
            if c.__class__ is TextDelta:
                box[0] += len(c.payload.text.split())
            yield c

    async def hand_gen() -> tuple[int, int]:
        box = [0]
        out = 0
        async for _ in hand_gen_source(box):
            out += 1
        return out, box[0]

    def push_loop() -> tuple[int, int]:
        chain = _chain(transforms())
        push = chain.push
        out = 0
        for c in chunks:
            if push(c) is not None:
                out += 1
        return out, _words_state(chain)

    async def apply() -> tuple[int, int]:
        applied = ops.apply(chunks, transforms())
        out = 0
        async for _ in applied:
            out += 1
        return out, int(applied.state("words").get("words", 0))

    def counters() -> tuple[Callable[[Any], bool], Callable[[Any], None], list[int]]:
        seen, words = [0], [0]

        def keep(_: Any) -> bool:
            seen[0] += 1
            return seen[0] % every != 0

        def count(c: Any) -> None:
            if c.__class__ is TextDelta:
                words[0] = count_words(words[0], c)
        return keep, count, words

    def rx_run() -> tuple[int, int]:
        keep, count, words = counters()
        out = [0]

        def sink(_: Any) -> None:
            out[0] += 1
        reactivex.from_iterable(chunks).pipe(
            rx_ops.map(upper_chunk), rx_ops.filter(keep), rx_ops.do_action(count)
        ).subscribe(on_next=sink)
        return out[0], words[0]

    async def aio() -> tuple[int, int]:
        keep, count, words = counters()
        xs = stream.iterate(chunks) | pipe.map(upper_chunk) | pipe.filter(keep) | \
            pipe.action(count)
        out = 0
        async with xs.stream() as items:
            async for _ in items:
                out += 1
        return out, words[0]

    async def same_functions() -> tuple[int, int]:
        # The baseline: a plain ``for`` loop in a coroutine calling the very hook
        # functions ``ops.apply`` calls (the processors' own), appending to a list.
        fns = [register(p).hooks["process_output_stream"].fn for p in transforms()]
        up, drop, count = fns
        s_drop: dict[str, Any] = {}
        s_words: dict[str, Any] = {}
        kept: list[Any] = []
        for c in chunks:
            c = up(c)
            if c is None:
                continue
            c = drop(c, s_drop)
            if c is None:
                continue
            c = count(c, s_words)
            if c is None:
                continue
            kept.append(c)
        return len(kept), int(s_words.get("words", 0))

    async def apply_list() -> tuple[int, int]:
        applied = ops.apply(chunks, transforms())
        kept = [c async for c in applied]
        return len(kept), int(applied.state("words").get("words", 0))

    return Group("runner · 3 transforms · sync", [
        Case(SAME_FNS, same_functions, n, is_async=True, expect=expect,
             note="a for loop in a coroutine calling the same three hook functions, into a list"),
        Case("ops.apply into a list", apply_list, n, is_async=True, baseline=SAME_FNS,
             expect=expect),
        Case(HAND, hand, n, expect=expect, note="work inline, no calls"),
        Case("StreamChain.push loop", push_loop, n, baseline=HAND, expect=expect),
        Case(HAND_GEN, hand_gen, n, is_async=True, baseline=HAND, expect=expect),
        Case("ops.apply", apply, n, is_async=True, baseline=HAND_GEN, expect=expect),
        Case("reactivex", rx_run, n, baseline=HAND, expect=expect),
        Case("aiostream", aio, n, is_async=True, baseline=HAND_GEN, expect=expect),
    ], repeat=repeat)


def _async_transform_group(chunks: list[Any], repeat: int) -> Group:
    n = len(chunks)
    expect = expected_transform(chunks)

    def hooks() -> tuple[Any, Any, Any, dict[str, Any], dict[str, Any]]:
        up, drop, words = async_transforms()
        return (up.process_output_stream, drop.process_output_stream, words.process_output_stream,
                {}, {})

    async def hand() -> tuple[int, int]:
        up, drop, count, s_drop, s_words = hooks()
        out = 0
        for c in chunks:
            c = await up(c)
            if c is None:
                continue
            c = await drop(c, s_drop)
            if c is None:
                continue
            c = await count(c, s_words)
            if c is None:
                continue
            out += 1
        return out, s_words.get("words", 0)

    async def hand_gen_source(s_words: dict[str, Any]) -> Any:
        up, drop, count, s_drop, _ = hooks()
        for c in chunks:
            c = await up(c)
            if c is None:
                continue
            c = await drop(c, s_drop)
            if c is None:
                continue
            c = await count(c, s_words)
            if c is None:
                continue
            yield c

    async def hand_gen() -> tuple[int, int]:
        s_words: dict[str, Any] = {}
        out = 0
        async for _ in hand_gen_source(s_words):
            out += 1
        return out, s_words.get("words", 0)

    async def push_loop() -> tuple[int, int]:
        chain = _chain(async_transforms())
        push = chain.push
        out = 0
        for c in chunks:
            if await push(c) is not None:
                out += 1
        return out, _words_state(chain)

    async def apply() -> tuple[int, int]:
        applied = ops.apply(chunks, async_transforms())
        out = 0
        async for _ in applied:
            out += 1
        return out, int(applied.state("words").get("words", 0))

    async def aio() -> tuple[int, int]:
        seen, words = [0], [0]

        async def keep(_: Any) -> bool:
            seen[0] += 1
            return seen[0] % DROP_EVERY != 0

        async def count(c: Any) -> None:
            if c.__class__ is TextDelta:
                words[0] = await acount_words(words[0], c)
        xs = stream.iterate(chunks) | pipe.map(aupper_chunk, task_limit=1) | \
            pipe.filter(keep) | pipe.action(count, task_limit=1)
        out = 0
        async with xs.stream() as items:
            async for _ in items:
                out += 1
        return out, words[0]

    return Group("runner · 3 transforms · async", [
        Case(HAND, hand, n, is_async=True, expect=expect, note="awaits the same hooks"),
        Case("StreamChain.push loop", push_loop, n, is_async=True, baseline=HAND, expect=expect),
        Case(HAND_GEN, hand_gen, n, is_async=True, baseline=HAND, expect=expect),
        Case("ops.apply", apply, n, is_async=True, baseline=HAND_GEN, expect=expect),
        Case("aiostream", aio, n, is_async=True, baseline=HAND_GEN, expect=expect),
    ], repeat=repeat)


def runner_groups(n: int, repeat: int) -> list[Group]:
    """Every standalone-runner group over ``n`` text deltas."""
    chunks = text_chunks(n)
    groups = [_pass_group(chunks, 0, False, repeat)]
    for is_async in (False, True):
        for k in (1, 3, 10):
            groups.append(_pass_group(chunks, k, is_async, repeat))
    groups += [_sync_transform_group(chunks, repeat), _async_transform_group(chunks, repeat)]
    return groups
