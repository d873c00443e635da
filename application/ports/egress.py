"""Ports for reaching URLs outside Parley: knowledge-base page fetches, webhook deliveries, and the APIs Parley
calls (carriers, model servers, custom tools).

Every outbound request goes through :class:`SafeHttp`, which refuses private, loopback and
reserved destinations (see ``domain.addresses``) at every hop, after DNS resolution.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

DEFAULT_ACCEPT: tuple[str, ...] = ("text/html", "text/plain", "application/xhtml+xml")
BODY_PREFIX_BYTES = 2048


class ResolutionFailed(Exception):
    """A host name could not be resolved (no such name, no answer, timeout)."""


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address ``host`` resolves to, as IP strings. Raises ``ResolutionFailed`` (or
        returns an empty list) when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class FetchedPage:
    final_url: str
    """The URL that answered, after redirects (canonical form)."""
    status: int
    content_type: str
    """The media type only, lower case, e.g. ``text/html``."""
    charset: str | None
    """The ``charset`` parameter of Content-Type, lower case, if the server sent one."""
    body: bytes
    """The decoded (un-gzipped) body, at most ``max_bytes`` long."""


@dataclass(frozen=True, slots=True)
class PostResult:
    status: int | None
    """The HTTP status, or None when no response came back (see ``error``)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Response headers, names lower case, repeated headers joined with ", "."""
    body_prefix: bytes = b""
    """The first 2048 bytes of the response body as sent (not decompressed)."""
    duration_ms: int = 0
    error: str | None = None
    """Why no response came back (DNS, connection, timeout, protocol); None when one did."""

    @property
    def delivered(self) -> bool:
        """True when the receiver answered 2xx."""
        return self.status is not None and 200 <= self.status < 300


class RequestFailed(Exception):
    """No HTTP answer came back. ``maybe_sent``: the request may have reached the server (a time-out or a dropped
    connection after sending), so repeating it could repeat its effect; False when it certainly did not (DNS, the
    connection refused)."""

    def __init__(self, message: str, *, maybe_sent: bool) -> None:
        super().__init__(message)
        self.message, self.maybe_sent = message, maybe_sent


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    """Names lower case, repeated headers joined with ", "."""
    body: bytes
    duration_ms: int = 0


class StreamingResponse(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (each read bounded by the stream's ``read_timeout``)."""
        ...

    def lines(self) -> AsyncIterator[str]:
        """The body as text lines as they arrive (server-sent events, JSON lines)."""
        ...


class SafeHttp(Protocol):
    async def fetch(self, url: str, *, max_bytes: int, accept: tuple[str, ...] = DEFAULT_ACCEPT) -> FetchedPage:
        """GET a text page, following at most a few redirects, each one re-checked.

        Raises ``ValidationFailed`` for a malformed URL (bad scheme, port, user info),
        ``BlockedAddress`` when the URL or any redirect resolves to a non-public address, and
        ``UpstreamFetchFailed`` for everything else that goes wrong: DNS, connection, timeout,
        non-2xx status, a media type outside ``accept``, a decoded body over ``max_bytes``,
        too many redirects.
        """
        ...

    async def post(
        self,
        url: str,
        *,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 - a per-delivery deadline the adapter enforces
    ) -> PostResult:
        """POST ``body`` once, without following redirects (a 3xx is a result).

        Raises ``ValidationFailed`` for a malformed URL and ``BlockedAddress`` when the host
        resolves (now, at send time) to a non-public address. Never raises for what the
        receiver does: network failures come back as ``PostResult(status=None, error=...)``.
        """
        ...

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeout: float,  # noqa: ASYNC109 - the whole exchange's deadline, enforced by the adapter
        max_bytes: int = 1_000_000,
    ) -> HttpResponse:
        """One request to an API, no redirects followed (a 3xx is an answer), the body read up to ``max_bytes``.

        Raises ``ValidationFailed`` for a malformed URL, ``BlockedAddress`` for a non-public destination, and
        :class:`RequestFailed` when no answer came back (see ``maybe_sent``); any HTTP status is an answer.
        """
        ...

    def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        connect_timeout: float = 5,
        read_timeout: float = 30,
    ) -> AbstractAsyncContextManager[StreamingResponse]:
        """One request whose answer is read as it arrives (a model's streamed tokens, synthesized audio). Entering
        the context sends the request and waits for the status line; errors as :meth:`request`."""
        ...
