"""PIIDetector: detection types, strategies and methods on input, tool results and the stream;
streamed redaction with the secret split at every chunk boundary; stored == streamed through
Memory; reversible placeholders restored at the edge."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from streamkit import Agent, ProcessorError, ops, tool
from streamkit.chunks import TextDelta, TextEnd, TextStart
from streamkit.errors import InvalidArgument
from streamkit.memory import Memory, SQLiteStore
from streamkit.testing import ScriptedModel, reasoning, text, tool_call
from streamkit_operators import (
    PII_TYPES,
    Detection,
    HoldbackScanner,
    PIIDetector,
    PlaceholderVault,
    RestorePlaceholders,
    Rule,
    find_all,
    mask_value,
)
from streamkit_operators._pii import pii_rules

CARD = "4111 1111 1111 1111"

#: One valid sample per detection type, and the placeholder each becomes.
SAMPLES = {
    "email": "ada.lovelace@example.com",
    "phone": "(555) 123-4567",
    "credit-card": CARD,
    "ssn": "123-45-6789",
    "api-key": "sk-proj-abcdefghijklmnopqrstuv",
    "ip-address": "192.168.10.42",
    "url": "https://example.com/orders/77?x=1",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "crypto-wallet": "0x52908400098527886E0F7030069857D2E4169EE7",
    "iban": "GB82 WEST 1234 5698 7654 32",
    "date-of-birth": "12/03/1990",
}


def delta(piece: str, id: str = "t1") -> TextDelta:
    return TextDelta(id=id, text=piece, run_id="r1", from_="AGENT")


async def run_stream(guard: Any, pieces: list[str], **kwargs: Any) -> list[Any]:
    chunks = [TextStart(id="t1", run_id="r1", from_="AGENT"), *map(delta, pieces),
              TextEnd(id="t1", run_id="r1", from_="AGENT")]
    return [c async for c in ops.apply(chunks, guard, **kwargs)]


def text_of(chunks: list[Any]) -> str:
    return "".join(c.payload.text for c in chunks if c.type == "text-delta")


def placeholder(kind: str) -> str:
    return f"[{kind.upper().replace('-', '_')}]"


def two_way(s: str) -> list[list[str]]:
    return [[s[:i], s[i:]] for i in range(1, len(s))]


def three_way(s: str) -> list[list[str]]:
    return [[s[:i], s[i:j], s[j:]] for i, j in itertools.combinations(range(1, len(s)), 2)]


# ----------------------------------------------------------------------------- detection


def test_every_builtin_type_has_a_sample() -> None:
    assert set(SAMPLES) == set(PII_TYPES)


@pytest.mark.parametrize("kind", PII_TYPES)
async def test_detects_each_type_in_the_stream(kind: str) -> None:
    guard = PIIDetector(detection_types=[kind], redaction_method="placeholder")
    prefix = "DOB: " if kind == "date-of-birth" else "value "
    out = await run_stream(guard, [f"{prefix}{SAMPLES[kind]} end"])
    assert text_of(out) == f"{prefix}{placeholder(kind)} end"


@pytest.mark.parametrize("kind, value", [
    pytest.param("credit-card", "4111 1111 1111 1112", id="card-failing-luhn"),
    pytest.param("iban", "GB82 WEST 1234 5698 7654 33", id="iban-failing-mod97"),
    pytest.param("ssn", "000-12-3456", id="ssn-area-000"),
    pytest.param("ip-address", "version 1.2.3 of 999.1.1.1", id="version-and-bad-octet"),
    pytest.param("date-of-birth", "meeting on 12/03/1990", id="date-without-birth-context"),
    pytest.param("email", "user at example dot com", id="obfuscated-email"),
])
async def test_lookalikes_are_not_detected(kind: str, value: str) -> None:
    guard = PIIDetector(detection_types=[kind], redaction_method="placeholder")
    assert text_of(await run_stream(guard, [value])) == value


@pytest.mark.parametrize("kind, value, masked", [
    pytest.param("email", "john@example.com", "j**n@*******.com", id="email"),
    pytest.param("phone", "(555) 123-4567", "(***) ***-4567", id="phone-last-4"),
    pytest.param("credit-card", CARD, "**** **** **** 1111", id="card-last-4"),
    pytest.param("ssn", "123-45-6789", "***-**-6789", id="ssn-last-4"),
    pytest.param("uuid", SAMPLES["uuid"], "********-****-****-****-************", id="uuid"),
    pytest.param("crypto-wallet", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
                 "bc1q**********************************5mdq", id="wallet-first-last-4"),
    pytest.param("iban", "GB82 WEST 1234 5698 7654 32", "GB** **** **** **** **54 32",
                 id="iban-country-and-last-4"),
    pytest.param("ip-address", "10.0.0.1", "1******1", id="generic-first-last"),
])
def test_mask_rules(kind: str, value: str, masked: str) -> None:
    assert mask_value(kind, value) == masked
    assert mask_value(kind, value, preserve_format=False) == "*" * min(len(value), 8)


@pytest.mark.parametrize("method, expected", [
    pytest.param("mask", "mail a*a@*******.com now", id="mask"),
    pytest.param("placeholder", "mail [EMAIL] now", id="placeholder"),
    pytest.param("remove", "mail  now", id="remove"),
    pytest.param("reversible", "mail <EMAIL_1> now", id="reversible"),
])
async def test_redaction_methods(method: str, expected: str) -> None:
    guard = PIIDetector(redaction_method=method, vault=PlaceholderVault())
    assert text_of(await run_stream(guard, ["mail ada@example.com now"])) == expected


async def test_hash_method_is_stable_and_short() -> None:
    guard = PIIDetector(redaction_method="hash")
    first = text_of(await run_stream(guard, ["a ada@example.com b ada@example.com"]))
    token = first.split()[1]
    assert token.startswith("[HASH:") and len(token) == len("[HASH:12345678]")
    assert first == f"a {token} b {token}"


async def test_overlapping_detections_union_and_the_longest_owner_decides() -> None:
    # The custom rule covers part of the email; the email is longer, so it owns the region.
    guard = PIIDetector(detection_types=["email"], custom_patterns={"handle": r"ada\.\w+"},
                        redaction_method="placeholder")
    assert text_of(await run_stream(guard, ["to ada.l@example.com."])) == "to [EMAIL]."


def test_options_are_validated() -> None:
    with pytest.raises(InvalidArgument, match="needs a model"):
        PIIDetector(detection_types=["name"])
    with pytest.raises(InvalidArgument, match="unknown PII type"):
        PIIDetector(detection_types=["emails"])
    with pytest.raises(InvalidArgument, match="strategy"):
        PIIDetector(strategy="mask")
    with pytest.raises(InvalidArgument, match="redaction_method"):
        PIIDetector(redaction_method="blur")
    with pytest.raises(InvalidArgument, match="empty string"):
        PIIDetector(custom_patterns={"x": r"\d*"})
    with pytest.raises(InvalidArgument, match="at least one"):
        PIIDetector(detection_types=[])


# ----------------------------------------------------------------------------- streaming


TEXT = f"My card is {CARD}, thanks."
EXPECTED = "My card is [CREDIT_CARD], thanks."


@pytest.mark.parametrize("cut", range(1, len(TEXT)), ids=lambda i: f"split-at-{i}")
async def test_card_split_at_every_boundary_never_leaks(cut: int) -> None:
    guard = PIIDetector(redaction_method="placeholder")
    out = await run_stream(guard, [TEXT[:cut], TEXT[cut:]])
    # Chunks are appended in order, so every intermediate view is a prefix of this text, which
    # holds no digit of the card: no part of the number ever reached the consumer.
    assert text_of(out) == EXPECTED


@pytest.mark.parametrize("kind", ["credit-card", "email", "ssn", "api-key", "phone", "iban"])
async def test_every_three_way_split_never_leaks(kind: str) -> None:
    value = SAMPLES[kind]
    full = f"id: {value}."
    expected = f"id: {placeholder(kind)}."
    guard = PIIDetector(detection_types=[kind], redaction_method="placeholder")
    for pieces in three_way(full):
        assert text_of(await run_stream(guard, pieces)) == expected, pieces


def test_all_detectors_streamed_equal_one_shot_on_random_texts_and_splits() -> None:
    # The built-in rules carry ``starts`` classes that let the scanner skip them; the same
    # rules without them, and one-shot scanning, must find exactly the same.
    rules = pii_rules()
    plain = [Rule(r.name, r.pattern, validate=r.validate) for r in rules]
    fillers = [" ", "  ", "DOB: ", "born on ", "DOB: 12/03/1990", "id=", ", ", ".", "\n", "x",
               "Ada", "4", "12", "-", "(", "+", "0x", "bc1", "sk-", "h", "<", ":", "fe80::1",
               "2001:db8::8a2e:370:7334"]
    rng = random.Random(11)
    kinds_found: set[str] = set()
    for trial in range(300):
        parts = [rng.choice(fillers + list(SAMPLES.values())) for _ in range(rng.randint(1, 8))]
        whole = "".join(parts)
        cuts = sorted(rng.sample(range(1, len(whole)), min(len(whole) - 1, rng.randint(0, 6))))
        pieces = [whole[i:j] for i, j in zip([0, *cuts], [*cuts, len(whole)])]
        expected = sorted((f.rule.name, f.start, f.end) for f in find_all(rules, whole))
        kinds_found.update(name for name, _, _ in expected)
        for ruleset in (rules, plain):
            scanner = HoldbackScanner(ruleset)
            commits = [scanner.feed(p) for p in pieces] + [scanner.finish()]
            assert "".join(c.text for c in commits) == whole
            found = sorted((f.rule.name, f.start, f.end) for c in commits for f in c.findings)
            assert found == expected, (trial, pieces)
    assert kinds_found == set(PII_TYPES)  # the texts exercised every detector


async def test_one_character_per_chunk() -> None:
    guard = PIIDetector(redaction_method="placeholder")
    out = await run_stream(guard, list(TEXT))
    assert text_of(out) == EXPECTED
    assert all("1" not in c.payload.text for c in out if c.type == "text-delta")


async def test_the_example_from_the_issue() -> None:
    out = await run_stream(PIIDetector(), ["Pay with 4111 1111", " 1111 1111 today"])
    deltas = [c.payload.text for c in out if c.type == "text-delta"]
    assert deltas == ["Pay with ", "**** **** **** 1111 ", "today"]


async def test_holds_back_only_what_could_still_become_a_match() -> None:
    guard = PIIDetector(detection_types=["email", "credit-card"])
    app = ops.apply([delta("Hello wor"), delta("ld. "), delta("Call 4111"),
                     delta(" 1111 1111 1111 now")], guard)
    seen = [(c.payload.text if c.type == "text-delta" else c.type) async for c in app]
    # "wor" might become "wor...@x.com"; "ld. " ends in a space, so nothing is held;
    # "4111" might be a card: held until the number ends.
    assert seen == ["Hello ", "world. ", "Call ", "**** **** **** 1111 ", "now"]


async def test_held_text_is_released_before_the_next_non_text_chunk_in_order() -> None:
    guard = PIIDetector()
    chunks = [delta("write to ada"), TextEnd(id="t1", run_id="r1", from_="AGENT"),
              delta("x", id="t2")]
    out = [c async for c in ops.apply(chunks, guard)]
    assert [(c.type, getattr(c.payload, "text", None)) for c in out] == [
        ("text-delta", "write to "), ("text-delta", "ada"), ("text-end", None),
        ("text-delta", "x")]


async def test_a_new_text_id_releases_the_previous_one_under_its_own_id() -> None:
    out = await run_stream(PIIDetector(), [])
    assert out[0].type == "text-start"
    chunks = [delta("one 4111", id="a"), delta("two", id="b")]
    out = [c async for c in ops.apply(chunks, PIIDetector())]
    assert [(c.payload.id, c.payload.text) for c in out] == [("a", "one "), ("a", "4111"),
                                                               ("b", "two")]


async def test_max_hold_bounds_the_hold_back() -> None:
    guard = PIIDetector(detection_types=["email"], max_hold=8)
    app = ops.apply([delta("x" * 20), delta("y" * 4)], guard)
    seen = [c.payload.text async for c in app if c.type == "text-delta"]
    assert seen[0] == "x" * 12 and "".join(seen) == "x" * 20 + "y" * 4


# ----------------------------------------------------------------------------- strategies


async def test_block_trips_before_any_part_of_the_value_is_streamed() -> None:
    guard = PIIDetector(strategy="block", include_detections=True)
    app = ops.apply([delta("Card 4111 1111"), delta(" 1111 1111 ok")], guard)
    out = [c async for c in app]
    assert text_of(out) == "Card "
    trip = out[-1]
    assert trip.type == "tripwire"
    assert trip.payload.reason == "PII detected in streamed output. Types: credit-card"
    assert trip.payload.metadata["detections"] == [
        {"type": "credit-card", "start": 5, "end": 24, "masked": "**** **** **** 1111"}]
    assert app.tripwire is not None and app.tripwire.retry is False


async def test_warn_passes_every_chunk_at_once_and_reports() -> None:
    events: list[Detection] = []
    guard = PIIDetector(strategy="warn", on_detection=events.append)
    chunks = [delta("Card 4111 1111"), delta(" 1111 1111 ok")]
    app = ops.apply(chunks, guard)
    out = [c async for c in app]
    assert [c for c in out if c.type == "text-delta"] == chunks  # the very same objects
    assert [(e.type, e.value, e.source) for e in events] == [("credit-card", CARD, "stream")]
    assert app.state("pii-detector")["detections"][0]["type"] == "credit-card"


async def test_filter_removes_values_from_the_stream() -> None:
    out = await run_stream(PIIDetector(strategy="filter"), ["mail ada@", "example.com now"])
    assert text_of(out) == "mail  now"


async def test_on_detection_errors_are_ignored() -> None:
    def broken(event: Detection) -> None:
        raise RuntimeError("callback bug")

    out = await run_stream(PIIDetector(on_detection=broken, redaction_method="placeholder"),
                           ["ada@example.com "])
    assert text_of(out) == "[EMAIL] "


# ----------------------------------------------------------------------------- in the agent


async def test_input_is_redacted_before_the_model_and_the_store(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "m.db"))
    model = ScriptedModel([text("Noted.")])
    pii = PIIDetector(redaction_method="placeholder")
    agent = Agent(id="a", model=model, input_processors=[pii], memory=memory)
    await agent.generate(f"My card is {CARD}", thread_id="t", resource_id="u")
    assert model.requests[0].prompt[-1]["content"] == "My card is [CREDIT_CARD]"
    stored = await memory.get_messages("t")
    assert [m.content.parts[0].text for m in stored] == ["My card is [CREDIT_CARD]", "Noted."]
    await memory.close()


async def test_input_block_and_filter() -> None:
    model = ScriptedModel([text("never")])
    blocked = await Agent(id="a", model=model, input_processors=[
        PIIDetector(strategy="block", retry=True)]).generate("ssn 123-45-6789")
    assert blocked.tripwire is not None and model.calls == 0
    assert blocked.tripwire.reason == "PII detected in input. Types: ssn"
    assert blocked.tripwire.retry is False  # process_input has no step to retry

    model = ScriptedModel([text("ok")])
    await Agent(id="a", model=model, input_processors=[PIIDetector(strategy="filter")]
                ).generate(["hello", "my ssn is 123-45-6789"])
    assert [m["content"] for m in model.requests[0].prompt if m["role"] == "user"] == ["hello"]


@tool
def lookup_customer(customer_id: str) -> dict[str, Any]:
    """Look a customer up."""
    return {"name": "Ada", "email": "ada@example.com", "notes": ["card on file " + CARD]}


async def test_tool_results_are_redacted_for_the_model_the_client_and_the_store() -> None:
    model = ScriptedModel([tool_call("lookup_customer", {"customer_id": "C-1"}, id="c1"),
                           text("Done.")])
    agent = Agent(id="a", model=model, tools=[lookup_customer],
                  output_processors=[PIIDetector(redaction_method="placeholder")])
    stream = agent.stream("who is C-1?")
    chunks = [c async for c in stream]
    result = await stream.result()
    redacted = {"name": "Ada", "email": "[EMAIL]", "notes": ["card on file [CREDIT_CARD]"]}
    assert next(c for c in chunks if c.type == "tool-result").payload.result == redacted
    tool_msg = model.requests[1].prompt[-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"][0]["result"] == redacted
    stored = [p.tool_invocation.result for m in result.messages for p in m.content.parts
              if p.type == "tool-invocation"]
    assert stored == [redacted]


async def test_tool_result_block_retries_the_step() -> None:
    model = ScriptedModel([tool_call("lookup_customer", {"customer_id": "C-1"}),
                           text("I cannot share that.")])
    agent = Agent(id="a", model=model, tools=[lookup_customer], max_processor_retries=1,
                  output_processors=[PIIDetector(strategy="block", retry=True)])
    result = await agent.generate("who is C-1?")
    assert result.tripwire is None and result.text == "I cannot share that."
    assert result.steps[0].finish_reason == "retry"
    assert "PII detected in tool result" in model.requests[1].prompt[-1]["content"]


@pytest.mark.parametrize("size", range(1, 9), ids=lambda n: f"chunk-size-{n}")
async def test_stored_equals_streamed_through_memory(tmp_path: Path, size: int) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "m.db"))
    answer = f"Your card {CARD} and mail ada@example.com are on file."
    agent = Agent(id="a", model=ScriptedModel([text(answer, chunk_size=size)]),
                  output_processors=[PIIDetector()], memory=memory)
    stream = agent.stream("what do you have?", thread_id="t", resource_id="u")
    streamed = text_of([c async for c in stream])
    assert streamed == "Your card **** **** **** 1111 and mail a*a@*******.com are on file."
    stored = await memory.get_messages("t")
    assert stored[-1].role == "assistant"
    assert "".join(p.text for p in stored[-1].content.parts if p.type == "text") == streamed
    assert (await stream.result()).text == streamed
    await memory.close()


async def test_reasoning_is_redacted_too_and_stored_as_streamed(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "m.db"))
    model = ScriptedModel([[reasoning("The user is ada@example.com, card 4111 1111 1111 1111."),
                            text("Done.")]])
    agent = Agent(id="a", model=model, output_processors=[
        PIIDetector(redaction_method="placeholder", phase="output")], memory=memory)
    stream = agent.stream("x", thread_id="t", resource_id="u")
    chunks = [c async for c in stream]
    streamed = "".join(c.payload.text for c in chunks if c.type == "reasoning-delta")
    assert streamed == "The user is [EMAIL], card [CREDIT_CARD]."
    stored = (await memory.get_messages("t"))[-1].content.parts
    assert [p.text for p in stored if p.type == "reasoning"] == [streamed]
    await memory.close()

    off = PIIDetector(include_reasoning=False, phase="output")
    chunks = [c async for c in Agent(id="a", model=ScriptedModel([[reasoning(
        "ada@example.com"), text("ok")]]), output_processors=[off]).stream("x")]
    assert "ada@example.com" in "".join(c.payload.text for c in chunks
                                        if c.type == "reasoning-delta")


# ----------------------------------------------------------------------------- reversible


async def test_reversible_round_trip_model_and_store_see_placeholders(tmp_path: Path) -> None:
    memory = Memory(store=SQLiteStore(tmp_path / "m.db"))
    model = ScriptedModel([text("I will write to <EMAIL_1> and call <PHONE_1>.", chunk_size=3)])
    pii = PIIDetector(redaction_method="reversible")
    agent = Agent(id="a", model=model, input_processors=[pii], output_processors=[pii],
                  memory=memory)
    vault = PlaceholderVault()
    stream = agent.stream("I am ada@example.com, phone (555) 123-4567",
                          request_context={"pii_vault": vault}, thread_id="t", resource_id="u")
    client = text_of([c async for c in ops.apply(stream, RestorePlaceholders(vault))])
    assert client == "I will write to ada@example.com and call (555) 123-4567."
    assert model.requests[0].prompt[-1]["content"] == "I am <EMAIL_1>, phone <PHONE_1>"
    stored = [m.content.parts[0].text for m in await memory.get_messages("t")]
    assert stored == ["I am <EMAIL_1>, phone <PHONE_1>",
                      "I will write to <EMAIL_1> and call <PHONE_1>."]
    await memory.close()


async def test_the_vault_is_created_in_request_context_when_missing() -> None:
    model = ScriptedModel([text("ok")])
    agent = Agent(id="a", model=model, input_processors=[PIIDetector(
        redaction_method="reversible")])
    ctx: dict[str, Any] = {}
    await agent.generate("mail ada@example.com", request_context=ctx)
    assert ctx["pii_vault"].restore("<EMAIL_1>") == "ada@example.com"


PLACEHOLDER_TEXT = "Mail <EMAIL_1> or <EMAIL_2>."


@pytest.mark.parametrize("pieces", two_way(PLACEHOLDER_TEXT) + three_way(PLACEHOLDER_TEXT)[::7],
                         ids=lambda p: "|".join(p))
async def test_restore_is_boundary_safe(pieces: list[str]) -> None:
    vault = PlaceholderVault()
    vault.placeholder("ada@example.com", "email")
    vault.placeholder("bot@example.com", "email", origin="stream")
    out = await run_stream(RestorePlaceholders(vault), pieces)
    # <EMAIL_2> came from the model's own output: it stays a placeholder for the client.
    assert text_of(out) == "Mail ada@example.com or <EMAIL_2>."


async def test_restore_refuses_to_run_inside_the_agent() -> None:
    agent = Agent(id="a", model=ScriptedModel([text("hi")]),
                  output_processors=[RestorePlaceholders(PlaceholderVault())])
    stream = agent.stream("x")
    with pytest.raises(ProcessorError, match="at the edge"):
        await stream.result()


async def test_output_values_get_placeholders_but_are_not_restored() -> None:
    vault = PlaceholderVault()
    vault.placeholder("ada@example.com", "email")
    pii = PIIDetector(redaction_method="reversible", vault=vault)
    model = ScriptedModel([text("Ada is ada@example.com, Bob is bob@example.com.")])
    stream = Agent(id="a", model=model, output_processors=[pii]).stream("x")
    client = text_of([c async for c in ops.apply(stream, RestorePlaceholders(vault))])
    assert client == "Ada is ada@example.com, Bob is <EMAIL_2>."


def test_vault_snapshot_round_trip() -> None:
    vault = PlaceholderVault()
    assert vault.placeholder("ada@example.com", "email") == "<EMAIL_1>"
    assert vault.placeholder("4111", "credit-card", origin="tool-result") == "<CREDIT_CARD_1>"
    copy = PlaceholderVault.from_dict(vault.to_dict())
    assert copy.restore({"a": ["<EMAIL_1>", "<CREDIT_CARD_1>"]}) == {
        "a": ["ada@example.com", "<CREDIT_CARD_1>"]}
    assert copy.restore("<CREDIT_CARD_1>", origins=None) == "4111"
    assert copy.placeholder("bob@example.com", "email") == "<EMAIL_2>"
    with pytest.raises(InvalidArgument, match="snapshot"):
        PlaceholderVault.from_dict({"entries": [{"token": "<X_1>"}]})
