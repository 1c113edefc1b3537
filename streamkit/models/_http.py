"""HTTP plumbing shared by the real model providers: errors, retries, the client, SSE bodies.

What belongs here: the one place where ``httpx`` exceptions, HTTP error statuses, error events
inside a stream and malformed or truncated streams become :class:`~streamkit.errors.APICallError`
(always ``raise ... from exc``), none holding a URL's credentials (``api_error``);
``Retry-After`` parsing; the bounded retry loop
(:class:`RetryPolicy`, :func:`retrying`); and :class:`HTTPSession`, which owns or borrows the
``httpx.AsyncClient`` and turns one POST into server-sent events or a bounded body; and what
both providers share beyond HTTP: :class:`HTTPModel` (their constructor options, retry policy,
``aclose``) and two format helpers (:func:`split_media`, :func:`json_text`). What does not: any
provider's request or response format (``_openai``, ``_anthropic``), and
choosing a provider from a router id (``_router``).

Retries happen only before a step has yielded its first chunk: a half-streamed step is never
replayed, because the consumer has already seen (and maybe acted on) its first half. A failure
after that point is raised, and the agent's ``process_api_error`` processors decide.

>>> policy = RetryPolicy(max_retries=3, backoff=0.5, max_backoff=4.0)
>>> policy.delay(0, retry_after=2.0)
2.0
>>> 0.25 <= policy.delay(1, retry_after=None) <= 1.0
True
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import random
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict, TypeVar

import httpx
import msgspec

from ..errors import APICallError, ChunkDecodeError, InvalidArgument, InvalidType
from ..validate import (
    int_at_least,
    non_empty_str,
    optional_int_at_least,
    optional_seconds,
    seconds,
)
from ..wire import DEFAULT_MAX_EVENT_BYTES, SSEEvent, SSEParser
from ._credentials import safe_url, strip_credentials

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_DEADLINE", "Deadline", "RetryPolicy", "HTTPSession",
           "parse_retry_after", "retrying", "api_error",
           "error_from_status", "error_from_exception", "error_from_payload", "stream_error",
           "encode_json", "decode_json", "split_media", "json_text", "ResponseMetadataFields",
           "unwrap_provider_options",
           "HTTPModel"]

T = TypeVar("T")

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=10.0)
"""10 s to connect (and to get a pooled connection), 30 s to send a request, 120 s for each read:
a model thinking before its first token has two minutes, a dead connection ends. A server that
keeps sending a byte now and then never trips a read timeout: :data:`DEFAULT_DEADLINE` ends it."""

DEFAULT_DEADLINE = 600.0
"""Seconds one model call may take in all: every attempt, the waits between them and the whole
streamed answer. ``deadline=None`` on the model turns it off."""

# Error bodies are kept whole up to this size; beyond it they are cut (a proxy may send a page).
# At most this many bytes of an error response are read at all.
_MAX_BODY_CHARS = 64_000

_json_encoder = msgspec.json.Encoder(enc_hook=str)
_json_decode = msgspec.json.decode


def encode_json(value: object) -> bytes:
    """JSON bytes for a request body; values JSON does not know are sent as ``str(value)``."""
    return _json_encoder.encode(value)


def decode_json(data: str | bytes) -> Any:
    """Decoded JSON (raises ``msgspec.DecodeError`` when malformed or nested too deeply)."""
    try:
        return _json_decode(data)
    except RecursionError as exc:  # msgspec past Python's recursion limit (~1,000 levels)
        raise msgspec.DecodeError(f"JSON is nested too deeply to decode ({exc})") from exc


@dataclass(frozen=True, slots=True)
class Deadline:
    """When one model call must be over: ``at`` on the event loop's clock, ``seconds`` after its
    start (for messages).

    Example:
        >>> Deadline.start(None) is None
        True
    """

    seconds: float
    at: float

    @classmethod
    def start(cls, seconds: float | None) -> Deadline | None:
        """The deadline ``seconds`` from now (``None``: no deadline)."""
        if seconds is None:
            return None
        return cls(seconds, asyncio.get_running_loop().time() + seconds)

    def left(self) -> float:
        """Seconds until the deadline (negative once it passed)."""
        return self.at - asyncio.get_running_loop().time()

    def error(self, provider: str, url: str) -> APICallError:
        """The ``APICallError`` for a call that ran out of time (not retryable: no time left)."""
        return api_error(f"{provider} API call to {url} did not finish within its deadline "
                            f"of {self.seconds:g} s (the model's deadline= option)",
                            status_code=None, is_retryable=False, url=url)


async def _bounded(awaitable: Awaitable[T], deadline: Deadline | None) -> T:
    """``await awaitable``, cancelled with ``TimeoutError`` at the deadline."""
    if deadline is None:
        return await awaitable
    async with asyncio.timeout_at(deadline.at):
        return await awaitable


def json_text(value: object) -> str:
    """A tool result as the text a provider wants: strings as they are, anything else as JSON.

    Example:
        >>> json_text({"temp": 21}), json_text("sunny")
        ('{"temp":21}', 'sunny')
    """
    if isinstance(value, str):
        return value
    return _json_encoder.encode(value).decode()


def split_media(data: object, mime_type: str | None) -> tuple[str, str, str | None]:
    """Classify file/image data: ``("url", url, mime)`` or ``("base64", data, mime)``.

    Accepts ``http(s)`` URLs, ``data:`` URIs (their media type wins), raw bytes (encoded here)
    and base64 text.

    Example:
        >>> split_media("data:image/png;base64,iVBO", None)
        ('base64', 'iVBO', 'image/png')
        >>> split_media(b"hi", "text/plain")
        ('base64', 'aGk=', 'text/plain')
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        return "base64", base64.b64encode(bytes(data)).decode("ascii"), mime_type
    text = str(data)
    if text.startswith(("http://", "https://")):
        return "url", text, mime_type
    if text.startswith("data:") and "," in text:
        header, _, payload = text[5:].partition(",")
        media = header.split(";", 1)[0] or mime_type
        return "base64", payload, media
    return "base64", text, mime_type


# provider_options namespaces: the calling provider's is unwrapped into the body, others dropped.
_NAMESPACES = frozenset(("openai", "openai-compatible", "openaiCompatible", "anthropic"))


def unwrap_provider_options(options: Mapping[str, object], namespaces: tuple[str, ...]
                            ) -> dict[str, Any]:
    """``provider_options`` for one provider's request body.

    Top-level keys are kept; this provider's namespace (``{"openai": {...}}``) is merged over
    them; other providers' namespaces are dropped, so one agent's options can serve several
    models.

    Example:
        >>> unwrap_provider_options({"user": "u1", "openai": {"seed": 1},
        ...                          "anthropic": {"top_k": 5}}, ("openai",))
        {'user': 'u1', 'seed': 1}
    """
    body = {k: v for k, v in options.items() if k not in _NAMESPACES}
    for name in namespaces:
        scoped = options.get(name)
        if isinstance(scoped, dict):
            body.update(scoped)
    return body


class _RequestOptions(TypedDict, total=False):
    """``build_request``'s per-request keywords a model adds (none, or the timeout)."""

    timeout: float | httpx.Timeout


# --- Retry-After -------------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asked the client to wait, or ``None`` when it did not say.

    Reads ``retry-after-ms`` (OpenAI's milliseconds header) first, then ``Retry-After`` as
    delta-seconds or as an HTTP-date (RFC 9110 §10.2.3). A date in the past means 0.

    Args:
        headers: response headers (case-insensitive mapping, such as ``httpx.Headers``).
        now: the current time, for HTTP-dates (tests pass a fixed one).

    Example:
        >>> parse_retry_after({"retry-after": "3"})
        3.0
        >>> when = datetime(2025, 1, 1, tzinfo=UTC)
        >>> parse_retry_after({"retry-after": "Wed, 01 Jan 2025 00:00:07 GMT"}, now=when)
        7.0
        >>> parse_retry_after({"retry-after": "soon"}) is None
        True
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0.0 and value == value:  # not NaN
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0.0 and seconds == seconds else None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


# --- retry policy ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a model retries transient failures (429, 5xx, timeouts, connection errors).

    Attributes:
        max_retries: retries after the first attempt (0 turns retrying off).
        backoff: the first delay in seconds; each further retry doubles it.
        max_backoff: the cap on one computed delay.
        max_retry_after: the longest ``Retry-After`` honoured; a server asking for more is not
            retried here (the error goes to ``process_api_error`` with ``retry_after`` set).
        sleep: the coroutine function that waits (tests inject one that records delays).

    Example:
        >>> RetryPolicy(max_retries=0).should_retry(APICallError("x", status_code=500), 0)
        False
    """

    max_retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[Any]] = field(default=asyncio.sleep, repr=False)
    deadline: float | None = DEFAULT_DEADLINE

    def __post_init__(self) -> None:
        int_at_least(self.max_retries, "max_retries", 0)
        for name in ("backoff", "max_backoff", "max_retry_after"):
            seconds(getattr(self, name), name, allow_zero=True)
        optional_seconds(self.deadline, "deadline")
        if not callable(self.sleep):
            raise InvalidType(f"sleep must be an async function, got {self.sleep!r}")

    def should_retry(self, error: APICallError, retries_done: int) -> bool:
        """Whether ``error``, after ``retries_done`` retries, is worth another attempt."""
        if retries_done >= self.max_retries or not error.is_retryable:
            return False
        after = error.retry_after
        return after is None or after <= self.max_retry_after

    def delay(self, retries_done: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retries_done + 1``.

        The server's ``Retry-After`` wins when given; otherwise exponential backoff with "equal
        jitter" (a random point in the upper half), so clients that failed together spread out.
        """
        if retry_after is not None:
            return float(retry_after)
        base = min(self.max_backoff, self.backoff * (2.0 ** retries_done))
        return base * (0.5 + random.random() / 2)


async def retrying(policy: RetryPolicy,
                   attempt: Callable[[Deadline | None], AsyncGenerator[T, None]]
                   ) -> AsyncIterator[T]:
    """Run ``attempt(deadline)`` and re-run it on a retryable ``APICallError`` raised before its
    first item.

    Marble (``x`` = retryable error, ``~`` = the policy's delay)::

        attempt 1: --x
        attempt 2:    ~~--a--b--|
        result:    -------a--b--|

    An error after the first item is raised as is: a half-streamed step is never replayed.
    Each attempt's iterator is closed (``aclose``) before the next one starts and when the
    consumer stops early, so its HTTP response is always released.

    The policy's ``deadline`` starts when iteration starts and is shared by every attempt (each
    bounds its network waits by it); a retry whose delay would end past it is not made.

    Args:
        policy: bounds and delays.
        attempt: makes a fresh iterator for one attempt, given the call's deadline.
    """
    retries_done = 0
    deadline = Deadline.start(policy.deadline)
    while True:
        has_yielded = False
        async with aclosing(attempt(deadline)) as items:
            try:
                async for item in items:
                    has_yielded = True
                    yield item
                return
            except APICallError as exc:
                if has_yielded or not policy.should_retry(exc, retries_done):
                    raise
                wait = policy.delay(retries_done, exc.retry_after)
                if deadline is not None and wait >= deadline.left():
                    raise
        await policy.sleep(wait)
        retries_done += 1


# --- errors --------------------------------------------------------------------------------------


def api_error(message: str, *, url: str | None, body: str | None = None,
              **attrs: Any) -> APICallError:
    """Every ``APICallError`` of this module is built here: its message, ``body`` and ``url``
    lose the credentials a URL or an echoing server may put in them (``_credentials``).

    Example:
        >>> err = api_error("call to http://u:pw@h/v1?key=k failed", url="http://u:pw@h/v1?key=k")
        >>> str(err), err.url
        ('call to http://***@h/v1?key=*** failed', 'http://***@h/v1?key=***')
    """
    return APICallError(strip_credentials(message),
                        body=None if body is None else strip_credentials(body),
                        url=None if url is None else safe_url(url), **attrs)


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_BODY_CHARS else text[:_MAX_BODY_CHARS] + "...[truncated]"


def _describe(obj: object) -> tuple[str | None, str | None]:
    """(error type, message) out of a decoded error document of any common shape."""
    if not isinstance(obj, dict):
        return None, None
    error = obj.get("error")
    if isinstance(error, dict):
        kind, message = error.get("type"), error.get("message")
    elif isinstance(error, str):
        kind, message = None, error
    else:  # vLLM {"object": "error", "message": ...}, FastAPI {"detail": ...}
        kind, message = obj.get("type"), obj.get("message") or obj.get("detail")
    return (kind if isinstance(kind, str) else None,
            message if isinstance(message, str) else
            (None if message is None else str(message)))


_AUTH_WORDS = ("api key", "api_key", "apikey", "authenticat", "unauthori", "credential")


def error_from_status(provider: str, status: int, body: bytes | str, url: str,
                      headers: Mapping[str, str], *,
                      key_env: str | None = None) -> APICallError:
    """The ``APICallError`` for an HTTP error response.

    429, 408, 409 and 5xx are retryable unless the server sent ``x-should-retry: false``
    (``true`` makes anything retryable); ``retry_after`` comes from the response headers.

    ``key_env`` is the variable a key would have come from, given only when the request carried
    no key. Then a 401/403, or any error whose body speaks of keys or authentication (a LiteLLM
    proxy answers a missing key with HTTP 500), says that no key was sent and where to put one,
    and is not retried: the same request would fail the same way.

    Example:
        >>> err = error_from_status("OpenAI", 429, b'{"error": {"message": "slow down"}}',
        ...                         "http://x/v1/chat/completions", {"retry-after": "2"})
        >>> err.status_code, err.is_retryable, err.retry_after, str(err)
        (429, True, 2.0, 'OpenAI API error: HTTP 429 from http://x/v1/chat/completions: slow down')
    """
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else body
    try:
        kind, message = _describe(decode_json(text)) if text else (None, None)
    except msgspec.DecodeError:
        kind, message = None, None
    if message is None:
        message = text.strip()[:300] or httpx.codes.get_reason_phrase(status) or "no body"
    label = f" ({kind})" if kind else ""
    should = {k.lower(): v for k, v in headers.items()}.get("x-should-retry")
    is_retryable = None if should not in ("true", "false") else should == "true"
    about_auth = f"{kind} {message}".lower()
    if key_env is not None and (status in (401, 403)
                                or any(w in about_auth for w in _AUTH_WORDS)):
        message = (f"{message} -- no API key was sent: set the {key_env} environment variable "
                   f"or pass api_key=")
        is_retryable = False
    return api_error(f"{provider} API error: HTTP {status}{label} from {url}: {message}",
                        status_code=status, body=_cut(text) or None, is_retryable=is_retryable,
                        url=url, retry_after=parse_retry_after(headers))


def error_from_payload(provider: str, obj: object, raw: str, url: str, *,
                       status_code: int | None = None) -> APICallError:
    """The ``APICallError`` for an error sent *inside* a stream answered with HTTP 200.

    ``status_code`` is the status the error names (LiteLLM's ``"code": "500"``, Anthropic's
    error type), or ``None``; retryability follows it (unknown → retryable).

    Example:
        >>> err = error_from_payload("OpenAI", {"error": {"message": "boom", "code": "500"}},
        ...                          "...", "http://x", status_code=500)
        >>> err.status_code, err.is_retryable
        (500, True)
    """
    kind, message = _describe(obj)
    label = f" ({kind})" if kind else ""
    return api_error(f"{provider} stream error{label} from {url}: {message or raw[:300]}",
                        status_code=status_code, body=_cut(raw), url=url)


def error_from_exception(provider: str, exc: BaseException, url: str) -> APICallError:
    """The ``APICallError`` for an ``httpx`` failure (timeout, connection, protocol, bad URL).

    Timeouts, connection failures and broken connections are retryable; a bad URL or an
    unsupported scheme is not.
    """
    if isinstance(exc, httpx.TimeoutException):
        what, retryable = f"timed out ({type(exc).__name__})", True
    elif isinstance(exc, httpx.ConnectError):
        what, retryable = "could not connect", True
    elif isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError)):
        what, retryable = "invalid request", False
    elif isinstance(exc, httpx.RemoteProtocolError):
        what, retryable = "connection broke off", True
    elif isinstance(exc, httpx.DecodingError):
        what, retryable = "response body could not be decoded", True
    else:
        what, retryable = f"network error ({type(exc).__name__})", True
    detail = str(exc) or type(exc).__name__
    return api_error(f"{provider} API call to {url} failed: {what}: {detail}",
                        status_code=None, is_retryable=retryable, url=url)


def stream_error(provider: str, problem: str, url: str, *, body: str | None = None,
                 is_retryable: bool = True) -> APICallError:
    """The ``APICallError`` for a malformed or truncated stream (retryable unless told)."""
    return api_error(f"{provider} stream from {url} is broken: {problem}",
                        status_code=None, body=None if body is None else _cut(body),
                        is_retryable=is_retryable, url=url)


# --- the HTTP session -----------------------------------------------------------------------------


class HTTPSession:
    """One model's HTTP client: borrowed from the caller, or owned and made per event loop.

    An owned ``httpx.AsyncClient`` is created lazily on first use, and again when used from a
    different event loop (pooled connections cannot cross loops, and ``asyncio.run`` twice in
    one script is common). ``aclose()`` closes an owned client; a borrowed one is the caller's.

    Args:
        provider: the name used in error messages (``"OpenAI"``, ``"Anthropic"``).
        client: a client to borrow, or ``None`` to own one.
        timeout: seconds or an ``httpx.Timeout``; ``None`` means :data:`DEFAULT_TIMEOUT` for an
            owned client and the borrowed client's own setting otherwise.
    """

    def __init__(self, provider: str, *, client: httpx.AsyncClient | None = None,
                 timeout: float | httpx.Timeout | None = None) -> None:
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise InvalidType(f"client must be an httpx.AsyncClient, got "
                              f"{type(client).__name__}")
        self.provider = provider
        #: The variable an API key comes from; errors of keyless requests name it.
        self.key_env: str | None = None
        self._borrowed = client
        self._timeout = timeout
        self._owned: httpx.AsyncClient | None = None
        self._owned_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None

    def client(self) -> httpx.AsyncClient:
        """The client to use on the running event loop."""
        if self._borrowed is not None:
            return self._borrowed
        loop = asyncio.get_running_loop()
        if self._owned is None or self._owned_loop is None or self._owned_loop() is not loop:
            self._owned = httpx.AsyncClient(
                timeout=DEFAULT_TIMEOUT if self._timeout is None else self._timeout)
            self._owned_loop = weakref.ref(loop)
        return self._owned

    async def aclose(self) -> None:
        """Close the owned client (a borrowed client is left open)."""
        owned, self._owned, self._owned_loop = self._owned, None, None
        if owned is not None:
            await owned.aclose()

    def _request_options(self) -> _RequestOptions:
        # An explicit timeout also applies to a borrowed client, per request.
        if self._borrowed is not None and self._timeout is not None:
            return {"timeout": self._timeout}
        return {}

    def _missing_key(self, headers: Mapping[str, str]) -> str | None:
        """``key_env`` when the request carried no key (no ``Authorization``/``x-api-key``)."""
        sent = {k.lower() for k in headers}
        return None if "authorization" in sent or "x-api-key" in sent else self.key_env

    async def _send(self, url: str, body: object, headers: Mapping[str, str],
                    deadline: Deadline | None) -> httpx.Response:
        """POST ``body`` as JSON; the response with its headers read and its body not yet.
        An error status raises here, after reading at most 64 KB of its body."""
        client = self.client()
        request = client.build_request("POST", url, content=encode_json(body), headers=headers,
                                       **self._request_options())
        response = await _bounded(client.send(request, stream=True), deadline)
        if response.status_code >= 400:
            try:
                text = await _bounded(_read_capped(response, _MAX_BODY_CHARS), deadline)
            finally:
                await response.aclose()
            raise error_from_status(self.provider, response.status_code, text, url,
                                    response.headers, key_env=self._missing_key(headers))
        return response

    async def sse(self, url: str, body: object, headers: Mapping[str, str], *,
                  deadline: Deadline | None = None,
                  max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES
                  ) -> AsyncIterator[SSEEvent]:
        """POST ``body`` as JSON and yield the server-sent events of the response.

        The response is closed when iteration ends for any reason, so a consumer that stops
        early or is cancelled releases the connection. Every network wait (connecting, the
        headers, each read) ends at ``deadline``.

        Raises:
            APICallError: an error status, a transport failure, the deadline, an event longer
                than ``max_event_bytes``, or a body that ends inside an event.
        """
        provider = self.provider
        try:
            response = await self._send(url, body, headers, deadline)
            parser = SSEParser(max_event_bytes=max_event_bytes)
            reads = response.aiter_bytes()
            try:
                while True:  # not ``async for``: each read is bounded by the deadline
                    block = await _bounded(anext(reads, None), deadline)
                    if block is None:
                        break
                    try:
                        events = parser.feed_events(block)
                    except ChunkDecodeError as exc:
                        raise stream_error(provider, str(exc), url, is_retryable=False) from exc
                    for event in events:
                        yield event
                try:
                    parser.close()
                except ChunkDecodeError as exc:
                    raise stream_error(provider, f"the body ended in the middle of an event "
                                       f"({exc})", url) from exc
            finally:
                await reads.aclose()  # type: ignore[attr-defined] # an async generator
                await response.aclose()
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise error_from_exception(provider, exc, url) from exc
        except TimeoutError as exc:  # only a deadline raises it here (httpx has its own)
            raise _out_of_time(provider, url, deadline) from exc

    async def post(self, url: str, body: object, headers: Mapping[str, str], *,
                        deadline: Deadline | None = None,
                        max_bytes: int | None = DEFAULT_MAX_EVENT_BYTES) -> bytes:
        """POST ``body`` as JSON and return the response body (to be decoded by the caller).

        Raises:
            APICallError: an error status, a transport failure, the deadline, or a body longer
                than ``max_bytes``.
        """
        provider = self.provider
        try:
            response = await self._send(url, body, headers, deadline)
            try:
                data = await _bounded(_read_capped(response, max_bytes), deadline)
            finally:
                await response.aclose()
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise error_from_exception(provider, exc, url) from exc
        except TimeoutError as exc:  # only a deadline raises it here (httpx has its own)
            raise _out_of_time(provider, url, deadline) from exc
        if max_bytes is not None and len(data) > max_bytes:
            raise stream_error(provider, f"the response is longer than max_event_bytes="
                               f"{max_bytes} bytes", url, is_retryable=False)
        return data


def _out_of_time(provider: str, url: str, deadline: Deadline | None) -> APICallError:
    if deadline is not None:
        return deadline.error(provider, url)
    return api_error(f"{provider} API call to {url} timed out", url=url)  # pragma: no cover


async def _read_capped(response: httpx.Response, limit: int | None) -> bytes:
    """The body of ``response``, reading no more than ``limit`` bytes past the limit's read
    (the returned bytes are cut to ``limit + 1``, so a caller can tell it was longer)."""
    pieces: list[bytes] = []
    size = 0
    # typed AsyncIterator by httpx; it is an async generator, with aclose
    async with aclosing(response.aiter_bytes()) as reads:  # type: ignore[type-var]
        async for block in reads:
            pieces.append(block)
            size += len(block)
            if limit is not None and size > limit:
                break
    data = b"".join(pieces)
    return data if limit is None else data[:limit + 1]


# --- the shared model base ------------------------------------------------------------------------


class HTTPModel:
    """What every HTTP model shares: ids, URL, key, headers, retry policy and the session.

    Subclasses build the request and translate the response; see ``OpenAIChatModel`` for the
    meaning of each argument. Use ``async with model:`` or ``await model.aclose()`` to close
    the HTTP client the model owns.
    """

    provider: str
    label: str  # the provider's name in error messages

    def __init__(self, model_id: str, *, base_url: str, api_key: str | None,
                 client: httpx.AsyncClient | None, timeout: float | httpx.Timeout | None,
                 max_retries: int, backoff: float, max_backoff: float,
                 headers: Mapping[str, str] | None,
                 sleep: Callable[[float], Awaitable[object]] | None,
                 deadline: float | None = DEFAULT_DEADLINE,
                 max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES) -> None:
        non_empty_str(model_id, "model_id")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            shown = safe_url(base_url) if isinstance(base_url, str) else base_url
            error = InvalidArgument if isinstance(base_url, str) else InvalidType
            raise error(f"base_url must be an http(s) URL, got {shown!r}")
        self.model_id = model_id
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.headers = dict(headers or {})
        self.retry_policy = RetryPolicy(max_retries=max_retries, backoff=backoff,
                                        max_backoff=max_backoff,
                                        sleep=asyncio.sleep if sleep is None else sleep,
                                        deadline=deadline)
        optional_int_at_least(max_event_bytes, "max_event_bytes", 1)  # as SSEParser checks it
        self.max_event_bytes = max_event_bytes
        self._session = HTTPSession(self.label, client=client, timeout=timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP client the model owns (a borrowed ``client`` stays open)."""
        await self._session.aclose()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _policy_for(self, settings: Mapping[str, object]) -> RetryPolicy:
        """The retry policy for one call: ``model_settings["max_retries"]`` (or Mastra's
        ``maxRetries``) overrides the model's count."""
        policy = self.retry_policy
        retries = settings.get("max_retries", settings.get("maxRetries"))
        if isinstance(retries, int) and retries != policy.max_retries:
            policy = RetryPolicy(max_retries=retries, backoff=policy.backoff,
                                 max_backoff=policy.max_backoff,
                                 max_retry_after=policy.max_retry_after, sleep=policy.sleep,
                                 deadline=policy.deadline)
        return policy

    def _extra_headers(self, settings: Mapping[str, object]) -> dict[str, str]:
        """The model's headers, then ``model_settings["headers"]`` over them."""
        headers = dict(self.headers)
        extra = settings.get("headers")
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items()})
        return headers


class ResponseMetadataFields(TypedDict, total=False):
    """The ``response-metadata`` fields a provider sent (each only when it sent a usable one),
    spread into ``ResponseMetadata(...)`` by the translators."""

    id: str
    model_id: str
    timestamp: datetime
