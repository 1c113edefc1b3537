"""``CostGuard``: a token and cost budget per request and across requests.

Mastra's ``TokenCostControl`` / ``CostGuardProcessor`` (``processInputStep``), with its options
Python-named. Mastra reads estimated cost from its observability store; streamkit has none, so
``CostGuard`` keeps its own ledger: after every live model call it records the call's tokens —
counted with ``streamkit.tokens``, the counter ``ScriptedModel`` reports usage with and which
matches OpenAI's billed ``prompt_tokens`` — in a ``UsageStore`` (in memory, the default; SQLite
for one machine; ``RedisUsageStore`` from ``_redis`` when processes on several machines share a
budget), keyed by scope. Before every model call it adds the tokens the coming prompt will
cost to what the scope already spent in the window, and compares that with the limits.

Both hooks are input-lane hooks: put it in ``input_processors``. Cached (replayed) steps cost
nothing and are not recorded.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from streamkit import MessageList, Processor, Violation
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.tokens import TokenCounter, get_counter

from ._aio import call_maybe_async
from ._model_check import check_choice

__all__ = ["CostGuard", "Price", "InMemoryUsageStore", "SQLiteUsageStore", "WINDOWS"]

log = logging.getLogger("streamkit_operators")

#: Mastra's named windows, in seconds.
WINDOWS = {"1h": 3600.0, "6h": 6 * 3600.0, "24h": 86400.0, "7d": 7 * 86400.0,
           "30d": 30 * 86400.0, "365d": 365 * 86400.0}
STRATEGIES = ("abort", "block", "warn")
SCOPES = ("run", "resource", "thread")
DEFAULT_MESSAGE = "Budget exceeded: {usage} of {limit} {unit} ({scope})"


@dataclass(frozen=True, slots=True)
class Price:
    """A model's price in US dollars per million tokens.

    Example:
        >>> Price(input_per_million=0.15, output_per_million=0.60).cost(1_000_000, 0)
        0.15
    """

    input_per_million: float
    output_per_million: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Dollars for that many input and output tokens."""
        return (input_tokens * self.input_per_million
                + output_tokens * self.output_per_million) / 1_000_000


class InMemoryUsageStore:
    """Usage records in this process: ``add`` one, ``total`` a scope since a time.

    Example:
        >>> store = InMemoryUsageStore()
        >>> store.add("user-1", 120, 0.0002, at=1000.0)
        >>> store.total("user-1", since=900.0)
        (120, 0.0002)
    """

    def __init__(self) -> None:
        self._rows: dict[str, list[tuple[float, int, float]]] = {}
        self._lock = threading.Lock()

    def add(self, scope_key: str, tokens: int, cost: float, at: float) -> None:
        """Record ``tokens`` and ``cost`` for ``scope_key`` at time ``at`` (epoch seconds)."""
        with self._lock:
            self._rows.setdefault(scope_key, []).append((at, tokens, cost))

    def total(self, scope_key: str, since: float | None = None) -> tuple[int, float]:
        """``(tokens, cost)`` recorded for ``scope_key`` at or after ``since``."""
        with self._lock:
            rows = [r for r in self._rows.get(scope_key, ()) if since is None or r[0] >= since]
        return sum(r[1] for r in rows), sum(r[2] for r in rows)


class SQLiteUsageStore:
    """Usage records in a SQLite file (stdlib ``sqlite3``): shared by processes and restarts.

    Args:
        path: the database file (created when missing), or ``":memory:"``.
        timeout: seconds to wait for another connection's lock.

    Example:
        >>> guard = CostGuard(max_tokens=200_000, store=SQLiteUsageStore("usage.db"))
    """

    def __init__(self, path: str | Path, *, timeout: float = 5.0) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS cost_guard_usage (scope_key TEXT NOT NULL, "
                         "at REAL NOT NULL, tokens INTEGER NOT NULL, cost REAL NOT NULL)")
        self._db.execute("CREATE INDEX IF NOT EXISTS cost_guard_usage_scope "
                         "ON cost_guard_usage (scope_key, at)")

    def add(self, scope_key: str, tokens: int, cost: float, at: float) -> None:
        """Record ``tokens`` and ``cost`` for ``scope_key`` at time ``at`` (epoch seconds)."""
        with self._lock:
            self._db.execute("INSERT INTO cost_guard_usage (scope_key, at, tokens, cost) "
                             "VALUES (?, ?, ?, ?)", (scope_key, at, tokens, cost))

    def total(self, scope_key: str, since: float | None = None) -> tuple[int, float]:
        """``(tokens, cost)`` recorded for ``scope_key`` at or after ``since``."""
        with self._lock:
            row = self._db.execute(
                "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) FROM "
                "cost_guard_usage WHERE scope_key = ? AND at >= ?",
                (scope_key, float("-inf") if since is None else since)).fetchone()
        return int(row[0]), float(row[1])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def _seconds(window: Any) -> float | None:
    if window is None:
        return None
    if isinstance(window, timedelta):
        return window.total_seconds()
    if isinstance(window, (int, float)) and not isinstance(window, bool) and window > 0:
        return float(window)
    if isinstance(window, str) and window in WINDOWS:
        return WINDOWS[window]
    allowed = f"one of {', '.join(WINDOWS)}, a number of seconds > 0, a timedelta or None"
    if isinstance(window, (str, int, float)) and not isinstance(window, bool):
        raise InvalidArgument(f"window must be {allowed}; got {window!r}")
    raise InvalidType(f"window must be {allowed}; got {type(window).__name__} {window!r}")


def _output_text(chunks: list[Any]) -> tuple[str, list[tuple[str, str]]]:
    texts: list[str] = []
    calls: list[tuple[str, str]] = []
    for chunk in chunks:
        kind = chunk.type
        if kind in ("text-delta", "reasoning-delta"):
            texts.append(chunk.payload.text)
        elif kind == "tool-call":
            args = chunk.payload.args
            calls.append((chunk.payload.tool_name,
                          args if isinstance(args, str) else json.dumps(args)))
    return "".join(texts), calls


class CostGuard(Processor):
    """Stops (or warns) before a model call that would take a scope over its token or cost
    budget.

    Args:
        max_tokens: token budget (input + output) for the scope and window; an int, or
            ``fn(request_context) -> int | None`` (``None``/invalid: no token limit this call).
        max_cost: dollar budget, the same way; needs ``pricing``.
        pricing: a ``Price`` for every model, a ``{model_id: Price}`` dict (``"*"`` is the
            default entry; router ids like ``"openai/gpt-4o"`` and bare ids both match), or
            ``fn(model_id, input_tokens, output_tokens) -> dollars``.
        scope: ``"resource"`` (default, the request's ``resource_id``), ``"thread"``, ``"run"``
            (this request only) or ``fn(request_context) -> str | None``. A request with no
            key for its scope is limited as ``"run"``.
        window: how far back the scope's spend counts: ``"1h"``, ``"6h"``, ``"24h"``, ``"7d"``
            (default), ``"30d"``, ``"365d"``, seconds, a ``timedelta``, or ``None`` (forever).
        strategy: ``"abort"`` (default; Mastra's ``"block"`` is accepted) trips the wire with
            metadata ``{"processorId", "usage": {"tokens", "estimatedCost", "costUnit"},
            "maxTokens", "maxCost", "scope", "scopeKey", "threshold": "hard", "breakdown"?}``;
            ``"warn"`` logs, calls ``on_violation`` once per request, and lets the call run.
        message: the tripwire reason, a template with ``{usage}``, ``{limit}``, ``{unit}``
            (``tokens`` or ``USD``) and ``{scope}``.
        warn_at_percent: a soft threshold (e.g. ``80``): once per request, the first time the
            projected spend reaches that share of a limit, a warning is logged and
            ``on_violation`` gets a ``Violation`` with ``detail["threshold"] == "soft"``.
        include_breakdown: add ``{"prior", "run", "next_call"}`` token/cost figures to metadata.
        store: where usage is kept (default: a new ``InMemoryUsageStore``); anything with
            ``add(scope_key, tokens, cost, at)`` and ``total(scope_key, since)``, sync or async.
        counter: the ``TokenCounter`` (default: the one for the step's model).
        on_violation: called with a ``Violation`` for soft thresholds, for ``"warn"``, and (by
            the runtime) for every tripwire this processor raises.
        clock: epoch seconds (``time.time``); tests inject one.
        id: processor id (default ``"cost-guard"``).

    Example:
        >>> guard = CostGuard(max_cost=5.0, pricing={"gpt-4o-mini": Price(0.15, 0.60)},
        ...                   scope="resource", window="24h", warn_at_percent=80,
        ...                   store=SQLiteUsageStore("usage.db"))
        >>> agent = Agent(id="a", model="openai/gpt-4o-mini", input_processors=[guard])
        >>> await agent.generate("hi", resource_id="customer-42")
    """

    id = "cost-guard"
    name = "Cost Guard"

    def __init__(self, *, max_tokens: int | Callable[[Any], Any] | None = None,
                 max_cost: float | Callable[[Any], Any] | None = None, pricing: Any = None,
                 scope: str | Callable[[Any], Any] = "resource", window: Any = "7d",
                 strategy: str = "abort", message: str = DEFAULT_MESSAGE,
                 warn_at_percent: float | None = None, include_breakdown: bool = False,
                 store: Any = None, counter: TokenCounter | None = None,
                 on_violation: Callable[[Violation], Any] | None = None,
                 clock: Callable[[], float] = time.time, id: str | None = None) -> None:
        super().__init__(id)
        if max_tokens is None and max_cost is None:
            raise InvalidArgument("CostGuard needs max_tokens= and/or max_cost=; both are None")
        if max_cost is not None and pricing is None:
            raise InvalidArgument("max_cost needs pricing= (a Price, a {model_id: Price} dict "
                                  "or a function) to turn tokens into dollars; pricing is None")
        if not callable(scope):
            check_choice("scope", scope, SCOPES)
        if warn_at_percent is not None and not 0 < warn_at_percent <= 100:
            raise InvalidArgument(f"warn_at_percent must be in (0, 100], got {warn_at_percent}")
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.pricing = pricing
        self.scope = scope
        self.window = _seconds(window)
        self.strategy = "abort" if check_choice("strategy", strategy, STRATEGIES) == "block" \
            else strategy
        self.message = message
        self.warn_at_percent = warn_at_percent
        self.include_breakdown = include_breakdown
        self.store = InMemoryUsageStore() if store is None else store
        self.counter = counter
        self.clock = clock
        if on_violation is not None:
            self.on_violation = on_violation

    # -- pricing and limits -------------------------------------------------------------------

    def cost(self, model: Any, input_tokens: int, output_tokens: int) -> float:
        """Dollars for a call to ``model``; 0 when no price is known for it."""
        pricing = self.pricing
        if pricing is None:
            return 0.0
        model_id = str(getattr(model, "model_id", model) or "")
        if callable(pricing) and not isinstance(pricing, Price):
            return float(pricing(model_id, input_tokens, output_tokens))
        price = pricing
        if isinstance(pricing, Mapping):
            price = pricing.get(model_id) or pricing.get(model_id.rsplit("/", 1)[-1]) \
                or pricing.get("*")
        return price.cost(input_tokens, output_tokens) if isinstance(price, Price) else 0.0

    @staticmethod
    def _limit(value: Any, request_context: Any) -> float | None:
        if callable(value):
            value = value(request_context)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return None  # an invalid dynamic limit skips the check, as in Mastra
        return value

    def _scope_key(self, message_list: MessageList, request_context: Any) -> tuple[str, str | None]:
        scope = self.scope
        if callable(scope):
            key = scope(request_context)
            return ("custom", None if key is None else str(key))
        if scope == "resource":
            return scope, getattr(message_list, "resource_id", None)
        if scope == "thread":
            return scope, getattr(message_list, "thread_id", None)
        return "run", None

    def _counter(self, model: Any) -> TokenCounter:
        return self.counter or get_counter(model)

    # -- hooks --------------------------------------------------------------------------------

    async def process_input_step(self, message_list: MessageList, tools: Any, model: Any,
                                 state: dict[str, Any], abort: Any, request_context: Any,
                                 step_number: int) -> None:
        if "scope_key" not in state:
            scope, key = self._scope_key(message_list, request_context)
            state["scope"], state["scope_key"] = scope, key
            state["run_tokens"], state["run_cost"] = 0, 0.0
        max_tokens = self._limit(self.max_tokens, request_context)
        max_cost = self._limit(self.max_cost, request_context)
        if max_tokens is None and max_cost is None:
            return None
        key = state["scope_key"]
        prior = (0, 0.0)
        if key is not None:
            since = None if self.window is None else self.clock() - self.window
            prior = await call_maybe_async(self.store.total, key, since)
        next_tokens = self._counter(model).count_request(message_list.prompt(), tools)
        next_cost = self.cost(model, next_tokens, 0)
        tokens = prior[0] + state["run_tokens"] + next_tokens
        cost = prior[1] + state["run_cost"] + next_cost
        breakdown = {"prior": {"tokens": prior[0], "cost": prior[1]},
                     "run": {"tokens": state["run_tokens"], "cost": state["run_cost"]},
                     "next_call": {"tokens": next_tokens, "cost": next_cost}}
        for used, limit, unit in ((tokens, max_tokens, "tokens"), (cost, max_cost, "USD")):
            if limit is None:
                continue
            metadata = self._metadata(state, tokens, cost, max_tokens, max_cost, breakdown)
            if used > limit:
                reason = self.message.format(usage=_fmt(used, unit), limit=_fmt(limit, unit),
                                             unit=unit, scope=state["scope"])
                if self.strategy == "abort":
                    abort(reason, metadata=metadata)
                await self._once(state, "hard", reason, metadata)
            elif self.warn_at_percent is not None and used >= limit * self.warn_at_percent / 100:
                reason = (f"{self.warn_at_percent:g}% of the {unit} budget used: "
                          f"{_fmt(used, unit)} of {_fmt(limit, unit)} ({state['scope']})")
                await self._once(state, "soft", reason, {**metadata, "threshold": "soft"})
        return None

    async def process_llm_response(self, request: Any, chunks: list[Any], from_cache: bool,
                                   model: Any, state: dict[str, Any]) -> None:
        if from_cache or request is None:
            return None
        counter = self._counter(model)
        text, calls = _output_text(chunks)
        input_tokens = counter.count_request(request.prompt, request.tools)
        output_tokens = counter.count_text(text) + sum(
            counter.count_text(name) + counter.count_text(args) for name, args in calls)
        tokens = input_tokens + output_tokens
        cost = self.cost(model, input_tokens, output_tokens)
        state["run_tokens"] = state.get("run_tokens", 0) + tokens
        state["run_cost"] = state.get("run_cost", 0.0) + cost
        key = state.get("scope_key")
        if key is not None:
            await call_maybe_async(self.store.add, key, tokens, cost, self.clock())
        return None

    # -- helpers ------------------------------------------------------------------------------

    def _metadata(self, state: dict[str, Any], tokens: int, cost: float, max_tokens: Any,
                  max_cost: Any, breakdown: dict[str, Any]) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "processorId": self.id,
            "usage": {"tokens": tokens, "estimatedCost": cost, "costUnit": "usd"},
            "maxTokens": max_tokens, "maxCost": max_cost, "scope": state["scope"],
            "threshold": "hard"}
        if state["scope_key"] is not None:
            metadata["scopeKey"] = state["scope_key"]
        if self.include_breakdown:
            metadata["breakdown"] = breakdown
        return metadata

    async def _once(self, state: dict[str, Any], level: str, reason: str,
                    metadata: dict[str, Any]) -> None:
        """Warn and tell ``on_violation`` once per request and level."""
        flag = f"warned_{level}"
        if state.get(flag):
            return
        state[flag] = True
        log.warning("cost-guard: %s", reason)
        callback = getattr(self, "on_violation", None)
        if callback is None:
            return
        try:
            await call_maybe_async(callback, Violation(
                processor_id=self.id, message=reason, detail=metadata, hook="process_input_step"))
        except Exception:  # noqa: BLE001 - a broken callback must not change the run
            log.exception("cost-guard: on_violation raised; ignored")


def _fmt(value: float, unit: str) -> str:
    return f"${value:.4f}" if unit == "USD" else f"{int(value)}"
