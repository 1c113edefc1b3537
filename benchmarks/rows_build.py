"""Building chunks: the public constructors against plain msgspec Structs of the same fields.

What belongs here: one group, each row building ``n`` text deltas (four fields: ``id``, ``text``,
``run_id``, ``from_``) in a plain loop and keeping the last:

* **plain msgspec Structs** (the baseline): a tagged chunk struct and a payload struct with the
  same fields, defaults and options as ``TextDelta``/``TextDeltaPayload``, but no metaclass;
* **TextDelta(id=, text=, run_id=, from_=)**: the flattened constructor;
* **TextDelta(payload=..., run_id=, from_=)**: the payload form (payload built in the loop too);
* **Stamper**: ``Stamper(TextDelta, run_id=...)(TextDeltaPayload(...))``, the providers' path.

What does not: encoding (``benchmarks.rows_wire``).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from streamkit.chunks import Stamper, TextDelta, TextDeltaPayload

from .harness import Case, Group

__all__ = ["build_groups", "PLAIN"]

PLAIN = "plain msgspec Structs"


class _PlainPayload(msgspec.Struct, kw_only=True, gc=False, omit_defaults=True, frozen=True,
                    forbid_unknown_fields=True):
    id: str
    text: str
    provider_metadata: dict[str, Any] | UnsetType = msgspec.field(default=UNSET,
                                                                  name="providerMetadata")
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class _PlainDelta(msgspec.Struct, kw_only=True, gc=False, frozen=True, tag="text-delta",
                  tag_field="type", forbid_unknown_fields=True):
    run_id: str | UnsetType = msgspec.field(default=UNSET, name="runId")
    from_: str | UnsetType = msgspec.field(default=UNSET, name="from")
    metadata: dict[str, Any] | UnsetType = UNSET
    payload: _PlainPayload


def build_groups(n: int, repeat: int) -> list[Group]:
    texts = [f"w{i % 50} " for i in range(n)]

    def plain() -> int:
        c = None
        for t in texts:
            c = _PlainDelta(payload=_PlainPayload(id="t", text=t), run_id="r", from_="AGENT")
        return len(texts) if c is not None else 0

    def flat() -> int:
        c = None
        for t in texts:
            c = TextDelta(id="t", text=t, run_id="r", from_="AGENT")
        return len(texts) if c is not None else 0

    def with_payload() -> int:
        c = None
        for t in texts:
            c = TextDelta(payload=TextDeltaPayload(id="t", text=t), run_id="r", from_="AGENT")
        return len(texts) if c is not None else 0

    def stamped() -> int:
        stamp = Stamper(TextDelta, run_id="r")
        c = None
        for t in texts:
            c = stamp(TextDeltaPayload(id="t", text=t))
        return len(texts) if c is not None else 0

    return [Group(f"chunks · building {n:,} text deltas", [
        Case(PLAIN, plain, n, expect=n, note="same fields and options, no metaclass"),
        Case("TextDelta(id=, text=, run_id=, from_=)", flat, n, baseline=PLAIN, expect=n),
        Case("TextDelta(payload=..., run_id=, from_=)", with_payload, n, baseline=PLAIN,
             expect=n),
        Case("Stamper(TextDelta)(payload)", stamped, n, baseline=PLAIN, expect=n),
    ], repeat=repeat)]
