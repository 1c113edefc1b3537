"""``TokenLimiter``: keep the prompt inside a token budget, and cap how much a response streams.

Mastra's ``TokenLimiterProcessor`` (id ``token-limiter``), counting with ``streamkit.tokens`` — the
same counter the scripted model reports usage with and ``CostGuard`` bills with — instead of a
character heuristic, so the prompt budget covers the system prompt and the tool schemas exactly
as a provider bills them (Mastra issue #14115).

Decisions:

* Prompt trimming (``best-fit`` / ``contiguous``) happens in ``process_llm_request``, on the prompt
  of that one model call: nothing is removed from the message list or from memory. The current
  turn — everything from the last user message on, including this run's tool calls and results
  and retry feedback — is never trimmed (Mastra issue #24110); neither are leading system messages.
* ``memory-only`` trims in ``process_input_step`` (before every model call, the first included):
  it removes the oldest *remembered* messages from the list. Input, response and context
  messages are never removed.
* The output side cuts the delta that crosses the limit to exactly the tokens left (Mastra drops
  it whole), so a client sees the longest allowed answer, and what is stored equals what was
  streamed. ``process_output_result`` is not needed for that: the stored message is built from
  the streamed chunks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from streamkit import MessageList, Processor, TripWire
from streamkit.chunks import DataChunk, ObjectChunk, TextDelta
from streamkit.errors import InvalidArgument, InvalidType
from streamkit.tokens import TokenCounter, get_counter
from streamkit.validate import is_int

from ._model_check import check_choice

__all__ = ["TokenLimiter"]

STRATEGIES = ("truncate", "abort")
COUNT_MODES = ("cumulative", "part")
TRIM_MODES = ("best-fit", "contiguous", "memory-only")
PHASES = ("all", "input", "output")


def _groups(messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Prompt messages grouped so that an assistant tool call and the ``tool`` message with its
    results are kept or dropped together (a provider rejects one without the other)."""
    groups: list[list[dict[str, Any]]] = []
    for message in messages:
        if message.get("role") == "tool" and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


class TokenLimiter(Processor):
    """Trims the prompt to ``limit`` tokens and limits the streamed answer to ``limit`` tokens.

    Put it in ``input_processors`` to bound the prompt, in ``output_processors`` to bound the
    answer, or the same instance in both.

    Prompt side (``trim_mode``):

    * ``"best-fit"`` (default): walk older messages newest → oldest and keep each group that
      still fits, skipping those that do not.
    * ``"contiguous"``: the same walk, stopping at the first group that does not fit (the kept
      history has no holes).
    * ``"memory-only"``: once the whole prompt exceeds ``limit``, remove the oldest remembered
      messages until it is at most ``limit - at_max_remove_tokens``; ``on_memory_trim`` is called
      with ``{"removed": [messages], "tokens_before": n, "tokens_after": m}``.

    Tripwires (never retried): the system messages and tool schemas alone exceed the limit
    (metadata ``{"systemTokens", "limit"}``), or the current turn does not fit (metadata
    ``{"tokens", "limit", "messageCount"}``).

    Output side (``process_output_stream``): counts the text of ``text-delta`` chunks and the JSON
    of ``object`` chunks — across the whole request (``count_mode="cumulative"``) or per chunk
    (``"part"``). Past the limit, ``strategy="truncate"`` cuts the crossing delta to the tokens
    left, drops what follows and emits ``{"type": "data-token-limit-reached", "data":
    {"processorId", "limit", "tokens"}, "transient": true}`` once; ``strategy="abort"`` trips
    the wire with Mastra's reason, ``"Token limit of 3 exceeded (current: 4)"`` (metadata
    ``{"processorId", "limit", "tokens"}``).

    Marble (``limit`` = 3 tokens, truncate)::

        --"a b"--" c d"--" e"--|   TokenLimiter(3)   --"a b"--" c"--[limit]--|

    Args:
        limit: the token budget (an int > 0). ``TokenLimiter(1000)`` works.
        strategy: ``"truncate"`` (default) or ``"abort"``, for the output side.
        count_mode: ``"cumulative"`` (default) or ``"part"``.
        trim_mode: ``"best-fit"`` (default), ``"contiguous"`` or ``"memory-only"``.
        at_max_remove_tokens: ``memory-only`` headroom (default 25 % of ``limit``).
        counter: a ``streamkit.tokens.TokenCounter``; default: the one for the step's model.
        on_memory_trim: called (sync) after a ``memory-only`` trim.
        phase: ``"all"`` (default, as Mastra), ``"input"`` (prompt hooks only) or ``"output"``
            (the stream hook only) — so one limiter can bound prompts and another answers.
        id: processor id (default ``"token-limiter"``).

    Example:
        >>> agent = Agent(id="a", model=model, memory=memory,
        ...               input_processors=[TokenLimiter(8_000, phase="input")],
        ...               output_processors=[TokenLimiter(500, phase="output")])
    """

    id = "token-limiter"
    name = "Token Limiter"
    multi_emit = True

    def __init__(self, limit: int, *, strategy: str = "truncate", count_mode: str = "cumulative",
                 trim_mode: str = "best-fit", at_max_remove_tokens: int | None = None,
                 counter: TokenCounter | None = None,
                 on_memory_trim: Callable[[dict[str, Any]], Any] | None = None,
                 phase: str = "all", id: str | None = None) -> None:
        super().__init__(id)
        if not is_int(limit):
            raise InvalidType(f"limit must be a positive int (tokens), got "
                              f"{type(limit).__name__} {limit!r}")
        if limit <= 0:
            raise InvalidArgument(f"limit must be a positive int (tokens), got {limit!r}")
        self.limit = limit
        self.strategy = check_choice("strategy", strategy, STRATEGIES)
        self.count_mode = check_choice("count_mode", count_mode, COUNT_MODES)
        self.trim_mode = check_choice("trim_mode", trim_mode, TRIM_MODES)
        if at_max_remove_tokens is not None and not 0 <= at_max_remove_tokens < limit:
            raise InvalidArgument(f"at_max_remove_tokens must be in [0, limit={limit}), got "
                                  f"{at_max_remove_tokens}")
        self.at_max_remove_tokens = limit // 4 if at_max_remove_tokens is None \
            else at_max_remove_tokens
        self.counter = counter
        self.on_memory_trim = on_memory_trim
        self.phase = check_choice("phase", phase, PHASES)
        # The hooks exist only for the chosen phase, so an input-only limiter in
        # input_processors is not reported as having an output hook that never runs.
        if phase in ("input", "all"):
            self.process_input_step = self._trim_memory
            self.process_llm_request = self._trim_request
        if phase in ("output", "all"):
            self.process_output_stream = self._limit_stream

    def _counter(self, model: Any = None) -> TokenCounter:
        return self.counter or get_counter(model)

    # -- prompt side --------------------------------------------------------------------------

    def _trim_memory(self, message_list: MessageList, tools: Any, model: Any,
                     state: dict[str, Any]) -> None:
        if self.trim_mode != "memory-only":
            return None
        counter = self._counter(model)
        before = total = counter.count_request(message_list.prompt(), tools)
        if total <= self.limit:
            return None
        target = self.limit - self.at_max_remove_tokens
        removed = []
        for message in message_list.get.remembered.db():  # oldest first
            if total <= target:
                break
            removed.extend(message_list.remove_by_ids([message.id]))
            total = counter.count_request(message_list.prompt(), tools)
        if removed:
            state["memory_trimmed"] = state.get("memory_trimmed", 0) + len(removed)
            if self.on_memory_trim is not None:
                self.on_memory_trim({"removed": removed, "tokens_before": before,
                                     "tokens_after": total})
        return None

    def trim_prompt(self, prompt: list[dict[str, Any]], *, tools: Any = None,
                    counter: TokenCounter | None = None) -> tuple[list[dict[str, Any]], int]:
        """``prompt`` trimmed to the limit by ``trim_mode`` (best-fit or contiguous), and its
        token count. Raises ``TripWire`` when even the protected messages do not fit.

        Example:
            >>> kept, tokens = TokenLimiter(40).trim_prompt(
            ...     [{"role": "user", "content": "old " * 50}, {"role": "user", "content": "hi"}])
            >>> [m["content"] for m in kept], tokens
            (['hi'], 8)
        """
        counter = counter or self._counter()
        rules = counter.rules
        head_end = 0
        while head_end < len(prompt) and prompt[head_end].get("role") == "system":
            head_end += 1
        last_user = max((i for i, m in enumerate(prompt) if m.get("role") == "user"),
                        default=len(prompt))
        tail_start = max(last_user, head_end)
        head, middle, tail = prompt[:head_end], prompt[head_end:tail_start], prompt[tail_start:]
        tool_tokens = counter.count_tools(tools)
        system_tokens = sum(counter.count_message(m) for m in head) + tool_tokens \
            + rules.reply_priming
        if system_tokens > self.limit:
            raise TripWire(f"System messages and tool schemas alone use {system_tokens} tokens, "
                           f"more than the limit of {self.limit}",
                           metadata={"systemTokens": system_tokens, "limit": self.limit},
                           processor_id=self.id)
        used = system_tokens + sum(counter.count_message(m) for m in tail)
        if used > self.limit:
            raise TripWire(f"The current turn needs {used} tokens, more than the limit of "
                           f"{self.limit}", processor_id=self.id,
                           metadata={"tokens": used, "limit": self.limit,
                                     "messageCount": len(tail)})
        kept: list[list[dict[str, Any]]] = []
        for group in reversed(_groups(middle)):
            cost = sum(counter.count_message(m) for m in group)
            if used + cost <= self.limit:
                kept.append(group)
                used += cost
            elif self.trim_mode == "contiguous":
                break
        trimmed = head + [m for group in reversed(kept) for m in group] + tail
        return trimmed, used

    def _trim_request(self, prompt: list[dict[str, Any]], tools: Any, model: Any,
                      state: dict[str, Any]) -> dict[str, Any] | None:
        state["model"] = model
        if self.trim_mode == "memory-only":
            return None
        trimmed, used = self.trim_prompt(prompt, tools=tools, counter=self._counter(model))
        state["prompt_tokens"] = used
        if len(trimmed) == len(prompt):
            return None
        state["trimmed_messages"] = state.get("trimmed_messages", 0) + len(prompt) - len(trimmed)
        return {"prompt": trimmed}

    # -- output side --------------------------------------------------------------------------

    def _reached(self, tokens: int) -> DataChunk:
        return DataChunk(type="data-token-limit-reached", transient=True,
                         data={"processorId": self.id, "limit": self.limit, "tokens": tokens})

    def _limit_stream(self, part: Any, state: dict[str, Any], abort: Any) -> Any:
        cls = part.__class__
        if cls is TextDelta:
            text = part.payload.text
        elif cls is ObjectChunk:
            text = json.dumps(msgspec.to_builtins(part.object), separators=(",", ":"))
        else:
            return part
        counter = state.get("counter")
        if counter is None:  # chosen once per request, not per chunk
            counter = state["counter"] = self._counter(state.get("model"))
        n = counter.count_text(text)
        spent = state.get("tokens", 0) if self.count_mode == "cumulative" else 0
        total = spent + n
        if self.count_mode == "cumulative":
            state["tokens"] = total
        if total <= self.limit:
            return part
        if self.strategy == "abort":
            abort(f"Token limit of {self.limit} exceeded (current: {total})",
                  metadata={"processorId": self.id, "limit": self.limit, "tokens": total})
        out: list[Any] = []
        left = self.limit - spent
        if cls is TextDelta and left > 0:
            out.append(TextDelta(id=part.payload.id, text=counter.truncate(text, left),
                                 run_id=part.run_id, from_=part.from_))
        if not state.get("reached"):
            state["reached"] = True
            out.append(self._reached(total))
        return out or None
