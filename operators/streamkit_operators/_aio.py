"""One helper the processors share: call something that may be sync or async.

Stores, caches and callbacks users pass in may be either; these are called once per request or
per step (never per chunk), so checking the result is cheap enough here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["call_maybe_async"]


async def call_maybe_async(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, awaited when it returns an awaitable."""
    out = fn(*args)
    return await out if inspect.isawaitable(out) else out
