"""A guard annotated with streamkit's hook argument types, checked with ``mypy --strict`` by
``tests/test_guard_authoring.py``: it must type-check, except the line marked ``# E: arg-type``."""

from __future__ import annotations

from typing import Any

from streamkit import Abort, Chunk, Processor, Writer
from streamkit.chunks import TextDelta


class NoDrafts(Processor):
    id = "no-drafts"

    def process_output_stream(self, part: Chunk, state: dict[str, Any], abort: Abort,
                              retry_count: int, writer: Writer) -> Chunk | None:
        if state.get("attempt") != retry_count:  # state lives for the request: reset per attempt
            state["attempt"], state["buffer"] = retry_count, ""
        if isinstance(part, TextDelta):
            state["buffer"] += part.payload.text
            if "draft" in state["buffer"]:
                abort("no drafts", retry=True, metadata={"attempt": retry_count})
        return part


def misuse(abort: Abort) -> None:
    abort("x", retry="yes")  # E: arg-type
