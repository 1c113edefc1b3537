"""Rich display: the graph drawing, chunk tables, traces, results, and the live view."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from streamkit import Agent, APICallError, Processor, display, ops, tool
from streamkit.chunks import DataChunk, TextDelta, ToolCall, TripwireChunk
from streamkit.errors import InvalidArgument
from streamkit.graph import Edge, Graph, Node
from streamkit.testing import ScriptedModel, api_error, text, tool_call

SVG = "{http://www.w3.org/2000/svg}"


@tool
def lookup(customer_id: str) -> dict[str, Any]:
    """Look up a customer by id."""
    return {"id": customer_id, "tier": "gold"}


class Pii(Processor):
    id = "pii"

    def process_output_stream(self, part: Any) -> Any:
        return part

    def process_tool_result(self) -> None:
        return None


class InputGuard(Processor):
    id = "input-guard"

    def process_input(self) -> None:
        return None


class BadWord(Processor):
    """Trips on the word 'bad' — with a retry on the first attempt when ``retry`` is set."""

    id = "bad-word"

    def __init__(self, retry: bool = False) -> None:
        super().__init__()
        self.retry = retry

    def process_output_stream(self, part: Any, abort: Any, retry_count: int) -> Any:
        if part.type == "text-delta" and "bad" in part.payload.text:
            abort("said a bad word", retry=self.retry and retry_count == 0,
                  metadata={"word": "bad"})
        return part


class FakeHandle:
    """A display handle that keeps every update's mime bundle (what a notebook would show)."""

    def __init__(self) -> None:
        self.bundles: list[dict[str, str]] = []

    def update(self, obj: Any) -> None:
        self.bundles.append(obj._repr_mimebundle_())

    @property
    def html(self) -> str:
        return self.bundles[-1]["text/html"]


def svg_of(html: str) -> ET.Element:
    """Parse the first ``<svg>`` in ``html`` as XML (so a stray ``<`` fails the test)."""
    match = re.search(r"<svg.*?</svg>", html, re.S)
    assert match, "no <svg> in the output"
    return ET.fromstring(match.group(0))


def agent_graph() -> Graph:
    agent = Agent(id="g", model=ScriptedModel([]), tools=[lookup],
                  input_processors=[InputGuard()], output_processors=[Pii()])
    return agent.graph()


# ----------------------------------------------------------------------------- graph


class TestGraph:
    def test_svg_has_every_node_edge_label_and_processor(self) -> None:
        graph = agent_graph()
        root = svg_of(display.graph_svg(graph))
        nodes = {g.get("data-node") for g in root.iter(f"{SVG}g") if g.get("data-node")}
        assert nodes == {n.name for n in graph.nodes}
        drawn = {(g.get("data-src"), g.get("data-dst")) for g in root.iter(f"{SVG}g")
                 if g.get("data-src")}
        assert drawn == {(e.src, e.dst) for e in graph.edges}
        texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
        for label in {e.label for e in graph.edges if e.label}:
            assert label in texts, label
        procs = {g.get("data-processor") for g in root.iter(f"{SVG}g")
                 if g.get("data-processor")}
        assert procs == {"pii", "input-guard"}

    def test_main_path_top_to_bottom_and_back_edge_on_the_side(self) -> None:
        graph = agent_graph()
        root = svg_of(display.graph_svg(graph))
        boxes = {}
        for g in root.iter(f"{SVG}g"):
            if g.get("data-node"):
                rect = g.find(f"{SVG}rect")
                assert rect is not None
                boxes[g.get("data-node")] = (float(rect.get("x", 0)), float(rect.get("y", 0)))
        main = ["start", "process_input", "process_input_step", "prepare_step",
                "process_llm_request", "model", "process_output_stream", "collect",
                "process_llm_response", "process_output_step", "tools", "process_tool_result",
                "step_finish", "process_output_result", "finish", "end"]
        assert [boxes[n][1] for n in main] == sorted(boxes[n][1] for n in main)
        assert len({boxes[n][0] for n in main}) == 1
        column = boxes["start"][0]
        for side in ("retry", "tripwire", "fail", "process_api_error"):
            assert boxes[side][0] > column
        loop = next(g for g in root.iter(f"{SVG}g") if g.get("data-src") == "step_finish"
                    and g.get("data-dst") == "process_input_step")
        line = loop.find(f"{SVG}polyline")
        assert line is not None
        xs = [float(p.split(",")[0]) for p in line.get("points", "").split()]
        assert min(xs) < column, "the loop back-edge is routed left of the main column"

    def test_node_kinds_are_styled_differently(self) -> None:
        root = svg_of(display.graph_svg(agent_graph()))
        fills = {}
        for g in root.iter(f"{SVG}g"):
            kind = next((c for c in (g.get("class") or "").split() if c.startswith("sk-kind-")),
                        None)
            rect = g.find(f"{SVG}rect")
            if kind and rect is not None:
                fills.setdefault(kind, set()).add(rect.get("fill"))
        assert set(fills) == {"sk-kind-io", "sk-kind-hook", "sk-kind-model", "sk-kind-tools",
                              "sk-kind-control"}
        assert len({next(iter(f)) for f in fills.values()}) == 5

    def test_graph_html_has_svg_mermaid_and_text_fallbacks(self) -> None:
        graph = agent_graph()
        html = graph._repr_html_()
        assert "<svg" in html and "flowchart TD" in html
        assert "(process_tool_result)" in html and "[pii]" in html
        bundle = graph._repr_mimebundle_()
        assert "<svg" in bundle["text/html"] and bundle["text/plain"] == graph.to_text()

    def test_names_and_labels_are_escaped(self) -> None:
        graph = Graph([Node("start", "<b>go</b>", "io"),
                       Node("x<script>", "a & b", "hook", ("<img src=x>",)), Node("end")],
                      [Edge("start", "x<script>", 'if "a<b"'), Edge("x<script>", "end")])
        html = display.graph_html(graph)
        assert "<script>" not in html and "<img" not in html and "<b>go" not in html
        assert "x&lt;script&gt;" in html and "a &amp; b" in html
        svg_of(html)  # still well-formed XML

    @pytest.mark.parametrize("edges", [
        pytest.param([Edge("start", "end")], id="two-nodes"),
        pytest.param([Edge("start", "a"), Edge("a", "a", "again"), Edge("a", "end")],
                     id="self-loop"),
        pytest.param([Edge("start", "a"), Edge("start", "end", "skip"), Edge("a", "end"),
                      Edge("a", "start", "restart")], id="skip-and-back-edge"),
    ])
    def test_small_graphs_draw(self, edges: list[Edge]) -> None:
        names = {n for e in edges for n in (e.src, e.dst)}
        graph = Graph([Node(n) for n in ["start", *sorted(names - {"start", "end"}), "end"]],
                      edges)
        root = svg_of(display.graph_svg(graph))
        assert {g.get("data-node") for g in root.iter(f"{SVG}g") if g.get("data-node")} == names


# ----------------------------------------------------------------------------- chunks


def sample_chunks() -> list[Any]:
    return [
        TextDelta(text="<script>alert(1)</script>", id="t1", run_id="r", from_="AGENT"),
        ToolCall(tool_call_id="c1", tool_name="lookup", args={"customer_id": "C-1"},
                 run_id="r", from_="AGENT"),
        DataChunk(type="data-progress", data={"pct": 50}, id="p1"),
        TripwireChunk(reason="blocked <here>", processor_id="guard", run_id="r",
                      from_="AGENT"),
    ]


class TestChunks:
    def test_table_cells(self) -> None:
        rows = display.show_chunks(sample_chunks()).rows()
        assert [r["type"] for r in rows] == ["text-delta", "tool-call", "data-progress",
                                             "tripwire"]
        assert rows[1]["tool"] == "lookup" and rows[1]["id"] == "c1"
        assert '"customer_id": "C-1"' in rows[1]["text"]
        assert rows[2]["text"] == '{"pct": 50}' and rows[2]["id"] == "p1"
        assert rows[3]["text"] == "blocked <here>" and rows[3]["tool"] == "guard"

    def test_html_is_escaped_and_tripwire_row_marked(self) -> None:
        html = display.show_chunks(sample_chunks())._repr_html_()
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "blocked &lt;here&gt;" in html
        assert html.count('class="sk-row-tripwire"') == 1

    def test_text_fallback(self) -> None:
        table = display.show_chunks(sample_chunks(), title="sample")
        out = table.to_text().splitlines()
        assert out[0] == "sample"
        assert out[1].split() == ["#", "type", "text", "/", "data", "tool", "/", "processor",
                                  "id", "t", "(ms)"]
        assert "tripwire" in out[-1] and "guard" in out[-1]
        from IPython.lib.pretty import pretty

        assert pretty(table) == table.to_text()

    def test_still_a_list(self) -> None:
        chunks = sample_chunks()
        table = display.show_chunks(chunks)
        assert table == chunks and table[0] is chunks[0] and len(table) == 4
        assert display.show_chunks(table) is table
        assert table.text == "<script>alert(1)</script>"

    async def test_collect_records_times_and_applies_a_pipeline(self) -> None:
        chunks = [TextDelta(text=w, id="t") for w in ("a", "b", "c")]
        table = await display.collect(chunks, ops.map_text(str.upper))
        assert table.text == "ABC" and table.times is not None and len(table.times) == 3
        assert table.times == sorted(table.times)
        assert all(r["t_ms"] for r in table.rows())

    async def test_collect_limit_closes_the_source(self) -> None:
        closed = []

        async def source() -> Any:
            try:
                for i in range(100):
                    yield TextDelta(text=str(i), id="t")
            finally:
                closed.append(True)

        table = await display.collect(source(), limit=3)
        assert table.text == "012" and closed == [True]

    async def test_collect_an_agent_stream(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("Hello world")]))
        table = await display.collect(agent.stream("hi"))
        assert table.types[0] == "start" and table.types[-1] == "finish"
        assert table.text == "Hello world"
        assert "stop" in table.rows()[-1]["text"]


# ----------------------------------------------------------------------------- results


async def tripped_result() -> Any:
    agent = Agent(id="a", model=ScriptedModel([text("a bad answer")]),
                  input_processors=[InputGuard()], output_processors=[BadWord()])
    return await agent.generate("hi")


async def retried_result() -> Any:
    agent = Agent(id="a", model=ScriptedModel([tool_call("lookup", {"customer_id": "C1"}),
                                               text("a bad answer"), text("a good answer")]),
                  tools=[lookup], output_processors=[BadWord(retry=True), Pii()],
                  max_processor_retries=2)
    return await agent.generate("hi")


class TestResults:
    async def test_tripwire_is_a_red_box_with_processor_and_reason(self) -> None:
        result = await tripped_result()
        html = result._repr_html_()
        assert 'class="sk-tripwire"' in html
        box = html[html.index('class="sk-tripwire"'):]
        assert "bad-word" in box[:400] and "said a bad word" in box[:400]
        assert "process_output_stream" in box[:400] and "&quot;word&quot;" in box[:600]
        root = svg_of(html)
        outcomes = {g.get("data-processor"): g.get("data-outcome") for g in root.iter(f"{SVG}g")
                    if g.get("data-hook") == "process_output_stream"}
        assert outcomes == {"bad-word": "tripwire"}
        assert "sk-row-tripwire" in html

    async def test_timeline_bands_show_the_retried_attempt(self) -> None:
        result = await retried_result()
        svg = display.trace_timeline_svg(result.trace)
        root = ET.fromstring(svg)
        bands = [t.text for g in root.iter(f"{SVG}g") if g.get("class") == "sk-band"
                 for t in g.iter(f"{SVG}text")]
        assert bands == ["step 0", "step 1", "step 1 · retry 1"]
        bars = [(g.get("data-processor"), g.get("data-hook")) for g in root.iter(f"{SVG}g")
                if g.get("class") == "sk-bar"]
        assert len(bars) == len(result.trace)
        assert ("pii", "process_tool_result") in bars

    async def test_steps_table_marks_the_rejected_attempt(self) -> None:
        result = await retried_result()
        html = display.steps_html(result.steps)
        assert html.count("<tr") == 1 + len(result.steps)
        assert html.count('class="sk-row-retry"') == 1
        assert "lookup(" in html and "said a bad word" in html

    async def test_text_fallbacks(self) -> None:
        from IPython.lib.pretty import pretty

        result = await tripped_result()
        out = pretty(result)
        assert out.startswith("AgentResult: other")
        assert "TRIPWIRE by bad-word in process_output_stream: said a bad word" in out
        assert "processor" in out and "input-guard" in out
        view = display.show_trace(result.trace)
        assert "<svg" in view._repr_html_() and "bad-word" in pretty(view)

    async def test_result_html_escapes_the_answer(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("<script>x()</script>")]))
        html = (await agent.generate("hi"))._repr_html_()
        assert "<script>x()" not in html and "&lt;script&gt;x()" in html

    def test_bar_chart(self) -> None:
        chart = display.bar_chart(["0", "4", "16"], [300.0, 200.0, 100.0], unit="chunks/s",
                                  title="throughput")
        root = svg_of(chart._repr_html_())
        assert len([g for g in root.iter(f"{SVG}g") if g.get("class") == "sk-bar-row"]) == 3
        assert repr(chart).splitlines()[0] == "throughput"
        with pytest.raises(InvalidArgument, match="2 labels but 1 values"):
            display.bar_chart(["a", "b"], [1.0])


# ----------------------------------------------------------------------------- live view


class TestLive:
    async def test_updates_a_handle_in_place_as_text_arrives(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("Hello brave new world")]))
        handle = FakeHandle()
        result = await display.live(agent.stream("hi"), handle=handle, min_interval=0)
        assert result.text == "Hello brave new world"
        shown = [b["text/plain"].splitlines()[0] if b["text/plain"] else ""
                 for b in handle.bundles]
        assert "Hello brave" in shown and "Hello brave new" in shown
        assert shown[-1] == "Hello brave new world"
        assert "done (stop)" in handle.html

    async def test_throttled_updates_still_end_complete(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("one two three four")]))
        handle = FakeHandle()
        await display.live(agent.stream("hi"), handle=handle, min_interval=3600)
        assert len(handle.bundles) < 8
        assert handle.bundles[-1]["text/plain"].startswith("one two three four")

    async def test_tripwire_is_shown_distinctly(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("a bad answer")]),
                      output_processors=[BadWord()])
        handle = FakeHandle()
        result = await display.live(agent.stream("hi"), handle=handle, min_interval=0)
        assert result.tripwire is not None
        html = handle.html
        assert 'class="sk-tripwire"' in html and "bad-word" in html
        assert "said a bad word" in html
        assert "[TRIPWIRE] processor bad-word: said a bad word" in handle.bundles[-1][
            "text/plain"]

    async def test_step_retry_withdraws_the_shown_text(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("a bad answer"), text("a good one")]),
                      output_processors=[BadWord(retry=True)], max_processor_retries=1)
        handle = FakeHandle()
        result = await display.live(agent.stream("hi"), handle=handle, min_interval=0)
        assert result.text == "a good one"
        before = [b["text/plain"] for b in handle.bundles]
        assert any(t.startswith("a") and "good" not in t for t in before)
        html = handle.html
        withdrawn = re.findall(r'<del class="sk-withdrawn"[^>]*>(.*?)</del>', html)
        assert withdrawn == ["a"]
        assert "retried (#1)" in html and "said a bad word" in html
        assert handle.bundles[-1]["text/plain"].startswith("a good one")

    async def test_chunk_text_is_escaped(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("<script>x()</script>")]))
        handle = FakeHandle()
        await display.live(agent.stream("hi"), handle=handle, min_interval=0)
        assert "<script>" not in handle.html and "&lt;script&gt;x()" in handle.html

    async def test_api_error_is_shown_then_raised(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([api_error(500, "boom")]))
        handle = FakeHandle()
        with pytest.raises(APICallError):
            await display.live(agent.stream("hi"), handle=handle, min_interval=0)
        assert 'class="sk-error"' in handle.html and "boom" in handle.html

    async def test_prints_outside_ipython(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([
            tool_call("lookup", {"customer_id": "C1"}), text("a bad answer")]),
            tools=[lookup], output_processors=[BadWord()])
        out = io.StringIO()
        result = await agent.stream("hi").show(file=out)
        printed = out.getvalue()
        assert result.tripwire is not None
        assert '[tool-call] lookup({"customer_id": "C1"})' in printed
        assert "[TRIPWIRE] processor bad-word: said a bad word" in printed
        assert printed.rstrip().endswith("-- stopped by a tripwire")

    async def test_live_over_a_plain_chunk_source(self) -> None:
        handle = FakeHandle()
        chunks = [TextDelta(text=w, id="t") for w in ("x", "y")]
        table = await display.live(ops.apply(chunks, []), handle=handle, min_interval=0)
        assert isinstance(table, display.ChunkTable) and table.text == "xy"
        assert table.times is not None and len(table.times) == 2

    def test_stream_repr_says_how_to_watch_it(self) -> None:
        agent = Agent(id="a", model=ScriptedModel([text("hi")]))
        assert "stream.show()" in agent.stream("hi")._repr_html_()


async def test_timeline_keeps_one_band_for_several_tools() -> None:
    @tool
    def other(x: int) -> int:
        """Another tool."""
        return x

    agent = Agent(id="a", tools=[lookup, other], output_processors=[Pii()],
                  model=ScriptedModel([[tool_call("lookup", {"customer_id": "C1"}),
                                        tool_call("other", {"x": 1})], text("done")]))
    result = await agent.generate("hi")
    root = ET.fromstring(display.trace_timeline_svg(result.trace))
    bands = [t.text for g in root.iter(f"{SVG}g") if g.get("class") == "sk-band"
             for t in g.iter(f"{SVG}text")]
    assert bands == ["step 0", "step 1"]


def test_all_is_honest() -> None:
    for name in display.__all__:
        assert hasattr(display, name), name


def test_long_chunk_tables_elide_the_middle() -> None:
    chunks = [TextDelta(text=str(i), id="t") for i in range(1000)]
    html = display.chunks_html(chunks, max_rows=100)
    assert html.count("<tr") == 1 + 100 + 1
    assert "… 900 chunk(s) not shown …" in html and ">999<" in html and ">0<" in html
    assert "1000 chunk(s)" in html


async def test_live_closes_the_stream_when_the_display_fails() -> None:
    closed: list[bool] = []

    async def source() -> Any:
        try:
            for i in range(10):
                yield TextDelta(text=str(i), id="t")
        finally:
            closed.append(True)

    class BrokenHandle:
        def __init__(self) -> None:
            self.calls = 0

        def update(self, obj: Any) -> None:
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("display went away")

    with pytest.raises(RuntimeError, match="display went away"):
        await display.live(ops.apply(source(), []), handle=BrokenHandle(), min_interval=0)
    assert closed == [True]
