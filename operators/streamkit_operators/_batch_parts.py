"""``BatchParts``: fewer, larger stream chunks — fewer frames for the client and for every
processor after it.

Mastra's ``BatchPartsProcessor`` (id ``batch-parts``, ``process_output_stream``). Differences, all
because streamkit lets a stream hook emit several chunks at once (``multi_emit``) and calls
``flush_output_stream`` when a step's model stream ends:

* a non-text chunk that flushes the batch is emitted right after it, in the same call (Mastra
  stashes it to be re-driven);
* whatever is still held at the end of a step is emitted then (Mastra's runner never calls its
  ``flush``; the text would wait for the next chunk);
* ``max_wait_time`` is in **seconds** (Mastra: milliseconds) and checked as chunks arrive, with an
  injectable clock, like Mastra's timer that only flags the batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streamkit import Processor
from streamkit.chunks import TextDelta
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.validate import is_int, optional_seconds

__all__ = ["BatchParts"]


class BatchParts(Processor):
    """Buffers stream chunks and emits them in batches, merging runs of text deltas.

    Marble (``batch_size=3``; ``a``..``e`` text deltas, ``T`` a tool call)::

        --a--b--c--d--T--e--|   BatchParts(3)   --------abc-----(d,T)---e|

    A batch is emitted when it holds ``batch_size`` chunks, when a chunk arrives
    ``max_wait_time`` seconds or more after the batch started, before a non-text chunk (when
    ``emit_on_non_text``), and at the end of each step. Emitting merges each run of consecutive
    text deltas with the same text id into one delta (id, run id and ``from`` of its first
    delta); other chunks keep their place. Nothing is lost or reordered.

    Args:
        batch_size: chunks per batch (default 5).
        max_wait_time: seconds a batch may wait for more chunks (default: no limit).
        emit_on_non_text: emit the batch, then the chunk, as soon as a non-text chunk arrives
            (default ``True``); ``False`` batches non-text chunks like text.
        clock: time source for ``max_wait_time`` (``time.monotonic``); tests inject one.
        id: processor id (default ``"batch-parts"``).

    Example:
        >>> agent = Agent(id="a", model=model, output_processors=[BatchParts(batch_size=10)])
    """

    id = "batch-parts"
    name = "Batch Parts"
    multi_emit = True

    def __init__(self, batch_size: int = 5, *, max_wait_time: float | None = None,
                 emit_on_non_text: bool = True, clock: Callable[[], float] = time.monotonic,
                 id: str | None = None) -> None:
        super().__init__(id)
        if not is_int(batch_size):
            raise InvalidType(f"batch_size must be an int >= 1, got "
                              f"{type(batch_size).__name__} {batch_size!r}")
        if batch_size < 1:
            raise InvalidArgument(f"batch_size must be an int >= 1, got {batch_size!r}")
        optional_seconds(max_wait_time, "max_wait_time")
        self.batch_size = batch_size
        self.max_wait_time = max_wait_time
        self.emit_on_non_text = emit_on_non_text
        self.clock = clock

    @staticmethod
    def _merge(batch: list[Any]) -> list[Any]:
        out: list[Any] = []
        run: list[Any] = []

        def close() -> None:
            if len(run) == 1:
                out.append(run[0])
            elif run:
                first = run[0]
                out.append(TextDelta(id=first.payload.id,
                                     text="".join(c.payload.text for c in run),
                                     run_id=first.run_id, from_="AGENT"))
            run.clear()

        for chunk in batch:
            if chunk.__class__ is TextDelta:
                if run and run[0].payload.id != chunk.payload.id:
                    close()
                run.append(chunk)
            else:
                close()
                out.append(chunk)
        close()
        return out

    def flush(self, state: dict[str, Any]) -> list[Any]:
        """Emit and clear what ``state`` holds (merged); ``[]`` when nothing is held."""
        batch: list[Any] = state.get("batch") or []
        state["batch"] = []
        state.pop("started", None)
        return self._merge(batch) if batch else []

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        batch: list[Any] | None = state.get("batch")
        if batch is None:
            batch = state["batch"] = []
        if self.emit_on_non_text and part.__class__ is not TextDelta:
            return [*self.flush(state), part] if batch else part
        out: list[Any] = []
        if batch and self.max_wait_time is not None \
                and self.clock() - state["started"] >= self.max_wait_time:
            # Like Mastra's timer: the late chunk still joins the batch it was waiting on.
            batch.append(part)
            return self.flush(state)
        if not batch:
            state["started"] = self.clock()
        batch.append(part)
        if len(batch) >= self.batch_size:
            out.extend(self.flush(state))
        return out or None

    def flush_output_stream(self, state: dict[str, Any]) -> list[Any] | None:
        return self.flush(state) or None
