"""Users' functions handed to ``ops`` (issue 32): typed on the chunk class they handle, checked.

``tests/test_user_typing.py`` expects each line marked ``# E: <code>`` to be reported by
``mypy --strict`` with that code, and the unmarked lines to be clean. A function typed on one
chunk class (``def up(c: TextDelta) -> TextDelta``) is accepted where the ``types=`` gate sends
it only that class; sync and ``async`` functions alike. A function whose parameter is not a
chunk, or whose result is not what the operator takes, is an error. The program also runs.
"""

from __future__ import annotations

import asyncio

from streamkit import Chunk, ops
from streamkit.chunks import TextDelta, ToolCall


def shout(c: TextDelta) -> TextDelta:
    return ops.with_text(c, c.payload.text.upper())


async def shout_later(c: TextDelta) -> TextDelta | None:
    return ops.with_text(c, c.payload.text.upper()) if c.payload.text else None


def is_lookup(c: ToolCall) -> bool:
    return c.payload.tool_name == "lookup"


async def is_empty(c: TextDelta) -> bool:
    return not c.payload.text


def twice(c: TextDelta) -> list[TextDelta]:
    return [c, c]


def count(acc: int, c: TextDelta) -> int:
    return acc + len(c.payload.text)


def log(c: Chunk) -> None:
    print(c.type)


def length(text: str) -> int:
    return len(text)


def by_text(c: str) -> str:
    return c


def exclaim(text: str) -> str:
    return text + "!"


pipeline = (ops.map(shout, types="text-delta") | ops.map(shout_later, types="text-delta")
            | ops.drop(is_lookup, types="tool-call") | ops.filter(is_empty, types="text-delta")
            | ops.flat_map(twice, types="text-delta") | ops.scan(count, 0, types="text-delta")
            | ops.tap(log) | ops.map_text(exclaim) | ops.take_while(lambda c: c.type != "finish")
            | ops.abort(is_lookup, types="tool-call"))

ops.map(length)  # E: type-var
ops.map(by_text)  # E: type-var
ops.filter(by_text)  # E: type-var
ops.flat_map(shout)  # E: type-var
ops.map_text(length)  # E: arg-type
ops.scan(count, "zero")  # E: arg-type
ops.map(lambda c: 42)  # E: type-var


async def main() -> list[str]:
    parts: list[Chunk] = [TextDelta(id="t", text="hi")]
    out: list[str] = []
    async for chunk in ops.apply(parts, ops.map(shout, types="text-delta")
                                 | ops.flat_map(twice, types="text-delta")):
        if isinstance(chunk, TextDelta):
            out.append(chunk.payload.text)
    return out


if __name__ == "__main__":
    print(asyncio.run(main()))
