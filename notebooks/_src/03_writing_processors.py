# %% [markdown]
# # 03 · Writing processors
#
# A processor is a class with an `id` and any of nine hooks. Each hook receives, **by keyword,
# only the parameters it names** (`def process_output_stream(self, part, state)`), may be `def`
# or `async def`, and is checked when the processor is registered — a misspelled hook or
# parameter is an error, not a hook that silently never runs.
#
# | hook | when | returns |
# |---|---|---|
# | `process_input` | once, before the first step | messages (or `None`) |
# | `process_input_step` | every step, before the model | overrides for this step |
# | `process_llm_request` | just before the model call | a prompt, or a cached response |
# | `process_api_error` | the model call failed | `{"retry": True}` to try again |
# | `process_output_stream` | every chunk | the chunk, a new one, or `None` to drop it |
# | `process_llm_response` | the model's stream ended | `None` |
# | `process_output_step` | after each step | messages |
# | `process_tool_result` | after each tool | messages |
# | `process_output_result` | once, at the end | messages |

# %%
from streamkit import Agent, Processor, display, tool
from streamkit.testing import ScriptedModel, api_error, text, tool_call

# %% [markdown]
# ## Every hook
#
# `Audit` writes down every call. It sits in all three lists — input, output and error
# processors. The script makes the first model call fail with a 503 (the error hook asks for a
# retry), then calls a tool, then answers.


# %%
class Audit(Processor):
    id = "audit"

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def process_input(self, messages):
        self.log.append(f"process_input: {len(messages)} message(s)")

    async def process_input_step(self, step_number):            # async hooks work the same
        self.log.append(f"process_input_step: step {step_number}")

    def process_llm_request(self, step_number, prompt):
        self.log.append(f"process_llm_request: {len(prompt)} prompt message(s)")

    def process_api_error(self, error, retry_count):
        self.log.append(f"process_api_error: {error.status_code}, retry #{retry_count}")
        return {"retry": True}

    def process_output_stream(self, part, state):
        state["chunks"] = state.get("chunks", 0) + 1              # per request, per processor
        return part

    def process_llm_response(self, step_number, from_cache):
        self.log.append(f"process_llm_response: step {step_number}")

    def process_output_step(self, step_number, finish_reason, tool_calls):
        self.log.append(f"process_output_step: {finish_reason}")

    def process_tool_result(self, tool_name, result):
        self.log.append(f"process_tool_result: {tool_name} -> {result}")

    def process_output_result(self, result, state):
        self.log.append(f"process_output_result: {result['finish_reason']}, "
                        f"{state['chunks']} chunks streamed")


@tool
def weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


audit = Audit()
display.show_processors(audit)

# %%
agent = Agent(id="audited", tools=[weather], model=ScriptedModel([
    api_error(503, "overloaded"),
    tool_call("weather", {"city": "Paris"}),
    text("It is sunny in Paris."),
]), input_processors=[audit], output_processors=[audit], error_processors=[audit])
result = await agent.generate("Weather in Paris?")
print("\n".join(audit.log))

# %% [markdown]
# The result shows the answer, each step (the failed call is a rejected attempt), the trace as a
# timeline — which processor did what on which step — and as a table.

# %%
result

# %% [markdown]
# ## State
#
# `state` is one dict per processor per request, shared by all hooks of that processor. Here
# the stream hook counts words and `process_output_result` writes the count as a custom
# `data-word-count` chunk at the end of the stream (hooks that get a `writer` can emit chunks).
# A new request starts with a fresh dict.


# %%
class WordCount(Processor):
    id = "word-count"

    def process_output_stream(self, part, state):
        if part.type == "text-delta":
            state["words"] = state.get("words", 0) + len(part.payload.text.split())
        return part

    def process_output_result(self, state, writer):
        writer.custom({"type": "data-word-count", "data": state.get("words", 0)})


agent = Agent(id="counted", output_processors=[WordCount()],
              model=ScriptedModel([text("One."), text("Now three words.")]))
first = await display.collect(agent.stream("count"))
second = await display.collect(agent.stream("count again"))
display.show_chunks([c for c in first + second if c.type.startswith("data-")])

# %% [markdown]
# ## abort
#
# Any hook can call `abort(reason)` (or `raise TripWire(...)`). The run stops, the stream ends
# with a `tripwire` chunk, and `generate()` returns — it does not raise — with
# `result.tripwire` set. `on_violation` hears about every tripwire.


# %%
class NoPasswords(Processor):
    id = "no-passwords"

    def __init__(self) -> None:
        super().__init__()
        self.violations = []

    def process_input(self, messages, abort):
        for m in messages:
            if "password" in str(m.content.parts).lower():
                abort("Never send passwords to the model", metadata={"field": "password"})

    def on_violation(self, violation):
        self.violations.append(violation)


guard = NoPasswords()
agent = Agent(id="guarded", input_processors=[guard], model=ScriptedModel([text("unused")]))
result = await agent.generate("My password is hunter2")
result

# %%
guard.violations

# %% [markdown]
# ## retry
#
# `abort(reason, retry=True)` from a hook inside a step rolls the step back and runs it again,
# with the reason fed back to the model — when `max_processor_retries` allows it. Here the
# answer must end with a full stop. The live view shows the rejected text withdrawn (struck
# through) the moment the retry is decided, then the new attempt.


# %%
class FullStop(Processor):
    id = "full-stop"

    def process_output_step(self, text, abort, retry_count):
        if text and not text.rstrip().endswith("."):
            abort("End the answer with a full stop", retry=True)


model = ScriptedModel([text("It will rain tomorrow"), text("It will rain tomorrow.")])
agent = Agent(id="pedant", output_processors=[FullStop()], model=model, max_processor_retries=2)
result = await agent.stream("Weather tomorrow?").show()

# %%
result

# %% [markdown]
# The second request to the model carried the feedback as a system message after the
# conversation (it is never stored in memory):

# %%
model.requests[1].prompt[-1]
