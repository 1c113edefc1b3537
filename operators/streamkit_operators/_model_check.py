"""Plumbing shared by the model-backed processors: ask a model for a JSON answer, and apply the
processor's ``error_strategy`` when that fails.

What belongs here: option validation, the one model call (``streamkit.models.complete``) and the
parsing of its answer, and the ``warn`` / ``strict`` policy. What does not: any processor's own
prompt or decision logic.

``error_strategy``:

* ``"warn"`` — the check fails **open**: a warning is logged and the content passes unchecked.
* ``"strict"`` — the check fails **closed**: the processor aborts the run (a tripwire whose
  reason starts with ``"<Name> failed:"`` and whose metadata holds the error).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection
from typing import Any, NoReturn

from streamkit.errors import StreamkitError
from streamkit.models import complete
from streamkit.validate import one_of

__all__ = ["ERROR_STRATEGIES", "check_choice", "ask_json", "parse_json", "on_check_failure",
           "ModelAnswerError"]

log = logging.getLogger("streamkit_operators")

ERROR_STRATEGIES = ("warn", "strict")

# Possessive language tag and whitespace: a closing fence cannot start inside them, so giving
# them back never helps, and without a closing fence the search stays linear (with backtracking
# into them it was quadratic in a run of spaces after an opening fence).
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*+\s*+\n?(.*?)\n?```", re.S)


class ModelAnswerError(StreamkitError, ValueError):
    """A model answered, but not with what it was asked for (no JSON object, a missing key, a
    value that does not fit the schema). A ``StreamkitError``, and a ``ValueError`` as before."""


def check_choice(name: str, value: Any, allowed: Collection[str]) -> str:
    """``value`` if it is one of ``allowed``; else ``InvalidArgument`` naming the choices.

    Example:
        >>> check_choice("strategy", "warn", ("block", "warn"))
        'warn'
    """
    return str(one_of(value, name, tuple(allowed)))


def parse_json(text: str) -> Any:
    """The JSON value in a model's answer: bare, inside a ```json fence, or the outermost
    ``{...}`` of a chatty answer.

    Raises:
        ModelAnswerError: no JSON object could be read.

    Example:
        >>> parse_json('Sure! ```json\\n{"a": 1}\\n```')
        {'a': 1}
    """
    body = text.strip()
    fenced = _FENCE.search(body)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(body)
    start, end = body.find("{"), body.rfind("}")
    if 0 <= start < end:
        candidates.append(body[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ModelAnswerError(f"expected a JSON object, got {text[:120]!r}")


async def ask_json(model: Any, content: str, *, instructions: str,
                   schema: dict[str, Any] | None = None,
                   model_settings: dict[str, Any] | None = None) -> Any:
    """Ask ``model`` about ``content`` and return its answer parsed as JSON.

    The schema is sent as ``structured_output`` (providers that support it enforce it) and the
    call runs at temperature 0 unless ``model_settings`` says otherwise.

    Raises:
        APICallError: the call failed.
        ModelAnswerError: the answer is not JSON.
    """
    settings = {"temperature": 0, **(model_settings or {})}
    answer = await complete(model, content, system=instructions, model_settings=settings,
                            structured_output=schema)
    return parse_json(answer)


def on_check_failure(name: str, exc: BaseException, error_strategy: str,
                     abort: Callable[..., NoReturn], *, retry: bool = False) -> None:
    """Apply ``error_strategy`` to a failed check: ``strict`` aborts (``"<name> failed: ..."``,
    metadata ``{"error": ..., "errorType": ...}``), ``warn`` logs and returns (fail open)."""
    if error_strategy == "strict":
        abort(f"{name} failed: {exc}", retry=retry,
              metadata={"error": str(exc), "errorType": type(exc).__name__})
    log.warning("%s failed, letting the content through (error_strategy='warn'): %s: %s",
                name, type(exc).__name__, exc)
