"""``ModerationProcessor``: a model scores the user's input and the streamed answer against
moderation categories, and the processor blocks, warns or filters.

Mastra's ``ModerationProcessor`` (id ``moderation``), with one deliberate change in the stream:
Mastra makes one model call per ``text-delta`` (``chunkWindow`` adds earlier deltas as context);
here the stream is checked per ``buffering`` window (default: whole sentences), so a word-by-word
stream costs one call per sentence, a phrase split across deltas is judged whole, and no text of
a window reaches the client before its check passed. ``Buffering.passthrough(overlap=n)`` gives
Mastra's per-delta behaviour back. There is no ``process_output_result`` hook: it would check
the same text a second time, and could only make the stored answer differ from the streamed one.

What belongs here: the moderation prompt, its answer, and the strategies. What does not: the
window engine (``_budget``) and the model call (``_model_check``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from streamkit.errors import InvalidArgument

from ._budget import Buffering, Window, WindowGuard
from ._model_check import ERROR_STRATEGIES, ModelAnswerError, ask_json, check_choice
from ._model_guard import check_each, format_scores, scores_of

__all__ = ["ModerationProcessor", "MODERATION_CATEGORIES"]

log = logging.getLogger("streamkit_operators")

#: OpenAI's moderation categories (Mastra's default set).
MODERATION_CATEGORIES: tuple[str, ...] = (
    "hate", "hate/threatening", "harassment", "harassment/threatening", "self-harm",
    "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence",
    "violence/graphic",
)

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category_scores": {"type": ["array", "null"], "items": {
            "type": "object",
            "properties": {"category": {"type": "string"}, "score": {"type": "number"}},
            "required": ["category", "score"]}},
        "reason": {"type": ["string", "null"]},
    },
    "required": ["category_scores"],
}


def _instructions(categories: Sequence[str]) -> str:
    return ("You are a content moderator. Score how strongly the text belongs to each of these "
            f"categories, from 0 (not at all) to 1 (certainly): {', '.join(categories)}. Judge "
            "only the text under 'Text to moderate'; earlier text is context. Reply with JSON "
            "only: {\"category_scores\": [{\"category\": str, \"score\": number}] or null when "
            "nothing applies, \"reason\": short explanation or null}.")


class ModerationProcessor(WindowGuard):
    """Moderates input messages (``process_input``) and the streamed answer
    (``process_output_stream``, per ``buffering`` window).

    Args:
        model: the moderation model (a model object or router id; required).
        categories: the categories to score (default ``MODERATION_CATEGORIES``).
        threshold: a category counts when its score is at least this (default 0.5).
        strategy: ``"block"`` (default: abort ``Content flagged for moderation. Categories:
            ...``), ``"warn"`` (log, keep), ``"filter"`` (drop the input message / the window).
        include_scores: add ``Scores: ...`` to the reason.
        buffering: the stream's windows (default ``Buffering.sentence()``).
        retry: with ``"block"`` in the stream, let the agent re-run the step with the reason
            as feedback (needs ``max_processor_retries``).
        instructions: replace the moderation prompt.
        error_strategy: ``"warn"`` (default: a failed check lets the content through) or
            ``"strict"`` (it aborts: ``Moderation failed: ...``).
        last_message_only: check only the last input message.
        model_settings: for the moderation call (default temperature 0).
        phase: ``"input"`` (``process_input`` only), ``"output"`` (the stream only) or
            ``"all"`` (default).
        id: processor id (default ``"moderation"``).
        counter: token counter for ``Buffering.window`` (default: ``approx_tokens``).

    Example:
        >>> moderation = ModerationProcessor(model="openai/gpt-4o-mini", threshold=0.7,
        ...                                  buffering=Buffering.window(tokens=48, overlap=8))
        >>> agent = Agent(id="a", model=main, input_processors=[moderation],
        ...               output_processors=[moderation])
    """

    failure_name = "Moderation"

    def __init__(self, *, model: Any, categories: Sequence[str] = MODERATION_CATEGORIES,
                 threshold: float = 0.5, strategy: str = "block", include_scores: bool = False,
                 buffering: Buffering | None = None, retry: bool = False,
                 instructions: str | None = None, error_strategy: str = "warn",
                 last_message_only: bool = False,
                 model_settings: dict[str, Any] | None = None, phase: str = "all",
                 id: str = "moderation", counter: Callable[[str], int] | None = None) -> None:
        if model is None:
            raise InvalidArgument("ModerationProcessor requires a model (a model id such as "
                                  "'openai/gpt-4o-mini' or a Model); got model=None")
        if not categories:
            raise InvalidArgument(f"ModerationProcessor needs at least one category (known: "
                                  f"{', '.join(MODERATION_CATEGORIES)}); got {categories!r}")
        if not 0 <= threshold <= 1:
            raise InvalidArgument(f"threshold must be between 0 and 1, got {threshold}")
        check_choice("strategy", strategy, ("block", "warn", "filter"))
        check_choice("error_strategy", error_strategy, ERROR_STRATEGIES)
        check_choice("phase", phase, ("input", "output", "all"))
        super().__init__(id, buffering=buffering or Buffering.sentence(), strategy=strategy,
                         retry=retry, error_strategy=error_strategy, counter=counter,
                         is_async=True)
        self.model = model
        self.categories = tuple(categories)
        self.threshold = threshold
        self.include_scores = include_scores
        self.instructions = instructions or _instructions(self.categories)
        self.last_message_only = last_message_only
        self.model_settings = model_settings
        self.phase = phase
        # Only the hooks of the chosen phases exist, so the agent can check the placement.
        if phase != "output":
            self.process_input = self._moderate_input
        if phase == "input":
            del self.process_output_stream, self.flush_output_stream

    async def moderate(self, text: str, context: str = "") -> dict[str, Any] | None:
        """Ask the model about ``text``; ``None`` when nothing reaches the threshold, else
        ``{"reason", "categories", "scores"}``. Raises what the call raises."""
        content = f"Earlier text (context):\n{context}\n\nText to moderate:\n{text}" \
            if context else f"Text to moderate:\n{text}"
        answer = await ask_json(self.model, content, instructions=self.instructions,
                                schema=_SCHEMA, model_settings=self.model_settings)
        if not isinstance(answer, dict):
            raise ModelAnswerError(f"expected a JSON object, got {type(answer).__name__}")
        scores = {k: v for k, v in scores_of(answer.get("category_scores"), "category").items()
                  if k in self.categories}
        flagged = [k for k, v in scores.items() if v >= self.threshold]
        if not flagged:
            return None
        reason = f"Content flagged for moderation. Categories: {', '.join(flagged)}"
        if isinstance(answer.get("reason"), str) and answer["reason"]:
            reason += f". Reason: {answer['reason']}"
        if self.include_scores:
            reason += f". Scores: {format_scores(scores)}"
        return {"reason": reason, "categories": flagged, "scores": scores}

    async def _moderate_input(self, messages: list[Any], state: dict[str, Any],
                              abort: Any) -> Any:
        kept, dropped = [], False
        async for message, _, result in check_each(
                messages, last_message_only=self.last_message_only, min_length=1,
                check=self.moderate, failure_name=self.failure_name,
                error_strategy=self.error_strategy, abort=abort, state=state):
            if result is None:
                kept.append(message)
                continue
            state.setdefault("violations", []).append(
                {"source": "input", "reason": result["reason"], "strategy": self.strategy})
            if self.strategy == "block":
                abort(result["reason"], metadata={"processorId": self.id,
                                                  "categories": result["categories"],
                                                  "scores": result["scores"]})
            if self.strategy == "warn":
                log.warning("%s: %s (strategy='warn', message kept)", self.id, result["reason"])
                kept.append(message)
                continue
            dropped = True
        return kept if dropped else None

    async def check_window(self, window: Window, state: dict[str, Any]) -> Any:
        if not window.text.strip():
            return None
        result = await self.moderate(window.text, window.context)
        if result is None:
            return None
        return {"reason": result["reason"],
                "metadata": {"categories": result["categories"], "scores": result["scores"]}}
