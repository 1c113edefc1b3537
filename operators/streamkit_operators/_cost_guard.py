"""``CostGuard``: a token and cost budget per request and across requests.

Mastra's ``TokenCostControl`` / ``CostGuardProcessor``, with its options Python-named. Mastra
reads estimated cost from its observability store; streamkit has none, so ``CostGuard`` keeps its
own ledger — counted with ``streamkit.tokens``, the counter ``ScriptedModel`` reports usage with
and which matches OpenAI's billed ``prompt_tokens`` — in a usage store (``InMemoryUsageStore``,
the default; ``SQLiteUsageStore`` for one machine; ``RedisUsageStore`` when processes on several
machines share a budget; ``_usage_stores`` describes the protocol).

A budget shared by requests in flight is a reservation, not a read-then-record:

1. ``process_llm_request`` (right before the model call, after every other processor changed
   the request) estimates the call — its prompt's tokens plus the output it may produce — and
   asks the store, in one atomic step, whether spend plus the reservations of calls in flight
   plus this estimate stays within the limits; if so the estimate is reserved, else the call
   is refused (``strategy="abort"``).
2. ``process_llm_response`` replaces the reservation with the call's real usage (a replayed
   step just releases it); ``process_api_error`` releases it (a retried call reserves again),
   and so does the end of the task that made it (a cancelled request) — whichever comes first.
3. A reservation nobody settles or releases (its process died, a later processor ended the run
   inside a long-lived task) expires after ``reservation_ttl``.

Mastra checks in ``processInputStep``; ``CostGuard`` checks in ``process_llm_request``, so the
estimate is of the request the model gets (after every processor edited it, with the step's
final model) and a reservation spans the model call and nothing else.

So the budget is exceeded by at most the amount real usage exceeds the estimates of the calls
in flight — nothing when ``output_tokens`` is an upper bound (a ``max_tokens`` setting) — never
by the number of requests in flight.

Both hooks are input-lane hooks: put it in ``input_processors``. Cached (replayed) steps cost
nothing and are not recorded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from streamkit import MessageList, Processor, Violation
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.tokens import TokenCounter, get_counter
from streamkit.validate import is_int, is_number, seconds

from ._aio import call_maybe_async
from ._model_check import check_choice
from ._usage_stores import InMemoryUsageStore, SQLiteUsageStore

__all__ = ["CostGuard", "Price", "InMemoryUsageStore", "SQLiteUsageStore", "WINDOWS"]

log = logging.getLogger("streamkit_operators")

#: Buckets per window: a check adds up at most this many running totals (plus one).
BUCKETS_PER_WINDOW = 64
#: Settings that bound a call's output tokens, in the order they are read.
_MAX_OUTPUT_SETTINGS = ("max_tokens", "max_output_tokens", "max_completion_tokens")

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


def _seconds(window: Any) -> float | None:
    if window is None:
        return None
    if isinstance(window, timedelta):
        return window.total_seconds()
    if is_number(window) and window > 0:
        return float(window)
    if isinstance(window, str) and window in WINDOWS:
        return WINDOWS[window]
    allowed = f"one of {', '.join(WINDOWS)}, a number of seconds > 0, a timedelta or None"
    if isinstance(window, str) or is_number(window):
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


@dataclass(slots=True)
class _Hold:
    """A reservation in flight: its ledger, its id, and the task whose end releases it."""

    ledger: str
    id: str
    task: asyncio.Task[Any] | None = None
    on_done: Callable[[Any], None] | None = field(default=None, repr=False)

    def detach(self) -> None:
        if self.task is not None and self.on_done is not None:
            self.task.remove_done_callback(self.on_done)
        self.task = self.on_done = None


class CostGuard(Processor):
    """Stops (or warns) before a model call that would take a scope over its token or cost
    budget; calls in flight hold reservations, so a burst cannot overrun a shared budget.

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
            Spend is kept in 64 buckets per window and counts while its bucket reaches into
            the window: it leaves the window up to 1/64 of it late, never early.
        strategy: ``"abort"`` (default; Mastra's ``"block"`` is accepted) trips the wire with
            metadata ``{"processorId", "usage": {"tokens", "estimatedCost", "costUnit"},
            "maxTokens", "maxCost", "scope", "scopeKey", "threshold": "hard", "breakdown"?}``;
            ``"warn"`` logs, calls ``on_violation`` once per request, and lets the call run.
        message: the tripwire reason, a template with ``{usage}``, ``{limit}``, ``{unit}``
            (``tokens`` or ``USD``) and ``{scope}``.
        warn_at_percent: a soft threshold (e.g. ``80``): once per request, the first time the
            projected spend reaches that share of a limit, a warning is logged and
            ``on_violation`` gets a ``Violation`` with ``detail["threshold"] == "soft"``.
        include_breakdown: add ``{"prior", "run", "next_call"}`` token/cost figures to metadata
            (``prior``: the scope's spend and reservations other than this run's).
        store: where the ledger is kept (default: a new ``InMemoryUsageStore``). A store with
            ``reserve``/``settle``/``release`` (the three shipped ones) gets the atomic
            reservation; one with only ``add(key, tokens, cost, at)`` and ``total(key,
            since)`` (sync or async) is read before the call and written after it, which
            concurrent requests can overrun.
        name: the guard's name: its ledger in the store is ``"<name>:<scope key>"``, so guards
            with different names keep different budgets and guards with one name (the same
            agent in many processes, or agents meant to share a budget) share one. Default:
            the processor ``id`` (``"cost-guard"``) — give each budget its own ``id`` or
            ``name``. Guards sharing a name must share the window. No ``:`` in a name.
        output_tokens: the output tokens a call is estimated (and reserved) at: an int, or
            ``fn(request_context) -> int``; default: the step's ``max_tokens`` (or
            ``max_output_tokens``) setting when it has one, else 0. A bound makes the budget
            hold exactly; below the real output, each call in flight can overrun it by the
            difference.
        reservation_ttl: seconds a reservation lives when nobody settles or releases it (its
            process died); longer than your slowest model call (default 600). A call that
            outlives it is still recorded when it ends.
        counter: the ``TokenCounter`` (default: the one for the step's model).
        on_violation: called with a ``Violation`` for soft thresholds, for ``"warn"``, and (by
            the runtime) for every tripwire this processor raises.
        clock: epoch seconds (``time.time``); tests inject one.
        id: processor id (default ``"cost-guard"``).

    Example:
        >>> guard = CostGuard(max_cost=5.0, pricing={"gpt-4o-mini": Price(0.15, 0.60)},
        ...                   scope="resource", window="24h", warn_at_percent=80,
        ...                   store=SQLiteUsageStore("usage.db"), name="support-budget")
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
                 store: Any = None, name: str | None = None,
                 output_tokens: int | Callable[[Any], Any] | None = None,
                 reservation_ttl: float = 600.0, counter: TokenCounter | None = None,
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
        ledger_name = self.id if name is None else name
        if not isinstance(ledger_name, str) or not ledger_name or ":" in ledger_name:
            raise InvalidArgument(f"the guard's name (name=, default its id) names its ledger: "
                                  f"a non-empty str without ':', got {ledger_name!r}")
        seconds(reservation_ttl, "reservation_ttl")
        if output_tokens is not None and not callable(output_tokens) and (
                not is_int(output_tokens) or output_tokens < 0):
            raise InvalidArgument(f"output_tokens must be an int >= 0 or "
                                  f"fn(request_context) -> int, got {output_tokens!r}")
        if name is not None:
            self.name = name
        self.ledger_name = ledger_name
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.pricing = pricing
        self.scope = scope
        self.window = _seconds(window)
        #: Seconds per running total (``None``: one total, for a guard without a window).
        self.bucket: int | None = None if self.window is None else max(
            1, math.ceil(self.window / BUCKETS_PER_WINDOW))
        self.strategy = "abort" if check_choice("strategy", strategy, STRATEGIES) == "block" \
            else strategy
        self.message = message
        self.warn_at_percent = warn_at_percent
        self.include_breakdown = include_breakdown
        self.store = InMemoryUsageStore() if store is None else store
        self.output_tokens = output_tokens
        self.reservation_ttl = float(reservation_ttl)
        self.counter = counter
        self.clock = clock
        self._atomic = all(callable(getattr(self.store, m, None))
                           for m in ("reserve", "settle", "release"))
        self._releasing: set[asyncio.Task[Any]] = set()
        if on_violation is not None:
            self.on_violation = on_violation

    def ledger(self, scope_key: str) -> str:
        """The store key of ``scope_key``'s ledger for this guard: ``"<name>:<scope key>"``.

        Example:
            >>> CostGuard(max_tokens=10).ledger("customer-42")
            'cost-guard:customer-42'
        """
        return f"{self.ledger_name}:{scope_key}"

    async def spent(self, scope_key: str) -> tuple[int, float]:
        """``(tokens, dollars)`` ``scope_key`` spent in this guard's window (reservations of
        calls in flight left out)."""
        since = None if self.window is None else self.clock() - self.window
        if not self._atomic:
            tokens, cost = await call_maybe_async(self.store.total, scope_key, since)
        else:
            tokens, cost = await call_maybe_async(
                lambda: self.store.total(self.ledger(scope_key), since, bucket=self.bucket))
        return int(tokens), float(cost)

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
        if not is_number(value) or value < 0:
            return None  # an invalid dynamic limit skips the check, as in Mastra
        return value

    def _expected_output(self, model_settings: Any, request_context: Any) -> int:
        value = self.output_tokens
        if callable(value):
            value = value(request_context)
        elif value is None and isinstance(model_settings, Mapping):
            value = next((model_settings[k] for k in _MAX_OUTPUT_SETTINGS
                          if model_settings.get(k) is not None), 0)
        if not is_int(value) or value < 0:
            return 0
        return value

    def _scope_key(self, message_list: Any, request_context: Any) -> tuple[str, str | None]:
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

    # -- reservations -------------------------------------------------------------------------

    def _hold(self, state: dict[str, Any], ledger: str) -> _Hold:
        hold = state["hold"] = _Hold(ledger, secrets.token_hex(8))
        task = asyncio.current_task()
        if task is not None:
            def on_done(_: Any, hold: _Hold = hold) -> None:
                # The request's task ended (cancelled, failed) with the call unsettled.
                hold.task = hold.on_done = None
                self._release_later(hold)
            hold.task, hold.on_done = task, on_done
            task.add_done_callback(on_done)
        return hold

    def _release_later(self, hold: _Hold) -> None:
        try:
            task = asyncio.get_running_loop().create_task(self._release(hold))
        except RuntimeError:  # no loop any more: the reservation expires by its TTL
            return
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _release(self, hold: _Hold | None) -> None:
        if hold is None:
            return
        hold.detach()
        try:
            await call_maybe_async(self.store.release, hold.ledger, hold.id)
        except Exception:  # noqa: BLE001 - the reservation then expires by its TTL
            log.exception("cost-guard: could not release a reservation on %s; it expires "
                          "after %gs", hold.ledger, self.reservation_ttl)

    # -- hooks --------------------------------------------------------------------------------

    async def process_llm_request(self, prompt: list[dict[str, Any]], message_list: MessageList,
                                  tools: Any, model: Any, model_settings: Any,
                                  state: dict[str, Any], abort: Any,
                                  request_context: Any) -> None:
        # An attempt that never reported (a stream tripwire, then a retry) holds no call now.
        await self._release(state.pop("hold", None))
        if "scope_key" not in state:
            scope, key = self._scope_key(message_list, request_context)
            state["scope"], state["scope_key"] = scope, key
            state["run_tokens"], state["run_cost"] = 0, 0.0
        max_tokens = self._limit(self.max_tokens, request_context)
        max_cost = self._limit(self.max_cost, request_context)
        if max_tokens is None and max_cost is None:
            return None
        key = state["scope_key"]
        counter = self._counter(model)
        next_in = counter.count_request(prompt, tools)
        next_out = self._expected_output(model_settings, request_context)
        next_tokens, next_cost = next_in + next_out, self.cost(model, next_in, next_out)
        run = (state["run_tokens"], state["run_cost"])
        used: tuple[int, float] = run  # the scope's spend and reservations before this call
        if key is not None:
            now = self.clock()
            since = None if self.window is None else now - self.window
            if self._atomic:
                ledger = self.ledger(key)
                hold = self._hold(state, ledger)
                try:
                    admitted, *spent = await call_maybe_async(
                        lambda: self.store.reserve(
                            ledger, hold.id, next_tokens, next_cost, at=now, since=since,
                            bucket=self.bucket, ttl=self.reservation_ttl,
                            max_tokens=max_tokens, max_cost=max_cost,
                            force=self.strategy == "warn"))
                except BaseException:
                    hold.detach()
                    state.pop("hold", None)
                    raise
                used = (int(spent[0]), float(spent[1]))
                if not admitted:  # refused: the store holds nothing for this call
                    hold.detach()
                    state.pop("hold", None)
            else:
                prior = await call_maybe_async(self.store.total, key, since)
                used = (int(prior[0]), float(prior[1]))
        tokens, cost = used[0] + next_tokens, used[1] + next_cost
        breakdown = {"prior": {"tokens": max(0, used[0] - run[0]),
                               "cost": max(0.0, used[1] - run[1]) if key else 0.0},
                     "run": {"tokens": run[0], "cost": run[1]},
                     "next_call": {"tokens": next_tokens, "cost": next_cost}}
        for spent_now, limit, unit in ((tokens, max_tokens, "tokens"), (cost, max_cost, "USD")):
            if limit is None:
                continue
            metadata = self._metadata(state, tokens, cost, max_tokens, max_cost, breakdown)
            if spent_now > limit:
                reason = self.message.format(usage=_fmt(spent_now, unit),
                                             limit=_fmt(limit, unit), unit=unit,
                                             scope=state["scope"])
                if self.strategy == "abort":
                    await self._release(state.pop("hold", None))  # refused: nothing held
                    abort(reason, metadata=metadata)
                await self._once(state, "hard", reason, metadata)
            elif self.warn_at_percent is not None and \
                    spent_now >= limit * self.warn_at_percent / 100:
                reason = (f"{self.warn_at_percent:g}% of the {unit} budget used: "
                          f"{_fmt(spent_now, unit)} of {_fmt(limit, unit)} ({state['scope']})")
                await self._once(state, "soft", reason, {**metadata, "threshold": "soft"})
        return None

    async def process_llm_response(self, request: Any, chunks: list[Any], from_cache: bool,
                                   model: Any, state: dict[str, Any]) -> None:
        hold: _Hold | None = state.pop("hold", None)
        if from_cache or request is None:
            await self._release(hold)
            return None
        if hold is not None:
            hold.detach()
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
        if key is None:
            return None
        if not self._atomic:
            await call_maybe_async(self.store.add, key, tokens, cost, self.clock())
            return None
        keep = None if self.window is None else self.window + (self.bucket or 0)
        await call_maybe_async(
            lambda: self.store.settle(self.ledger(key), None if hold is None else hold.id,
                                      tokens, cost, at=self.clock(), bucket=self.bucket,
                                      keep=keep))
        return None

    async def process_api_error(self, state: dict[str, Any]) -> None:
        # The call failed: it holds nothing now (a retry reserves again before calling).
        await self._release(state.pop("hold", None))
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
                processor_id=self.id, message=reason, detail=metadata, hook="process_llm_request"))
        except Exception:  # noqa: BLE001 - a broken callback must not change the run
            log.exception("cost-guard: on_violation raised; ignored")


def _fmt(value: float, unit: str) -> str:
    return f"${value:.4f}" if unit == "USD" else f"{int(value)}"
