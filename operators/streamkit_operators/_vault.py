"""Reversible placeholders: the vault that maps ``<EMAIL_1>`` back to a value, and the edge operator
that restores them for the client.

What belongs here: ``PlaceholderVault`` and ``RestorePlaceholders``. What does not: detecting the
values (``PIIDetector`` fills the vault with ``redaction_method="reversible"``).

Trust model
-----------
* **Trusted:** the server process that runs the agent and holds the vault, and the client that
  sent the values in the first place.
* **Sees placeholders only:** the model provider (the prompt carries ``<EMAIL_1>``), the memory
  store and anything that reads stored messages (they are built from the agent's stream, before
  restoration), traces, tripwire metadata and processor state (which never hold raw values).
* **Restoration happens at the edge**, on the way out of the server: wrap the agent's stream,
  ``ops.apply(agent.stream(...), RestorePlaceholders(vault))``, or call ``vault.restore(text)``
  on a ``generate()`` result. ``RestorePlaceholders`` refuses to run inside an agent's
  ``output_processors``, because there the restored values would be stored.
* **Only what the client sent comes back.** A value is restorable when it entered through
  ``process_input`` (origin ``"input"``). Values the guard found in tool results or in the
  model's own output get placeholders too, but are not restored unless ``origins`` says so: the
  guard is there to keep them from the client.
* Tools receive what the model wrote, i.e. placeholders. A tool that needs a real value calls
  ``vault.restore(args)`` itself — an explicit, auditable decision.
* One vault per conversation. Keep it beside the session (``to_dict``/``from_dict``), never
  beside the stored messages: a vault stored with the messages undoes the redaction.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from streamkit import ProcessorError
from streamkit.errors import InvalidArgument

from ._holdback import HoldbackGuard
from ._redact import Commit, Rule, map_strings, merge_regions, replace_regions

__all__ = ["PlaceholderVault", "RestorePlaceholders", "TOKEN_PATTERN"]

log = logging.getLogger("streamkit_operators")

#: What a reversible placeholder looks like: ``<EMAIL_1>``, ``<CREDIT_CARD_12>``.
TOKEN_PATTERN = r"<([A-Z][A-Z0-9_]*?)_([1-9][0-9]*)>"
_TOKEN = regex.compile(TOKEN_PATTERN)


@dataclass(slots=True)
class _Entry:
    value: str
    kind: str
    origins: set[str] = field(default_factory=set)


class PlaceholderVault:
    """Reversible placeholders for one conversation: the same value always gets the same
    placeholder, numbered per type (``<EMAIL_1>``, ``<EMAIL_2>``, ``<PHONE_1>``).

    Example:
        >>> vault = PlaceholderVault()
        >>> vault.placeholder("ada@example.com", "email")
        '<EMAIL_1>'
        >>> vault.restore("Write to <EMAIL_1>.")
        'Write to ada@example.com.'
    """

    def __init__(self) -> None:
        self._tokens: dict[str, _Entry] = {}
        self._by_value: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._tokens

    def __repr__(self) -> str:
        return f"<PlaceholderVault {len(self)} placeholder(s)>"

    def placeholder(self, value: str, kind: str, *, origin: str = "input") -> str:
        """The placeholder for ``value`` of type ``kind`` (created on first use); ``origin``
        (``"input"``, ``"tool-result"``, ``"stream"``) is remembered for ``restore``."""
        label = regex.sub(r"[^A-Z0-9]+", "_", kind.upper()).strip("_") or "VALUE"
        key = (label, value)
        token = self._by_value.get(key)
        if token is None:
            n = self._counts.get(label, 0) + 1
            self._counts[label] = n
            token = f"<{label}_{n}>"
            self._by_value[key] = token
            self._tokens[token] = _Entry(value, kind)
        self._tokens[token].origins.add(origin)
        return token

    def original(self, token: str, *, origins: Iterable[str] | None = ("input",)) -> str | None:
        """The value behind ``token`` if it is known and came from one of ``origins``
        (``None``: any origin); else ``None``."""
        entry = self._tokens.get(token)
        if entry is None:
            return None
        if origins is not None and not entry.origins.intersection(origins):
            return None
        return entry.value

    def restore(self, value: Any, *, origins: Iterable[str] | None = ("input",)) -> Any:
        """``value`` (a string, or strings inside dicts/lists) with known placeholders replaced
        by their values; unknown or non-restorable placeholders stay as they are."""
        allowed = None if origins is None else frozenset(origins)

        def one(text: str) -> str:
            return _TOKEN.sub(lambda m: self.original(m.group(), origins=allowed)
                              or m.group(), text)

        return map_strings(value, one)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot (keep it with the session, never with the messages)."""
        return {"entries": [{"token": t, "value": e.value, "kind": e.kind,
                             "origins": sorted(e.origins)} for t, e in self._tokens.items()],
                "counts": dict(self._counts)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlaceholderVault:
        """Rebuild a vault from ``to_dict()``."""
        vault = cls()
        try:
            for item in data["entries"]:
                entry = _Entry(str(item["value"]), str(item["kind"]), set(item["origins"]))
                vault._tokens[item["token"]] = entry
                label = _TOKEN.fullmatch(item["token"])
                if label is None:
                    raise InvalidArgument(f"not a PlaceholderVault snapshot: "
                                          f"{item['token']!r} is not a placeholder")
                vault._by_value[(label.group(1), entry.value)] = item["token"]
            vault._counts = {str(k): int(v) for k, v in data["counts"].items()}
        except InvalidArgument:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # A missing key, a wrong container or a count that is not a number: all the same to
            # the caller, who handed us something that did not come from to_dict().
            raise InvalidArgument(f"not a PlaceholderVault snapshot (expected to_dict()'s "
                                  f"{{'entries', 'counts'}}): {type(exc).__name__}: {exc}"
                                  ) from exc
        return vault

    @classmethod
    def for_request(cls, request_context: Any, key: str = "pii_vault") -> PlaceholderVault:
        """The vault in ``request_context[key]``, created (and stored there) when missing, so
        the caller who passed ``request_context`` can read it after the run."""
        if isinstance(request_context, dict):
            vault = request_context.get(key)
            if isinstance(vault, PlaceholderVault):
                return vault
            if vault is not None:
                raise ProcessorError(f"request_context[{key!r}] must be a PlaceholderVault, got "
                                     f"{type(vault).__name__}")
            vault = request_context[key] = cls()
            return vault
        getter = getattr(request_context, "get", None)
        found = getter(key) if callable(getter) else None
        if isinstance(found, PlaceholderVault):
            return found
        raise ProcessorError(f"reversible placeholders need a PlaceholderVault: pass vault= to "
                             f"the processor, or request_context={{{key!r}: PlaceholderVault()}}")


class RestorePlaceholders(HoldbackGuard):
    """Restore reversible placeholders in streamed text for the client — at the edge, not in the
    agent (see the trust model in this module's docstring).

    Placeholders split across chunks (``"<EMA"`` + ``"IL_1>"``) are held back until complete.
    Unknown placeholders, and values whose origin is not in ``origins``, pass unchanged. Text
    and reasoning deltas are restored; other chunks (tool results) pass as they are.

    Args:
        vault: the conversation's vault; when omitted, ``request_context[vault_key]`` of the
            standalone run (``ops.apply(..., request_context=...)``).
        origins: which values come back (default: only what the client sent).
        id: processor id.

    Marble::

        --"Mail <EMA"--"IL_1> now"--|   restore   --"Mail "--"ada@example.com now"--|

    Example:
        >>> vault = PlaceholderVault()
        >>> ctx = {"pii_vault": vault}
        >>> stream = agent.stream("I am ada@example.com", request_context=ctx)
        >>> async for chunk in ops.apply(stream, RestorePlaceholders(vault)):
        ...     send_to_client(chunk)
    """

    def __init__(self, vault: PlaceholderVault | None = None, *,
                 origins: Sequence[str] | None = ("input",), vault_key: str = "pii_vault",
                 id: str = "restore-placeholders") -> None:
        super().__init__(id)
        self.process_output_stream = self._edge_stream
        self.vault = vault
        self.origins = None if origins is None else frozenset(origins)
        self.vault_key = vault_key
        self._rules = [Rule("placeholder", TOKEN_PATTERN, starts="[<]")]

    def stream_rules(self) -> Sequence[Rule]:
        return self._rules

    def _edge_stream(self, part: Any, state: dict[str, Any], request_context: Any,
                     retry_count: int, message_list: Any = None) -> Any:
        if message_list is not None:
            raise ProcessorError(
                f"{self.id}: RestorePlaceholders must run at the edge, after the agent — "
                f"ops.apply(agent.stream(...), RestorePlaceholders(vault)); in output_processors "
                f"the restored values would be stored in memory")
        return self._stream(part, state, request_context, retry_count)

    def on_commit(self, commit: Commit, state: dict[str, Any], request_context: Any) -> str:
        vault = self.vault
        if vault is None:
            vault = state.get("vault")
            if vault is None:
                vault = state["vault"] = PlaceholderVault.for_request(request_context,
                                                                      self.vault_key)
        origins = self.origins

        def restore(region: Any, text: str) -> str:
            return vault.original(text, origins=origins) or text

        return replace_regions(commit.text, merge_regions(commit.findings), restore,
                               commit.start)
