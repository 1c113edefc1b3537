"""Live view: watch a chunk stream as it arrives.

In a Jupyter kernel the view is one output, created with ``display(..., display_id=True)`` and
updated in place with ``handle.update(...)``; anywhere else it degrades to printing the text as
it arrives. A tripwire is shown as a red box naming the processor and its reason; a
``data-step-retry`` chunk withdraws the text of the rolled-back attempt (struck through, with the
reason) before the retried attempt streams in.

What does not belong here: the tables and charts of finished results (``_tables``).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TextIO, TypeVar, overload

from ._html import STYLE, attr, esc, fmt_value, short
from ._tables import ChunkTable

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class ResultStream(Protocol[R_co]):
    """A stream of chunks with a result once drained: an ``AgentStream`` (whose result is an
    ``AgentResult``). Named by shape, not imported: ``AgentStream.show()`` reaches display, so
    importing the agent's classes here would close a circle."""

    def __aiter__(self) -> AsyncIterator[object]: ...
    async def result(self) -> R_co: ...

__all__ = ["LiveView", "live", "DisplayHandle"]

#: Chunk types that always refresh the view at once (the rest are throttled).
_PROMPT_TYPES = frozenset(("tool-call", "tool-result", "tool-error", "tripwire", "error",
                           "data-step-retry", "finish", "step-finish", "abort"))


class DisplayHandle(Protocol):
    """What ``live`` needs from a display: ``IPython.display.DisplayHandle`` fits."""

    def update(self, obj: object) -> object: ...


@dataclass
class _Item:
    kind: str                     # text | reasoning | tool-call | tool-result | tool-error | data
    attempt: int
    text: str = ""
    withdrawn: bool = False


class _Snapshot:
    """An immutable rendering of the view at one moment (what a display handle receives)."""

    __slots__ = ("html", "text")

    def __init__(self, html: str, text: str) -> None:
        self.html = html
        self.text = text

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": self.html}

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


@dataclass
class LiveView:
    """The state of a stream being watched; ``feed`` each chunk, render with ``html()``/
    ``text()``. ``LiveView`` knows nothing of IPython — ``live`` connects it to a display."""

    items: list[_Item] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)     # (position, html) retry notes
    tripwire: dict[str, object] | None = None
    error: str | None = None
    status: str = "streaming…"
    finish_reason: str | None = None
    chunks: list[object] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    attempt: int = 0
    started: float = field(default_factory=time.perf_counter)

    def feed(self, chunk: object) -> list[str]:
        """Take one chunk; return the lines to print for it (the print fallback's output)."""
        self.chunks.append(chunk)
        self.times.append(time.perf_counter() - self.started)
        ctype = str(getattr(chunk, "type", ""))
        payload = attr(chunk, "payload")
        if ctype == "step-start":
            self.attempt += 1
        elif ctype in ("text-delta", "reasoning-delta"):
            kind = "text" if ctype == "text-delta" else "reasoning"
            text = str(getattr(payload, "text", ""))
            last = self.items[-1] if self.items else None
            if last is not None and last.kind == kind and last.attempt == self.attempt:
                last.text += text
            else:
                self.items.append(_Item(kind, self.attempt, text))
            return [text] if kind == "text" else []
        elif ctype in ("tool-call", "tool-result", "tool-error"):
            name = fmt_value(attr(payload, "tool_name"))
            if ctype == "tool-call":
                text = f"{name}({short(fmt_value(attr(payload, 'args')), 120)})"
            else:
                value = attr(payload, "result" if ctype == "tool-result" else "error")
                text = f"{name} → {short(fmt_value(value), 120)}"
            self.items.append(_Item(ctype, self.attempt, text))
            return [f"\n[{ctype}] {text}\n"]
        elif ctype == "data-step-retry":
            data = attr(chunk, "data")
            return self._withdraw(data if isinstance(data, Mapping) else {})
        elif ctype.startswith("data-") and not attr(chunk, "transient"):
            text = f"{ctype}: {short(fmt_value(attr(chunk, 'data')), 120)}"
            self.items.append(_Item("data", self.attempt, text))
        elif ctype == "tripwire":
            self.tripwire = {"reason": fmt_value(attr(payload, "reason")),
                             "processor_id": fmt_value(attr(payload, "processor_id")) or "?",
                             "retry": bool(attr(payload, "retry")),
                             "metadata": attr(payload, "metadata")}
            self.status = "stopped by a tripwire"
            t = self.tripwire
            return [f"\n[TRIPWIRE] processor {t['processor_id']}: {t['reason']}\n"]
        elif ctype == "error":
            self.error = short(fmt_value(attr(payload, "error")), 400)
            self.status = "failed"
            return [f"\n[ERROR] {self.error}\n"]
        elif ctype == "finish":
            step = attr(payload, "step_result")
            self.finish_reason = fmt_value(attr(step, "reason")) if step is not None else None
        return []

    def _withdraw(self, data: Mapping[str, object]) -> list[str]:
        """A retried step: strike out what this attempt showed and say why."""
        withdrawn = ""
        for item in self.items:
            if item.attempt == self.attempt and not item.withdrawn:
                item.withdrawn = True
                if item.kind == "text":
                    withdrawn += item.text
        who = data.get("processorId") or "an error processor"
        note = (f"↻ step {data.get('stepNumber', '?')} retried (#{data.get('retryCount', '?')})"
                f" — {who}: {data.get('reason', '')}")
        self.notes.append((len(self.items), note))
        shown = f" — withdrawn: {withdrawn!r}" if withdrawn else ""
        return [f"\n[retry] {note}{shown}\n"]

    def close(self, error: BaseException | None = None) -> None:
        """The stream ended (with ``error`` when iterating it raised)."""
        if error is not None and self.error is None:
            self.error = f"{type(error).__name__}: {error}"
            self.status = "failed"
        elif self.status == "streaming…":
            self.status = "done"

    @property
    def text_shown(self) -> str:
        """The text currently shown (withdrawn attempts excluded)."""
        return "".join(i.text for i in self.items if i.kind == "text" and not i.withdrawn)

    def html(self) -> str:
        """The view as HTML: answer (withdrawn text struck through), tools, tripwire, status."""
        body: list[str] = []
        notes = dict(self.notes)
        for pos, item in enumerate(self.items):
            if pos in notes:
                body.append(f'<div class="sk-retry">{esc(notes.pop(pos))}</div>')
            body.append(_item_html(item))
        for note in notes.values():
            body.append(f'<div class="sk-retry">{esc(note)}</div>')
        if self.tripwire is not None:
            t = self.tripwire
            meta = t["metadata"]
            body.append(f'<div class="sk-tripwire"><b>⛔ Tripwire</b> by processor '
                        f"<code>{esc(t['processor_id'])}</code>"
                        f"{' (asked for a retry)' if t['retry'] else ''}<br/><b>reason:</b> "
                        f"{esc(t['reason'])}"
                        + (f'<div class="sk-muted">metadata: <code>{esc(fmt_value(meta))}'
                           f"</code></div>" if meta is not None else "") + "</div>")
        if self.error is not None:
            body.append(f'<div class="sk-error"><b>Error</b> {esc(self.error)}</div>')
        elapsed = self.times[-1] if self.times else 0.0
        status = self.status + (f" ({self.finish_reason})" if self.finish_reason else "")
        return (f'<div class="sk-box sk-live">{STYLE}<div class="sk-answer">{"".join(body)}'
                f"{'' if body else '<span class=sk-muted>…</span>'}</div>"
                f'<div class="sk-muted">{esc(status)} · {len(self.chunks)} chunk(s) · '
                f"{elapsed * 1e3:.1f} ms</div></div>")

    def text(self) -> str:
        """The view as plain text (the ``text/plain`` fallback of each update)."""
        lines = [self.text_shown]
        if self.tripwire is not None:
            lines.append(f"[TRIPWIRE] processor {self.tripwire['processor_id']}: "
                         f"{self.tripwire['reason']}")
        if self.error is not None:
            lines.append(f"[ERROR] {self.error}")
        lines.append(f"-- {self.status} · {len(self.chunks)} chunk(s)")
        return "\n".join(lines)

    def snapshot(self) -> _Snapshot:
        return _Snapshot(self.html(), self.text())

    def table(self) -> ChunkTable:
        """Every chunk seen, with arrival times."""
        return ChunkTable(self.chunks, times=self.times)


def _item_html(item: _Item) -> str:
    if item.kind == "text":
        inner = esc(item.text)
    elif item.kind == "reasoning":
        inner = f'<span class="sk-muted"><i>{esc(item.text)}</i></span>'
    elif item.kind == "data":
        inner = f'<div class="sk-muted">▪ {esc(item.text)}</div>'
    else:
        icon = {"tool-call": "🔧", "tool-result": "✓", "tool-error": "✗"}[item.kind]
        inner = f'<div><span class="sk-tool">{icon} {esc(item.text)}</span></div>'
    if item.withdrawn:
        return f'<del class="sk-withdrawn" title="withdrawn: the step was retried">{inner}</del>'
    return inner


def _ipython_handle(initial: _Snapshot) -> DisplayHandle | None:
    """A display handle when running inside a Jupyter kernel, else ``None``."""
    # IPython is optional (not a dependency of streamkit): imported here, where its absence
    # just means "no kernel", rather than at module top where it would break the import.
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    from IPython.display import display

    # IPython's display() has no annotations; with display_id=True it returns a DisplayHandle.
    handle: DisplayHandle = display(initial, display_id=True)  # type: ignore[no-untyped-call]
    return handle


# A ResultStream is an async iterable too: the first overload wins for it (mypy reports the
# overlap of the two; picking the first is what overloads are for).
@overload
async def live(stream: ResultStream[R], *,  # type: ignore[overload-overlap]
               handle: DisplayHandle | None = None, min_interval: float = 0.05,
               file: TextIO | None = None) -> R: ...
@overload
async def live(stream: AsyncIterable[object], *, handle: DisplayHandle | None = None,
               min_interval: float = 0.05, file: TextIO | None = None) -> ChunkTable: ...
async def live(stream: AsyncIterable[object] | ResultStream[object], *,
               handle: DisplayHandle | None = None, min_interval: float = 0.05,
               file: TextIO | None = None) -> object:
    """Consume ``stream`` while showing it live; return its result.

    In a Jupyter kernel the output is one display updated in place (at most every
    ``min_interval`` seconds, and at once for tool calls, retries, tripwires, errors and the
    end). Elsewhere the text is printed as it arrives, with tripwires and retries marked.

    Args:
        stream: an ``AgentStream`` (``agent.stream(...)``), an ``ops.apply(...)`` stream or any
            async iterable of chunks.
        handle: an object with ``update(obj)`` to render into (default: a new
            ``IPython.display`` handle in a kernel; printing otherwise).
        min_interval: seconds between two throttled updates (``0`` updates on every chunk).
        file: where the print fallback writes (default ``sys.stdout``).

    Returns:
        ``await stream.result()`` when the stream has one (an ``AgentResult``), else a
        ``ChunkTable`` of every chunk seen.

    Raises:
        Whatever the stream raises (an ``APICallError`` after it has been shown).

    Example:
        >>> result = await display.live(agent.stream("Tell me a story"))
    """
    view = LiveView()
    if handle is None:
        handle = _ipython_handle(view.snapshot())
    else:
        handle.update(view.snapshot())
    out = file if file is not None else sys.stdout
    last = 0.0
    try:
        async for chunk in stream:
            printed = view.feed(chunk)
            if handle is None:
                for line in printed:
                    out.write(line)
                out.flush()
                continue
            now = time.perf_counter()
            if now - last >= min_interval or getattr(chunk, "type", "") in _PROMPT_TYPES:
                handle.update(view.snapshot())
                last = now
    except BaseException as exc:
        view.close(exc)
        with contextlib.suppress(Exception):    # the display may be what failed
            _final(view, handle, out)
        await _close(stream)
        raise
    result_fn = getattr(stream, "result", None)
    if result_fn is None:
        view.close()
        _final(view, handle, out)
        return view.table()
    try:
        result: object = await result_fn()  # an AgentStream's (see the docstring)
    except BaseException as exc:
        view.close(exc)
        _final(view, handle, out)
        raise
    view.close()
    _final(view, handle, out)
    return result


async def _close(stream: object) -> None:
    """Close a stream we stopped reading because of an error (closes the model's stream too)."""
    closer = getattr(stream, "aclose", None)
    if closer is None:
        return
    try:
        await closer()
    except Exception:  # noqa: BLE001 - the original error is what the caller must see
        pass


def _final(view: LiveView, handle: DisplayHandle | None, out: TextIO) -> None:
    if handle is not None:
        handle.update(view.snapshot())
    else:
        out.write(f"\n-- {view.status}\n")
        out.flush()
