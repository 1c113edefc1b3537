"""Pipelines the replay tests name as ``tests.replay_pipelines:ATTRIBUTE`` (importable by worker
processes and Ray tasks, which rebuild the pipeline from that name)."""

from __future__ import annotations

from typing import Any

from streamkit import ops
from streamkit_operators import PIIDetector

FORBIDDEN = "FORBIDDEN"


def is_reasoning(part: Any) -> bool:
    return part.type == "reasoning-delta"


def american(text: str) -> str:
    return text.replace("colour", "color")


def forbidden(part: Any) -> bool:
    return part.type == "text-delta" and FORBIDDEN in part.payload.text


def guards() -> list[Any]:
    """A factory: reasoning dropped, spelling rewritten, e-mail addresses redacted (held back
    until a value is complete), a forbidden word trips the wire."""
    return [ops.drop(is_reasoning, id="drop-reasoning"),
            ops.map_text(american, id="american"),
            PIIDetector(detection_types=["email"], id="pii"),
            ops.abort(forbidden, "forbidden word", id="forbidden")]


PIPELINE = guards()
