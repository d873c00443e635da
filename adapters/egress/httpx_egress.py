"""The one way out: an httpx client that only ever connects to checked public addresses.

How the pinning works: each call builds a small httpx client whose transport uses a network
backend that refuses to open a TCP connection to anything except the addresses this module put
on its pin list for that (host, port) after resolving the host once and checking every answer.
The request URL keeps the original host name, so the Host header, the TLS server name (SNI)
and certificate verification all use it, while the socket goes to the checked address; a
second DNS answer (rebinding) can never be used because httpx never resolves anything itself.
Redirects are followed by hand, each hop checked like the first.

API requests (``request``: carriers, engines) share one client per ``HttpxSafeHttp`` and event loop, so a dial
reuses a kept-alive connection instead of building a client and opening a TCP (and TLS) connection each time
(about a tenth of a carrier dial's CPU). Each request still resolves and checks its host first and pins the
answers before it is sent; the pool keys its connections by scheme, host and port, so a kept-alive connection
is one the pin list allowed when it was opened (a checked address of that very host). Fetches, webhook posts and
streams keep a client of their own per call.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
import time
import typing
import zlib
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urljoin

import httpcore
import httpx

from application.ports.egress import (
    BODY_PREFIX_BYTES,
    DEFAULT_ACCEPT,
    FetchedPage,
    HttpResponse,
    PostResult,
    RequestFailed,
    ResolutionFailed,
    Resolver,
)
from domain.addresses import DEFAULT_PORTS, ParsedTarget, check_url, ensure_public, port_allowed
from domain.errors import BlockedAddress, DomainError, UpstreamFetchFailed, ValidationFailed

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
KEEPALIVE_SECONDS = 5.0
"""An idle connection is closed after this (well below the idle timeouts of the APIs it talks to)."""
API_POOL_CONNECTIONS = 32
API_POOL_KEEPALIVE = 8
"""The connections of ``request``'s shared pool (all hosts together), and the idle ones kept open."""
_RAW_SLACK = 64 * 1024  # compressed bodies may be slightly larger than their content
# Request headers a caller may not set on a webhook delivery.
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
    }
)

MSG_DNS = "the host name could not be resolved"
MSG_CONNECT = "the server could not be reached"
MSG_TIMEOUT = "the server did not answer in time"
MSG_PROTOCOL = "the server sent an invalid response"
MSG_STATUS = "the page could not be fetched (HTTP {status})"
MSG_TYPE = "the page is not a supported text document"
MSG_TOO_BIG = "the page is larger than the {limit}-byte limit"
MSG_ENCODING = "the page uses an unsupported or invalid content encoding"
MSG_REDIRECTS = "the page redirected too many times"
MSG_BAD_REDIRECT = "the page sent an invalid redirect"
MSG_REDIRECT_BLOCKED = "the page redirected to a location that is not allowed"


class _DnsFailure(Exception):
    pass


class _TooBig(Exception):
    pass


def _pin_key(host: str, port: int) -> tuple[str, int]:
    return host.strip("[]").lower(), port


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Opens TCP connections only to pinned addresses; every other destination fails closed."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.AnyIOBackend()
        self._pins: dict[tuple[str, int], list[str]] = {}

    def pin(self, host: str, port: int, addresses: Iterable[str]) -> None:
        self._pins[_pin_key(host, port)] = list(addresses)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self._pins.get(_pin_key(host, port))
        if not addresses:
            raise httpcore.ConnectError("destination was not checked")
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a :class:`PinnedBackend`, HTTP/1.1 only, no proxies, no retries."""

    def __init__(self, backend: PinnedBackend, *, ssl_context: ssl.SSLContext, max_connections: int = 4,
                 max_keepalive_connections: int = 2) -> None:
        super().__init__(verify=ssl_context, trust_env=False, retries=0)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=KEEPALIVE_SECONDS,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )


def _media_type(value: str) -> tuple[str, str | None]:
    media, *params = value.split(";")
    charset = None
    for param in params:
        name, _, raw = param.partition("=")
        if name.strip().lower() == "charset":
            charset = raw.strip().strip('"').lower() or None
    return media.strip().lower(), charset


class _CappedBody:
    """Accumulates a response body, decoding gzip/deflate incrementally, and raises _TooBig as
    soon as the decoded size passes ``limit`` (zlib is never asked for more than fits)."""

    def __init__(self, encoding: str, limit: int) -> None:
        self._limit = limit
        self._raw_limit = limit + _RAW_SLACK
        self._raw = 0
        self._out = bytearray()
        self._fallback_raw_deflate = False
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._inflater = None
        elif encoding in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS)
            self._fallback_raw_deflate = True
        else:
            raise UpstreamFetchFailed(MSG_ENCODING)

    def feed(self, chunk: bytes) -> None:
        self._raw += len(chunk)
        if self._raw > self._raw_limit:
            raise _TooBig
        if self._inflater is None:
            self._append(chunk)
            return
        try:
            self._inflate(chunk)
        except zlib.error:
            if not (self._fallback_raw_deflate and not self._out):
                raise
            # "deflate" sent as a raw deflate stream rather than zlib-wrapped: start over.
            self._fallback_raw_deflate = False
            self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            self._inflate(chunk)
        self._fallback_raw_deflate = False

    def _inflate(self, data: bytes) -> None:
        assert self._inflater is not None
        while data and not self._inflater.eof:
            room = self._limit - len(self._out)
            self._append(self._inflater.decompress(data, room + 1))
            data = self._inflater.unconsumed_tail

    def _append(self, data: bytes) -> None:
        self._out += data
        if len(self._out) > self._limit:
            raise _TooBig

    def finish(self) -> bytes:
        if self._inflater is not None and not self._inflater.eof:
            self._append(self._inflater.flush())
        return bytes(self._out)


async def _read_prefix(response: httpx.Response, size: int) -> bytes:
    prefix = bytearray()
    async for chunk in response.aiter_raw():
        prefix += chunk
        if len(prefix) >= size:
            break
    return bytes(prefix[:size])


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """The system's trust store, loaded once per process (about 15 ms of CPU a load) and shared by every client:
    a context is not changed after it is made."""
    return httpx.create_ssl_context(trust_env=False)


class HttpxSafeHttp:
    """:class:`application.ports.egress.SafeHttp` over httpx, pinned to checked addresses.

    ``allow_loopback`` lets 127.0.0.0/8 and ::1 through, on any port (development and tests only);
    every other destination must use one of ``allowed_ports`` (80, 443, 8080, 8443).
    """

    def __init__(
        self,
        resolver: Resolver,
        *,
        allow_loopback: bool,
        user_agent: str,
        connect_timeout: float = 5,
        read_timeout: float = 10,
        max_redirects: int = 5,
        total_timeout: float = 30,
        allowed_ports: Collection[int] = DEFAULT_PORTS,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._resolver = resolver
        self._allow_loopback = allow_loopback
        self._user_agent = user_agent
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_redirects = max_redirects
        self._total_timeout = total_timeout
        self._allowed_ports = frozenset(allowed_ports)
        self._ssl_context = ssl_context  # None: the process's default, made on the first request
        self._shared: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient, PinnedBackend] | None = None

    def _api_client(self) -> tuple[httpx.AsyncClient, PinnedBackend]:
        """``request``'s pooled client of the running event loop (module docstring), made on first use."""
        loop = asyncio.get_running_loop()
        shared = self._shared
        if shared is None or shared[0] is not loop or shared[1].is_closed:
            backend = PinnedBackend()
            transport = PinnedTransport(backend, ssl_context=self._ssl_context or _default_ssl_context(),
                                        max_connections=API_POOL_CONNECTIONS,
                                        max_keepalive_connections=API_POOL_KEEPALIVE)
            client = httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False)
            shared = self._shared = (loop, client, backend)
        return shared[1], shared[2]

    async def aclose(self) -> None:
        """Close ``request``'s pooled connections (a pool made on another event loop is let go: its loop owns
        its sockets)."""
        shared, self._shared = self._shared, None
        if shared is not None and shared[0] is asyncio.get_running_loop():
            await shared[1].aclose()

    # -- shared -------------------------------------------------------------------------------

    async def _checked_addresses(self, target: ParsedTarget) -> list[str]:
        """Resolve once and check every answer. BlockedAddress if any is not public."""
        if target.ip is not None:
            ensure_public(target.ip, allow_loopback=self._allow_loopback)
            return [str(target.ip)]
        try:
            answers = await self._resolver.resolve(target.host, target.port)
        except DomainError:
            raise
        except Exception as exc:  # resolver failures of any kind: no usable answer
            raise _DnsFailure from exc
        if not answers:
            raise _DnsFailure
        addresses: list[str] = []
        for answer in answers:
            ensure_public(answer, allow_loopback=self._allow_loopback)
            address = str(ipaddress.ip_address(answer))
            if address not in addresses:
                addresses.append(address)
        if not port_allowed(target.port, addresses, allow_loopback=self._allow_loopback,
                            allowed_ports=self._allowed_ports):
            raise BlockedAddress("the port is only allowed for loopback targets")
        return addresses

    @asynccontextmanager
    async def _session(self, limits: httpx.Timeout) -> AsyncIterator[tuple[httpx.AsyncClient, PinnedBackend]]:
        backend = PinnedBackend()
        transport = PinnedTransport(backend, ssl_context=self._ssl_context or _default_ssl_context())
        async with httpx.AsyncClient(
            transport=transport, timeout=limits, follow_redirects=False, trust_env=False
        ) as client:
            yield client, backend

    # -- GET ----------------------------------------------------------------------------------

    async def fetch(self, url: str, *, max_bytes: int, accept: tuple[str, ...] = DEFAULT_ACCEPT) -> FetchedPage:
        target = check_url(url, allowed_ports=self._allowed_ports, allow_loopback=self._allow_loopback)
        try:
            async with asyncio.timeout(self._total_timeout):
                return await self._fetch(target, max_bytes=max_bytes, accept=accept)
        except DomainError:
            raise
        except _DnsFailure:
            raise UpstreamFetchFailed(MSG_DNS) from None
        except (TimeoutError, httpx.TimeoutException):
            raise UpstreamFetchFailed(MSG_TIMEOUT) from None
        except httpx.ConnectError:
            raise UpstreamFetchFailed(MSG_CONNECT) from None
        except _TooBig:
            raise UpstreamFetchFailed(MSG_TOO_BIG.format(limit=max_bytes)) from None
        except zlib.error:
            raise UpstreamFetchFailed(MSG_ENCODING) from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError):
            raise UpstreamFetchFailed(MSG_PROTOCOL) from None

    async def _fetch(self, target: ParsedTarget, *, max_bytes: int, accept: tuple[str, ...]) -> FetchedPage:
        timeout = httpx.Timeout(self._read_timeout, connect=self._connect_timeout)
        headers = {
            "User-Agent": self._user_agent,
            "Accept": ", ".join(accept),
            "Accept-Encoding": "gzip, deflate",
        }
        wanted = {media.lower() for media in accept}
        async with self._session(timeout) as (client, backend):
            for _hop in range(self._max_redirects + 1):
                backend.pin(target.host, target.port, await self._checked_addresses(target))
                async with client.stream("GET", target.url, headers=headers) as response:
                    status = response.status_code
                    if status in REDIRECT_STATUSES:
                        target = self._redirect_target(target, response.headers.get("location"))
                        continue
                    if not 200 <= status < 300:
                        raise UpstreamFetchFailed(MSG_STATUS.format(status=status), details={"status": status})
                    media, charset = _media_type(response.headers.get("content-type", ""))
                    if media not in wanted:
                        raise UpstreamFetchFailed(MSG_TYPE)
                    length = response.headers.get("content-length", "").strip()
                    if length.isdigit() and int(length) > max_bytes + _RAW_SLACK:
                        raise _TooBig
                    body = _CappedBody(response.headers.get("content-encoding", ""), max_bytes)
                    async for chunk in response.aiter_raw():
                        body.feed(chunk)
                    return FetchedPage(
                        final_url=target.url, status=status, content_type=media, charset=charset, body=body.finish()
                    )
        raise UpstreamFetchFailed(MSG_REDIRECTS)

    def _redirect_target(self, current: ParsedTarget, location: str | None) -> ParsedTarget:
        if not location or len(location) > 2 * 2048:
            raise UpstreamFetchFailed(MSG_BAD_REDIRECT)
        try:
            joined = urljoin(current.url, location.strip())
        except ValueError:
            raise UpstreamFetchFailed(MSG_BAD_REDIRECT) from None
        try:
            return check_url(joined.partition("#")[0], allowed_ports=self._allowed_ports,
                             allow_loopback=self._allow_loopback)
        except ValidationFailed:
            raise BlockedAddress(MSG_REDIRECT_BLOCKED) from None

    # -- POST ---------------------------------------------------------------------------------

    async def post(
        self,
        url: str,
        *,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 - the port's signature: a per-delivery deadline
    ) -> PostResult:
        target = check_url(url, allowed_ports=self._allowed_ports, allow_loopback=self._allow_loopback)
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        started = time.perf_counter()

        def elapsed() -> int:
            return round((time.perf_counter() - started) * 1000)

        def failed(error: str) -> PostResult:
            return PostResult(status=None, headers={}, body_prefix=b"", duration_ms=elapsed(), error=error)

        request_headers = {"User-Agent": self._user_agent}
        for name, value in headers.items():
            if name.lower() not in _RESERVED_HEADERS:
                request_headers[name] = value
        request_headers["Accept-Encoding"] = "identity"
        http_timeout = httpx.Timeout(timeout, connect=min(self._connect_timeout, timeout))
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._checked_addresses(target)
                async with self._session(http_timeout) as (client, backend):
                    backend.pin(target.host, target.port, addresses)
                    async with client.stream("POST", target.url, content=body, headers=request_headers) as response:
                        received = {name: value for name, value in response.headers.items()}
                        error = None
                        try:
                            prefix = await _read_prefix(response, BODY_PREFIX_BYTES)
                        except httpx.HTTPError:
                            prefix, error = b"", "the response body could not be read"
                        return PostResult(
                            status=response.status_code,
                            headers=received,
                            body_prefix=prefix,
                            duration_ms=elapsed(),
                            error=error,
                        )
        except DomainError:
            raise
        except _DnsFailure:
            return failed(MSG_DNS)
        except (TimeoutError, httpx.TimeoutException):
            return failed(MSG_TIMEOUT)
        except httpx.ConnectError:
            return failed(MSG_CONNECT)
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError):
            return failed(MSG_PROTOCOL)


    # -- API requests ---------------------------------------------------------------------------

    def _headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        request_headers = {"User-Agent": self._user_agent}
        for name, value in headers.items():
            if name.lower() not in _RESERVED_HEADERS:
                request_headers[name] = value
        request_headers["Accept-Encoding"] = "identity"
        return request_headers

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeout: float,  # noqa: ASYNC109 - the port's signature: the whole exchange's deadline
        max_bytes: int = 1_000_000,
    ) -> HttpResponse:
        target = check_url(url, allowed_ports=self._allowed_ports, allow_loopback=self._allow_loopback)
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        started = time.perf_counter()
        http_timeout = httpx.Timeout(timeout, connect=min(self._connect_timeout, timeout))
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._checked_addresses(target)
                client, backend = self._api_client()
                backend.pin(target.host, target.port, addresses)  # checked just now, before anything is sent
                async with client.stream(method, target.url, content=body, headers=self._headers(headers),
                                         timeout=http_timeout) as response:
                    received = dict(response.headers.items())
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_raw():
                        size += len(chunk)
                        if size > max_bytes:
                            raise RequestFailed(f"the answer is larger than {max_bytes} bytes", maybe_sent=True)
                        chunks.append(chunk)
                    return HttpResponse(response.status_code, received, b"".join(chunks),
                                        round((time.perf_counter() - started) * 1000))
        except (DomainError, RequestFailed):
            raise
        except _DnsFailure:
            raise RequestFailed(MSG_DNS, maybe_sent=False) from None
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise RequestFailed(MSG_CONNECT, maybe_sent=False) from None
        except (TimeoutError, httpx.TimeoutException):
            raise RequestFailed(MSG_TIMEOUT, maybe_sent=True) from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError):
            raise RequestFailed(MSG_PROTOCOL, maybe_sent=True) from None

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        connect_timeout: float = 5,
        read_timeout: float = 30,
    ) -> AsyncIterator[_Streaming]:
        target = check_url(url, allowed_ports=self._allowed_ports, allow_loopback=self._allow_loopback)
        http_timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        try:
            async with asyncio.timeout(connect_timeout):
                addresses = await self._checked_addresses(target)
        except DomainError:
            raise
        except _DnsFailure:
            raise RequestFailed(MSG_DNS, maybe_sent=False) from None
        except TimeoutError:
            raise RequestFailed(MSG_DNS, maybe_sent=False) from None
        async with self._session(http_timeout) as (client, backend):
            backend.pin(target.host, target.port, addresses)
            try:
                async with client.stream(method, target.url, content=body,
                                         headers=self._headers(headers)) as response:
                    yield _Streaming(response)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                raise RequestFailed(MSG_CONNECT, maybe_sent=False) from None
            except httpx.TimeoutException:
                raise RequestFailed(MSG_TIMEOUT, maybe_sent=True) from None
            except (httpx.HTTPError, httpx.InvalidURL, OSError):
                raise RequestFailed(MSG_PROTOCOL, maybe_sent=True) from None


class _Streaming:
    """:class:`application.ports.egress.StreamingResponse` over an open httpx response."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_bytes():
            yield chunk

    async def lines(self) -> AsyncIterator[str]:
        async for line in self._response.aiter_lines():
            yield line


class SystemResolver:
    """:class:`application.ports.egress.Resolver` over the C library's getaddrinfo, run in a
    worker thread, given up on after ``timeout`` seconds."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self._timeout = timeout

    async def resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP),
                timeout=self._timeout,
            )
        except (TimeoutError, OSError, UnicodeError) as exc:
            raise ResolutionFailed("the host name could not be resolved") from exc
        addresses: list[str] = []
        for family, _type, _proto, _name, sockaddr in infos:
            if family not in (socket.AF_INET, socket.AF_INET6):
                continue
            address = str(sockaddr[0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise ResolutionFailed("the host name could not be resolved")
        return addresses
