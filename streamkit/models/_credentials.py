r"""Credentials out of URLs and the text that names them, before either goes into an error.

A provider's ``base_url`` may carry a password (``https://user:pass@proxy/v1``, which httpx sends
as Basic auth) or a key in its query string (``?key=...``, ``?api-key=...``); an httpx
exception's message may quote the URL. Every ``APICallError`` is built in ``_http`` from these
functions' output, so its message and ``url`` never hold either (the request itself still
uses the real URL).

Decisions: the user-info part of a URL is replaced whole by ``***`` (a user name alone can be
a token: ``https://sk-abc@host``); a query parameter is secret when its name says so (``key``,
``api_key``/``api-key``/``apikey``, ``token``, ``access_token``, ``secret``, ``password``,
``sig``/``signature``, ``auth``, ``credential``...: any name containing one of
:data:`SECRET_PARAM_WORDS`), and only its value is replaced, so ``api-version=2024-06-01`` stays
readable.

>>> safe_url("https://bob:hunter2@proxy.example/v1?api-version=1&key=AIzaSy123")
'https://***@proxy.example/v1?api-version=1&key=***'
>>> strip_credentials("could not connect to http://u:p@10.0.0.1:8080/v1 (refused)")
'could not connect to http://***@10.0.0.1:8080/v1 (refused)'
"""

from __future__ import annotations

import re

__all__ = ["safe_url", "strip_credentials", "SECRET_PARAM_WORDS", "MASK"]

MASK = "***"

#: A query parameter whose (lower-cased) name contains one of these holds a secret.
SECRET_PARAM_WORDS = ("key", "token", "secret", "password", "passwd", "pwd", "auth", "sig",
                      "credential", "session")

# ``scheme://user-info@``: the user-info is everything up to the last ``@`` before the host's
# end (no ``/``, ``?``, ``#`` or whitespace in between): a password may hold an unescaped ``@``.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
# ``?name=value`` / ``&name=value`` where the name holds a secret word.
_SECRET_PARAM = re.compile(
    r"(?i)([?&;][^=&#\s]*(?:" + "|".join(SECRET_PARAM_WORDS) + r")[^=&#\s]*=)[^&#\s'\"]*")


def strip_credentials(text: str) -> str:
    """``text`` with the user-info of every URL in it and every secret query value replaced by
    ``***`` (see the module docstring for which parameters are secret)."""
    if "@" in text:
        text = _USERINFO.sub(r"\1" + MASK + "@", text)
    if "=" in text:
        text = _SECRET_PARAM.sub(r"\1" + MASK, text)
    return text


def safe_url(url: str) -> str:
    """``url`` as errors and ``repr`` may show it: no user-info, no secret query values."""
    return strip_credentials(url)
