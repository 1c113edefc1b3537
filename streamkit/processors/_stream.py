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


def _shape(hooks: Sequence[HookSpec], multi: Sequence[bool], timed: bool) -> tuple[Any, ...]:
    return (timed, tuple((h.is_async, h.params, h.wants_all, h.positional, m)
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


def _compile(hooks: Sequence[HookSpec], multi: Sequence[bool], timed: bool) -> Callable[..., Any]:
    """Generate ``factory(fns, consts, stats, ctx, fail) -> run(part)`` for one chain shape."""
    n = len(hooks)
    is_async = any(h.is_async for h in hooks)
    d = "async def" if is_async else "def"
    lines = ["def factory(fns, consts, stats, ctx, fail, pc):"]
    for i, hook in enumerate(hooks):
        lines.append(f"    f{i} = fns[{i}]")
        lines.append(f"    st{i} = stats[{i}]")
        if hook.wants_all or "stream_parts" in hook.params:
            lines.append(f"    sp{i} = consts[{i}]['stream_parts']")
        for name in _PER_REQUEST:
            if hook.wants_all or name in hook.params:
                lines.append(f"    c{i}_{name} = consts[{i}][{name!r}]")
    # One function per entry point: 0, and the position after each multi-emit processor.
    entries = [0] + [i + 1 for i in range(n) if multi[i]]
    for start in sorted(set(entries), reverse=True):
        lines.append(f"    {d} run{start}(part):")
        if start == n:
            lines.append("        return part")
            continue
        for i in range(start, n):
            hook = hooks[i]
            aw = "await " if hook.is_async else ""
            if hook.wants_all or "stream_parts" in hook.params:
                lines.append(f"        sp{i}.append(part)")
            lines.append("        try:")
            if timed:
                lines.append("            t0 = pc()")
            lines.append(f"            out = {aw}f{i}({_args(i, hook)})")
            lines.append("        except BaseException as exc:")
            lines.append(f"            raise fail({i}, exc)")
            if timed:
                lines.append("        t1 = pc()")
                lines.append(f"        st{i}.calls += 1")
                lines.append(f"        st{i}.ns += t1 - t0")
                lines.append(f"        if st{i}.calls == 1: st{i}.first_ns = t1 - t0")
            lines.append("        if out is None:")
            if timed:
                lines.append(f"            st{i}.dropped += 1")
            lines.append("            return None")
            if multi[i]:
                lines.append("        if out.__class__ is list:")
                lines.append("            acc = []")
                lines.append("            for p in out:")
                lines.append(f"                r = {'await ' if is_async else ''}run{i + 1}(p)")
                lines.append("                if r is None: continue")
                lines.append("                if r.__class__ is list: acc.extend(r)")
                lines.append("                else: acc.append(r)")
                lines.append("            return acc")
            lines.append("        part = out")
        lines.append("        return part")
    lines.append("    return run0")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<streamkit fused chain x{n}>", "exec"), namespace)
    return namespace["factory"]  # type: ignore[no-any-return]


class _Ctx:
    __slots__ = ("retry_count",)

    def __init__(self) -> None:
        self.retry_count = 0


def _bind(specs: Sequence[ProcessorSpec], runtime: RequestRuntime, writer: Any,
          message_list: Any, ctx: _Ctx, timed: bool) -> tuple[Callable[..., Any], list[StreamStats]]:
    hooks = [s.hooks[HOOK] for s in specs]
    multi = [s.multi_emit for s in specs]
    key = _shape(hooks, multi, timed)
    factory = _CACHE.get(key)
    if factory is None:
        factory = _CACHE[key] = _compile(hooks, multi, timed)
    consts = [{
        "state": runtime.state(s.id), "abort": runtime.abort(s.id), "message_list": message_list,
        "request_context": runtime.request_context, "writer": writer, "tracing_context": None,
        "stream_parts": [],
    } for s in specs]
    stats = [StreamStats() for _ in specs]

    def fail(i: int, exc: BaseException) -> BaseException:
        return hook_failure(specs[i].id, HOOK, exc)

    return factory([h.fn for h in hooks], consts, stats, ctx, fail, time.perf_counter_ns), stats


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
        self._main, self._main_stats = _bind(self.specs, runtime, writer, message_list,
                                             self.ctx, self.timed)
        if len(data_specs) == len(self.specs):
            self._data, self._data_stats = self._main, []
        else:
            self._data, self._data_stats = _bind(data_specs, runtime, writer, message_list,
                                                 self.ctx, self.timed)
            # Data chains must share the calling convention of the main chain.
            if self.is_async and not any(s.hooks[HOOK].is_async for s in data_specs):
                sync_data = self._data

                async def _data_async(part: Any) -> Any:
                    return sync_data(part)

                self._data = _data_async
        self._data_index = [self.specs.index(s) for s in data_specs]
        self.push: Callable[[Any], Any] = self._push_async if self.is_async else self._push_sync
        self.empty = not self.specs

    @property
    def retry_count(self) -> int:
        return self.ctx.retry_count

    @retry_count.setter
    def retry_count(self, value: int) -> None:
        self.ctx.retry_count = value

    def _push_sync(self, part: Any) -> Any:
        if part.__class__ is self._data_cls:
            return self._data(part)
        return self._main(part)

    async def _push_async(self, part: Any) -> Any:
        if part.__class__ is self._data_cls:
            return await self._data(part)
        return await self._main(part)

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
            rest = self._rest(spec)
            for part in (res if isinstance(res, list) else [res]):
                r = rest.push(part)
                if rest.is_async:
                    r = await r
                if r is None:
                    continue
                (out.extend if r.__class__ is list else out.append)(r)
        return out

    def record(self, step: int | None, outcome_for: dict[str, tuple[str, str | None]] | None = None
               ) -> None:
        """Write one trace record per stream processor for this step and reset the counters."""
        if not self.timed:
            return
        merged = [StreamStats() for _ in self.specs]
        for i, st in enumerate(self._main_stats):
            merged[i] = st
        for j, st in zip(self._data_index, self._data_stats):
            m = merged[j]
            m.calls += st.calls
            m.dropped += st.dropped
            m.ns += st.ns
            if not m.first_ns:
                m.first_ns = st.first_ns
        for spec, st in zip(self.specs, merged):
            outcome, detail = (outcome_for or {}).get(spec.id, ("ok", None))
            if st.calls or outcome != "ok":
                self.runtime.record_stream(spec.id, step, st, outcome, detail)
        for st in self._main_stats + self._data_stats:
            st.calls = st.dropped = st.ns = st.first_ns = 0
