"""RegexFilter (rules, presets, strategies, phases) and the hold-back scanner under it: streamed
scanning equals scanning the whole text at once, at every split."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from streamkit import Agent, ProcessorDefinitionError, ops, tool
from streamkit.chunks import TextDelta, TextEnd
from streamkit.errors import InvalidArgument
from streamkit.testing import ScriptedModel, text, tool_call
from streamkit_operators import Detection, HoldbackScanner, RegexFilter, Rule, find_all

SECRET = "sk-live_0123456789abcdefXYZ"


def delta(piece: str) -> TextDelta:
    return TextDelta(id="t1", text=piece, run_id="r1", from_="AGENT")


async def run_stream(guard: Any, pieces: list[str]) -> list[Any]:
    chunks = [*map(delta, pieces), TextEnd(id="t1", run_id="r1", from_="AGENT")]
    return [c async for c in ops.apply(chunks, guard)]


def text_of(chunks: list[Any]) -> str:
    return "".join(c.payload.text for c in chunks if c.type == "text-delta")


def scan_in_pieces(rules: list[Rule], pieces: list[str]) -> tuple[str, list[tuple[str, int, int]]]:
    scanner = HoldbackScanner(rules)
    out, found = [], []
    for piece in pieces:
        commit = scanner.feed(piece)
        out.append(commit.text)
        found += commit.findings
    commit = scanner.finish()
    out.append(commit.text)
    found += commit.findings
    return "".join(out), sorted((f.rule.name, f.start, f.end) for f in found)


def one_shot(rules: list[Rule], whole: str) -> list[tuple[str, int, int]]:
    return sorted((f.rule.name, f.start, f.end) for f in find_all(rules, whole))


# ----------------------------------------------------------------------------- the scanner


@pytest.mark.parametrize("pattern, pieces, expected", [
    pytest.param(r"\d+", ["a 12", "34 b"], [(2, 6)], id="greedy-match-ending-at-the-end-waits"),
    pytest.param(r"abc|a", ["x ab", "c y"], [(2, 5)], id="longer-alternative-may-follow"),
    pytest.param(r"\bcat\b", ["the cat", "alog"], [], id="word-boundary-undone-by-more-text"),
    pytest.param(r"(?<=id=)\d+", ["id", "=42;"], [(3, 5)], id="look-behind-sees-emitted-text"),
])
def test_scanner_cases_that_need_each_hold_rule(pattern: str, pieces: list[str],
                                               expected: list[tuple[int, int]]) -> None:
    rules = [Rule("r", pattern)]
    whole, found = scan_in_pieces(rules, pieces)
    assert whole == "".join(pieces)
    assert [(s, e) for _, s, e in found] == expected == [
        (s, e) for _, s, e in one_shot(rules, whole)]


FRAGMENTS = ["ada", "@", "example", ".", "com", " ", "4111", "1111", "-", "12", "3", "sk-",
             "live_", "0123456789abcdef", "\n", "id=", "x", ", ", "(555)", "<", ">"]
RULES = [
    Rule("email", r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}"),
    Rule("digits", r"\d{4}(?:[ -]?\d{4})+"),
    Rule("key", r"sk-(?:live_)?[a-z0-9]{8,}"),
    Rule("alt", r"ab|a"),
    Rule("tag", r"<\w+>"),
    Rule("after-id", r"(?<=id=)\w+"),
]


def test_streamed_scanning_equals_one_shot_on_random_texts_and_splits() -> None:
    rng = random.Random(7)
    for trial in range(400):
        whole = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 14)))
        cuts = sorted(rng.sample(range(1, len(whole)), min(len(whole) - 1, rng.randint(0, 5)))) \
            if len(whole) > 1 else []
        pieces = [whole[i:j] for i, j in zip([0, *cuts], [*cuts, len(whole)])]
        streamed, found = scan_in_pieces(RULES, pieces)
        assert (streamed, found) == (whole, one_shot(RULES, whole)), (trial, pieces)


def test_scanner_commits_everything_and_only_what_is_final() -> None:
    scanner = HoldbackScanner([Rule("card", r"\d{4} \d{4}")])
    assert scanner.feed("pay 1234").text == "pay "
    assert scanner.held == "1234"
    commit = scanner.feed(" 5678 now")
    # "now" cannot start a card number: nothing is held
    assert (commit.text, [f.text for f in commit.findings]) == ("1234 5678 now", ["1234 5678"])
    assert commit.findings[0].start == 4
    assert scanner.feed(" 12").text == " " and scanner.finish().text == "12"


def test_rule_validation() -> None:
    with pytest.raises(InvalidArgument, match="empty string"):
        Rule("x", r"a?")
    with pytest.raises(InvalidArgument, match="invalid pattern"):
        Rule("x", r"(")
    with pytest.raises(InvalidArgument, match="non-empty name"):
        Rule("", r"a")
    assert Rule("x", re.compile("abc", re.I)).pattern.match("ABC")


# ----------------------------------------------------------------------------- RegexFilter


def test_needs_at_least_one_rule_and_valid_options() -> None:
    with pytest.raises(InvalidArgument, match="at least one rule"):
        RegexFilter()
    with pytest.raises(InvalidArgument, match="unknown preset"):
        RegexFilter(presets="phones")
    with pytest.raises(InvalidArgument, match="strategy"):
        RegexFilter(presets="pii", strategy="filter")
    with pytest.raises(InvalidArgument, match="phase"):
        RegexFilter(presets="pii", phase="stream")
    with pytest.raises(InvalidArgument, match="'name' and 'pattern'"):
        RegexFilter(rules=[{"pattern": "x"}])


@pytest.mark.parametrize("preset, sample, replaced", [
    pytest.param("pii", "mail ada@example.com", "mail [EMAIL]", id="pii-email"),
    pytest.param("pii", "card 4111 1111 1111 1111", "card [CREDIT_CARD]", id="pii-card"),
    pytest.param("secrets", f"key {SECRET}", "key [API_KEY]", id="secrets-api-key"),
    pytest.param("secrets", "Authorization: Bearer abc.def-ghi_123", "Authorization: "
                 "[BEARER_TOKEN]", id="secrets-bearer"),
    pytest.param("secrets", "id AKIAABCDEFGHIJKLMNOP", "id [AWS_KEY]", id="secrets-aws"),
    pytest.param("urls", "see https://example.com/x.", "see [URL].", id="urls"),
])
async def test_presets_redact(preset: str, sample: str, replaced: str) -> None:
    guard = RegexFilter(presets=preset, strategy="redact")
    assert text_of(await run_stream(guard, [sample + " "])) == replaced + " "


async def test_default_replacement_and_group_templates() -> None:
    guard = RegexFilter(rules=[
        {"name": "ticket", "pattern": r"TCK-(\d+)", "replacement": "[ticket $1]"},
        Rule("order", r"ORD-(?P<n>\d+)", replacement=r"<order \g<n>>"),
        {"name": "code", "pattern": r"CODE\d+"},
        Rule("upper", r"shout:(\w+)", replacement=lambda m: m.group(1).upper()),
    ], strategy="redact")
    out = await run_stream(guard, ["TCK-12 ORD-9 CODE7 shout:hi"])
    assert text_of(out) == "[ticket 12] <order 9> [REDACTED] HI"


@pytest.mark.parametrize("cut", range(1, len(f"key: {SECRET} ok")), ids=lambda i: f"split-{i}")
async def test_block_mid_stream_never_shows_the_secret(cut: int) -> None:
    full = f"key: {SECRET} ok"
    app = ops.apply([delta(full[:cut]), delta(full[cut:])], RegexFilter(presets="secrets"))
    out = [c async for c in app]
    # Text before the match in the same commit goes down with it; none of the secret shows.
    assert "key: ".startswith(text_of(out))
    assert out[-1].type == "tripwire"
    assert out[-1].payload.reason == ("Regex filter: blocked streaming content matching "
                                      "patterns: api-key")
    assert out[-1].payload.metadata == {
        "processorId": "regex-filter", "strategy": "block",
        "matches": [{"rule": "api-key", "match": "[REDACTED_MATCH]", "index": 5}]}


async def test_warn_reports_without_holding_and_values_are_hidden_by_default() -> None:
    events: list[Detection] = []
    guard = RegexFilter(presets="secrets", strategy="warn", on_detection=events.append)
    chunks = [delta("key: sk-live_0123"), delta("456789abcdefXYZ ok")]
    out = [c async for c in ops.apply(chunks, guard)]
    assert [c for c in out if c.type == "text-delta"] == chunks
    assert [(e.type, e.value, e.start) for e in events] == [("api-key", "[REDACTED_MATCH]", 5)]

    shown: list[Detection] = []
    guard = RegexFilter(presets="secrets", strategy="warn", include_redacted_values=True,
                        on_detection=shown.append)
    await run_stream(guard, [f"key: {SECRET} "])
    assert shown[0].value == SECRET


@pytest.mark.parametrize("phase, model_sees, client_sees", [
    pytest.param("input", "[EMAIL]", "reply ada@example.com", id="input-only"),
    pytest.param("output", "ada@example.com", "reply [EMAIL]", id="output-only"),
    pytest.param("all", "[EMAIL]", "reply [EMAIL]", id="all"),
])
async def test_phases(phase: str, model_sees: str, client_sees: str) -> None:
    guard = RegexFilter(presets="pii", strategy="redact", phase=phase)
    model = ScriptedModel([text("reply ada@example.com")])
    agent = Agent(id="a", model=model,
                  input_processors=[guard] if phase != "output" else [],
                  output_processors=[guard] if phase != "input" else [])
    result = await agent.generate("ada@example.com")
    assert model.requests[0].prompt[-1]["content"] == model_sees
    assert result.text == client_sees


def test_a_phase_without_hooks_in_a_lane_is_a_configuration_error() -> None:
    with pytest.raises(ProcessorDefinitionError, match="none of its hooks"):
        Agent(id="a", model=ScriptedModel([]),
              output_processors=[RegexFilter(presets="pii", phase="input")])


async def test_input_block_aborts_before_the_model() -> None:
    model = ScriptedModel([text("never")])
    result = await Agent(id="a", model=model, input_processors=[
        RegexFilter(presets="secrets")]).generate(f"here is {SECRET}")
    assert model.calls == 0 and result.tripwire is not None
    assert result.tripwire.reason == "Regex filter: blocked content matching patterns: api-key"


@tool
def read_config() -> dict[str, Any]:
    """Read the service configuration."""
    return {"service": "billing", "token": SECRET}


async def test_tool_results_are_redacted_and_stored_redacted() -> None:
    model = ScriptedModel([tool_call("read_config", {}), text("Configured.")])
    agent = Agent(id="a", model=model, tools=[read_config],
                  output_processors=[RegexFilter(presets="secrets", strategy="redact")])
    result = await agent.generate("show config")
    assert model.requests[1].prompt[-1]["content"][0]["result"] == {
        "service": "billing", "token": "[API_KEY]"}
    assert result.tool_results[0]["result"] == {"service": "billing", "token": "[API_KEY]"}


async def test_stream_block_with_retry_through_the_agent() -> None:
    model = ScriptedModel([text(f"Use {SECRET} to log in."), text("Ask your admin for a key.")])
    agent = Agent(id="a", model=model, max_processor_retries=2,
                  output_processors=[RegexFilter(presets="secrets", retry=True)])
    stream = agent.stream("how do I log in?")
    chunks = [c async for c in stream]
    result = await stream.result()
    assert SECRET not in text_of(chunks) and "sk-" not in text_of(chunks)
    retry = next(c for c in chunks if c.type == "data-step-retry")
    assert retry.data["processorId"] == "regex-filter" and retry.transient is True
    assert result.text == "Ask your admin for a key."
    assert "Regex filter: blocked streaming content" in model.requests[1].prompt[-1]["content"]
