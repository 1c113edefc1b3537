"""``UnicodeNormalizer``: canonical, tidy text in the user's input before anything else reads it.

Mastra's ``UnicodeNormalizer`` (id ``unicode-normalizer``, ``process_input``), with one addition:
``strip_format_chars`` removes invisible format characters (zero-width spaces, bidi overrides,
Unicode *tag* characters used to smuggle hidden instructions) that NFKC leaves in place.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Any

from streamkit import Message, Processor
from streamkit.messages import TextPart

__all__ = ["UnicodeNormalizer"]

log = logging.getLogger("streamkit_operators")

# Control characters except \t \n \r (C0, DEL and C1), as Mastra strips them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Without emoji preservation: everything outside tab/newlines, printable ASCII and the BMP
# above U+00A0 goes — which removes the astral planes, where most emoji live.
_NON_BMP_OR_CONTROL = re.compile(r"[^\t\n\r\x20-\x7e\u00a0-\uffff]")
_ZWJ = "\u200d"  # joins emoji sequences; kept while emojis are preserved


class UnicodeNormalizer(Processor):
    """Normalises the text of input messages (text parts and ``content.content``).

    Steps, in order: NFKC normalisation (folds look-alike compatibility characters: ``ｆｕｌｌ``
    → ``full``, ``ﬁ`` → ``fi``); optional control-character stripping; optional removal of
    invisible format characters; whitespace collapsing (CRLF/CR → LF, runs of newlines → one,
    runs of spaces/tabs → one space); trimming. A failure leaves the messages unchanged (this is
    hygiene, not a guard).

    Args:
        strip_control_chars: remove control characters except tab and newlines.
        preserve_emojis: with ``strip_control_chars``, keep emoji (``False`` also strips every
            character outside the Basic Multilingual Plane).
        collapse_whitespace: collapse whitespace runs as described above.
        trim: strip leading and trailing whitespace.
        strip_format_chars: remove Unicode format characters (category ``Cf``: zero-width
            spaces, bidi controls, tag characters); the zero-width joiner stays while
            ``preserve_emojis`` is on. Not in Mastra; off by default.
        id: processor id (default ``"unicode-normalizer"``).

    Example:
        >>> agent = Agent(id="a", model=model, input_processors=[UnicodeNormalizer()])
        >>> # "ｈｅｌｌｏ\\r\\n\\r\\n  world " reaches the model as "hello\\nworld"
    """

    id = "unicode-normalizer"
    name = "Unicode Normalizer"

    def __init__(self, *, strip_control_chars: bool = False, preserve_emojis: bool = True,
                 collapse_whitespace: bool = True, trim: bool = True,
                 strip_format_chars: bool = False, id: str | None = None) -> None:
        super().__init__(id)
        self.strip_control_chars = strip_control_chars
        self.preserve_emojis = preserve_emojis
        self.collapse_whitespace = collapse_whitespace
        self.trim = trim
        self.strip_format_chars = strip_format_chars

    def normalize(self, text: str) -> str:
        """The normalised form of ``text`` under this processor's options.

        Example:
            >>> UnicodeNormalizer().normalize("  ｆｉｌｅ\\r\\n\\r\\nname\\t\\t x ")
            'file\\nname x'
        """
        out = unicodedata.normalize("NFKC", text)
        if self.strip_control_chars:
            pattern = _CONTROL if self.preserve_emojis else _NON_BMP_OR_CONTROL
            out = pattern.sub("", out)
        if self.strip_format_chars:
            keep = _ZWJ if self.preserve_emojis else ""
            out = "".join(ch for ch in out
                          if ch == keep or unicodedata.category(ch) != "Cf")
        if self.collapse_whitespace:
            out = out.replace("\r\n", "\n").replace("\r", "\n")
            out = re.sub(r"\n+", "\n", out)
            out = re.sub(r"[ \t]+", " ", out)
        if self.trim:
            out = out.strip()
        return out

    def process_input(self, messages: list[Message]) -> list[Message]:
        try:
            # Compute every new text first, so a failure cannot leave half-normalised messages.
            edits: list[tuple[Any, str, str]] = []
            for message in messages:
                for part in message.content.parts:
                    if isinstance(part, TextPart):
                        edits.append((part, "text", self.normalize(part.text)))
                if isinstance(message.content.content, str):
                    edits.append((message.content, "content",
                                  self.normalize(message.content.content)))
        except Exception:  # noqa: BLE001 - hygiene must never break a request
            log.exception("unicode-normalizer failed; input left unchanged")
            return messages
        for target, attr, value in edits:
            setattr(target, attr, value)
        return messages
