"""The fused stream chain's source code: one generated module per *shape* of pipeline.

What belongs here: rendering the Python source of a fused chain from its shape, compiling it
with the source registered in ``linecache`` (so tracebacks show real lines, as the standard
library's ``dataclasses`` does for the methods it generates), and caching the compiled factory
by shape. What does not: binding a request's state to it (``_chain.StreamChain``) or the agent.

Why generated code (measured on the project's 2-core host, 3 sync pass-through hooks, one
``push`` per chunk): generated ~300 ns/chunk; a plain loop over ``(fn, state)`` pairs ~350–400
ns, and only when every hook takes ``(part, state)`` positionally; a plain loop over
``functools.partial`` adapters (needed because each hook names its own parameters) ~1,500 ns.
Generated code calls each hook directly with exactly the arguments it names and keeps every
per-request constant in a closure cell. ``docs/DESIGN.md`` has the numbers.

The shape is everything that changes the code: per hook whether it is async, which parameters
it names (and whether they can be passed positionally), whether it may return a list
(``multi_emit``); per chain the timing mode and whether ``data-*`` chunks take a separate chain.
``render(shape)`` is a pure function of the shape; ``StreamChain.source`` prints it for a
pipeline.

The generated module defines, inside ``factory(fns, consts, stats, env)``:

* ``push(part)``: one chunk through every hook; returns ``None`` (dropped), a chunk, or a list
  (a multi-emit hook fanned out). ``async def`` when any hook is async.
* ``rest<k>(part)``: the chain from hook *k* on, for chunks a multi-emit hook fanned out.
* ``drive(source, is_list, pending, held, on_held, flush, on_trip, on_close)``: an async
  generator, **the one loop that drives a source through the chain** (``ops.apply`` and the
  agent's model step both run it). Written chunks in ``pending`` are yielded before the chunk
  being processed; chunks whose class is in ``held`` (never ``TextDelta``) are handed to
  ``on_held`` instead of the chain (the agent keeps the model's ``finish``); an item whose class is
  not a chunk class goes to ``not_chunk(item)`` (which raises unless it is a chunk subclass)
  before any hook sees it; at the end ``flush()`` (an async iterator)
  yields what the hooks still held; ``on_trip(tripwire)`` turns a ``TripWire`` into a final
  chunk (``None``: re-raise); ``on_close()`` runs however the loop ends.
* ``count()``/``arm()``: chunks that entered; re-arm the time-to-first-chunk probe.

Timing modes: ``"off"`` (the chain is inlined into ``drive``: no call per chunk beyond the hooks),
``"always"`` (every call timed: the ``data-*`` chain, which sees few chunks), ``"sampled"`` (the
agent's default: the first chunk and one in ``SAMPLE_EVERY`` are timed; until a text delta leaves
the chain, a *probe* path notes when the first text delta entered and left each hook).
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ._spec import HookSpec

__all__ = ["Shape", "HookShape", "Timing", "SAMPLE_EVERY", "PER_REQUEST", "render", "factory_for"]

Timing = Literal["off", "sampled", "always"]

#: Stream hooks are timed on the first chunk and then on one chunk in ``SAMPLE_EVERY``; their
#: total duration is scaled from the samples. Timing every chunk would cost more (two clock reads
#: and four attribute updates, ~300 ns per processor) than most hooks take.
SAMPLE_EVERY = 64

#: Arguments that are constant for a whole request: bound once into the closure (``c<i>_<name>``).
PER_REQUEST = ("state", "abort", "message_list", "request_context", "writer", "tracing_context")


@dataclass(frozen=True, slots=True)
class HookShape:
    """What of one stream hook changes the generated code."""

    is_async: bool
    params: tuple[str, ...]
    wants_all: bool
    positional: bool
    multi: bool

    @classmethod
    def of(cls, hook: HookSpec, multi: bool) -> HookShape:
        return cls(hook.is_async, hook.params, hook.wants_all, hook.positional, multi)

    def wants(self, name: str) -> bool:
        return self.wants_all or name in self.params


@dataclass(frozen=True, slots=True)
class Shape:
    """The shape of one chain: its hooks, timing mode, and whether ``data-*`` chunks are sent
    to a separate chain (``dispatch``). ``is_async`` makes ``push`` a coroutine function even
    when no hook of this chain is async (one calling convention with the main chain)."""

    hooks: tuple[HookShape, ...]
    timing: Timing
    dispatch: bool
    is_async: bool

    @property
    def writes(self) -> bool:
        """Whether a hook can write chunks mid-stream (only then ``drive`` checks ``pending``)."""
        return any(h.wants("writer") for h in self.hooks)


_HAS_TEXT = ("(out.__class__ is text_cls or (out.__class__ is list and "
             "any(o.__class__ is text_cls for o in out)))")


def _indent(lines: list[str], depth: int) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


def _call_args(i: int, hook: HookShape) -> str:
    names = ("part", "stream_parts", "retry_count") + PER_REQUEST if hook.wants_all \
        else hook.params
    values = {"part": "part", "stream_parts": f"sp{i}", "retry_count": "ctx.retry_count"}
    for name in PER_REQUEST:
        values[name] = f"c{i}_{name}"
    if hook.positional and not hook.wants_all:
        return ", ".join(values[n] for n in names)
    return ", ".join(f"{n}={values[n]}" for n in names)


def _chain_body(shape: Shape, start: int, *, timed: bool, probe: bool, entry: str,
                tail: list[str] | None) -> list[str]:
    """Statements running hooks ``start..`` on ``part``.

    Args:
        timed: time each call into ``st<i>``.
        probe: note when the first text delta enters and leaves each hook.
        entry: prefix of the continuation functions a fan-out calls (``rest``/``probe``).
        tail: ``None`` inside a function (a drop returns ``None``, the result is returned);
            else the statements that deliver ``part`` inside ``drive``'s loop (a drop yields
            what hooks wrote meanwhile and ``continue``s).
    """
    lines: list[str] = []
    drop = [*_indent(_written(shape), 1), "    continue"] if tail is not None \
        else ["    return None"]
    aw_chain = "await " if shape.is_async else ""
    for i in range(start, len(shape.hooks)):
        hook = shape.hooks[i]
        if hook.wants("stream_parts"):
            lines.append(f"sp{i}.append(part)")
        if probe:
            lines.append(f"if part.__class__ is text_cls and not st{i}.text_in_ns: "
                         f"st{i}.text_in_ns = pc()")
        lines.append("try:")
        if timed:
            lines.append("    t0 = pc()")
        lines.append(f"    out = {'await ' if hook.is_async else ''}f{i}({_call_args(i, hook)})")
        # No ``from None``: that would erase the ``__cause__`` ``fail`` sets (the hook's own
        # exception, whose traceback shows the hook and these lines).
        lines += ["except BaseException as exc:", f"    raise fail({i}, exc)"]
        if timed:
            lines += ["t1 = pc() - t0", f"if not st{i}.sampled: st{i}.first_ns = t1",
                      f"st{i}.sampled += 1", f"st{i}.ns += t1"]
        if probe:
            lines.append(f"if not st{i}.text_out_ns and {_HAS_TEXT}: st{i}.text_out_ns = pc()")
        # A hook that passes its chunk on (``out is part``) pays one identity test, as the drop
        # test alone cost before; anything else is a drop (``None``) or must be of a chunk
        # class (``checked`` raises ProcessorError otherwise).
        ok = "ok_multi" if hook.multi else "ok_one"
        lines += ["if out is not part:", "    if out is None:", f"        st{i}.dropped += 1",
                  *_indent(drop, 1), f"    if out.__class__ not in {ok}: checked({i}, out)"]
        if hook.multi:
            # Fanned-out chunks are counted as they go on (not ``len(out) - 1`` up front), so
            # the trace's call counts stay exact when one of them trips the wire.
            lines += ["if out.__class__ is list:", f"    st{i}.fanout -= 1",
                      "    acc = []", "    for p in out:",
                      f"        if p.__class__ not in ok_one: checked({i}, p, True)",
                      f"        st{i}.fanout += 1",
                      f"        r = {aw_chain}{entry}{i + 1}(p)",
                      "        if r is None: continue",
                      "        if r.__class__ is list: acc.extend(r)",
                      "        else: acc.append(r)"]
            if tail is None:
                lines.append("    return acc")
            else:
                lines += ["    for part in acc:", *_indent(tail, 2), *drop]
        lines.append("part = out")
    lines += tail if tail is not None else ["return part"]
    return lines


def _function(shape: Shape, name: str, body: list[str]) -> list[str]:
    head = f"{'async def' if shape.is_async else 'def'} {name}(part):"
    return [head, *_indent(body, 1)]


def _continuations(shape: Shape, entry: str, probe: bool) -> list[str]:
    """``<entry><k>(part)`` for every hook ``k`` after a multi-emit hook (fan-out continues)."""
    lines: list[str] = []
    after_multi = sorted({i + 1 for i, h in enumerate(shape.hooks) if h.multi}, reverse=True)
    for k in after_multi:
        lines += _function(shape, f"{entry}{k}",
                           _chain_body(shape, k, timed=False, probe=probe, entry=entry,
                                       tail=None))
    return lines


def _push(shape: Shape) -> list[str]:
    aw = "await " if shape.is_async else ""
    lines: list[str] = []
    if shape.dispatch:
        lines += ["if part.__class__ is data_cls:", f"    return {aw}run_data(part)"]
    if shape.timing == "sampled":
        lines += ["nonlocal n, probing", "n += 1",
                  "if probing:",
                  f"    out = {aw}(tprobe0(part) if n % {SAMPLE_EVERY} == 1 else probe0(part))",
                  f"    if out is not None and {_HAS_TEXT}: probing = False",
                  "    return out",
                  f"if n % {SAMPLE_EVERY} == 1:", f"    return {aw}timed(part)"]
    elif shape.timing == "always":
        lines += ["nonlocal n", "n += 1"]
    lines += _chain_body(shape, 0, timed=shape.timing == "always", probe=False, entry="rest",
                         tail=None)
    return _function(shape, "push", lines)


def _written(shape: Shape) -> list[str]:
    """Inside ``drive``: yield what hooks wrote (also when the chunk itself was dropped: a
    write must not wait for the next chunk that gets through)."""
    if not shape.writes:
        return []
    return ["if pending:", "    for w in pending:", "        yield w", "    pending.clear()"]


def _deliver(shape: Shape) -> list[str]:
    """Inside ``drive``: yield what hooks wrote, then ``part``."""
    return [*_written(shape), "yield part"]


def _drive_loop(shape: Shape, kind: Literal["list", "aiter"], holding: bool) -> list[str]:
    """The loop of ``drive`` over a list (``for``) or an async iterator (``async for``);
    ``holding``: the variant that takes ``held`` chunk classes out first (the agent's model
    step). Both variants are generated so that ``ops.apply`` pays no check for it per chunk."""
    head = "for part in source:" if kind == "list" else "async for part in source:"
    # Every class check sits behind one identity test that a text delta -- most of any
    # stream -- fails: held classes (never ``TextDelta``), anything that is not a chunk at all
    # (a dict, a string: ``not_chunk`` raises, naming it), the ``data-*`` dispatch.
    slow: list[str] = []
    if holding:
        slow += ["if part.__class__ in held:", "    on_held(part)", "    continue"]
    slow += ["if part.__class__ not in chunk_classes:", "    not_chunk(part)"]
    deliver = _deliver(shape)
    body: list[str] = []
    if shape.timing == "off":
        # Inlined: no call per chunk beyond the hooks themselves (and, untimed, no count).
        if shape.dispatch:
            slow += ["if part.__class__ is data_cls:",
                     f"    out = {'await ' if shape.is_async else ''}run_data(part)",
                     "    if out is None:", *_indent(_written(shape), 2), "        continue",
                     "    for part in (out if out.__class__ is list else (out,)):",
                     *_indent(deliver, 2), *_indent(_written(shape), 1), "    continue"]
        body += ["if part.__class__ is not text_cls:", *_indent(slow, 1)]
        body += _chain_body(shape, 0, timed=False, probe=False, entry="rest", tail=deliver)
    else:
        pushed = [f"out = {'await ' if shape.is_async else ''}push(part)", *_written(shape),
                  "if out is None: continue"]
        if any(h.multi for h in shape.hooks):  # only a multi-emit hook makes push return a list
            pushed += ["if out.__class__ is list:", "    for o in out: yield o", "    continue"]
        pushed.append("yield out")
        if shape.timing == "sampled" and shape.dispatch:
            # ``push`` dispatches a ``data-*`` chunk (uncounted) before anything else.
            slow += ["if part.__class__ is data_cls:", *_indent(pushed, 1), "    continue"]
        body += ["if part.__class__ is not text_cls:", *_indent(slow, 1)]
        if shape.timing == "sampled":
            # Only the chunks ``push`` would time or probe go through it (it counts them
            # itself); the other 63 in 64 are counted here and run the inlined chain, as
            # untimed: no call per chunk beyond the hooks.
            body += [f"if probing or n % {SAMPLE_EVERY} == 0:", *_indent(pushed, 1),
                     "    continue", "n += 1"]
            body += _chain_body(shape, 0, timed=False, probe=False, entry="rest",
                                tail=deliver)
        else:
            body += pushed
    return [head, *_indent(body, 1)]


def _drive(shape: Shape) -> list[str]:
    lines = ["async def drive(source, is_list, pending, held, on_held, flush, on_trip, "
             "on_close):"]
    if shape.timing == "sampled":
        lines.append("    nonlocal n")
    lines += ["    try:", "        try:"]
    for kind in ("list", "aiter"):
        lines.append("            if is_list:" if kind == "list" else "            else:")
        lines += ["                if held:", *_indent(_drive_loop(shape, kind, True), 5),
                  "                else:", *_indent(_drive_loop(shape, kind, False), 5)]
    lines += ["            flushing = flush()", "            try:",
              "                async for part in flushing:", "                    yield part",
              "            finally:", "                await flushing.aclose()",
              "            if pending:", "                for w in pending:",
              "                    yield w", "                pending.clear()",
              "        except TripWire as tw:", "            if on_trip is None:",
              "                raise", "            yield await on_trip(tw)",
              "    finally:", "        if on_close is not None:", "            await on_close()"]
    return lines


def render(shape: Shape) -> str:
    """The Python source of the fused chain for ``shape`` (a module defining ``factory``)."""
    lines = ["def factory(fns, consts, stats, env):",
             "    ctx, fail, pc = env.ctx, env.fail, env.perf_counter_ns",
             "    checked, ok_one, ok_multi = env.checked, env.chunk_classes, env.multi_classes",
             "    chunk_classes, not_chunk = env.chunk_classes, env.not_chunk",
             "    data_cls, text_cls, run_data, TripWire = env.data_cls, env.text_cls, "
             "env.run_data, env.tripwire_cls"]
    for i, hook in enumerate(shape.hooks):
        lines += [f"    f{i} = fns[{i}]", f"    st{i} = stats[{i}]"]
        if hook.wants("stream_parts"):
            lines.append(f"    sp{i} = consts[{i}]['stream_parts']")
        for name in PER_REQUEST:
            if hook.wants(name):
                lines.append(f"    c{i}_{name} = consts[{i}][{name!r}]")
    sampled = shape.timing == "sampled"
    lines += ["    n = 0", f"    probing = {sampled}",
              "    def count():", "        return n",
              "    def arm():", "        nonlocal probing", f"        probing = {sampled}"]
    body: list[str] = _continuations(shape, "rest", probe=False)
    if sampled:
        body += _function(shape, "timed", _chain_body(shape, 0, timed=True, probe=False,
                                                      entry="rest", tail=None))
        body += _continuations(shape, "probe", probe=True)
        body += _function(shape, "probe0", _chain_body(shape, 0, timed=False, probe=True,
                                                       entry="probe", tail=None))
        body += _function(shape, "tprobe0", _chain_body(shape, 0, timed=True, probe=True,
                                                        entry="probe", tail=None))
    body += _push(shape)
    body += _drive(shape)
    body.append("return push, count, arm, drive")
    return "\n".join(lines + _indent(body, 1)) + "\n"


_FACTORIES: dict[Shape, Callable[..., Any]] = {}


def factory_for(shape: Shape) -> Callable[..., Any]:
    """The compiled ``factory`` for ``shape``, rendered and compiled once per shape.

    The source is registered in ``linecache`` under a file name naming the shape's size and a
    stable serial, so a traceback through a fused chain shows the generated lines.
    """
    factory = _FACTORIES.get(shape)
    if factory is None:
        source = render(shape)
        filename = f"<streamkit fused chain #{len(_FACTORIES) + 1}: {len(shape.hooks)} hooks, " \
            f"timing {shape.timing}>"
        # The same entry ``dataclasses`` makes: (size, mtime=None, lines, name). A ``None``
        # mtime keeps ``linecache.checkcache`` from discarding it.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace: dict[str, Any] = {}
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - see module docstring
        factory = _FACTORIES[shape] = namespace["factory"]
    return factory
