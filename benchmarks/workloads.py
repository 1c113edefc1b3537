"""The work every contender does: chunk lists, the processors, and their hand-written twins.

What belongs here: the input chunks (``text_chunks``, ``long_text``), the processors the rows run
(pass-through, the three "real" transforms, the request rows' input and result processors), the
plain functions the reactivex/aiostream pipelines and the hand-written loops call, and
``PrebuiltModel``. What does not: timing (``benchmarks.harness``) and the rows themselves
(``benchmarks.rows_*``).

The three real transforms, identical in every contender:

* **uppercase**: a ``text-delta`` is replaced by a new chunk whose text is upper-cased. streamkit
  runs the documented operator, ``ops.map_text(str.upper)``; the hand-written loops (and the
  reactivex/aiostream functions) build the new chunk the cheapest correct way, with
  ``msgspec.structs.replace`` on the chunk and its payload, as a careful person would. Both give
  equal chunks; the difference in how they are built is part of what the rows measure.
* **drop every 10th**: a per-request counter; every chunk whose count is a multiple of 10 is
  dropped;
* **count words in state**: the words of every surviving ``text-delta`` are added up in the
  request's state (``ops.scan``), or in a local variable in the hand-written loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec

from streamkit import Processor, ops
from streamkit.chunks import TextDelta
from streamkit.messages import get_text

from .bench_wire import ENVELOPE, WORDS

__all__ = [
    "text_chunks", "long_text", "PassThrough", "AsyncPassThrough", "DropEveryNth",
    "AsyncDropEveryNth", "transforms", "async_transforms", "upper_chunk", "aupper_chunk",
    "count_words", "acount_words", "aupper", "expected_transform", "InputGuard", "ResultWords",
    "PrebuiltModel", "DROP_EVERY", "replace",
]

DROP_EVERY = 10
replace = msgspec.structs.replace


def text_chunks(n: int) -> list[Any]:
    """``n`` text deltas of one word each (``"quick "``, ``"brown "``...), as a model streams."""
    words = [w + " " for w in WORDS]
    return [TextDelta(id="txt-0", text=words[i % len(words)], **ENVELOPE) for i in range(n)]


_TEXT_UNIT = " ".join(WORDS) + " "


def long_text(chunks: int, chunk_size: int = 4) -> str:
    """A text that ``text(..., chunk_size=chunk_size)`` streams as exactly ``chunks`` deltas."""
    size = chunks * chunk_size
    return (_TEXT_UNIT * (size // len(_TEXT_UNIT) + 1))[:size]


# --------------------------------------------------------------------------- processors


class PassThrough(Processor):
    """A sync stream processor that returns every chunk unchanged."""

    def process_output_stream(self, part: Any) -> Any:
        return part


class AsyncPassThrough(Processor):
    """An async stream processor that returns every chunk unchanged."""

    async def process_output_stream(self, part: Any) -> Any:
        return part


class DropEveryNth(Processor):
    """Drop every ``n``-th chunk of the request (a counter kept in the request's state)."""

    def __init__(self, n: int = DROP_EVERY, id: str = "drop-every-nth") -> None:
        super().__init__(id)
        self.n = n

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        seen = state.get("seen", 0) + 1
        state["seen"] = seen
        return None if seen % self.n == 0 else part


class AsyncDropEveryNth(DropEveryNth):
    """``DropEveryNth`` with an ``async`` hook."""

    async def process_output_stream(  # type: ignore[override]
            self, part: Any, state: dict[str, Any]) -> Any:
        seen = state.get("seen", 0) + 1
        state["seen"] = seen
        return None if seen % self.n == 0 else part


def count_words(acc: int, part: Any) -> int:
    """``ops.scan`` step: add the words of a text delta to the running count."""
    return acc + len(part.payload.text.split())


async def acount_words(acc: int, part: Any) -> int:
    """``count_words``, async."""
    return acc + len(part.payload.text.split())


async def aupper(text: str) -> str:
    """``str.upper``, async (the function ``ops.map_text`` awaits in the async transforms)."""
    return text.upper()


def transforms() -> list[Any]:
    """The three real transforms as streamkit processors (sync hooks)."""
    return [ops.map_text(str.upper, id="upper"), DropEveryNth(),
            ops.scan(count_words, 0, key="words", types="text-delta", id="words")]


def async_transforms() -> list[Any]:
    """The three real transforms as streamkit processors (async hooks)."""
    return [ops.map_text(aupper, id="upper"), AsyncDropEveryNth(),
            ops.scan(acount_words, 0, key="words", types="text-delta", id="words")]


def upper_chunk(c: Any) -> Any:
    """The uppercase transform as a plain function (reactivex/aiostream ``map``)."""
    if c.__class__ is TextDelta:
        p = c.payload
        return replace(c, payload=replace(p, text=p.text.upper()))
    return c


async def aupper_chunk(c: Any) -> Any:
    """``upper_chunk``, async."""
    if c.__class__ is TextDelta:
        p = c.payload
        return replace(c, payload=replace(p, text=await aupper(p.text)))
    return c


def expected_transform(chunks: list[Any]) -> tuple[int, int]:
    """(chunks out, words counted) the three transforms must produce over ``chunks``."""
    kept = [c for i, c in enumerate(chunks, 1) if i % DROP_EVERY]
    return len(kept), sum(len(c.payload.text.split()) for c in kept
                          if c.__class__ is TextDelta)


# --------------------------------------------------------------------------- request rows


class InputGuard(Processor):
    """An input processor: rejects an over-long last message (a typical guard), else no change."""

    def __init__(self, limit: int = 10_000, id: str = "input-guard") -> None:
        super().__init__(id)
        self.limit = limit

    def process_input(self, messages: list[Any], abort: Any) -> None:
        if messages and len(get_text(messages[-1])) > self.limit:
            abort("input too long")


class ResultWords(Processor):
    """A result processor: counts the words of the response into the request's state."""

    id = "result-words"

    def process_output_result(self, messages: list[Any], state: dict[str, Any]) -> None:
        state["words"] = sum(len(get_text(m).split()) for m in messages)


# --------------------------------------------------------------------------- models


async def _replay(chunks: list[Any]) -> AsyncIterator[Any]:
    for chunk in chunks:
        yield chunk


class PrebuiltModel:
    """A model that streams chunks built ahead of time (as a provider adapter hands over chunks
    msgspec already decoded): isolates the agent loop from the cost of building chunks."""

    provider = "prebuilt"
    model_id = "prebuilt"

    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks

    def stream(self, request: Any) -> AsyncIterator[Any]:
        return _replay(self.chunks)
