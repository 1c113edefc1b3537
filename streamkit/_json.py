"""``JSONValue``: the type of a JSON document streamkit builds itself (a provider's request body).

Decided for issue 32: the containers are ``Sequence``/``Mapping`` (covariant), so a
``list[dict[str, JSONValue]]`` built for ``messages`` is a ``JSONValue`` without copying or
casting; a body is a ``JSONDict`` (a ``dict``, so it can be filled key by key). Values that
come from a user (``model_settings``, ``provider_options``, a tool's ``parameters``) are still
``Any``-typed where they enter and encoded as before (``encode_json``). Not used
for chunk payloads (``args``, ``result``): users read those, and a JSON union would make every
read narrow first (the README's changelog for issue 32); ``_chunk_base.JSONObject`` (a dict
with ``Any`` values) stays the type of those free-form payload values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["JSONValue", "JSONDict"]

JSONValue: TypeAlias = (
    "None | bool | int | float | str | Sequence[JSONValue] | Mapping[str, JSONValue]")
JSONDict: TypeAlias = dict[str, JSONValue]
