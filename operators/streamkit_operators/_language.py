"""``LanguageDetector``: a model identifies the language of the user's input; the processor records
it, translates the message into a target language, blocks it or warns.

Mastra's ``LanguageDetector`` (id ``language-detector``, ``process_input``), with its options;
a failed check follows ``error_strategy``. Detection and translation are one model call.

What belongs here: language names and codes, the prompt, and the strategies. What does not: the
model call (``_model_check``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from streamkit import Processor
from streamkit.errors import InvalidArgument

from ._model_check import ERROR_STRATEGIES, ModelAnswerError, ask_json, check_choice
from ._model_guard import check_each, replace_text

__all__ = ["LanguageDetector", "LANGUAGES"]

log = logging.getLogger("streamkit_operators")

#: ISO 639-1 code → English name, for the languages models identify reliably.
LANGUAGES: dict[str, str] = {
    "ar": "Arabic", "bn": "Bengali", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "es": "Spanish", "fa": "Persian", "fi": "Finnish",
    "fr": "French", "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "ms": "Malay", "nl": "Dutch",
    "no": "Norwegian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
    "sv": "Swedish", "sw": "Swahili", "th": "Thai", "tr": "Turkish", "uk": "Ukrainian",
    "ur": "Urdu", "vi": "Vietnamese", "zh": "Chinese",
}
_CODES = {name.lower(): code for code, name in LANGUAGES.items()}

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "iso_code": {"type": ["string", "null"]},
        "confidence": {"type": "number"},
        "translated_text": {"type": ["string", "null"]},
    },
    "required": ["iso_code", "confidence"],
}


def _code(language: str) -> str:
    """ISO code for a name or code (``"French"``/``"fr"`` → ``"fr"``); unknown → lowercased."""
    key = language.strip().lower()
    return _CODES.get(key, key.split("-")[0])


class LanguageDetector(Processor):
    """Detects the language of input messages (``process_input``).

    Every checked message gets ``content.metadata["language_detection"] = {detected_language,
    iso_code, confidence, is_target_language, target_languages}`` (plus ``translation`` and,
    with ``preserve_original``, ``original_content`` when translated). An answer below
    ``threshold`` confidence leaves the message unchanged, without metadata.

    Args:
        model: the detection model (required).
        target_languages: accepted languages, as names or ISO codes (required; translation goes
            to the first one).
        threshold: minimum confidence to act on a detection (default 0.7).
        strategy: ``"detect"`` (default: metadata only), ``"translate"`` (replace the text of a
            non-target message with the translation), ``"block"`` (abort for a non-target
            language), ``"warn"`` (log).
        preserve_original: keep the original text in the metadata when translating.
        min_text_length: shorter messages are not checked (default 10 characters).
        include_detection_details: add the detection to the tripwire metadata on block.
        instructions: replace the detection prompt.
        error_strategy: ``"warn"`` (default: fail open) or ``"strict"`` (abort
            ``Language detection failed: ...``).
        last_message_only: check only the last input message.
        model_settings: for the detection call (default temperature 0).
        id: processor id (default ``"language-detector"``).

    Example:
        >>> detector = LanguageDetector(model="openai/gpt-4o-mini", target_languages=["en"],
        ...                             strategy="translate")
    """

    def __init__(self, *, model: Any, target_languages: Sequence[str],
                 threshold: float = 0.7, strategy: str = "detect",
                 preserve_original: bool = True, min_text_length: int = 10,
                 include_detection_details: bool = False, instructions: str | None = None,
                 error_strategy: str = "warn", last_message_only: bool = False,
                 model_settings: dict[str, Any] | None = None,
                 id: str = "language-detector") -> None:
        super().__init__(id)
        if model is None:
            raise InvalidArgument("LanguageDetector requires a model (a model id such as "
                                  "'openai/gpt-4o-mini' or a Model); got model=None")
        if isinstance(target_languages, str):
            target_languages = [target_languages]
        if not target_languages:
            raise InvalidArgument(f"LanguageDetector needs at least one target language "
                                  f"(such as 'en'); got {target_languages!r}")
        if not 0 <= threshold <= 1:
            raise InvalidArgument(f"threshold must be between 0 and 1, got {threshold}")
        self.model = model
        self.target_languages = list(target_languages)
        self.target_codes = [_code(t) for t in self.target_languages]
        self.threshold = threshold
        self.strategy = check_choice("strategy", strategy,
                                     ("detect", "translate", "block", "warn"))
        self.preserve_original = preserve_original
        self.min_text_length = min_text_length
        self.include_detection_details = include_detection_details
        self.error_strategy = check_choice("error_strategy", error_strategy, ERROR_STRATEGIES)
        target = LANGUAGES.get(self.target_codes[0], self.target_languages[0])
        self.instructions = instructions or (
            "Identify the language of the user's text. Reply with JSON only: {\"iso_code\": "
            "ISO 639-1 code, \"confidence\": 0 to 1" + (
                f", \"translated_text\": the text translated into {target} when it is not "
                f"already in {target}, else null" if strategy == "translate" else "") + "}.")
        self.last_message_only = last_message_only
        self.model_settings = model_settings

    async def detect(self, text: str) -> dict[str, Any]:
        """The model's answer for ``text``: ``{"iso_code", "confidence", "translated_text"?}``."""
        answer = await ask_json(self.model, text, instructions=self.instructions,
                                schema=_SCHEMA, model_settings=self.model_settings)
        if not isinstance(answer, dict) or not isinstance(answer.get("confidence"),
                                                          (int, float)):
            raise ModelAnswerError(f"expected {{'iso_code', 'confidence'}}, got "
                                   f"{answer!r:.120}")
        return answer

    async def process_input(self, messages: list[Any], state: dict[str, Any],
                            abort: Any) -> Any:
        async for message, text, result in check_each(
                messages, last_message_only=self.last_message_only,
                min_length=self.min_text_length, check=self.detect,
                failure_name="Language detection", error_strategy=self.error_strategy,
                abort=abort, state=state):
            if result is None:
                continue
            confidence = float(result["confidence"])
            code = _code(str(result.get("iso_code") or ""))
            if confidence < self.threshold or not code:
                continue
            is_target = code in self.target_codes
            info: dict[str, Any] = {
                "detected_language": LANGUAGES.get(code, code), "iso_code": code,
                "confidence": confidence, "is_target_language": is_target,
                "target_languages": self.target_languages}
            state.setdefault("detections", []).append(dict(info))
            if not is_target and self.strategy == "block":
                metadata: dict[str, Any] = {"processorId": self.id, "iso_code": code}
                if self.include_detection_details:
                    metadata["detection"] = info
                abort(f"Language not allowed: {info['detected_language']} ({code}). Allowed: "
                      f"{', '.join(self.target_languages)}", metadata=metadata)
            if not is_target and self.strategy == "warn":
                log.warning("%s: message in %s, not in %s", self.id, info["detected_language"],
                            ", ".join(self.target_languages))
            translated = result.get("translated_text")
            if not is_target and self.strategy == "translate" and isinstance(translated, str) \
                    and translated.strip():
                info["translation"] = {"target_language": self.target_codes[0],
                                       "text": translated}
                if self.preserve_original:
                    info["original_content"] = text
                replace_text(message, translated)
            metadata_dict = message.content.metadata
            if not isinstance(metadata_dict, dict):
                metadata_dict = message.content.metadata = {}
            metadata_dict["language_detection"] = info
        return None
