"""What an agent run calls to be traced: ``RunTracer``, whose methods do nothing, and ``NOOP``.

``NOOP`` is the tracer of every run while tracing is off (opentelemetry not loaded, no provider
configured, or ``uninstrument()``); ``_spans.SpanTracer`` overrides every method to build the
span tree. A run resolves its tracer once, when it is created (``_settings.run_tracer``), and
calls it at a handful of places, never per chunk:

* ``Run.events``: ``begin`` before the first node, ``transition(run, node, nxt)`` after every
  node (the span tree follows the loop graph: steps, model calls and tools are nodes), ``end``
  however the run ends.
* the ``tools`` node: ``tool_context(id)`` around each tool's own work, so spans the tool makes
  nest under its ``execute_tool`` span.
* the ``process_tool_result`` node: ``tool_hooks(id)`` before a call's hooks run, so their
  processor spans nest under that call's ``execute_tool`` span.
* ``RequestRuntime.on_record``, set by ``begin``: one processor span per ``result.trace`` record.

What does not belong here: anything that imports opentelemetry (``_spans``), the settings.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agent._run import Run

__all__ = ["RunTracer", "NOOP"]

_NO_CONTEXT: AbstractContextManager[None] = nullcontext()


class RunTracer:
    """The calls a run makes to be traced; this base class ignores them all (``NOOP``)."""

    __slots__ = ()

    def begin(self, run: Run) -> None:
        """The run starts (its first chunk is being asked for)."""

    def transition(self, run: Run, node: str, nxt: str) -> None:
        """Node ``node`` finished (its chunks were delivered); ``nxt`` runs next."""

    def end(self, run: Run, exc: BaseException | None) -> None:
        """The run ended: normally (``exc`` is ``None``; ``run.state.error`` says whether it
        failed), or with ``exc`` escaping its generator (closed early, cancelled, a bug)."""

    def tool_hooks(self, tool_call_id: str) -> None:
        """The ``process_tool_result`` hooks of call ``tool_call_id`` run next."""

    def tool_context(self, tool_call_id: str) -> AbstractContextManager[None]:
        """Entered around the tool's own work, inside the tool's task."""
        return _NO_CONTEXT


#: The tracer of an untraced run.
NOOP = RunTracer()
