"""``StructuredOutput``: turn the agent's final answer into a typed object with a second model.

Mastra's ``StructuredOutputProcessor`` (id ``structured-output``): the main model answers in
free text (and may call tools); a separate structuring model reads the final answer and returns
JSON that matches ``schema``. Use it when the main model cannot do structured output itself, or
when you want it to think in prose first. (When the main model can, pass ``structured_output=``
to the agent instead: that is Mastra's "direct" mode and needs no processor.)

Where the object goes: an ``object-result`` chunk in the stream (``metadata.from =
"structured-output"``), ``content.metadata["structuredOutput"]`` of the step's assistant message
(stored with it), and ``StructuredOutput.object_of(result)``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import msgspec

from streamkit import AgentResult, MessageList, Processor
from streamkit.chunks import ObjectResult
from streamkit.errors import InvalidArgument
from streamkit.tools import json_schema

from ._aio import call_maybe_async
from ._model_check import ModelAnswerError, ask_json, check_choice, on_check_failure

__all__ = ["StructuredOutput"]

log = logging.getLogger("streamkit_operators")

ERROR_STRATEGIES = ("strict", "warn", "fallback")
METADATA_KEY = "structuredOutput"

DEFAULT_INSTRUCTIONS = (
    "You convert an assistant's answer into structured data. Read the answer and reply with "
    "one JSON value that matches the JSON schema below, using only information from the "
    "answer. Reply with the JSON only.\n\nJSON schema:\n{schema}")


def _json_schema(schema: Any) -> dict[str, Any]:
    return json_schema(schema)


class StructuredOutput(Processor):
    """Structures the final answer of a run with a separate model.

    Runs in ``process_output_step`` of every step that ends without tool calls (the answer),
    asking ``model`` once (temperature 0) for JSON that matches ``schema``.

    Args:
        schema: a JSON schema ``dict``, or a type msgspec understands (``msgspec.Struct``,
            dataclass, ``TypedDict``...). With a type, the object is converted to it (and a
            mismatch is a failure); with a dict, the JSON is checked for the schema's
            ``required`` keys.
        model: the structuring model (object or router id).
        error_strategy: what a failed call or an unusable answer does:

            * ``"strict"`` (default, as Mastra): abort with ``retry=True`` and
              ``metadata={"error": ...}`` — the step is re-run when ``max_processor_retries``
              allows, else the run stops with a tripwire;
            * ``"warn"``: log and go on without an object;
            * ``"fallback"``: use ``fallback_value`` (the chunk's metadata says
              ``"fallback": true``).
        fallback_value: the object for ``"fallback"``.
        instructions: the structuring model's system prompt; ``{schema}`` is replaced by the
            JSON schema.
        model_settings: settings for the structuring call (default ``{"temperature": 0}``).
        id: processor id (default ``"structured-output"``).

    Example:
        >>> class Weather(msgspec.Struct):
        ...     city: str
        ...     celsius: float
        >>> so = StructuredOutput(Weather, model="openai/gpt-4o-mini")
        >>> result = await Agent(id="w", model=main, output_processors=[so]).generate("Paris?")
        >>> StructuredOutput.object_of(result)
        Weather(city='Paris', celsius=21.0)
    """

    id = "structured-output"
    name = "Structured Output"

    def __init__(self, schema: Any, *, model: Any, error_strategy: str = "strict",
                 fallback_value: Any = None, instructions: str | None = None,
                 model_settings: dict[str, Any] | None = None, id: str | None = None) -> None:
        super().__init__(id)
        if model is None:
            raise InvalidArgument("StructuredOutput needs model= (the structuring model, such "
                                  "as 'openai/gpt-4o-mini'); got model=None")
        self.schema = schema
        self.json_schema = _json_schema(schema)
        self.model = model
        self.error_strategy = check_choice("error_strategy", error_strategy, ERROR_STRATEGIES)
        self.fallback_value = fallback_value
        template = instructions if instructions is not None else DEFAULT_INSTRUCTIONS
        self.instructions = template.replace("{schema}", json.dumps(self.json_schema, indent=1))
        self.model_settings = model_settings

    def convert(self, raw: Any) -> Any:
        """``raw`` (parsed JSON) as the schema's type, or checked against a dict schema.

        Raises:
            ModelAnswerError: the value does not match (also a ``ValueError``).
        """
        if not isinstance(self.schema, dict):
            try:
                return msgspec.convert(raw, type=self.schema, strict=False)
            except msgspec.ValidationError as exc:
                raise ModelAnswerError(f"the answer does not match the schema: {exc}") from exc
        if self.json_schema.get("type") == "object":
            if not isinstance(raw, dict):
                raise ModelAnswerError(f"expected a JSON object, got {type(raw).__name__}")
            missing = [k for k in self.json_schema.get("required", ()) if k not in raw]
            if missing:
                raise ModelAnswerError(f"the answer lacks required key(s) {missing}")
        return raw

    def process_output_stream(self, part: Any, state: dict[str, Any]) -> Any:
        # Only to learn the run id, so the object-result chunk carries the envelope.
        if "run_id" not in state:
            state["run_id"] = part.run_id
        return part

    async def process_output_step(self, text: str, tool_calls: Any, message_list: MessageList,
                                  state: dict[str, Any], abort: Any, writer: Any) -> None:
        if tool_calls:
            return None
        fallback = False
        try:
            if not text.strip():
                raise ModelAnswerError("the step produced no text to structure")
            raw = await ask_json(self.model, text, instructions=self.instructions,
                                 schema=self.json_schema, model_settings=self.model_settings)
            obj = self.convert(raw)
        except Exception as exc:  # noqa: BLE001 - every failure goes through error_strategy
            if self.error_strategy != "fallback":
                state["error"] = f"{type(exc).__name__}: {exc}"
                on_check_failure("Structured output", exc, self.error_strategy, abort,
                                 retry=True)
                return None
            log.warning("structured output failed, using fallback_value: %s", exc)
            obj, fallback = self.fallback_value, True
        state["object"] = obj
        plain = msgspec.to_builtins(obj)
        responses = [m for m in message_list.get.response.db() if m.role == "assistant"]
        if responses:
            content = responses[-1].content
            content.metadata = {**(content.metadata or {}), METADATA_KEY: plain}
        metadata: dict[str, Any] = {"from": "structured-output"}
        if fallback:
            metadata["fallback"] = True
        chunk = ObjectResult(object=plain, from_="AGENT", metadata=metadata,
                             **({"run_id": state["run_id"]} if state.get("run_id") else {}))
        if writer is not None:
            await call_maybe_async(writer.custom, chunk)
        return None

    @staticmethod
    def object_of(result: AgentResult, id: str = "structured-output") -> Any:
        """The structured object of a finished run: the typed object from the processor's
        state when available, else the JSON stored on the last assistant message; ``None``
        when there is none."""
        states = getattr(result, "states", None) or {}
        state = states.get(id) if isinstance(states, dict) else None
        if isinstance(state, dict) and "object" in state:
            return state["object"]
        for message in reversed(result.messages):
            metadata = message.content.metadata
            if isinstance(metadata, dict) and METADATA_KEY in metadata:
                return metadata[METADATA_KEY]
        return None
