"""streamkit_operators — ready-made processors for streamkit agents.

Mastra's built-in processors (``docs/mastra-fidelity.md``, "Built-in processors") with their
options and strategies,
Python-named, plus guards no peer library has. Everything here is built on streamkit's public
API only (a test enforces it), so each processor doubles as an example of writing your own.

Quick start::

    from streamkit import Agent
    from streamkit_operators import ResponseCache, TokenLimiter, UnicodeNormalizer

    agent = Agent(id="support", model="openai/gpt-4o-mini",
                  input_processors=[UnicodeNormalizer(), TokenLimiter(8_000), ResponseCache()])

Model-backed processors take ``model=`` (a model object or router id) and ``error_strategy``:
``"warn"`` fails open (log, let the content through), ``"strict"`` fails closed (abort).
"""

from __future__ import annotations

# -- prompt hygiene, budgets, caching, structuring, provider quirks -------------------------
from ._batch_parts import BatchParts

# -- guards: PII, regex, moderation, injection, language, latency budgets -------------------
from ._budget import Buffering, StreamGuard, WindowGuard, format_report, latency_report
from ._cost_guard import CostGuard, InMemoryUsageStore, Price, SQLiteUsageStore
from ._holdback import HoldbackGuard, RedactingGuard
from ._injection import INJECTION_TYPES, InjectionEvent, PromptInjectionDetector
from ._language import LANGUAGES, LanguageDetector
from ._moderation import MODERATION_CATEGORIES, ModerationProcessor
from ._pii import PII_TYPES, PIIDetector, mask_value
from ._prefill_error_handler import PrefillErrorHandler, is_prefill_error
from ._redact import Detection, HoldbackScanner, Rule, find_all
from ._redis import RedisCache, RedisUsageStore
from ._regex import PRESETS, RegexFilter
from ._response_cache import InMemoryCache, ResponseCache, SQLiteCache
from ._structured_output import StructuredOutput
from ._system_prompt_scrubber import SystemPromptScrubber
from ._token_limiter import TokenLimiter
from ._tool_call_filter import ToolCallFilter
from ._unicode_normalizer import UnicodeNormalizer
from ._vault import PlaceholderVault, RestorePlaceholders

__version__ = "0.1.0"

__all__ = [
    # -- prompt hygiene, budgets, caching, structuring, provider quirks
    "UnicodeNormalizer", "SystemPromptScrubber", "TokenLimiter", "BatchParts",
    "StructuredOutput", "ToolCallFilter", "CostGuard", "Price", "InMemoryUsageStore",
    "SQLiteUsageStore", "ResponseCache", "InMemoryCache", "SQLiteCache",
    "PrefillErrorHandler", "is_prefill_error", "RedisCache", "RedisUsageStore",
    # -- guards
    "PIIDetector", "PII_TYPES", "mask_value", "RegexFilter", "PRESETS", "Rule", "Detection",
    "find_all", "HoldbackScanner", "HoldbackGuard", "RedactingGuard", "PlaceholderVault",
    "RestorePlaceholders", "ModerationProcessor", "MODERATION_CATEGORIES",
    "PromptInjectionDetector", "InjectionEvent", "INJECTION_TYPES", "LanguageDetector",
    "LANGUAGES", "Buffering", "StreamGuard", "WindowGuard", "latency_report", "format_report",
]
