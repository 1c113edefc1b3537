"""Tracing is an observer of a run's events (``streamkit.events``): the span tree is built from
the events alone — the same spans come out of events recorded and read back from their JSON —
the tracing package imports nothing of the agent, and an observer's ``tool_context`` is entered
around each tool's work."""

from __future__ import annotations

import ast
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import msgspec
import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk (test extra) missing")

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402

from streamkit import Agent, tool  # noqa: E402
from streamkit.events import EventLog, ToolCalled, decode_event  # noqa: E402
from streamkit.testing import ScriptedModel, api_error, text, tool_call  # noqa: E402
from streamkit.tracing import _settings, _spans, instrument  # noqa: E402
from streamkit_operators import PIIDetector  # noqa: E402

from .conftest import REPO, P  # noqa: E402
from .test_tracing import _provider  # noqa: E402

#: Attributes that are times (measured, so never equal between two runs of the tracer).
TIMES = {"streamkit.processor.duration", "streamkit.processor.first_chunk_delay",
         "gen_ai.response.time_to_first_chunk"}


def shape(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """The spans in the order they ended: name, parent's name, kind, attributes but times,
    status and events."""
    names = {s.context.span_id: s.name for s in spans}
    return [(s.name, names.get(s.parent.span_id) if s.parent is not None else None, s.kind,
             {k: v for k, v in (s.attributes or {}).items() if k not in TIMES},
             s.status.status_code, s.status.description,
             [(e.name, dict(e.attributes or {})) for e in s.events]) for s in spans]


@tool
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order": order_id, "email": "ada@example.com"}


@tool
def broken(order_id: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no order {order_id}")


def tool_turn() -> Agent:
    guard = PIIDetector(detection_types=["email"])
    return Agent(id="support", name="Support", tools=[lookup, broken],
                 model=ScriptedModel([
                     [tool_call("lookup", {"order_id": "A1"}, id="c1"),
                      tool_call("broken", {"order_id": "B2"}, id="c2")],
                     text("Mail ada@example.com.")]),
                 input_processors=[P("inp", process_input=lambda messages: None)],
                 output_processors=[guard, P("out", process_tool_result=lambda: None)])


def api_retry() -> Agent:
    return Agent(id="a", model=ScriptedModel([api_error(429, "slow down"), text("fine")]),
                 error_processors=[P("backoff", process_api_error=lambda error: {"retry": True})])


def tripwire_retry() -> Agent:
    def check(messages: Any, abort: Any, retry_count: int) -> None:
        if retry_count == 0:
            abort("too short", retry=True)

    return Agent(id="a", model=ScriptedModel([text("no"), text("a longer answer")]),
                 output_processors=[P("len", process_output_step=check)],
                 max_processor_retries=2)


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "no-capture"])
@pytest.mark.parametrize("make", [tool_turn, api_retry, tripwire_retry])
async def test_the_spans_of_recorded_events_are_the_spans_of_the_run(
        make: Callable[[], Agent], capture: bool) -> None:
    live, live_spans = _provider()
    saved = _settings._settings
    instrument(live, capture_content=capture)
    log = EventLog()
    try:
        await make().generate("Where is A1?", thread_id="t-1", observers=[log])
    finally:
        _settings._settings = saved
    replayed, replayed_spans = _provider()
    tracer = _spans.tracer_for(replayed, capture)
    assert tracer is not None
    for event in log.events:  # through JSON: the tracer needs nothing but what events say
        tracer.on_event(decode_event(msgspec.json.encode(event)))
    assert shape(replayed_spans.get_finished_spans()) == shape(live_spans.get_finished_spans())
    assert len(live_spans.get_finished_spans()) >= 4


def _streamkit_imports(path: Any) -> set[str]:
    """Every streamkit module a file imports: at its top, under TYPE_CHECKING, in functions."""
    parts = path.relative_to(REPO).with_suffix("").parts
    package = ".".join(parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] \
                if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            if module.startswith("streamkit"):
                found.update(f"{module}.{a.name}" if node.module is None else module
                             for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("streamkit"))
    return found


def test_the_tracing_imports_nothing_of_the_agent() -> None:
    imported = set().union(*(_streamkit_imports(p)
                             for p in (REPO / "streamkit" / "tracing").glob("*.py")))
    outside = {m for m in imported if not m.startswith("streamkit.tracing")}
    # The data modules the events carry (typed prompts and tool records) are below the agent.
    assert outside <= {"streamkit.events", "streamkit._loop_nodes", "streamkit.errors",
                       "streamkit._prompt", "streamkit._tool_records"}, outside


_entered: contextvars.ContextVar[str | None] = contextvars.ContextVar("entered", default=None)


class ToolScope:
    """An observer with the optional ``tool_context`` hook."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_event(self, event: Any) -> None:
        if isinstance(event, ToolCalled):
            self.calls.append(event.tool_call_id)

    @contextlib.contextmanager
    def _scope(self, tool_call_id: str) -> Iterator[None]:
        token = _entered.set(tool_call_id)
        try:
            yield
        finally:
            _entered.reset(token)

    def tool_context(self, tool_call_id: str) -> contextlib.AbstractContextManager[None]:
        return self._scope(tool_call_id)


async def test_an_observers_tool_context_is_entered_around_each_tool() -> None:
    seen: list[str | None] = []

    @tool
    def where(order_id: str) -> str:
        """Where an order is."""
        seen.append(_entered.get())
        return "shipped"

    scope, plain = ToolScope(), EventLog()
    agent = Agent(id="a", tools=[where], model=ScriptedModel([
        [tool_call("where", {"order_id": "A1"}, id="c1"),
         tool_call("where", {"order_id": "A2"}, id="c2")], text("ok")]))
    result: Awaitable[Any] = agent.generate("hi", observers=[plain, scope, ToolScope()])
    assert (await result).text == "ok"
    assert sorted(s for s in seen if s is not None) == ["c1", "c2"] == scope.calls
    assert _entered.get() is None  # entered in the tools' tasks only
