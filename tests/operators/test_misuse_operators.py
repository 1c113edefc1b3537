"""Misuse of streamkit_operators raises a ``streamkit.errors`` class that says what was wrong.

Each case builds an operator (or calls a public method) wrongly and checks the class, that
``InvalidArgument`` / ``InvalidType`` are still ``ValueError`` / ``TypeError``, and the part of
the message that names the option, the value given and what is allowed. The source scan that
keeps bare builtin raises out of this package lives in ``tests/test_misuse.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from streamkit import Agent
from streamkit.errors import InvalidArgument, InvalidType, StreamkitError
from streamkit.testing import ScriptedModel, text
from streamkit_operators import (
    BatchParts,
    Buffering,
    CostGuard,
    HoldbackScanner,
    InMemoryCache,
    LanguageDetector,
    ModerationProcessor,
    PIIDetector,
    PlaceholderVault,
    PromptInjectionDetector,
    RegexFilter,
    ResponseCache,
    Rule,
    SQLiteCache,
    StreamGuard,
    StructuredOutput,
    SystemPromptScrubber,
    TokenLimiter,
    ToolCallFilter,
)

from ..conftest import assert_misuse

MODEL = ScriptedModel([])

MISUSES = [
    # -- TokenLimiter, CostGuard, BatchParts, ToolCallFilter ----------------------------------
    pytest.param(lambda: TokenLimiter(0), InvalidArgument,
                 "limit must be a positive int (tokens), got 0", id="token-limit-of-zero"),
    pytest.param(lambda: TokenLimiter("100"), InvalidType,  # type: ignore[arg-type]
                 "got str '100'", id="token-limit-given-as-a-str-is-a-type-error"),
    pytest.param(lambda: TokenLimiter(10, at_max_remove_tokens=10), InvalidArgument,
                 "at_max_remove_tokens must be in [0, limit=10), got 10",
                 id="token-limiter-headroom-not-below-the-limit"),
    pytest.param(lambda: TokenLimiter(10, strategy="drop"), InvalidArgument,
                 "strategy must be one of 'truncate', 'abort'; got 'drop'",
                 id="token-limiter-unknown-strategy-lists-the-choices"),
    pytest.param(lambda: CostGuard(), InvalidArgument, "needs max_tokens= and/or max_cost=",
                 id="cost-guard-without-any-budget"),
    pytest.param(lambda: CostGuard(max_cost=1.0), InvalidArgument, "max_cost needs pricing=",
                 id="cost-guard-with-a-dollar-budget-but-no-pricing"),
    pytest.param(lambda: CostGuard(max_tokens=10, window="2h"), InvalidArgument,
                 "window must be one of 1h, 6h, 24h, 7d, 30d, 365d",
                 id="cost-guard-unknown-window"),
    pytest.param(lambda: CostGuard(max_tokens=10, window=[1]), InvalidType,
                 "got list [1]", id="cost-guard-window-of-the-wrong-type"),
    pytest.param(lambda: CostGuard(max_tokens=10, warn_at_percent=150), InvalidArgument,
                 "warn_at_percent must be in (0, 100], got 150", id="cost-guard-warning-above-100"),
    pytest.param(lambda: CostGuard(max_tokens=10, scope="org"), InvalidArgument,
                 "scope must be one of 'run', 'resource', 'thread'; got 'org'",
                 id="cost-guard-unknown-scope"),
    pytest.param(lambda: BatchParts(0), InvalidArgument, "batch_size must be an int >= 1, got 0",
                 id="batch-parts-of-zero"),
    pytest.param(lambda: BatchParts(2.5), InvalidType,  # type: ignore[arg-type]
                 "batch_size must be an int >= 1, got float 2.5", id="batch-parts-of-a-float"),
    pytest.param(lambda: BatchParts(max_wait_time=0), InvalidArgument,
                 "max_wait_time must be None or a number of seconds > 0, got 0",
                 id="batch-parts-zero-wait"),
    pytest.param(lambda: ToolCallFilter(exclude="search"), InvalidType,
                 "did you mean ['search']?", id="tool-call-filter-exclude-as-one-string"),
    pytest.param(lambda: ToolCallFilter(filter_after_tool_steps=-1), InvalidArgument,
                 "filter_after_tool_steps must be None or an int >= 0, got -1",
                 id="tool-call-filter-negative-step-count"),
    # -- ResponseCache ------------------------------------------------------------------------
    pytest.param(lambda: ResponseCache(object()), InvalidType,
                 "cache must have get/set/delete methods; object has no get()",
                 id="response-cache-given-something-that-is-not-a-cache"),
    pytest.param(lambda: ResponseCache(ttl=0), InvalidArgument,
                 "ttl must be None or a number of seconds > 0, got 0",
                 id="response-cache-zero-ttl"),
    pytest.param(lambda: ResponseCache(key=lambda inputs: 42).make_key({}), InvalidType,
                 "the cache key (key=) must be a non-empty str, got int 42",
                 id="response-cache-key-function-returning-an-int"),
    pytest.param(lambda: ResponseCache(key="").make_key({}), InvalidArgument,
                 "must be a non-empty str, got ''", id="response-cache-empty-key"),
    pytest.param(lambda: InMemoryCache(max_entries=0), InvalidArgument,
                 "max_entries must be >= 1 or None, got 0", id="in-memory-cache-of-size-zero"),
    pytest.param(lambda: SQLiteCache(":memory:", table="x; DROP TABLE y"), InvalidArgument,
                 "table must be an SQL identifier", id="sqlite-cache-table-that-is-not-a-name"),
    # -- model-backed guards ------------------------------------------------------------------
    pytest.param(lambda: PromptInjectionDetector(model=None), InvalidArgument,
                 "requires a model", id="injection-detector-without-a-model"),
    pytest.param(lambda: PromptInjectionDetector(model=MODEL, detection_types=[]),
                 InvalidArgument, "at least one detection type (known: ",
                 id="injection-detector-without-detection-types-lists-them"),
    pytest.param(lambda: PromptInjectionDetector(model=MODEL, threshold=2), InvalidArgument,
                 "threshold must be between 0 and 1, got 2", id="injection-threshold-above-1"),
    pytest.param(lambda: LanguageDetector(model=None, target_languages=["en"]), InvalidArgument,
                 "requires a model", id="language-detector-without-a-model"),
    pytest.param(lambda: LanguageDetector(model=MODEL, target_languages=[]), InvalidArgument,
                 "at least one target language (such as 'en'); got []",
                 id="language-detector-without-targets"),
    pytest.param(lambda: LanguageDetector(model=MODEL, target_languages=["en"],
                                          strategy="guess"), InvalidArgument,
                 "strategy must be one of", id="language-detector-unknown-strategy"),
    pytest.param(lambda: ModerationProcessor(model=None), InvalidArgument, "requires a model",
                 id="moderation-without-a-model"),
    pytest.param(lambda: ModerationProcessor(model=MODEL, categories=[]), InvalidArgument,
                 "at least one category (known: ", id="moderation-without-categories"),
    pytest.param(lambda: ModerationProcessor(model=MODEL, threshold=-1), InvalidArgument,
                 "threshold must be between 0 and 1, got -1", id="moderation-negative-threshold"),
    pytest.param(lambda: ModerationProcessor(model=MODEL, phase="stream"), InvalidArgument,
                 "phase must be one of 'input', 'output', 'all'; got 'stream'",
                 id="moderation-unknown-phase"),
    pytest.param(lambda: SystemPromptScrubber(model=None), InvalidArgument, "requires a model",
                 id="scrubber-without-a-model"),
    pytest.param(lambda: SystemPromptScrubber(model=MODEL, buffer_size=0), InvalidArgument,
                 "buffer_size must be >= 1 (characters), got 0", id="scrubber-empty-buffer"),
    pytest.param(lambda: StructuredOutput({"type": "object"}, model=None), InvalidArgument,
                 "StructuredOutput needs model=", id="structured-output-without-a-model"),
    pytest.param(lambda: StructuredOutput({"type": "object"}, model=MODEL,
                                          error_strategy="ignore"), InvalidArgument,
                 "error_strategy must be one of 'strict', 'warn', 'fallback'; got 'ignore'",
                 id="structured-output-unknown-error-strategy"),
    # -- rules, regex, PII, vault -------------------------------------------------------------
    pytest.param(lambda: Rule("x", r"a?"), InvalidArgument, "matches the empty string",
                 id="a-rule-matching-the-empty-string"),
    pytest.param(lambda: Rule("x", "("), InvalidArgument, "invalid pattern '('",
                 id="a-rule-with-an-invalid-regex"),
    pytest.param(lambda: Rule("x", 42), InvalidType,
                 "a pattern must be a str or a compiled regex, got int",
                 id="a-rule-pattern-that-is-not-a-pattern"),
    pytest.param(lambda: Rule("", "a"), InvalidArgument, "a rule needs a non-empty name",
                 id="a-rule-with-an-empty-name"),
    pytest.param(lambda: Rule(None, "a"), InvalidType,  # type: ignore[arg-type]
                 "non-empty str name, got NoneType", id="a-rule-without-a-name"),
    pytest.param(lambda: Rule("x", "a", starts="["), InvalidArgument,
                 "invalid starts class '['", id="a-rule-with-an-invalid-starts-class"),
    pytest.param(lambda: HoldbackScanner([Rule("x", "a")], max_hold=0), InvalidArgument,
                 "max_hold must be >= 1 character, got 0", id="a-scanner-that-holds-nothing"),
    pytest.param(lambda: RegexFilter(), InvalidArgument, "needs at least one rule",
                 id="regex-filter-without-rules"),
    pytest.param(lambda: RegexFilter(presets="phones"), InvalidArgument,
                 "unknown preset 'phones'; known: ", id="regex-filter-unknown-preset"),
    pytest.param(lambda: RegexFilter(rules=[{"pattern": "x"}]), InvalidArgument,
                 "a rule dict needs 'name' and 'pattern'", id="regex-filter-rule-dict-no-name"),
    pytest.param(lambda: RegexFilter(rules=[42]), InvalidType,
                 "rules takes Rule objects or", id="regex-filter-rule-of-the-wrong-type"),
    pytest.param(lambda: RegexFilter(presets="pii", strategy="filter"), InvalidArgument,
                 "strategy must be 'block', 'redact' or 'warn', got 'filter'",
                 id="regex-filter-unknown-strategy"),
    pytest.param(lambda: RegexFilter(presets="pii", phase="stream"), InvalidArgument,
                 "phase must be 'input', 'output' or 'all', got 'stream'",
                 id="regex-filter-unknown-phase"),
    pytest.param(lambda: PIIDetector(detection_types=["name"]), InvalidArgument,
                 "PII type 'name' needs a model to detect", id="pii-model-only-type"),
    pytest.param(lambda: PIIDetector(detection_types=["emails"]), InvalidArgument,
                 "unknown PII type 'emails'; known: ", id="pii-unknown-type"),
    pytest.param(lambda: PIIDetector(strategy="mask"), InvalidArgument,
                 "strategy must be one of", id="pii-unknown-strategy"),
    pytest.param(lambda: PIIDetector(redaction_method="blur"), InvalidArgument,
                 "redaction_method must be one of", id="pii-unknown-redaction-method"),
    pytest.param(lambda: PIIDetector(on_detection="log"), InvalidType,  # type: ignore[arg-type]
                 "on_detection must be callable", id="pii-callback-that-is-not-callable"),
    pytest.param(lambda: PIIDetector(detection_types=[]), InvalidArgument,
                 "needs at least one detection type or custom pattern",
                 id="pii-with-nothing-to-detect"),
    pytest.param(lambda: PIIDetector(custom_patterns=["x"]), InvalidType,  # type: ignore
                 "custom_patterns takes a {name: pattern} dict or Rule objects, got str",
                 id="pii-custom-patterns-as-a-list-of-strings"),
    pytest.param(lambda: PlaceholderVault.from_dict({"entries": [{"token": "<X_1>"}]}),
                 InvalidArgument, "not a PlaceholderVault snapshot",
                 id="vault-snapshot-with-a-missing-key"),
    pytest.param(lambda: PlaceholderVault.from_dict({"entries": [], "counts": {"email": "n"}}),
                 InvalidArgument, "not a PlaceholderVault snapshot",
                 id="vault-snapshot-with-a-count-that-is-not-a-number"),
    pytest.param(lambda: PlaceholderVault.from_dict({"entries": [
        {"token": "nope", "value": "a", "kind": "email", "origins": []}], "counts": {}}),
        InvalidArgument, "'nope' is not a placeholder", id="vault-snapshot-with-a-bad-token"),
    # -- buffering and stream guards ----------------------------------------------------------
    pytest.param(lambda: Buffering("batch"), InvalidArgument, "buffering kind must be one of",
                 id="buffering-of-an-unknown-kind"),
    pytest.param(lambda: Buffering.window(tokens=4, overlap=4), InvalidArgument,
                 "overlap must be >= 0 and smaller than the window (4 tokens), got 4",
                 id="buffering-window-overlapping-itself"),
    pytest.param(lambda: Buffering.window(tokens=0), InvalidArgument,
                 "window tokens must be >= 1, got 0", id="buffering-window-of-zero-tokens"),
    pytest.param(lambda: Buffering.time(0), InvalidArgument, "seconds must be > 0, got 0",
                 id="buffering-time-of-zero-seconds"),
    pytest.param(lambda: Buffering.sentence(max_chars=0), InvalidArgument,
                 "max_chars must be >= 1, got 0", id="buffering-sentences-of-zero-chars"),
    pytest.param(lambda: StreamGuard("not callable"), InvalidType,  # type: ignore[arg-type]
                 "StreamGuard expects a check function, got str", id="stream-guard-no-function"),
    pytest.param(lambda: StreamGuard(bool, buffering="sentence"), InvalidType,  # type: ignore
                 "buffering must be a Buffering (such as Buffering.sentence()), got str",
                 id="stream-guard-buffering-given-as-a-name"),
    pytest.param(lambda: StreamGuard(bool, buffering=Buffering.holdback()), InvalidArgument,
                 "buffering must be a Buffering other than holdback",
                 id="stream-guard-with-holdback-buffering"),
    pytest.param(lambda: StreamGuard(bool, strategy="redact"), InvalidArgument,
                 "strategy must be 'block', 'filter' or 'warn', got 'redact'",
                 id="stream-guard-unknown-strategy"),
    pytest.param(lambda: StreamGuard(bool, error_strategy="ignore"), InvalidArgument,
                 "error_strategy must be 'warn' or 'strict', got 'ignore'",
                 id="stream-guard-unknown-error-strategy"),
    pytest.param(lambda: StreamGuard(bool, buffering=Buffering.end_of_stream(hold=False),
                                     strategy="filter"), InvalidArgument, "already streamed",
                 id="stream-guard-cannot-filter-text-it-already-released"),
]


@pytest.mark.parametrize("call, error, words", MISUSES)
def test_misuse_raises_a_streamkit_error_naming_the_problem(
        call: Callable[[], Any], error: type[StreamkitError], words: str) -> None:
    assert_misuse(call, error, words)


@pytest.mark.parametrize("answer", [
    pytest.param(text(json.dumps({"iso_code": "fr"})), id="an-answer-without-confidence"),
    pytest.param(text("no idea"), id="an-answer-that-is-not-json"),
])
async def test_a_malformed_checker_answer_is_a_model_answer_error(answer: Any) -> None:
    # Not misuse by the caller, but still a streamkit error: strict mode names its class.
    guard = LanguageDetector(model=ScriptedModel([answer]), target_languages=["en"],
                             error_strategy="strict")
    main = ScriptedModel([text("ok")])
    result = await Agent(id="a", model=main, input_processors=[guard]).generate(
        "Bonjour, où est ma commande ?")
    assert result.tripwire is not None and main.calls == 0
    assert result.tripwire.metadata["errorType"] == "ModelAnswerError"
