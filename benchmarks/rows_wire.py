"""Wire rows: ``streamkit.wire`` against raw msgspec and stdlib ``json``, per format.

What belongs here: one group per format (JSON, SSE, JSON lines, MessagePack), each encoding and
decoding the chunk mix of ``benchmarks.bench_wire.workload`` (a real agent run: text deltas
dominate, Mastra's own ``step-finish``/``finish`` payloads included). Contenders per format:

* **raw msgspec** (baseline): a module-level ``msgspec`` encoder on the same structs; decoding
  with the typed decoder chosen per item *outside* the timed loop (the tagged union, or
  ``DataChunk`` for ``data-*``) -- the floor streamkit's own work is measured against. SSE and
  JSON lines add their framing by hand (``b"data: " + body + b"\\n\\n"``, ``body + b"\\n"``).
* **streamkit**: the public functions (``wire.encode``/``decode``, ``encode_sse`` and
  ``SSEParser`` + ``decode``, ``encode_jsonl``/``decode_jsonl``, ``encode_msgpack``/
  ``decode_msgpack``).
* **stdlib json**: ``json.dumps`` of the equivalent dicts (built ahead, which flatters it) and
  ``json.loads`` to dicts (no structs built, which flatters it too); its ratio is taken against
  *streamkit*, so "≥ 4× faster than json" reads straight off the table. MessagePack has no
  stdlib twin and no json row.

Encoders return the total bytes they produced: streamkit and raw msgspec must agree exactly.

**SSE long lines**: one event whose single ``data:`` line is 1, 4 and 16 MiB, fed to
``SSEParser`` in 64 KiB reads as a client receives it. ``chunks`` is the line's size in MiB, so
µs/chunk reads as µs per MiB. Each size has a **floor** row (baseline): joining the reads and
decoding them into the one ``str`` any parser must build — the memory traffic that makes a
16 MiB line cost more per MiB than a 1 MiB one (it no longer fits in cache; fresh pages fault
in). ``SSEParser``'s ratio to the floor of its size stays flat for a linear parser; one that
rescans its buffer on every read (as before) grows with the line: ≈ 16× more per doubling of 4.
"""

from __future__ import annotations

import json
from typing import Any, Union

import msgspec

from streamkit import wire
from streamkit.chunks import CHUNK_TYPES, DataChunk

from .bench_wire import workload
from .harness import Case, Group

__all__ = ["wire_groups", "LONG_LINES"]

RAW = "raw msgspec"
SK = "streamkit"
JSON = "stdlib json"


def _raw_decoders(kind: str) -> tuple[Any, Any]:
    union = Union[tuple(CHUNK_TYPES.values())]  # type: ignore[valid-type]  # noqa: UP007
    mod = msgspec.json if kind == "json" else msgspec.msgpack
    return mod.Decoder(union).decode, mod.Decoder(DataChunk).decode


def _json_group(chunks: list[Any], dicts: list[Any], repeat: int) -> Group:
    n = len(chunks)
    raw_enc = msgspec.json.Encoder().encode
    union_dec, data_dec = _raw_decoders("json")
    lines = [wire.encode(c) for c in chunks]
    pairs = [(data_dec if c.__class__ is DataChunk else union_dec, b)
             for c, b in zip(chunks, lines)]
    total = sum(map(len, lines))
    encode, decode, dumps, loads = wire.encode, wire.decode, json.dumps, json.loads

    def enc_raw() -> int:
        return sum(len(raw_enc(c)) for c in chunks)

    def enc_sk() -> int:
        return sum(len(encode(c)) for c in chunks)

    def enc_json() -> int:
        return sum(len(dumps(d, separators=(",", ":")).encode()) for d in dicts)

    def dec_raw() -> int:
        return sum(1 for f, b in pairs if f(b) is not None)

    def dec_sk() -> int:
        return sum(1 for b in lines if decode(b) is not None)

    def dec_json() -> int:
        return sum(1 for b in lines if loads(b) is not None)

    return Group("wire · JSON", [
        Case(f"encode {RAW}", enc_raw, n, expect=total),
        Case(f"encode {SK}", enc_sk, n, baseline=f"encode {RAW}", expect=total),
        Case(f"encode {JSON}", enc_json, n, baseline=f"encode {SK}"),
        Case(f"decode {RAW}", dec_raw, n, expect=n),
        Case(f"decode {SK}", dec_sk, n, baseline=f"decode {RAW}", expect=n),
        Case(f"decode {JSON}", dec_json, n, baseline=f"decode {SK}", expect=n),
    ], repeat=repeat)


def _sse_group(chunks: list[Any], dicts: list[Any], repeat: int) -> Group:
    n = len(chunks)
    raw_enc = msgspec.json.Encoder().encode
    union_dec, data_dec = _raw_decoders("json")
    events = [wire.encode_sse(c) for c in chunks]
    body = b"".join(events)
    blocks = [body[i:i + 16384] for i in range(0, len(body), 16384)]
    total = len(body)
    kinds = [data_dec if c.__class__ is DataChunk else union_dec for c in chunks]
    encode_sse, decode, dumps, loads = wire.encode_sse, wire.decode, json.dumps, json.loads

    def enc_raw() -> int:
        return sum(len(b"data: " + raw_enc(c) + b"\n\n") for c in chunks)

    def enc_sk() -> int:
        return sum(len(encode_sse(c)) for c in chunks)

    def enc_json() -> int:
        return sum(len(b"data: " + dumps(d, separators=(",", ":")).encode() + b"\n\n")
                   for d in dicts)

    def dec_raw() -> int:
        # The floor: split the whole body on blank lines (no incremental parsing at all).
        items = body.split(b"\n\n")
        return sum(1 for f, ev in zip(kinds, items) if f(ev[6:]) is not None)

    def dec_sk() -> int:
        parser = wire.SSEParser()
        count = 0
        for block in blocks:  # as a client reads them: 16 KiB at a time, split anywhere
            for data in parser.feed(block):
                if decode(data) is not None:
                    count += 1
        parser.close()
        return count

    def dec_json() -> int:
        return sum(1 for ev in body.split(b"\n\n") if ev and loads(ev[6:]) is not None)

    return Group("wire · SSE", [
        Case(f"encode {RAW}", enc_raw, n, expect=total, note="b'data: ' + body + b'\\n\\n'"),
        Case(f"encode {SK}", enc_sk, n, baseline=f"encode {RAW}", expect=total),
        Case(f"encode {JSON}", enc_json, n, baseline=f"encode {SK}"),
        Case(f"decode {RAW}", dec_raw, n, expect=n, note="split on blank lines + typed decode"),
        Case(f"decode {SK}", dec_sk, n, baseline=f"decode {RAW}", expect=n,
             note="SSEParser.feed(16 KiB blocks) + wire.decode"),
        Case(f"decode {JSON}", dec_json, n, baseline=f"decode {SK}", expect=n),
    ], repeat=repeat)


def _jsonl_group(chunks: list[Any], dicts: list[Any], repeat: int) -> Group:
    n = len(chunks)
    raw_enc = msgspec.json.Encoder().encode
    union_dec, data_dec = _raw_decoders("json")
    doc = b"".join(wire.encode_jsonl(c) for c in chunks)
    total = len(doc)
    kinds = [data_dec if c.__class__ is DataChunk else union_dec for c in chunks]
    encode_jsonl, dumps, loads = wire.encode_jsonl, json.dumps, json.loads

    def enc_raw() -> int:
        return sum(len(raw_enc(c) + b"\n") for c in chunks)

    def enc_sk() -> int:
        return sum(len(encode_jsonl(c)) for c in chunks)

    def enc_json() -> int:
        return sum(len(dumps(d, separators=(",", ":")).encode() + b"\n") for d in dicts)

    # decode_jsonl returns the list of every chunk, so the baselines build their lists too.
    def dec_raw() -> int:
        return len([f(line) for f, line in zip(kinds, doc.split(b"\n"))])

    def dec_sk() -> int:
        return len(wire.decode_jsonl(doc))

    def dec_json() -> int:
        return len([loads(line) for line in doc.split(b"\n") if line])

    return Group("wire · JSON lines", [
        Case(f"encode {RAW}", enc_raw, n, expect=total),
        Case(f"encode {SK}", enc_sk, n, baseline=f"encode {RAW}", expect=total),
        Case(f"encode {JSON}", enc_json, n, baseline=f"encode {SK}"),
        Case(f"decode {RAW}", dec_raw, n, expect=n, note="split + typed decode into a list"),
        Case(f"decode {SK}", dec_sk, n, baseline=f"decode {RAW}", expect=n,
             note="wire.decode_jsonl(document) -> list"),
        Case(f"decode {JSON}", dec_json, n, baseline=f"decode {SK}", expect=n),
    ], repeat=repeat)


def _msgpack_group(chunks: list[Any], repeat: int) -> Group:
    n = len(chunks)
    raw_enc = msgspec.msgpack.Encoder().encode
    union_dec, data_dec = _raw_decoders("msgpack")
    blobs = [wire.encode_msgpack(c) for c in chunks]
    pairs = [(data_dec if c.__class__ is DataChunk else union_dec, b)
             for c, b in zip(chunks, blobs)]
    total = sum(map(len, blobs))
    encode, decode = wire.encode_msgpack, wire.decode_msgpack

    def enc_raw() -> int:
        return sum(len(raw_enc(c)) for c in chunks)

    def enc_sk() -> int:
        return sum(len(encode(c)) for c in chunks)

    def dec_raw() -> int:
        return sum(1 for f, b in pairs if f(b) is not None)

    def dec_sk() -> int:
        return sum(1 for b in blobs if decode(b) is not None)

    return Group("wire · MessagePack", [
        Case(f"encode {RAW}", enc_raw, n, expect=total),
        Case(f"encode {SK}", enc_sk, n, baseline=f"encode {RAW}", expect=total),
        Case(f"decode {RAW}", dec_raw, n, expect=n),
        Case(f"decode {SK}", dec_sk, n, baseline=f"decode {RAW}", expect=n),
    ], repeat=repeat)


LONG_LINES = "wire · SSE long lines"


def _long_line_group(sizes_mib: tuple[int, ...], repeat: int) -> Group:
    read = 64 * 1024
    cases = []
    for mib in sizes_mib:
        body = b"data: " + b"x" * (mib << 20) + b"\n\n"
        blocks = [body[i:i + read] for i in range(0, len(body), read)]

        def floor(blocks: list[bytes] = blocks) -> int:
            return len(b"".join(blocks).decode("utf-8", "replace")[6:-2])

        def parse(blocks: list[bytes] = blocks) -> int:
            parser = wire.SSEParser(max_event_bytes=64 << 20)
            size = 0
            for block in blocks:
                for data in parser.feed(block):
                    size += len(data)
            parser.close()
            return size

        base = f"floor · {mib} MiB line"
        cases.append(Case(base, floor, mib, expect=mib << 20, memory=False,
                          note="b''.join(reads).decode()[6:-2]; chunks = MiB"))
        cases.append(Case(f"SSEParser · {mib} MiB line", parse, mib, baseline=base,
                          expect=mib << 20, memory=False,
                          note="SSEParser.feed(64 KiB reads) of one data line; chunks = MiB"))
    return Group(LONG_LINES, cases, repeat=repeat)


def wire_groups(n: int, repeat: int, long_lines_mib: tuple[int, ...] = (1, 4, 16)
                ) -> list[Group]:
    """The four wire groups over ``n`` chunks of ``bench_wire.workload``, then SSE parsing of
    one long line of each size in ``long_lines_mib``."""
    chunks = workload(n)
    dicts = [wire.to_builtins(c) for c in chunks]
    return [_json_group(chunks, dicts, repeat), _sse_group(chunks, dicts, repeat),
            _jsonl_group(chunks, dicts, repeat), _msgpack_group(chunks, repeat),
            _long_line_group(long_lines_mib, repeat)]
