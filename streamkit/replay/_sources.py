"""Where recorded streams come from: JSON-lines and SSE files of chunks, and memory threads.

What belongs here: turning a source (a path, a directory, a ``MemorySource``) into
``RecordedStream`` records — a stream's id and its chunks as JSON, not yet decoded, so they
travel cheaply to worker processes and Ray tasks. What does not: decoding and running the
pipeline (``_run``), scheduling (``_execute``).

Decisions:

* A file holds one stream or several back to back: each ``start`` chunk (Mastra's first chunk
  of a run) begins a new stream; a file without one is a single stream. Only the ``type`` of a
  chunk is read here (a cheap partial decode); the chunk itself is decoded by the worker, so a
  malformed chunk is reported for its stream, not for the whole replay.
* ``.sse`` files are streamkit's SSE encoding (``data: <chunk json>``); a ``[DONE]`` event ends
  a stream as well. An event the SSE parser refuses (a line or event past 16 MiB, an event cut
  off by the end of the file) fails the stream it is in — ``RecordedStream.error`` says why, and
  the report lists it — and the parser starts afresh at the next event, so the other streams of
  the file are replayed. Every other file is JSON lines. A directory stands for its ``*.jsonl``,
  ``*.ndjson`` and ``*.sse`` files, recursively, in sorted order.
* A memory thread replays each stored assistant message as the stream that produced it: a
  ``start``, then per part ``text-start``/``text-delta``.../``text-end`` (the text cut into
  word-sized deltas, as a model streams it), reasoning the same way, a ``tool-call`` (and
  ``tool-result`` when stored), then ``finish``. The original deltas are not stored, so where a
  processor's behaviour depends on how text is cut, a memory replay shows the word-cut case.
* Stream ids are ``<path>#<n>`` (the n-th stream of the file, from 0) and
  ``<thread id>/<message id>``; results are reported under them, so reports are comparable
  across runs. They stay stable when a line is corrupt: a line that does not decode but whose
  ``"type": "start"`` member is readable still begins a stream (which fails alone with a
  ``ChunkDecodeError``) — read as part of the stream before, it would merge the two and shift
  the ids of every later stream of the file.
* A dangling symbolic link (or a loop of links) in a corpus is not skipped: it is a failed
  stream ``<link>#0`` whose error says where it pointed (``corpus_files``).
* URIs (``s3://``, ``gs://``...) are read by the workers of a Ray replay (``_ray``), not here.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec

from streamkit.errors import ChunkDecodeError, InvalidArgument, InvalidType
from streamkit.messages import Message, ReasoningPart, TextPart, ToolInvocationPart
from streamkit.wire import SSEParser

if TYPE_CHECKING:
    from streamkit.memory._store import MessageStore

T = TypeVar("T")

__all__ = ["RecordedStream", "MemorySource", "read_streams", "split_file", "corpus_files",
           "dangling", "SUFFIXES"]

#: The names of recording files in a directory.
SUFFIXES = (".jsonl", ".ndjson", ".sse")
_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class RecordedStream:
    """One recorded stream: ``id`` and its chunks, each as JSON bytes (decoded by the worker).

    ``error``: why the stream could not be read whole (an SSE event the parser refused); such a
    stream is reported as failed with this reason and not replayed.

    Example:
        >>> RecordedStream("run-1", (b'{"type":"data-a","data":1}',))
    """

    id: str
    chunks: tuple[bytes, ...]
    error: str | None = None


@dataclass(frozen=True)
class MemorySource:
    """The assistant messages of memory threads, as recorded streams.

    ``MessageStore`` lists threads per resource, so name the resources (all their threads) or
    the threads.

    Args:
        store: any ``MessageStore`` (``SQLiteStore``, ``PostgresStore``...); it is closed after
            reading when ``close`` is true.
        resource_ids: resources whose threads are replayed.
        thread_ids: threads replayed (in addition).

    Example:
        >>> source = MemorySource(SQLiteStore("memory.db"), resource_ids=["user-1"])
        >>> report = replay([source], "guards:PIPELINE")
    """

    store: MessageStore
    resource_ids: Sequence[str] = ()
    thread_ids: Sequence[str] = ()
    close: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.resource_ids, str) or isinstance(self.thread_ids, str):
            raise InvalidType("MemorySource resource_ids/thread_ids must be lists of ids, not "
                              "one string")
        if not self.resource_ids and not self.thread_ids:
            raise InvalidArgument("MemorySource needs resource_ids= and/or thread_ids= (a "
                                  "MessageStore lists threads per resource)")


class _TypeOnly(msgspec.Struct):
    type: str = ""


_type_of = msgspec.json.Decoder(_TypeOnly).decode


#: A ``"type": "start"`` member in a line that does not decode (cut off, or mangled after it).
_START_MEMBER = re.compile(rb'[{,]\s*"type"\s*:\s*"start"\s*[,}]?')


def _is_start(line: bytes) -> bool:
    try:
        return _type_of(line).type == "start"
    except (msgspec.DecodeError, RecursionError):
        # Malformed, or nested past msgspec's depth limit (it raises RecursionError). A
        # corrupt ``start`` line (its ``type`` member still readable) still begins a stream,
        # which then fails alone with the worker's ChunkDecodeError: read as part of the stream
        # before, it would merge the two and shift the ids of every later stream of the file.
        return _START_MEMBER.search(line, 0, 4096) is not None


def _split(name: str, lines: Iterable[bytes | ChunkDecodeError]) -> Iterator[RecordedStream]:
    """Cut ``lines`` into streams; a ``ChunkDecodeError`` among them (an SSE event that could not
    be read) fails the stream it falls in."""
    chunks: list[bytes] = []
    error: str | None = None
    n = 0
    for line in lines:
        if isinstance(line, ChunkDecodeError):
            error = error or f"ChunkDecodeError: an SSE event could not be read: {line}"
            continue
        if line == b"[DONE]":
            if chunks or error:
                yield RecordedStream(f"{name}#{n}", tuple(chunks), error)
                n, chunks, error = n + 1, [], None
            continue
        if (chunks or error) and _is_start(line):
            yield RecordedStream(f"{name}#{n}", tuple(chunks), error)
            n, chunks, error = n + 1, [], None
        chunks.append(line)
    if chunks or error:
        yield RecordedStream(f"{name}#{n}", tuple(chunks), error)


#: A blank line: where one SSE event ends (``\r\n``, ``\n`` or ``\r`` line ends).
_EVENT_END = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")


def _sse_events(data: bytes) -> Iterator[bytes | ChunkDecodeError]:
    """The data of each event of an SSE file, or the ``ChunkDecodeError`` of an event the parser
    refused; after one, parsing starts afresh at the next event."""
    parser = SSEParser()
    pos = 0
    for end in _EVENT_END.finditer(data):
        block, pos = data[pos:end.end()], end.end()
        try:
            events = parser.feed(block)
        except ChunkDecodeError as exc:
            yield exc
            parser = SSEParser()
            continue
        for event in events:
            yield event.encode()
    try:
        events = parser.feed(data[pos:])
        parser.close()
    except ChunkDecodeError as exc:
        yield exc
    else:
        for event in events:
            yield event.encode()


def split_file(name: str, data: bytes) -> Iterator[RecordedStream]:
    """The streams of one file's ``data``; ``name`` is the file's path (``.sse``: SSE, else
    JSON lines), the prefix of their ids."""
    if name.endswith(".sse"):
        return _split(name, _sse_events(data))
    lines = (s for s in (raw.strip() for raw in data.split(b"\n")) if s)
    return _split(name, lines)


def _file_streams(path: Path) -> Iterator[RecordedStream]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidArgument(f"replay source {str(path)!r} cannot be read: {exc}") from exc
    return split_file(str(path), data)


def dangling(path: Path) -> RecordedStream:
    """The failed stream that reports a symbolic link in a corpus whose target is missing (or
    a loop of links): ``<path>#0``, so the report names it instead of skipping it."""
    try:
        target = str(path.readlink())
    except OSError:
        target = "?"
    return RecordedStream(f"{path}#0", (), (
        f"InvalidArgument: {str(path)!r} is a symbolic link to {target!r}, which does not "
        f"exist (or is a loop of links); nothing of it was replayed"))


def corpus_files(source: str | Path) -> tuple[list[Path], list[RecordedStream]]:
    """The recording files ``source`` stands for, in sorted order, and a failed stream per
    dangling symbolic link in it (see ``dangling``) — whatever its name: where it pointed is
    unknown, it may have been a file or a directory of recordings.

    Raises:
        InvalidArgument: ``source`` does not exist.
    """
    if "://" in str(source):
        raise InvalidArgument(f"replay source {str(source)!r} is a URI: URIs are read by the "
                              f"workers of a Ray replay (replay(..., ray=...), --ray); "
                              f"locally, give a path")
    path = Path(source)
    if path.is_dir():
        files, broken = [], []
        for p in sorted(path.rglob("*")):
            if p.is_symlink() and not p.exists():
                broken.append(dangling(p))
            elif p.suffix in SUFFIXES and p.is_file():
                files.append(p)
        return files, broken
    if path.is_symlink() and not path.exists():
        return [], [dangling(path)]
    if not path.exists():
        raise InvalidArgument(f"replay source {str(source)!r} does not exist (expected a "
                              f"JSON-lines or .sse file of chunks, or a directory of them)")
    return [path], []


def _words(text: str) -> list[str]:
    return _WORDS.findall(text) or [text]


def message_chunks(message: Message) -> list[dict[str, object]]:
    """The chunks (as Mastra JSON objects) that stream an assistant ``message`` again."""
    run = {"runId": message.id, "from": "AGENT"}
    out: list[dict[str, object]] = [{"type": "start", **run,
                                  "payload": {"id": "replay", "messageId": message.id}}]
    for n, part in enumerate(message.content.parts):
        if isinstance(part, (TextPart, ReasoningPart)):
            kind = "text" if isinstance(part, TextPart) else "reasoning"
            body = part.text if isinstance(part, TextPart) else part.reasoning
            pid = f"{kind[:3]}-{n}"
            out.append({"type": f"{kind}-start", **run, "payload": {"id": pid}})
            out.extend({"type": f"{kind}-delta", **run, "payload": {"id": pid, "text": w}}
                       for w in _words(body))
            out.append({"type": f"{kind}-end", **run, "payload": {"type": f"{kind}-end",
                                                                   "id": pid}})
        elif isinstance(part, ToolInvocationPart):
            call = part.tool_invocation
            ids = {"toolCallId": call.tool_call_id, "toolName": call.tool_name}
            out.append({"type": "tool-call", **run, "payload": {**ids, "args": call.args}})
            if call.state == "result":
                out.append({"type": "tool-result", **run, "payload": {
                    **ids, "result": call.result, "isError": False, "args": call.args}})
    out.append({"type": "finish", **run, "payload": {
        "messageId": message.id, "stepResult": {"reason": "stop", "isContinued": False},
        "metadata": {}, "output": {"usage": {}}, "messages": {"all": [], "user": [],
                                                              "nonUser": []}}})
    return out


async def _read_memory(source: MemorySource) -> list[RecordedStream]:
    encode = msgspec.json.Encoder().encode
    try:
        thread_ids = list(source.thread_ids)
        for resource_id in source.resource_ids:
            thread_ids += [t.id for t in await source.store.list_threads(resource_id)
                           if t.id not in thread_ids]
        streams = []
        for thread_id in thread_ids:
            for message in await source.store.get_messages(thread_id):
                if message.role == "assistant":
                    streams.append(RecordedStream(f"{thread_id}/{message.id}", tuple(
                        encode(c) for c in message_chunks(message))))
        return streams
    finally:
        if source.close:
            await source.store.close()


def _run_async(coro: Coroutine[object, object, T]) -> T:
    """Run ``coro`` to its end from sync code, also when this thread already runs a loop (a
    notebook): then on a helper thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    value: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            value.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    worker = threading.Thread(target=target, name="streamkit-replay-read")
    worker.start()
    worker.join()
    if error:
        raise error[0]
    return value[0]


def read_streams(sources: Iterable[object]) -> Iterator[RecordedStream]:
    """Every recorded stream of ``sources``, in order (see the module docstring).

    Args:
        sources: paths (``str``/``Path``: files or directories), ``MemorySource``s, or
            ``RecordedStream``s (passed through).

    Raises:
        InvalidArgument: a path that does not exist or cannot be read.
        InvalidType: a source of another kind.

    Example:
        >>> [s.id for s in read_streams(["recordings/run-1.jsonl"])]
        ['recordings/run-1.jsonl#0']
    """
    if isinstance(sources, (str, Path, MemorySource)):
        sources = [sources]
    for source in sources:
        if isinstance(source, RecordedStream):
            yield source
        elif isinstance(source, MemorySource):
            yield from _run_async(_read_memory(source))
        elif isinstance(source, (str, Path)):
            files, broken = corpus_files(source)
            yield from broken
            for path in files:
                yield from _file_streams(path)
        else:
            raise InvalidType(f"a replay source is a path, a MemorySource or a RecordedStream; "
                              f"got {type(source).__name__}")
