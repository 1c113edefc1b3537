"""The fused stream path: every ``process_output_stream`` of a request in one pass per chunk.

The chain is compiled to one Python function per *shape* of pipeline (which hooks are async, which
parameters they ask for, who may multi-emit, whether timing is on). The compiled factory is cached
by shape, so a new request only binds its hook functions and per-request constants (state, abort,
writer...) into a closure. Per chunk this costs one call per processor that has a stream hook, with
sync hooks called inline (no ``await``, no ``isawaitable`` check) and no generator or task per
stage. Processors without ``process_output_stream`` cost nothing per chunk.

``data-*`` chunks take a second compiled chain holding only processors with
``process_data_parts = True``; which chain runs is decided by the chunk's class as it *enters* the
pipeline (a processor that turns a text chunk into a data chunk does not re-route it).

A non-``TripWire`` exception raised by a stream hook fails the request with ``ProcessorError``
(naming processor and hook) instead of letting the chunk through: for guards, failing closed is
the safe default. (Mastra logs and passes the chunk on; we chose not to.)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Sequence

from ..errors import ProcessorError
from ..tripwire import TripWire
from ._runtime import RequestRuntime, StreamStats
from ._spec import HookSpec, ProcessorSpec

__all__ = ["StreamChain", "hook_failure"]

HOOK = "process_output_stream"
_PER_REQUEST = ("state", "abort", "message_list", "request_context", "writer", "tracing_context")
_CACHE: dict[tuple[Any, ...], Callable[..., Any]] = {}


def hook_failure(spec_id: str, hook: str, exc: BaseException) -> BaseException:
    """Turn an exception raised inside a hook into what the runtime propagates: a TripWire gets
    its processor id, control flow passes through, anything else becomes ``ProcessorError``."""
    if isinstance(exc, TripWire):
        return exc.fill(spec_id)
    if isinstance(exc, (ProcessorError, asyncio.CancelledError, GeneratorExit, KeyboardInterrupt,
                        SystemExit)):
        return exc
    err = ProcessorError(f"processor {spec_id!r} raised in {hook}: {type(exc).__name__}: {exc}",
                         processor_id=spec_id, hook=hook)
    err.__cause__ = exc
    return err


#: Stream hooks are timed on the first chunk and then on one chunk in ``SAMPLE_EVERY``; their
#: total duration is scaled from the samples. Timing every chunk would cost more (two clock reads
#: and four attribute updates, ~300 ns per processor) than most hooks take.
SAMPLE_EVERY = 64


def _shape(hooks: Sequence[HookSpec], multi: Sequence[bool], timing: str, dispatch: bool
           ) -> tuple[Any, ...]:
    return (timing, dispatch, tuple((h.is_async, h.params, h.wants_all, h.positional, m)
                                    for h, m in zip(hooks, multi)))


def _args(i: int, hook: HookSpec) -> str:
    names = ("part", "stream_parts", "retry_count") + _PER_REQUEST if hook.wants_all \
        else hook.params
    values = {"part": "part", "stream_parts": f"sp{i}", "retry_count": "ctx.retry_count"}
    for name in _PER_REQUEST:
        values[name] = f"c{i}_{name}"
    if hook.positional and not hook.wants_all:
        return ", ".join(values[n] for n in names)
    return ", ".join(f"{n}={values[n]}" for n in names)


_HAS_TEXT = "(out.__class__ is text_cls or (out.__class__ is list and any(o.__class__ is " \
    "text_cls for o in out)))"


def _body(hooks: Sequence[HookSpec], multi: Sequence[bool], start: int, timed: bool,
          is_async: bool, prefix: str, indent: str, probe: bool = False,
          loop_tail: list[str] | None = None) -> list[str]:
    """The chain from processor ``start`` on, as statements (``prefix`` names entry points).
    ``probe`` also notes when the first text delta enters and leaves each processor.
    With ``loop_tail`` the body sits inside a ``for`` loop of a generator: a dropped chunk
    ``continue``s, fanned-out chunks are yielded, and ``loop_tail`` (which yields ``part``) ends
    it."""
    lines: list[str] = []
    drop = "    continue" if loop_tail is not None else "    return None"
    for i in range(start, len(hooks)):
        hook = hooks[i]
        aw = "await " if hook.is_async else ""
        if hook.wants_all or "stream_parts" in hook.params:
            lines.append(f"sp{i}.append(part)")
        if probe:
            lines.append(f"if part.__class__ is text_cls and not st{i}.text_in_ns: "
                         f"st{i}.text_in_ns = pc()")
        lines.append("try:")
        if timed:
            lines.append("    t0 = pc()")
        lines.append(f"    out = {aw}f{i}({_args(i, hook)})")
        lines.append("except BaseException as exc:")
        lines.append(f"    raise fail({i}, exc)")
        if timed:
            lines += ["t1 = pc() - t0", f"if not st{i}.sampled: st{i}.first_ns = t1",
                      f"st{i}.sampled += 1", f"st{i}.ns += t1"]
        if probe:
            lines.append(f"if not st{i}.text_out_ns and {_HAS_TEXT}: st{i}.text_out_ns = pc()")
        lines += ["if out is None:", f"    st{i}.dropped += 1", drop]
        if multi[i]:
            call = f"{'await ' if is_async else ''}{prefix}{i + 1}(p)"
            lines += ["if out.__class__ is list:", f"    st{i}.fanout += len(out) - 1",
                      "    acc = []", "    for p in out:", f"        r = {call}",
                      "        if r is None: continue",
                      "        if r.__class__ is list: acc.extend(r)",
                      "        else: acc.append(r)"]
            if loop_tail is None:
                lines.append("    return acc")
            else:
                lines += ["    for part in acc:", *("        " + t for t in loop_tail),
                          "    continue"]
        lines.append("part = out")
    lines += loop_tail if loop_tail is not None else ["return part"]
    return [indent + line for line in lines]


def _compile(hooks: Sequence[HookSpec], multi: Sequence[bool], timing: str, dispatch: bool
             ) -> Callable[..., Any]:
    """Generate ``factory(fns, consts, stats, ctx, fail, pc, data_cls, run_data, text_cls) ->
    (push, count, arm)`` for one chain shape. ``timing`` is ``"off"``, ``"sampled"`` or
    ``"always"``; ``dispatch`` sends data chunks to ``run_data``. ``count()`` is how many chunks
    entered. With ``"sampled"`` timing, chunks take a *probe* path from ``arm()`` until a text
    delta leaves the chain, noting when the first text delta entered and left each processor
    (its added time to first chunk; sampled timing goes on meanwhile); ``arm()`` is called again
    for every step."""
    n = len(hooks)
    is_async = any(h.is_async for h in hooks)
    d = "async def" if is_async else "def"
    aw = "await " if is_async else ""
    lines = ["def factory(fns, consts, stats, ctx, fail, pc, data_cls, run_data, text_cls, "
             "TripWire):"]
    for i, hook in enumerate(hooks):
        lines += [f"    f{i} = fns[{i}]", f"    st{i} = stats[{i}]"]
        if hook.wants_all or "stream_parts" in hook.params:
            lines.append(f"    sp{i} = consts[{i}]['stream_parts']")
        for name in _PER_REQUEST:
            if hook.wants_all or name in hook.params:
                lines.append(f"    c{i}_{name} = consts[{i}][{name!r}]")
    lines += ["    n = 0", "    probing = " + str(timing == "sampled")]
    lines += ["    def count():", "        return n"]
    lines += ["    def arm():", "        nonlocal probing",
              f"        probing = {timing == 'sampled'}"]
    # Entry points after each multi-emit processor (fan-out continues from there), untimed.
    for k in sorted({i + 1 for i in range(n) if multi[i]}, reverse=True):
        lines.append(f"    {d} rest{k}(part):")
        lines += _body(hooks, multi, k, False, is_async, "rest", "        ")
    if timing == "sampled":
        lines.append(f"    {d} timed(part):")
        lines += _body(hooks, multi, 0, True, is_async, "rest", "        ")
        # The probe: an untimed path (fan-out included) and a timed one for sampled chunks.
        for k in sorted({i + 1 for i in range(n) if multi[i]}, reverse=True):
            lines.append(f"    {d} probe{k}(part):")
            lines += _body(hooks, multi, k, False, is_async, "probe", "        ", probe=True)
        lines.append(f"    {d} probe0(part):")
        lines += _body(hooks, multi, 0, False, is_async, "probe", "        ", probe=True)
        lines.append(f"    {d} tprobe0(part):")
        lines += _body(hooks, multi, 0, True, is_async, "probe", "        ", probe=True)
    lines.append(f"    {d} push(part):")
    if dispatch:
        lines += ["        if part.__class__ is data_cls:",
                  f"            return {aw}run_data(part)"]
    if timing == "sampled":
        lines += ["        nonlocal n, probing", "        n += 1",
                  "        if probing:",
                  f"            out = {aw}(tprobe0(part) if n % {SAMPLE_EVERY} == 1 "
                  f"else probe0(part))",
                  f"            if out is not None and {_HAS_TEXT}: probing = False",
                  "            return out",
                  f"        if n % {SAMPLE_EVERY} == 1:", f"            return {aw}timed(part)"]
    elif timing == "always":
        lines += ["        nonlocal n", "        n += 1"]
    lines += _body(hooks, multi, 0, timing == "always", is_async, "rest", "        ")
    if timing == "off":
        lines += _loop(hooks, multi, dispatch, is_async)
    else:
        lines.append("    loop = None")
    lines.append("    return push, count, arm, loop")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<streamkit fused chain x{n}>", "exec"), namespace)
    return namespace["factory"]  # type: ignore[no-any-return]


def _loop(hooks: Sequence[HookSpec], multi: Sequence[bool], dispatch: bool, is_async: bool
          ) -> list[str]:
    """A whole standalone run as one generator: the source loop with the chain inlined, so a
    chunk costs no call at all beyond the hooks themselves (``ops.apply`` with timing off).

    ``loop(source, is_list, pending, on_trip, on_end, on_close)``: ``pending`` holds chunks the
    stream hooks' writer wrote (yielded before the chunk being processed); ``on_trip(tw)``
    returns the tripwire chunk; ``on_end()`` returns what is left at the end (flushed chunks);
    ``on_close()`` runs however the loop ends."""
    aw = "await " if is_async else ""
    # Only hooks that ask for ``writer`` can fill ``pending`` mid-stream (``on_end`` drains the
    # rest), so the check is generated only for them.
    writes = any(h.wants_all or "writer" in h.params for h in hooks)
    tail = ["if pending:", "    for w in pending:", "        yield w", "    pending.clear()",
            "yield part"] if writes else ["yield part"]
    out: list[str] = []
    for kind in ("list", "aiter"):
        head = "for part in source:" if kind == "list" else "async for part in source:"
        out.append(f"    async def loop_{kind}(source, pending, on_trip, on_end, on_close):")
        out += ["        try:", "            try:", f"                {head}"]
        if dispatch:
            out += ["                    if part.__class__ is data_cls:",
                    f"                        out = {aw}run_data(part)",
                    "                        if out is None: continue",
                    "                        for part in (out if out.__class__ is list "
                    "else (out,)):",
                    *("                            " + t for t in tail),
                    "                        continue"]
        out += _body(hooks, multi, 0, False, is_async, "rest", "                    ",
                     loop_tail=tail)
        out += ["                for part in await on_end():", "                    yield part",
                "            except TripWire as tw:", "                yield await on_trip(tw)",
                "        finally:", "            await on_close()"]
    out += ["    def loop(source, is_list, *args):",
            "        return (loop_list if is_list else loop_aiter)(source, *args)"]
    return out


class _Ctx:
    __slots__ = ("retry_count",)

    def __init__(self) -> None:
        self.retry_count = 0


def _bind(specs: Sequence[ProcessorSpec], runtime: RequestRuntime, writer: Any,
          message_list: Any, ctx: _Ctx, timing: str, run_data: Any, is_async: bool
          ) -> tuple[Callable[..., Any], Callable[[], int], Callable[[], None], list[StreamStats],
                     Callable[..., Any] | None]:
    from ..chunks import DataChunk, TextDelta

    hooks = [s.hooks[HOOK] for s in specs]
    multi = [s.multi_emit for s in specs]
    dispatch = run_data is not None
    key = _shape(hooks, multi, timing, dispatch) + (is_async,)
    factory = _CACHE.get(key)
    if factory is None:
        factory = _CACHE[key] = _compile(hooks, multi, timing, dispatch)
    consts = [{
        "state": runtime.state(s.id), "abort": runtime.abort(s.id), "message_list": message_list,
        "request_context": runtime.request_context, "writer": writer, "tracing_context": None,
        "stream_parts": [],
    } for s in specs]
    stats = [StreamStats() for _ in specs]

    def fail(i: int, exc: BaseException) -> BaseException:
        return hook_failure(specs[i].id, HOOK, exc)

    push, count, arm, loop = factory([h.fn for h in hooks], consts, stats, ctx, fail,
                                     time.perf_counter_ns, DataChunk, run_data, TextDelta,
                                     TripWire)
    if is_async and not any(h.is_async for h in hooks):
        # One calling convention per chain: an async main chain needs an awaitable data chain.
        sync_push = push

        async def push(part: Any) -> Any:  # type: ignore[no-redef]
            return sync_push(part)

    return push, count, arm, stats, loop


class StreamChain:
    """All stream processors of one request, fused.

    ``push(part)`` returns ``None`` (dropped), a chunk, or a list of chunks (a multi-emit
    processor fanned out); it is a coroutine function only when some stream hook is async
    (``is_async``), decided here once. ``flush()`` calls ``flush_output_stream`` of each processor
    in order when the source ends and pushes what it returns through the rest of the chain.

    Raises (from ``push``/``flush``): ``TripWire`` with its ``processor_id`` filled in, or
    ``ProcessorError`` wrapping any other exception.
    """

    def __init__(self, specs: Sequence[ProcessorSpec], runtime: RequestRuntime, *,
                 writer: Any = None, message_list: Any = None, timed: bool | None = None) -> None:
        from ..chunks import DataChunk

        self._data_cls = DataChunk
        self.runtime = runtime
        self.specs = [s for s in specs if HOOK in s.hooks]
        self.flushers = [s for s in specs if s.flush is not None]
        self._all_specs = list(specs)
        self._writer = writer
        self._message_list = message_list
        self.timed = runtime.timed if timed is None else timed
        self.ctx = _Ctx()
        data_specs = [s for s in self.specs if s.process_data_parts]
        self.is_async = any(s.hooks[HOOK].is_async for s in self.specs)
        run_data: Callable[..., Any] | None
        run_data, self._data_count, _, self._data_stats, _ = _bind(
            data_specs, runtime, writer, message_list, self.ctx,
            "always" if self.timed else "off", None, self.is_async)
        if len(data_specs) == len(self.specs):
            run_data = None  # every stream processor sees data chunks: no dispatch needed
        self.push, self._count, self._arm, self._main_stats, self.loop = _bind(
            self.specs, runtime, writer, message_list, self.ctx,
            "sampled" if self.timed else "off", run_data, self.is_async)
        self._data_index = [self.specs.index(s) for s in data_specs]
        self.empty = not self.specs
        self._counted = 0
        self._data_counted = 0

    @property
    def retry_count(self) -> int:
        return self.ctx.retry_count

    @retry_count.setter
    def retry_count(self, value: int) -> None:
        self.ctx.retry_count = value

    def _rest(self, spec: ProcessorSpec) -> StreamChain:
        pos = self._all_specs.index(spec)
        return StreamChain(self._all_specs[pos + 1:], self.runtime, writer=self._writer,
                           message_list=self._message_list, timed=False)

    async def flush(self) -> list[Any]:
        """End of source: collect what each processor still holds (``flush_output_stream``),
        passing each flushed chunk through the processors after it. Returns the chunks to emit."""
        out: list[Any] = []
        for spec in self.flushers:
            hook = spec.flush
            if hook is None:  # pragma: no cover - flushers only holds specs with a flush
                continue
            available = {"state": self.runtime.state(spec.id), "abort": self.runtime.abort(spec.id),
                         "writer": self._writer, "message_list": self._message_list,
                         "request_context": self.runtime.request_context,
                         "retry_count": self.ctx.retry_count, "tracing_context": None}
            try:
                res = hook.fn(**hook.call_kwargs(available))
                if hook.is_async:
                    res = await res
            except BaseException as exc:
                raise hook_failure(spec.id, "flush_output_stream", exc) from None
            if not res:
                continue
            flushed = res if isinstance(res, list) else [res]
            if self.timed:
                self._note_flushed_text(spec, flushed)
            rest = self._rest(spec)
            for part in flushed:
                r = rest.push(part)
                if rest.is_async:
                    r = await r
                if r is None:
                    continue
                (out.extend if r.__class__ is list else out.append)(r)
        return out

    def _note_flushed_text(self, spec: ProcessorSpec, flushed: list[Any]) -> None:
        """Text a processor first lets out at the end of the step (it held everything) counts
        as its first text out; the processors after it (run untimed here) add nothing."""
        from ..chunks import TextDelta

        if spec not in self.specs or not any(p.__class__ is TextDelta for p in flushed):
            return
        now = time.perf_counter_ns()
        for st in self._main_stats[self.specs.index(spec):]:
            if not st.text_in_ns:
                st.text_in_ns = now
            if not st.text_out_ns:
                st.text_out_ns = now

    def record(self, step: int | None, outcome_for: dict[str, tuple[str, str | None]] | None = None
               ) -> None:
        """Write one trace record per stream processor for this step and reset the counters.

        ``calls`` and ``dropped`` are exact: calls of processor *i* are the chunks that entered
        minus what processors before it dropped, plus what they fanned out. Durations come from
        the sampled calls, scaled to all calls (data chunks are always timed)."""
        if not self.timed:
            return
        entered = self._count() - self._counted
        self._counted += entered
        data_entered = self._data_count() - self._data_counted
        self._data_counted += data_entered
        calls = [0] * len(self.specs)
        flowing = entered
        for i, st in enumerate(self._main_stats):
            calls[i] = flowing
            flowing += st.fanout - st.dropped
        flowing = data_entered
        data_calls = {}
        for j, st in zip(self._data_index, self._data_stats):
            data_calls[j] = flowing
            flowing += st.fanout - st.dropped
        for i, spec in enumerate(self.specs):
            main = self._main_stats[i]
            ns = main.ns * calls[i] / main.sampled if main.sampled else 0.0
            dropped, first = main.dropped, main.first_ns
            n_calls = calls[i]
            if i in data_calls:
                data = self._data_stats[self._data_index.index(i)]
                n_calls += data_calls[i]
                ns += data.ns
                dropped += data.dropped
                first = first or data.first_ns
            outcome, detail = (outcome_for or {}).get(spec.id, ("ok", None))
            delay = max(0, main.text_out_ns - main.text_in_ns) / 1e9 \
                if main.text_in_ns and main.text_out_ns else None
            if n_calls or outcome != "ok":
                self.runtime.record_stream(spec.id, step, n_calls, dropped, ns, first, outcome,
                                           detail, first_chunk_delay=delay)
        for st in self._main_stats + self._data_stats:
            st.sampled = st.dropped = st.ns = st.first_ns = st.fanout = 0
            st.text_in_ns = st.text_out_ns = 0
        self._arm()
