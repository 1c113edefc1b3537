"""The leak matrix: every secret kind × every way out of a run × every guard — zero leaks.

Each case runs a real ``Agent`` with the guard in both ``input_processors`` and
``output_processors`` and ``Memory(SQLiteStore(file))``, as an attacker would arrange it: the
secret split across deltas, interleaved with chunks of other kinds, in reasoning, in streamed
tool-call arguments, returned by a tool (as a value, as a dict key, inside a dataclass, a struct,
a set or bytes), raised by a tool, written by a tool as a ``data-*`` chunk, split across two
steps, sent by the user, and written with look-alike characters. A leak is the secret's
*canonical* value (its detection view with separators dropped) anywhere in: the consumer's
chunks (their wire JSON, and the texts a client joins: text deltas, reasoning deltas, argument
deltas), the result (text, steps, messages), the stored thread, ``await stream.text``, or what
the model was sent.

The property tests (hypothesis) at the end check the stronger claim for text: over random splits,
chunks of other kinds interleaved between the deltas and look-alike rewrites, what the consumer
reads == what the store keeps == the one-shot redaction of the whole text.

How each piece works is tested in ``test_guard_paths.py`` and ``test_fold.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit import Agent, ops, tool, wire
from streamkit.chunks import (
    DataChunk,
    Finish,
    FinishPayload,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    StepOutputPayload,
    StepResultPayload,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallInputStreamingEnd,
    ToolCallInputStreamingStart,
    UsagePayload,
)
from streamkit.memory import Memory, SQLiteStore
from streamkit_operators import PIIDetector, RegexFilter, Rule, find_all
from streamkit_operators._fold import fold

from ..conftest import as_mode

#: One sample of each secret kind.
SECRETS = {
    "card": "4111 1111 1111 1111",
    "email": "ada.lovelace@example.com",
    "phone": "(555) 123-4567",
    "api-key": "sk-live_abcdefghijklmnop1234",
    "aws-key": "AKIAIOSFODNN7EXAMPLE",
    "ssn": "123-45-6789",
    "iban": "GB82 WEST 1234 5698 7654 32",
}

#: The same secrets as an attacker would write them to slip past a guard: look-alike digits,
#: separators and letters, invisible characters inside (see ``_fold``).
LOOKALIKES = {
    "card": "４１１１\u00a0１１１１\u200b.1111/1111",
    "email": "ada\u00ad.lovelace＠example\u200d.com",
    "phone": "(٥٥٥)\u202f١٢٣\u2011٤٥٦٧",
    "api-key": "\u0455k-live_abcdefgh\u200bijklmnop1234",
    "aws-key": "\u0410KIA\u2060IOSFODNN7EXAMPLE",
    "ssn": "123 45 6789",
    "iban": "GB82\u00a0WEST\u00a01234\u200b5698 ７６５４ 32",
}

#: A user's own rules, one per kind: a custom rule gets the same detection view.
CUSTOM_RULES = [
    Rule("card", r"\d{4}(?:[ ./-]?\d{4}){3}"),
    Rule("email", r"[\w.]+@[\w-]+(?:\.[\w-]+)+"),
    Rule("phone", r"\(\d{3}\) ?\d{3}-\d{4}"),
    Rule("api-key", r"sk-live_\w{16,}"),
    Rule("aws-key", r"AKIA[A-Z0-9]{16}"),
    Rule("ssn", r"\d{3}[- ]\d{2}[- ]\d{4}"),
    Rule("iban", r"GB\d{2}(?: ?[A-Z0-9]{4}){4} ?\d{2}"),
]

#: The guards, and the secret kinds each is configured for (no preset finds IBANs).
GUARDS: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "pii-detector": (lambda: PIIDetector(strategy="redact"), tuple(SECRETS)),
    "regex-presets": (lambda: RegexFilter(presets=["pii", "secrets"], strategy="redact"),
                      ("card", "email", "phone", "api-key", "aws-key", "ssn")),
    "custom-rule": (lambda: RegexFilter(rules=CUSTOM_RULES, strategy="redact"), tuple(SECRETS)),
}

ENV = {"run_id": "r", "from_": "AGENT"}


def compact(text: str) -> str:
    """The canonical characters of ``text``: its detection view, letters and digits only."""
    return re.sub(r"[\W_]+", "", fold(text).text).lower()


# ----------------------------------------------------------------------------- a raw model


class RawModel:
    """A model that streams exactly the chunks it is given, one list per step (re-stamped with
    the run id, closed by a ``finish``) — so a test can put any chunk between two deltas."""

    provider = "raw"
    model_id = "raw-model"

    def __init__(self, steps: list[list[Any]]) -> None:
        self.steps = steps
        self.prompts: list[Any] = []

    def stream(self, request: Any) -> Any:
        self.prompts.append(request.prompt)
        chunks = self.steps[len(self.prompts) - 1]

        async def play() -> Any:
            calls = False
            for chunk in chunks:
                calls = calls or chunk.__class__ is ToolCall
                yield chunk if chunk.__class__ is DataChunk else \
                    msgspec.structs.replace(chunk, run_id=request.run_id)
            yield Finish(payload=FinishPayload(
                step_result=StepResultPayload(reason="tool-calls" if calls else "stop"),
                output=StepOutputPayload(usage=UsagePayload(input_tokens=1, output_tokens=1,
                                                            total_tokens=2))),
                run_id=request.run_id, from_="AGENT")
        return play()


def text_part(text: str, id: str = "t1", size: int = 3) -> list[Any]:
    return [TextStart(id=id, **ENV),
            *[TextDelta(id=id, text=text[i:i + size], **ENV) for i in range(0, len(text), size)],
            TextEnd(id=id, **ENV)]


def call(name: str, args: dict[str, Any], id: str = "c1", size: int = 4) -> list[Any]:
    raw = json.dumps(args, ensure_ascii=False)
    return [ToolCallInputStreamingStart(tool_call_id=id, tool_name=name, **ENV),
            *[ToolCallDelta(tool_call_id=id, tool_name=name, args_text_delta=raw[i:i + size],
                            **ENV) for i in range(0, len(raw), size)],
            ToolCallInputStreamingEnd(tool_call_id=id, **ENV),
            ToolCall(tool_call_id=id, tool_name=name, args=args, **ENV)]


class Owner(msgspec.Struct):
    name: str


@dataclasses.dataclass
class Account:
    owner: Owner
    tags: set[str]
    raw: bytes


def tools(secret: str, mode: str) -> list[Any]:
    """Tools that hand the secret back every way a tool can."""

    def reveal(q: str) -> dict[str, Any]:
        """Returns the secret as a value and as a key."""
        return {"found": f"it is {secret}", secret: [secret]}

    def explode(q: str) -> str:
        """Fails with the secret in its message."""
        raise ValueError(f"no account for {secret}")

    def describe(q: str) -> Any:
        """Returns the secret inside objects the wire encodes: a dataclass, a struct, a set,
        bytes."""
        return Account(owner=Owner(secret), tags={secret}, raw=secret.encode())

    def report(q: str, writer: Any) -> str:
        """Writes the secret in a data chunk."""
        writer.custom({"type": "data-lookup", "data": {"match": secret, secret: {"v": secret}}})
        return "written"

    return [tool(as_mode(fn, mode)) for fn in (reveal, describe, explode, report)]


# ----------------------------------------------------------------------------- the paths


def half(secret: str) -> tuple[str, str]:
    return secret[:len(secret) // 2], secret[len(secret) // 2:]


def _interleaved(secret: str) -> list[list[Any]]:
    a, b = half(secret)
    return [[TextStart(id="t1", **ENV), TextDelta(id="t1", text=f"mine is {a}", **ENV),
             ReasoningStart(id="r1", **ENV), ReasoningDelta(id="r1", text="hmm ", **ENV),
             DataChunk("data-progress", {"pct": 50}),
             TextDelta(id="t2", text="aside. ", **ENV),
             ToolCallDelta(tool_call_id="c9", tool_name="reveal", args_text_delta='{"q"', **ENV),
             TextDelta(id="t1", text=f"{b} ok", **ENV), ReasoningEnd(id="r1", **ENV),
             TextEnd(id="t1", **ENV), TextEnd(id="t2", **ENV)]]


def _reasoning(secret: str) -> list[list[Any]]:
    return [[ReasoningStart(id="r1", **ENV),
             *[ReasoningDelta(id="r1", text=p, **ENV) for p in half(f"I see {secret} here")],
             ReasoningEnd(id="r1", **ENV), *text_part("fine")]]


def _across_steps(secret: str) -> list[list[Any]]:
    a, b = half(secret)
    return [[*text_part(f"mine is {a}"), *call("reveal", {"q": "x"})],
            [*text_part(f"{b} ok", id="t2")]]


#: path → (the model's steps for a secret, the user's prompt); tool paths call a tool.
PATHS: dict[str, Callable[[str], tuple[list[list[Any]], str]]] = {
    "text-split": lambda s: ([text_part(f"mine is {s}, ok", size=2)], "hi"),
    "interleaved": lambda s: (_interleaved(s), "hi"),
    "reasoning": lambda s: (_reasoning(s), "hi"),
    "tool-args": lambda s: ([call("reveal", {"q": f"use {s}", s: 1}), text_part("done")], "hi"),
    "tool-result": lambda s: ([call("reveal", {"q": "x"}), text_part("done")], "hi"),
    "tool-result-object": lambda s: ([call("describe", {"q": "x"}), text_part("done")], "hi"),
    "tool-error": lambda s: ([call("explode", {"q": "x"}), text_part("done")], "hi"),
    "data-chunk": lambda s: ([call("report", {"q": "x"}), text_part("done")], "hi"),
    "across-steps": lambda s: (_across_steps(s), "hi"),
    "input": lambda s: ([text_part("noted")], f"remember {s} please"),
}

TOOL_PATHS = ("tool-args", "tool-result", "tool-result-object", "tool-error", "data-chunk")


def consumer_view(chunks: list[Any]) -> str:
    """Everything a client can read: each chunk's wire JSON, and the texts it joins."""
    joined: dict[str, list[str]] = {"text": [], "reasoning": [], "args": []}
    for c in chunks:
        if c.__class__ is TextDelta:
            joined["text"].append(c.payload.text)
        elif c.__class__ is ReasoningDelta:
            joined["reasoning"].append(c.payload.text)
        elif c.__class__ is ToolCallDelta:
            joined["args"].append(c.payload.args_text_delta)
    return "\n".join(["".join(v) for v in joined.values()]
                     + [wire.encode(c).decode() for c in chunks])


def dump(value: Any) -> str:
    return json.dumps(msgspec.to_builtins(value), ensure_ascii=False)


async def attack(tmp_path: Path, guard: Any, steps: list[list[Any]], prompt: str,
                 tools_: list[Any]) -> dict[str, Any]:
    memory = Memory(store=SQLiteStore(str(tmp_path / "memory.db")))
    model = RawModel(steps)
    agent = Agent(id="victim", model=model, tools=tools_, input_processors=[guard],
                  output_processors=[guard], memory=memory)
    stream = agent.stream(prompt, thread_id="t", resource_id="u")
    chunks = [c async for c in stream]
    result = await stream.result()
    stored = await memory.recall("t", "u")
    await memory.close()
    return {"chunks": chunks, "result": result, "stored": stored, "text": await stream.text,
            "model": model}


def leaks(run: dict[str, Any], secret: str) -> list[str]:
    """Where the secret's canonical value appears."""
    result = run["result"]
    views = {
        "consumer": consumer_view(run["chunks"]),
        "result": dump([result.text, result.steps, result.messages]),
        "stored": dump(run["stored"]),
        "stream.text": run["text"],
        "model": json.dumps(run["model"].prompts, ensure_ascii=False, default=str),
    }
    canonical = compact(secret)
    return [where for where, view in views.items() if canonical in compact(view)]


CASES = [pytest.param(g, kind, path, id=f"{g}-{kind}-{path}")
         for g, (_, kinds) in GUARDS.items() for kind in kinds for path in PATHS]


class NoGuard:
    """A processor that changes nothing: the matrix's control group."""

    id = "no-guard"

    def process_input(self, messages: list[Any]) -> None:
        return None

    def process_output_stream(self, part: Any) -> Any:
        return part


@pytest.mark.parametrize("secret", [SECRETS["card"], LOOKALIKES["card"]],
                         ids=["plain", "look-alike"])
@pytest.mark.parametrize("path", PATHS)
async def test_without_a_guard_every_path_leaks(tmp_path: Path, path: str, secret: str) -> None:
    """The control: with no guard, each path does carry the secret out, and ``leaks`` sees it
    (so the zero-leak assertions below can fail)."""
    steps, prompt = PATHS[path](secret)
    run = await attack(tmp_path, NoGuard(), steps, prompt, tools(secret, "sync"))
    where = leaks(run, secret)
    assert ("model" in where) if path == "input" else ("consumer" in where and "stored" in where)


@pytest.mark.parametrize("guard_name, kind, path", CASES)
async def test_no_secret_leaks(tmp_path: Path, guard_name: str, kind: str, path: str) -> None:
    secret = SECRETS[kind]
    steps, prompt = PATHS[path](secret)
    run = await attack(tmp_path, GUARDS[guard_name][0](), steps, prompt, tools(secret, "async"))
    assert leaks(run, secret) == []
    assert_consistent(run)


@pytest.mark.parametrize("guard_name, kind", [
    pytest.param(g, kind, id=f"{g}-{kind}") for g, (_, kinds) in GUARDS.items()
    for kind in kinds])
@pytest.mark.parametrize("path", ["text-split", "interleaved", "tool-result", "input"])
async def test_no_look_alike_leaks(tmp_path: Path, guard_name: str, kind: str, path: str
                                   ) -> None:
    secret = LOOKALIKES[kind]
    assert compact(secret) == compact(SECRETS[kind])  # the same secret to a reader
    steps, prompt = PATHS[path](secret)
    run = await attack(tmp_path, GUARDS[guard_name][0](), steps, prompt, tools(secret, "sync"))
    assert leaks(run, secret) == []
    assert_consistent(run)


@pytest.mark.parametrize("path", TOOL_PATHS)
async def test_tools_async_and_sync_alike(tmp_path: Path, path: str, mode: str) -> None:
    secret = SECRETS["card"]
    steps, prompt = PATHS[path](secret)
    run = await attack(tmp_path, PIIDetector(strategy="redact"), steps, prompt,
                       tools(secret, mode))
    assert leaks(run, secret) == []


def assert_consistent(run: dict[str, Any]) -> None:
    """What every summary says is what was emitted: ``result.text`` and the ``finish`` chunk's
    text are the joined text deltas, ``await stream.text`` the final step's (as Mastra's);
    each ``step-finish`` has its step's text and tool calls; the stored assistant text and tool
    outcomes are what was streamed."""
    chunks, result = run["chunks"], run["result"]
    by_part: dict[str, str] = {}  # each text part whole, in the order of its first delta
    for c in chunks:
        if c.__class__ is TextDelta:
            by_part[c.payload.id] = by_part.get(c.payload.id, "") + c.payload.text
    joined = "".join(by_part.values())
    finish = [c for c in chunks if c.type == "finish"]
    assert result.text == joined == finish[-1].payload.output.text
    last_step = max(i for i, c in enumerate(chunks) if c.type == "step-start")
    final: dict[str, str] = {}  # the final step's text parts, whole, as above
    for c in chunks[last_step:]:
        if c.__class__ is TextDelta:
            final[c.payload.id] = final.get(c.payload.id, "") + c.payload.text
    assert run["text"] == "".join(final.values())
    step_texts, calls, parts = [], [], {}
    for c in chunks:
        if c.__class__ is TextDelta:
            parts[c.payload.id] = parts.get(c.payload.id, "") + c.payload.text
        elif c.__class__ is ToolCall:
            calls.append({"toolCallId": c.payload.tool_call_id,
                          "toolName": c.payload.tool_name, "args": c.payload.args})
        elif c.type == "step-finish":
            assert c.payload.output.text == "".join(parts.values())
            assert c.payload.output.tool_calls == calls
            step_texts.append("".join(parts.values()))
            calls, parts = [], {}
    assert [s.text for s in result.steps] == step_texts
    stored = [p for m in run["stored"] if m.role == "assistant" for p in m.content.parts]
    assert "".join(p.text for p in stored if p.type == "text") == joined
    assert "".join(p.text for p in stored if p.type == "reasoning") == "".join(
        c.payload.text for c in chunks if c.__class__ is ReasoningDelta)
    outcomes = {c.payload.tool_call_id: c for c in chunks
                if c.type in ("tool-result", "tool-error")}
    for p in stored:
        if p.type == "tool-invocation":
            inv = p.tool_invocation
            chunk = outcomes[inv.tool_call_id]
            assert inv.args == chunk.payload.args
            if chunk.type == "tool-result":
                assert inv.result == chunk.payload.result
            else:
                assert chunk.payload.error["message"] in inv.error_text
    data = [c.data for c in chunks if c.__class__ is DataChunk and c.type == "data-lookup"]
    assert [p.data for p in stored if p.type == "data-lookup"] == data


@pytest.mark.parametrize("text", [
    pytest.param("pay 4111 1111 1111 1111 4 now", id="a-digit-after"),
    pytest.param("pay 1 4111 1111 1111 1111 now", id="a-digit-before"),
    pytest.param("ref 1234 4111 1111 1111 1111 5678", id="inside-a-longer-run"),
    pytest.param("pay 4111\u00b71111\u00b71111\u00b71111 now", id="middle-dots"),
    pytest.param("pay 4111\u20221111\u20221111\u20221111 now", id="bullets"),
    pytest.param("pay 4111\n1111\n1111\n1111 now", id="line-breaks"),
    pytest.param("pay 4111\t1111\t1111\t1111 now", id="tabs"),
    pytest.param("pay 4111  1111  1111  1111 now", id="double-spaces"),
])
@pytest.mark.parametrize("factory", [PIIDetector, lambda: RegexFilter(presets="pii",
                                                                      strategy="redact")],
                         ids=["pii-detector", "regex-presets"])
async def test_a_card_padded_to_fail_its_checksum_is_still_found(text: str, factory: Any
                                                                 ) -> None:
    """A match that fails its validator (17 digits fail Luhn) does not hide the valid card in
    it; streamed at every 2-way split it comes out as the one-shot redaction."""
    guard = factory()
    whole = one_shot(guard, text)
    assert whole != text and compact(SECRETS["card"]) not in compact(whole)
    for cut in range(1, len(text)):
        chunks = [TextDelta(id="t1", text=text[:cut], **ENV),
                  TextDelta(id="t1", text=text[cut:], **ENV), TextEnd(id="t1", **ENV)]
        out = [c async for c in ops.apply(chunks, guard)]
        assert "".join(c.payload.text for c in out if c.__class__ is TextDelta) == whole


@pytest.mark.parametrize("pattern", [
    pytest.param(r"[a-z]{2}\d{6,8}(?!\d)", id="plain"),
    pytest.param(regex.compile(r"[a-z]{2} \d{6,8} (?!\d)  # an id", regex.I | regex.X),
                 id="verbose-ignorecase"),
])
async def test_a_custom_validated_rule_finds_the_valid_match_inside_a_failed_one(
        pattern: Any) -> None:
    """``AB12345678`` fails the check (an id ends in 7) and its shorter prefixes are followed by
    a digit (no match where they stand: the look-ahead sees the real text), so it stays; the
    two ids that end in 7 are found. Streamed at every 2-way split: the one-shot result."""
    rule = Rule("id", pattern, validate=lambda t: t.endswith("7"))
    guard = RegexFilter(rules=[rule], strategy="redact")
    text = "ids: AB12345678, ab123457 and ab1234567 8"
    whole = one_shot(guard, text)
    assert whole == "ids: AB12345678, [REDACTED] and [REDACTED] 8"
    for cut in range(1, len(text)):
        chunks = [TextDelta(id="t1", text=text[:cut], **ENV),
                  TextDelta(id="t1", text=text[cut:], **ENV), TextEnd(id="t1", **ENV)]
        out = [c async for c in ops.apply(chunks, guard)]
        assert "".join(c.payload.text for c in out if c.__class__ is TextDelta) == whole


# ----------------------------------------------------------------------------- properties


def one_shot(guard: Any, text: str) -> str:
    """The whole text redacted at once: what a guard must stream, whatever the split."""
    findings = find_all(guard.rules, text)
    return guard.handle_findings(text, findings, "stream", {}, {}) if findings else text


#: Look-alike rewrites of one character (each reads as the original).
_REWRITES: dict[str, list[str]] = {
    **{d: [chr(0xFF10 + int(d)), chr(0x0660 + int(d)), chr(0x1D7CE + int(d))] for d in
       "0123456789"},
    " ": ["\u00a0", "\u202f", "\u2007", "\u3000"],
    "-": ["\u2011", "\u2013", "\uff0d"],
    "@": ["\uff20"],
    ".": ["\uff0e"],
    "s": ["\u0455"],
    "a": ["\u0430"],
    "e": ["\u0435"],
    "o": ["\u043e"],
}
_INVISIBLE = ["\u200b", "\u200d", "\u00ad", "\u2060", "\ufeff"]

FILLERS = ["Hello there, ", "the value is ", " and then ", ". Thanks! ", "\n", "ok ", "4 ",
           "item 12 of 30 ", "mail me at ", "call "]


@st.composite
def lookalike(draw: Any, text: str) -> str:
    out = []
    for c in text:
        options = _REWRITES.get(c)
        if options and draw(st.booleans()):
            c = draw(st.sampled_from(options))
        out.append(c)
        if c.isalnum() and draw(st.integers(0, 9)) == 0:
            out.append(draw(st.sampled_from(_INVISIBLE)))
    return "".join(out)


@st.composite
def texts(draw: Any) -> str:
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        pieces.append(draw(st.sampled_from(FILLERS)))
        secret = SECRETS[draw(st.sampled_from(sorted(SECRETS)))]
        pieces.append(draw(lookalike(secret)) if draw(st.booleans()) else secret)
    pieces.append(draw(st.sampled_from(FILLERS)))
    return " ".join(pieces)  # a secret glued to a word is another word (rules want a boundary)


@st.composite
def streamed(draw: Any, text: str) -> list[Any]:
    """``text`` as the deltas of part ``t1``, split anywhere, with chunks of other kinds
    (reasoning, data, argument deltas) between them."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    others = [ReasoningDelta(id="r1", text="let me think. ", **ENV),
              DataChunk("data-progress", {"pct": 1}),
              ToolCallDelta(tool_call_id="c9", tool_name="reveal", args_text_delta="{", **ENV)]
    out: list[Any] = [TextStart(id="t1", **ENV), ReasoningStart(id="r1", **ENV)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b > a:
            out.append(TextDelta(id="t1", text=text[a:b], **ENV))
        if draw(st.booleans()):
            out.append(draw(st.sampled_from(others)))
    return [*out, TextEnd(id="t1", **ENV), ReasoningEnd(id="r1", **ENV)]


_EXAMPLE = itertools.count()

PROPERTY_GUARDS = [pytest.param(factory, kinds, id=name)
                   for name, (factory, kinds) in GUARDS.items()]


@pytest.mark.parametrize("factory, kinds", PROPERTY_GUARDS)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
async def test_consumer_text_is_stored_text_is_one_shot_redaction(
        tmp_path: Path, factory: Callable[[], Any], kinds: tuple[str, ...], data: Any) -> None:
    whole = data.draw(texts())
    chunks = data.draw(streamed(whole))
    db = tmp_path / f"{next(_EXAMPLE)}.db"  # a fresh store per example
    memory = Memory(store=SQLiteStore(str(db)))
    guard = factory()
    agent = Agent(id="p", model=RawModel([chunks]), output_processors=[guard], memory=memory)
    stream = agent.stream("hi", thread_id="t", resource_id="u")
    got = [c async for c in stream]
    await stream.result()
    consumer = "".join(c.payload.text for c in got if c.__class__ is TextDelta)
    (message,) = [m for m in await memory.recall("t", "u") if m.role == "assistant"]
    await memory.close()
    db.unlink()
    stored = "".join(p.text for p in message.content.parts if p.type == "text")
    assert consumer == stored == one_shot(guard, whole)
    assert [k for k in kinds if compact(SECRETS[k]) in compact(consumer)] == []
