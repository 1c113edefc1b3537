# %% [markdown]
# # 05 · Guardrails
#
# Three kinds of guard, built from streamkit's processors and operators:
#
# * **redact** — rewrite the stream as it flows (here: e-mail addresses and card numbers, even
#   when a match is split across chunks);
# * **abort** — stop the run with a tripwire (here: an API key in the answer);
# * **retry** — reject a step and let the model try again with feedback (here: no promises).
#
# Each is shown live: text as it arrives, tripwires in red, withdrawn text struck through.

# %%
import re

from streamkit import Agent, Processor, display, ops
from streamkit.chunks import TextDelta
from streamkit.testing import ScriptedModel, text

# %% [markdown]
# ## Streamed redaction
#
# A regex cannot be applied chunk by chunk: `ada@exa` + `mple.com` only matches once joined.
# `RegexRedactor` holds back the tail of the text that could still grow into a match (everything
# after the last space), and releases it — redacted — when more text arrives, before any
# non-text chunk, and at the end of the stream (`flush_output_stream`). `multi_emit = True`
# lets its stream hook return several chunks (or none).


# %%
class RegexRedactor(Processor):
    multi_emit = True

    def __init__(self, pattern: str, replacement: str, *, id: str) -> None:
        super().__init__(id)
        self.pattern = re.compile(pattern)
        self.replacement = replacement

    def _delta(self, text: str, like: TextDelta) -> TextDelta:
        return TextDelta(text=self.pattern.sub(self.replacement, text), id=like.payload.id,
                         run_id=like.run_id, from_=like.from_)

    def process_output_stream(self, part, state):
        if part.type != "text-delta":
            held = state.pop("held", None)
            return part if held is None else [self._delta(*held), part]
        text = state["held"][0] + part.payload.text if "held" in state else part.payload.text
        cut = max(text.rfind(" "), text.rfind("\n"))
        if cut <= 0:                                 # no boundary yet: keep holding
            state["held"] = (text, part)
            return []
        state["held"] = (text[cut:], part)
        return [self._delta(text[:cut], part)]

    def flush_output_stream(self, state):
        held = state.pop("held", None)
        return [self._delta(*held)] if held else None


EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
CARD = r"\b\d{4}-\d{4}-\d{4}-\d{4}\b"
redact = (RegexRedactor(EMAIL, "[email]", id="redact-email")
          | RegexRedactor(CARD, "[card]", id="redact-card"))
display.show_processors(redact)

# %% [markdown]
# Standalone first: the model's text arrives in 5-character pieces, so the address is split
# across three chunks. Before and after:

# %%
model_text = "Write to ada@example.com, card 4111-1111-1111-1111 is on file."
agent = Agent(id="raw", model=ScriptedModel([text(model_text, chunk_size=5)]))
raw = await display.collect(agent.stream("contact?"))
display.show_chunks([c for c in raw if c.type == "text-delta"], title="as the model sent it")

# %%
clean = await display.collect(raw, redact)
display.show_chunks([c for c in clean if c.type == "text-delta"], title="after redaction")

# %%
clean.text

# %% [markdown]
# ## Abort: a tripwire
#
# `ops.abort` trips when its predicate holds. The stream ends with a `tripwire` chunk; the live
# view shows the red box with the processor and the reason. Order matters: placed after the
# redactors, which release whole words, the guard sees `sk-live-…` in one piece even when the
# model split it across chunks.

# %%
no_keys = ops.abort(lambda c: c.type == "text-delta" and "sk-" in c.payload.text,
                    "the answer contains an API key", id="no-api-keys")


# %% [markdown]
# ## Retry: reject a step, feed the reason back
#
# `NoPromises` looks at the whole step in `process_output_step` and asks for a retry. With
# `max_processor_retries` set, the step is rolled back and re-run; the live view withdraws the
# rejected text.


# %%
class NoPromises(Processor):
    id = "no-promises"

    def process_output_step(self, text, abort):
        if re.search(r"\b(guarantee|promise)", text, re.I):
            abort("Do not promise anything; say what is expected instead", retry=True)


# %% [markdown]
# ## All three guards on one agent

# %%
def support_agent(*answers: str) -> Agent:
    return Agent(id="support", model=ScriptedModel([text(a, chunk_size=6) for a in answers]),
                 output_processors=[redact, no_keys, NoPromises()], max_processor_retries=2)


support_agent().graph()

# %% [markdown]
# Redaction while streaming:

# %%
result = await support_agent(model_text).stream("How do I reach you?").show()

# %% [markdown]
# An API key trips the wire — the run stops, nothing is accepted:

# %%
result = await support_agent("Use the key sk-live-51Hx2 to log in.").stream("Key?").show()

# %%
result

# %% [markdown]
# A promise is rejected and the step re-run:

# %%
result = await support_agent("We guarantee delivery by Friday.",
                             "Delivery is expected by Friday.").stream("When?").show()

# %%
result

# %% [markdown]
# ## Ready-made guards: `streamkit_operators`
#
# The `streamkit-operators` distribution ships these guards ready-made (built only on
# streamkit's public API, so each one is also an example of writing your own). `PIIDetector`
# redacts e-mails and card numbers — in the user's input, in tool results, and in the streamed
# answer with the same boundary-safe hold-back as above; `RegexFilter(presets="secrets")`
# blocks API keys.

# %%
from streamkit_operators import PIIDetector, RegexFilter

pii = PIIDetector(detection_types=["email", "credit-card"])
secrets = RegexFilter(presets="secrets", id="no-secrets")
display.show_processors([pii, secrets])

# %%
model = ScriptedModel([
    text("Write to ada@example.com, card 4111 1111 1111 1111 is on file.", chunk_size=5),
    text("Log in with sk-live_0123456789abcdefgh today.", chunk_size=5),
])
ready_made = Agent(id="support", model=model, input_processors=[pii, secrets],
                   output_processors=[pii, secrets])
result = await ready_made.stream("How do I reach you? I am bob@example.org").show()

# %% [markdown]
# The user's own address was masked before the model saw it:

# %%
model.requests[0].prompt[-1]

# %%
result = await ready_made.stream("Key?").show()

# %% [markdown]
# ## What an attacker tries: look-alikes and interleaving
#
# A card in full-width digits, with a zero-width space inside, still reads as a card. The guards
# match on a *folded view* of the text (look-alike digits, separators and letters folded,
# invisible characters removed) and replace exactly the original characters — streamed in
# 4-character pieces, as here, or all at once:

# %%
lookalike = "My card: ４１１１\u200b １１１１ １１１１ １１１１, thanks."
guard = PIIDetector(detection_types=["email", "credit-card"])
agent = Agent(id="lookalike", model=ScriptedModel([text(lookalike, chunk_size=4)]),
              output_processors=[guard])
result = await agent.stream("Card?").show()

# %%
assert "１１１１ １１１１ １１１１" not in result.text
result.text

# %% [markdown]
# A chunk of another kind between the two halves of a value — a reasoning delta here, or a
# `data-*` chunk, or another text part — does not make the guard release what it holds: each
# text part has its own hold-back, and the other chunk passes at once.

# %%
from streamkit.chunks import DataChunk, ReasoningDelta, TextEnd

env = {"run_id": "r1", "from_": "AGENT"}
interleaved = [TextDelta(id="t1", text="my card is 4", **env),
               ReasoningDelta(id="r1", text="(thinking) ", **env),
               DataChunk("data-progress", {"pct": 50}),
               TextDelta(id="t1", text="111 1111 1111 1111, ok", **env),
               TextEnd(id="t1", **env)]
caught = await display.collect(interleaved, PIIDetector())
display.show_chunks(caught, title="the card's halves, with two chunks between them")

# %%
answer = "".join(c.payload.text for c in caught if c.type == "text-delta")
assert "4111" not in answer
answer
