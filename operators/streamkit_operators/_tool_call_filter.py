"""``ToolCallFilter``: keep old tool calls and their results out of the prompt.

Mastra's ``ToolCallFilter`` (id ``tool-call-filter``, ``process_llm_request`` since 1.60). It edits
the outbound prompt only — the stored history keeps every tool call — so long tool outputs from
earlier turns stop costing tokens without being lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from streamkit import Processor
from streamkit.errors import InvalidType
from streamkit.tokens import get_counter
from streamkit.validate import optional_int_at_least

__all__ = ["ToolCallFilter"]

_json = msgspec.json.Encoder()


def _call_ids(message: dict[str, Any], names: frozenset[str] | None) -> list[str]:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [p["toolCallId"] for p in content
            if isinstance(p, dict) and p.get("type") == "tool-call"
            and (names is None or p.get("toolName") in names)]


def _result_text(part: dict[str, Any]) -> str:
    result = part.get("result")
    if isinstance(result, str):
        return result
    try:
        return _json.encode(result).decode()
    except (TypeError, msgspec.EncodeError):
        return str(result)


class ToolCallFilter(Processor):
    """Removes tool-call / tool-result pairs from the prompt sent to the model.

    By default only tool calls that were already in the conversation when the request started
    (the history) are removed; the calls this request makes stay visible to the model, so a
    multi-step tool loop keeps working. Assistant messages left empty are dropped.

    Args:
        exclude: tool names to filter; ``None`` (default) filters every tool.
        filter_after_tool_steps: keep the last ``n`` tool-calling assistant turns (history or
            not) and filter every earlier one.
        preserve_model_output: instead of dropping a filtered pair, leave a text part
            ``"<tool> result:\\n<result>"`` where the call was (Mastra does this for results made
            by ``toModelOutput``; here every result qualifies, as JSON when not a string).
        id: processor id (default ``"tool-call-filter"``).

    Example:
        >>> agent = Agent(id="a", model=model, memory=memory,
        ...               input_processors=[ToolCallFilter(exclude=["search_web"])])
    """

    id = "tool-call-filter"
    name = "Tool Call Filter"

    def __init__(self, *, exclude: Iterable[str] | None = None,
                 filter_after_tool_steps: int | None = None,
                 preserve_model_output: bool = False, id: str | None = None) -> None:
        super().__init__(id)
        if isinstance(exclude, str):
            raise InvalidType(f"exclude takes a list of tool names, not a single string; "
                              f"got {exclude!r} (did you mean [{exclude!r}]?)")
        optional_int_at_least(filter_after_tool_steps, "filter_after_tool_steps", 0)
        self.exclude = None if exclude is None else frozenset(exclude)
        self.filter_after_tool_steps = filter_after_tool_steps
        self.preserve_model_output = preserve_model_output

    def _targets(self, prompt: list[dict[str, Any]], state: dict[str, Any]) -> set[str]:
        names = self.exclude
        if self.filter_after_tool_steps is not None:
            turns = [ids for ids in (_call_ids(m, None) for m in prompt) if ids]
            keep = len(turns) - self.filter_after_tool_steps
            candidates = {cid for ids in turns[:max(keep, 0)] for cid in ids}
        else:
            history = state.get("history")
            if history is None:
                # The first prompt of the request: every tool call in it is history.
                history = state["history"] = frozenset(
                    cid for m in prompt for cid in _call_ids(m, None))
            candidates = set(history)
        if names is None or not candidates:
            return candidates
        named = {cid for m in prompt for cid in _call_ids(m, names)}
        return candidates & named

    def filter_prompt(self, prompt: list[dict[str, Any]], call_ids: set[str]
                      ) -> list[dict[str, Any]]:
        """``prompt`` without the tool calls and results whose ids are in ``call_ids``.

        Example:
            >>> ToolCallFilter().filter_prompt([
            ...     {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1",
            ...                                        "toolName": "t", "args": {}}]},
            ...     {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1",
            ...                                   "toolName": "t", "result": 1}]}], {"c1"})
            []
        """
        results = {p["toolCallId"]: p for m in prompt if m.get("role") == "tool"
                   for p in (m.get("content") or ()) if isinstance(p, dict)}
        out: list[dict[str, Any]] = []
        for message in prompt:
            content = message.get("content")
            if not isinstance(content, list) or message.get("role") not in ("assistant", "tool"):
                out.append(message)
                continue
            kept: list[Any] = []
            changed = False
            for part in content:
                cid = part.get("toolCallId") if isinstance(part, dict) else None
                if cid not in call_ids:
                    kept.append(part)
                    continue
                changed = True
                if self.preserve_model_output and part.get("type") == "tool-call" \
                        and cid in results:
                    kept.append({"type": "text", "text": f"{part.get('toolName')} result:\n"
                                                         f"{_result_text(results[cid])}"})
            if not kept:
                continue
            if not changed:
                out.append(message)
            elif message.get("role") == "assistant" and all(
                    isinstance(p, dict) and p.get("type") == "text" for p in kept):
                out.append({**message, "content": "".join(p["text"] for p in kept)})
            else:
                out.append({**message, "content": kept})
        return out

    def process_llm_request(self, prompt: list[dict[str, Any]], state: dict[str, Any]
                            ) -> dict[str, Any] | None:
        targets = self._targets(prompt, state)
        if not targets:
            return None
        filtered = self.filter_prompt(prompt, targets)
        # Kept in state so a run's trace/states show what the filter saved.
        counter = get_counter()
        state["removed_tokens"] = state.get("removed_tokens", 0) + \
            counter.count_messages(prompt) - counter.count_messages(filtered)
        return {"prompt": filtered}
