"""Latency budgets for stream guards: how much text a guard holds before it checks, and what that
cost the run.

What belongs here: ``Buffering`` (the declaration every stream guard carries as ``buffering``),
``WindowGuard`` (the engine that holds text per a ``Buffering`` and checks each window),
``StreamGuard`` (that engine around any check function), and ``latency_report`` (the run's
trace joined with the declarations). What does not: boundary-safe redaction (``_redact``, whose
guards declare ``Buffering.holdback``) and model prompts (the model-backed guards).

The kinds, from least to most held::

    passthrough()          check every delta inline, release it at once       added: check time
    holdback(max_chars)    hold the shortest tail that could become a match   added: ~1 delta
    window(tokens, overlap) hold N tokens, check them with `overlap` context  added: N tokens
    sentence(max_chars)    hold to the end of a sentence                      added: 1 sentence
    time(seconds)          hold until `seconds` passed since the window began added: <= seconds
    end_of_stream(hold=True)   hold everything, check once at the end         added: whole text
    end_of_stream(hold=False)  audit: release everything, check at the end    added: 0

What each guard actually added to time-to-first-chunk is measured by the runtime:
``TraceRecord.first_chunk_delay`` (first text delta in → first text delta out, per step).
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamkit import Processor, TripWire
from streamkit.chunks import StepStart, TextDelta
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.processors import is_async_callable

__all__ = ["Buffering", "WindowGuard", "StreamGuard", "latency_report", "format_report",
           "approx_tokens"]

log = logging.getLogger("streamkit_operators")

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"[.!?。！？…](?:[\"')\]»”’]*)(?=\s)|\n\n")
#: How far back into earlier held text a sentence end can start (mark + closing quotes).
_SENTENCE_LOOKBACK = 8
_KINDS = ("passthrough", "holdback", "window", "sentence", "time", "end_of_stream")


def _tail(pieces: list[str], n: int) -> str:
    """The last ``n`` characters held before the newest piece (``pieces[-1]``)."""
    out: list[str] = []
    need = n
    for piece in reversed(pieces[:-1]):
        if need <= 0:
            break
        out.append(piece[-need:])
        need -= len(piece)
    return "".join(reversed(out))


def _last_tokens(text: str, n: int) -> str:
    """The end of ``text`` holding its last ``n`` tokens (by the ``approx_tokens`` estimate)."""
    starts = [m.start() for m in _TOKEN.finditer(text)]
    return text[starts[-n]:] if len(starts) > n else text


def approx_tokens(text: str) -> int:
    """A cheap token estimate: words and punctuation marks (within ~25 % of BPE counts for
    English prose). Pass ``counter=`` to a guard for an exact tokenizer."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True, slots=True)
class Buffering:
    """How much text a stream guard holds back before releasing it — its latency budget.

    Build one with the class methods; read it from any guard's ``buffering`` attribute.

    Example:
        >>> Buffering.window(tokens=32, overlap=8)
        Buffering.window(tokens=32, overlap=8)
        >>> Buffering.window(tokens=32, overlap=8).holds
        True
    """

    kind: str
    tokens: int | None = None
    overlap: int = 0
    seconds: float | None = None
    max_chars: int | None = None
    hold: bool = True

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidArgument(f"buffering kind must be one of {_KINDS}, got {self.kind!r}")
        if self.tokens is not None and self.tokens < 1:
            raise InvalidArgument(f"window tokens must be >= 1, got {self.tokens}")
        if self.overlap < 0 or (self.tokens is not None and self.overlap >= self.tokens):
            raise InvalidArgument(f"overlap must be >= 0 and smaller than the window "
                                  f"({self.tokens} tokens), got {self.overlap}")
        if self.seconds is not None and self.seconds <= 0:
            raise InvalidArgument(f"seconds must be > 0, got {self.seconds}")
        if self.max_chars is not None and self.max_chars < 1:
            raise InvalidArgument(f"max_chars must be >= 1, got {self.max_chars}")

    @classmethod
    def passthrough(cls, *, overlap: int = 0) -> Buffering:
        """Nothing held across chunks: each delta is checked (with ``overlap`` tokens of what
        came before as context) and released right away."""
        return cls("passthrough", overlap=overlap)

    @classmethod
    def holdback(cls, *, max_chars: int = 1024) -> Buffering:
        """Only the shortest tail that could still become a match is held (redaction guards)."""
        return cls("holdback", max_chars=max_chars)

    @classmethod
    def window(cls, tokens: int = 32, overlap: int = 8) -> Buffering:
        """Windows of ``tokens`` tokens; each check also sees the last ``overlap`` tokens of the
        previous window, so a phrase split between windows is seen whole."""
        return cls("window", tokens=tokens, overlap=overlap)

    @classmethod
    def sentence(cls, *, max_chars: int = 400, overlap: int = 0) -> Buffering:
        """Whole sentences (or ``max_chars`` characters, whichever comes first)."""
        return cls("sentence", max_chars=max_chars, overlap=overlap)

    @classmethod
    def time(cls, seconds: float, *, max_chars: int | None = None) -> Buffering:
        """Whatever arrived within ``seconds`` of the window's first delta (checked as deltas
        arrive: a stalled model does not release on its own)."""
        return cls("time", seconds=seconds, max_chars=max_chars)

    @classmethod
    def end_of_stream(cls, *, hold: bool = True) -> Buffering:
        """One check over the whole text at the end of the text part. ``hold=True`` buffers
        until it passed; ``hold=False`` is an audit: text streams at once, a violation found at
        the end can only trip (with ``retry=True`` the client withdraws the step)."""
        return cls("end_of_stream", hold=hold)

    @property
    def holds(self) -> bool:
        """Whether the guard delays text across chunks."""
        return self.kind not in ("passthrough",) and not (
            self.kind == "end_of_stream" and not self.hold)

    def __repr__(self) -> str:
        args = {"window": f"tokens={self.tokens}, overlap={self.overlap}",
                "holdback": f"max_chars={self.max_chars}",
                "sentence": f"max_chars={self.max_chars}",
                "time": f"seconds={self.seconds}",
                "end_of_stream": f"hold={self.hold}",
                "passthrough": f"overlap={self.overlap}" if self.overlap else ""}[self.kind]
        return f"Buffering.{self.kind}({args})"

    __str__ = __repr__


@dataclass(slots=True)
class Window:
    """Text a ``WindowGuard`` checks: ``text`` (released when it passes, unless already
    released), ``context`` (the overlap before it, already checked), ``index`` (0-based)."""

    text: str
    context: str
    index: int
    released: bool = False
    run: Any = field(default=None, repr=False, compare=False)


@dataclass(slots=True)
class _Run:
    id: str
    run_id: Any
    from_: Any
    payload_cls: Any
    pieces: list[str] = field(default_factory=list)
    tokens: int = 0
    chars: int = 0
    opened: float = 0.0
    tail: str = ""
    audit: list[str] = field(default_factory=list)
    windows: int = 0

    def chunk(self, text: str) -> Any:
        return TextDelta(payload=self.payload_cls(id=self.id, text=text), run_id=self.run_id,
                         from_=self.from_)


class WindowGuard(Processor):
    """Base of guards that hold text per a ``Buffering`` and check each window.

    Subclasses implement ``check_window(window, state)`` — sync, or ``async`` (then the stream
    hook is async; which one is decided once, at construction) — returning a falsy value when
    the window passes, or a reason (``str``, or ``True`` for a default one) when it violates;
    it may raise to signal that the check itself failed (``error_strategy`` decides).

    A verdict may also be a dict ``{"reason": str, "metadata": dict}`` (the metadata goes into
    the tripwire). On a violation, ``strategy`` ``"block"`` trips (``retry=True``: the agent
    re-runs the step with the reason as feedback and the client gets ``data-step-retry``),
    ``"filter"`` drops the window's text, ``"warn"`` logs and releases it. Non-text chunks
    release what is held first, in order; ``step-start`` discards what a retried attempt left
    held.

    Example:
        >>> class NoShouting(WindowGuard):
        ...     def __init__(self):
        ...         super().__init__("no-shouting", buffering=Buffering.sentence())
        ...     def check_window(self, window, state):
        ...         return window.text.isupper() and "please do not shout"
    """

    multi_emit = True
    _RUN = "window.run"
    #: How a failed check is named in a strict tripwire: ``"<failure_name> failed: <error>"``.
    failure_name = "Stream guard check"

    def __init__(self, id: str, *, buffering: Buffering, strategy: str = "block",
                 retry: bool = False, error_strategy: str = "strict",
                 counter: Callable[[str], int] | None = None,
                 clock: Callable[[], float] = time.monotonic, is_async: bool = False) -> None:
        super().__init__(id)
        if not isinstance(buffering, Buffering):
            raise InvalidType(f"{id}: buffering must be a Buffering (such as "
                              f"Buffering.sentence()), got {type(buffering).__name__}")
        if buffering.kind == "holdback":
            raise InvalidArgument(f"{id}: buffering must be a Buffering other than holdback "
                                  f"(that one is for redaction guards), got {buffering!r}")
        if strategy not in ("block", "filter", "warn"):
            raise InvalidArgument(f"{id}: strategy must be 'block', 'filter' or 'warn', got "
                                  f"{strategy!r}")
        if strategy == "filter" and not buffering.holds and buffering.kind != "passthrough":
            raise InvalidArgument(f"{id}: strategy 'filter' needs text that is not released "
                                  f"yet; {buffering!r} has already streamed it — use 'block' "
                                  f"with retry=True to withdraw it")
        if error_strategy not in ("warn", "strict"):
            raise InvalidArgument(f"{id}: error_strategy must be 'warn' or 'strict', got "
                                  f"{error_strategy!r}")
        self.buffering = buffering
        self.strategy = strategy
        self.retry = retry
        self.error_strategy = error_strategy
        self.counter = counter or approx_tokens
        self.clock = clock
        if is_async:
            self.process_output_stream = self._stream_async
            self.flush_output_stream = self._flush_async
        else:
            self.process_output_stream = self._stream_sync
            self.flush_output_stream = self._flush_sync

    def check_window(self, window: Window, state: dict[str, Any]) -> Any:  # pragma: no cover
        raise NotImplementedError

    # -- the plan: which text to release directly and which windows to check, in order ------

    def _plan(self, part: Any, state: dict[str, Any]) -> list[Any]:
        cls = part.__class__
        if cls is not TextDelta:
            run = state.pop(self._RUN, None)
            if run is None or cls is StepStart:
                return [part]  # a run open at step-start belongs to a withdrawn attempt
            return [*self._close(run), part]
        run = state.get(self._RUN)
        items: list[Any] = []
        if run is None or run.id != part.payload.id:
            if run is not None:
                items.extend(self._close(run))
            run = state[self._RUN] = _Run(part.payload.id, part.run_id, part.from_,
                                          type(part.payload), opened=self.clock())
        run.run_id, run.from_ = part.run_id, part.from_
        items.extend(self._add(run, part.payload.text))
        return items

    def _add(self, run: _Run, text: str) -> list[Any]:
        b = self.buffering
        kind = b.kind
        if kind == "passthrough":
            return [self._window(run, [text])]
        if kind == "end_of_stream":
            if b.hold:
                run.pieces.append(text)
                return []
            run.audit.append(text)
            return [run.chunk(text)]
        if not run.pieces:
            run.opened = self.clock()
        before = run.chars
        run.pieces.append(text)
        run.chars += len(text)
        if kind == "window":
            run.tokens += self.counter(text)
            if run.tokens >= (b.tokens or 1):
                return [self._window(run, self._take(run))]
            return []
        if b.max_chars is not None and run.chars >= b.max_chars:
            return [self._window(run, self._take(run))]
        if kind == "sentence":
            # Earlier text held no confirmed sentence end, and one needs the character after
            # it: only the last few held characters and the new text can hold a new one.
            tail = _tail(run.pieces, _SENTENCE_LOOKBACK)
            last = None
            for last in _SENTENCE_END.finditer(tail + text):  # noqa: B007 - keeps the last match
                pass
            if last is None:
                return []
            held = "".join(run.pieces)
            cut = before - len(tail) + last.end()
            run.pieces = [held[cut:]] if cut < len(held) else []
            run.chars = len(held) - cut
            return [self._window(run, [held[:cut]])]
        if self.clock() - run.opened >= (b.seconds or 0.0):
            return [self._window(run, self._take(run))]
        return []

    @staticmethod
    def _take(run: _Run) -> list[str]:
        pieces, run.pieces, run.tokens, run.chars = run.pieces, [], 0, 0
        return pieces

    def _window(self, run: _Run, pieces: list[str], *, released: bool = False) -> Window:
        text = "".join(pieces)
        context = run.tail
        if self.buffering.overlap:
            run.tail = _last_tokens(context + text, self.buffering.overlap)
        window = Window(text, context, run.windows, released, run)
        run.windows += 1
        return window

    def _close(self, run: _Run) -> list[Any]:
        if self.buffering.kind == "end_of_stream" and not self.buffering.hold:
            return [self._window(run, run.audit, released=True)] if run.audit else []
        return [self._window(run, run.pieces)] if run.pieces else []

    # -- verdicts --------------------------------------------------------------------------

    def _emit(self, window: Window, verdict: Any, state: dict[str, Any], out: list[Any]) -> None:
        if not verdict:
            if not window.released and window.text:
                out.append(window.run.chunk(window.text))
            return
        extra: dict[str, Any] = {}
        if isinstance(verdict, dict):
            reason = str(verdict.get("reason") or f"{self.id}: content not allowed")
            extra = dict(verdict.get("metadata") or {})
        else:
            reason = verdict if isinstance(verdict, str) else f"{self.id}: content not allowed"
        state.setdefault("violations", []).append(
            {"window": window.index, "reason": reason, "strategy": self.strategy})
        if self.strategy == "block":
            raise TripWire(reason, retry=self.retry,
                           metadata={"processorId": self.id, "window": window.index,
                                     "buffering": repr(self.buffering), **extra})
        if self.strategy == "warn":
            log.warning("%s: %s (strategy='warn', content released)", self.id, reason)
            if not window.released and window.text:
                out.append(window.run.chunk(window.text))
        # filter: the window's text is dropped

    def _failed(self, exc: Exception, window: Window, state: dict[str, Any],
                out: list[Any]) -> None:
        state.setdefault("errors", []).append(f"{type(exc).__name__}: {exc}")
        if self.error_strategy == "strict":
            raise TripWire(f"{self.failure_name} failed: {exc}",
                           metadata={"processorId": self.id, "error": str(exc),
                                     "errorType": type(exc).__name__})
        log.warning("%s: check failed, releasing the text unchecked (error_strategy='warn'): "
                    "%s: %s", self.id, type(exc).__name__, exc)
        self._emit(window, None, state, out)

    def _resolve_sync(self, items: list[Any], state: dict[str, Any]) -> Any:
        out: list[Any] = []
        for item in items:
            if item.__class__ is not Window:
                out.append(item)
                continue
            try:
                verdict = self.check_window(item, state)
            except TripWire:
                raise
            except Exception as exc:  # noqa: BLE001 - error_strategy decides
                self._failed(exc, item, state, out)
                continue
            self._emit(item, verdict, state, out)
        return out

    async def _resolve_async(self, items: list[Any], state: dict[str, Any]) -> Any:
        out: list[Any] = []
        for item in items:
            if item.__class__ is not Window:
                out.append(item)
                continue
            try:
                verdict = await self.check_window(item, state)
            except TripWire:
                raise
            except Exception as exc:  # noqa: BLE001 - error_strategy decides
                self._failed(exc, item, state, out)
                continue
            self._emit(item, verdict, state, out)
        return out

    def _stream_sync(self, part: Any, state: dict[str, Any]) -> Any:
        items = self._plan(part, state)
        if len(items) == 1 and items[0] is part:
            return part
        return self._resolve_sync(items, state)

    async def _stream_async(self, part: Any, state: dict[str, Any]) -> Any:
        items = self._plan(part, state)
        if len(items) == 1 and items[0] is part:
            return part
        return await self._resolve_async(items, state)

    def _flush_sync(self, state: dict[str, Any]) -> Any:
        run = state.pop(self._RUN, None)
        return self._resolve_sync(self._close(run), state) if run is not None else None

    async def _flush_async(self, state: dict[str, Any]) -> Any:
        run = state.pop(self._RUN, None)
        return await self._resolve_async(self._close(run), state) if run is not None else None


class StreamGuard(WindowGuard):
    """A stream guard around any check function, held per a ``Buffering``.

    Args:
        check: ``check(text)`` or ``check(text, context)`` (sync or async; ``context`` is the
            overlap before ``text``) returning a falsy value when the text passes, or a reason
            (``str``; ``True`` for a default one) when it does not.
        id: processor id.
        buffering: how much text to hold per check (default: whole sentences).
        strategy: ``"block"`` (trip), ``"filter"`` (drop the window), ``"warn"`` (log, release).
        retry: with ``"block"``, ask the agent to re-run the step with the reason as feedback
            (needs ``max_processor_retries``); the client gets ``data-step-retry``.
        error_strategy: when ``check`` raises: ``"strict"`` (default: trip, fail closed) or
            ``"warn"`` (log, release the text unchecked: fail open).
        counter: token counter for ``Buffering.window`` (default ``approx_tokens``).
        clock: time source for ``Buffering.time`` (tests pass a fake).

    Marble (``buffering=sentence()``, check: "no refunds")::

        --"We "--"refund."--" Bye."--|   StreamGuard(retry=True)   -----------X(retry)

    Example:
        >>> guard = StreamGuard(lambda text: "refund" in text and "no refunds promised",
        ...                     id="no-refunds", buffering=Buffering.sentence(), retry=True)
        >>> agent = Agent(id="a", model=model, output_processors=[guard],
        ...               max_processor_retries=2)
    """

    def __init__(self, check: Callable[..., Any], *, id: str = "stream-guard",
                 buffering: Buffering | None = None, strategy: str = "block",
                 retry: bool = False, error_strategy: str = "strict",
                 counter: Callable[[str], int] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not callable(check):
            raise InvalidType(f"StreamGuard expects a check function, got "
                              f"{type(check).__name__}")
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(check).parameters
        except (TypeError, ValueError):
            params = {}
        self._with_context = "context" in params or any(
            p.kind is p.VAR_KEYWORD for p in params.values())
        self._check = check
        super().__init__(id, buffering=buffering or Buffering.sentence(), strategy=strategy,
                         retry=retry, error_strategy=error_strategy, counter=counter,
                         clock=clock, is_async=is_async_callable(check))

    def check_window(self, window: Window, state: dict[str, Any]) -> Any:
        if self._with_context:
            return self._check(window.text, context=window.context)
        return self._check(window.text)


def latency_report(trace: Iterable[Any], guards: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """One row per stream processor and step: its declared ``buffering``, chunks seen, mean
    cost per chunk, and the time it added to the first text chunk (``first_chunk_delay``).

    Args:
        trace: ``result.trace`` (or ``ops.apply(..., timed=True).trace``).
        guards: the processors, to read their ``buffering`` declarations (optional).

    Example:
        >>> for row in latency_report(result.trace, [pii, moderation]):
        ...     print(row["processor"], row["buffering"], row["ttfc_ms"])
    """
    declared = {g.id: getattr(g, "buffering", None) for g in guards}
    rows = []
    for rec in trace:
        if rec.hook != "process_output_stream":
            continue
        buffering = declared.get(rec.processor_id)
        delay = rec.first_chunk_delay
        rows.append({
            "processor": rec.processor_id, "step": rec.step,
            "buffering": repr(buffering) if buffering is not None else "-",
            "chunks": rec.calls,
            "us_per_chunk": round(rec.duration / rec.calls * 1e6, 2) if rec.calls else 0.0,
            "ttfc_ms": None if delay is None else round(delay * 1e3, 3),
            "outcome": rec.outcome,
        })
    return rows


def format_report(rows: Sequence[dict[str, Any]]) -> str:
    """``latency_report`` rows as an aligned text table."""
    if not rows:
        return "(no stream processors ran)"
    cols = list(rows[0])
    cells = [[str(r.get(c, "")) if r.get(c) is not None else "-" for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)
