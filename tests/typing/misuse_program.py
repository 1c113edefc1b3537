"""Mistakes a user's type checker must catch (``tests/test_user_typing.py`` expects each error).

Each line marked ``# E: <code>`` must be reported by ``mypy --strict`` with that error code.
"""

from __future__ import annotations

from streamkit import Chunk, tool


@tool
def lookup_customer(customer_id: str) -> dict[str, str]:
    """Look up a customer by id."""
    return {"id": customer_id}


def read(part: Chunk) -> str:
    return part.payload.text  # E: union-attr


lookup_customer(42)  # E: arg-type
lookup_customer("C-42", "extra")  # E: call-arg
count: int = lookup_customer("C-42")  # E: assignment
