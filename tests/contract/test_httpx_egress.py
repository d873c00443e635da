"""HttpxSafeHttp through the real httpx transport: a fake resolver (a dict), real sockets, and a
throwaway HTTP server on 127.0.0.1 for the cases that must actually connect."""

from __future__ import annotations

import datetime as dt
import gzip
import ipaddress
import ssl
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from adapters.egress import HttpxSafeHttp, SystemResolver
from application.ports.egress import RequestFailed, ResolutionFailed
from domain.errors import BlockedAddress, UpstreamFetchFailed, ValidationFailed

UA = "ParleyTest/1.0"
BOMB = gzip.compress(b"\0" * (20 * 1024 * 1024), compresslevel=9)  # ~20 KB on the wire, 20 MiB inflated
SMALL_HTML = b"<html><body>hello from the page</body></html>"


class FakeResolver:
    """host -> answers. Unknown hosts fail like NXDOMAIN. Records every lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise ResolutionFailed(host)
        return list(self.table[host])


class RebindingResolver(FakeResolver):
    """Answers the first lookup of a host with ``first``, every later one with ``later``."""

    def __init__(self, first: list[str], later: list[str]) -> None:
        super().__init__({})
        self.first, self.later = first, later

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return list(self.first if len(self.calls) == 1 else self.later)


# -- a loopback server ---------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""
    client_port: int = 0
    """The client's end of the TCP connection it came on."""


@dataclass
class PageServer:
    port: int
    requests: list[Seen] = field(default_factory=list)
    never_answer: threading.Event = field(default_factory=threading.Event)
    """/slow and /hook-slow hold their request until this is set (when the server stops): a receiver
    that never answers, so a deadline check does not race a sleeping server."""

    def clear(self) -> None:
        self.requests.clear()


HELD_PATHS = frozenset({"/slow", "/hook-slow"})
"""Requests the server holds until it stops (``PageServer.never_answer``)."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_state: PageServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(
        self,
        status: int,
        body: bytes = b"",
        content_type: str = "text/html; charset=utf-8",
        extra: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _record(self, body: bytes = b"") -> tuple[str, dict[str, list[str]]]:
        state: PageServer = self.server.state  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        # a held request's client gives up on its deadline, and on a loaded machine the server may read that
        # request only after the next test cleared the list: no test looks at them, so they are not recorded
        if parts.path not in HELD_PATHS:
            state.requests.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                       body, self.client_address[1]))
        return parts.path, parse_qs(parts.query)

    def _hang(self) -> None:
        state: PageServer = self.server.state  # type: ignore[attr-defined]
        state.never_answer.wait(timeout=60)

    def do_GET(self) -> None:
        path, query = self._record()
        if path == "/page":
            self._send(200, SMALL_HTML)
        elif path == "/plain":
            self._send(200, b"just text", "text/plain")
        elif path == "/redirect":
            self._send(302, extra={"Location": query["to"][0]})
        elif path.startswith("/hop/"):
            left = int(path.removeprefix("/hop/"))
            if left == 0:
                self._send(200, SMALL_HTML)
            else:
                self._send(301, extra={"Location": f"/hop/{left - 1}"})
        elif path == "/big":
            self._send(200, b"a" * 200_000, "text/plain")
        elif path == "/bomb":
            self._send(200, BOMB, "text/html", {"Content-Encoding": "gzip"})
        elif path == "/gzip":
            self._send(200, gzip.compress(SMALL_HTML), "text/html", {"Content-Encoding": "gzip"})
        elif path == "/deflate-raw":
            squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
            self._send(
                200, squeeze.compress(SMALL_HTML) + squeeze.flush(), "text/html", {"Content-Encoding": "deflate"}
            )
        elif path == "/brotli":
            self._send(200, b"\x1b\x00\x00", "text/html", {"Content-Encoding": "br"})
        elif path == "/missing":
            self._send(404, b"<html>secret internal 404 page</html>")
        elif path == "/image":
            self._send(200, b"\x89PNG\r\n\x1a\n", "image/png")
        elif path == "/slow":
            self._hang()
            self._send(200, SMALL_HTML)
        else:
            self._send(404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        path, _query = self._record(self.rfile.read(length))
        if path == "/hook":
            self._send(201, b"x" * 5000, "text/plain", {"X-Receiver": "ok"})
        elif path == "/hook-redirect":
            self._send(302, b"moved", "text/plain", {"Location": "/page"})
        elif path == "/hook-error":
            self._send(500, b"receiver exploded", "text/plain")
        elif path == "/hook-slow":
            self._hang()
            self._send(200)
        else:
            self._send(404)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients that hang up mid-response (oversize bodies, failed handshakes) are expected


def _serve(ssl_context: ssl.SSLContext | None = None) -> Iterator[PageServer]:
    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    if ssl_context is not None:
        httpd.socket = ssl_context.wrap_socket(httpd.socket, server_side=True)
    state = PageServer(port=httpd.server_address[1])
    httpd.state = state  # type: ignore[attr-defined]
    # shutdown() waits for the loop to look at its flag: every 50 ms, not the standard library's 0.5 s
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.never_answer.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def server() -> Iterator[PageServer]:
    yield from _serve()


@pytest.fixture
def page_server(server: PageServer) -> PageServer:
    server.clear()
    return server


def loopback_http(server: PageServer, resolver: FakeResolver | None = None, **kwargs: object) -> HttpxSafeHttp:
    resolver = resolver or FakeResolver(
        {"example.test": ["127.0.0.1"], "metadata.test": ["169.254.169.254"], "internal.test": ["10.0.0.5"]}
    )
    options: dict[str, object] = {"allow_loopback": True, "user_agent": UA, "allowed_ports": {server.port, 80, 443}}
    options.update(kwargs)
    return HttpxSafeHttp(resolver, **options)  # type: ignore[arg-type]


# -- hostile URLs: nothing is ever connected to -----------------------------------------------

HOSTILE_RESOLVER = {
    "localhost": ["127.0.0.1", "::1"],
    "internal.test": ["10.0.0.5"],
    "metadata.test": ["169.254.169.254"],
    "mixed.test": ["93.184.216.34", "10.0.0.1"],
    "v6internal.test": ["fd00::1"],
    "mapped.test": ["::ffff:192.168.0.1"],
    "example.test": ["93.184.216.34"],
}

HOSTILE: list[tuple[str, type[Exception]]] = [
    # not http(s), or not a plain URL
    ("file:///etc/passwd", ValidationFailed),
    ("gopher://127.0.0.1:70/_SET%20x", ValidationFailed),
    ("ftp://example.test/", ValidationFailed),
    ("dict://127.0.0.1:11211/", ValidationFailed),
    ("javascript:alert(1)", ValidationFailed),
    ("http://user@example.test/", ValidationFailed),
    ("http://user:secret@example.test/", ValidationFailed),
    ("http://example.test@127.0.0.1/", ValidationFailed),
    ("http://example.test:22/", ValidationFailed),
    ("http://127.0.0.1:6379/", BlockedAddress),
    ("http:///nohost", ValidationFailed),
    ("http://1.2.3.4.5/", ValidationFailed),
    ("http://[fe80::1%25eth0]/", ValidationFailed),
    ("http://example.test/" + "a" * 2100, ValidationFailed),
    # loopback in every notation
    ("http://127.0.0.1/", BlockedAddress),
    ("http://127.0.0.2:8080/", BlockedAddress),
    ("http://localhost/", BlockedAddress),
    ("http://2130706433/", BlockedAddress),
    ("http://0177.0.0.1/", BlockedAddress),
    ("http://017700000001/", BlockedAddress),
    ("http://0x7f000001/", BlockedAddress),
    ("http://0x7f.1/", BlockedAddress),
    ("http://127.1/", BlockedAddress),
    ("http://127.0.0.1./", BlockedAddress),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", BlockedAddress),
    ("http://127\u30020\u30020\u30021/", BlockedAddress),
    ("http://[::1]/", BlockedAddress),
    ("http://[::ffff:127.0.0.1]/", BlockedAddress),
    ("http://[::ffff:7f00:1]/", BlockedAddress),
    ("http://[::127.0.0.1]/", BlockedAddress),
    ("http://[2002:7f00:1::]/", BlockedAddress),
    ("http://[64:ff9b::7f00:1]/", BlockedAddress),
    # private, link-local, metadata, CGNAT, unspecified
    ("http://10.0.0.1/", BlockedAddress),
    ("https://10.255.255.254:8443/", BlockedAddress),
    ("http://172.16.0.1/", BlockedAddress),
    ("http://172.31.255.254/", BlockedAddress),
    ("http://192.168.1.1/", BlockedAddress),
    ("http://169.254.169.254/latest/meta-data/", BlockedAddress),
    ("http://metadata.test/latest/meta-data/", BlockedAddress),
    ("http://100.64.0.1/", BlockedAddress),
    ("http://0.0.0.0/", BlockedAddress),
    ("http://0/", BlockedAddress),
    ("http://[::]/", BlockedAddress),
    ("http://[::ffff:a00:1]/", BlockedAddress),
    ("http://[64:ff9b::a9fe:a9fe]/", BlockedAddress),
    ("http://[64:ff9b::10.0.0.1]/", BlockedAddress),
    ("http://[2002:a9fe:a9fe::1]/", BlockedAddress),
    ("http://[2001:0:a00:1::f7f7:f7f7]/", BlockedAddress),  # Teredo, server 10.0.0.1
    ("http://[2001:0:4136:e378:8000:63bf:3f57:fefe]/", BlockedAddress),  # Teredo, client 192.168.1.1
    ("http://[fe80::1]/", BlockedAddress),
    ("http://[fc00::1]/", BlockedAddress),
    ("http://[fd12:3456::1]/", BlockedAddress),
    ("http://[ff02::1]/", BlockedAddress),
    ("http://224.0.0.1/", BlockedAddress),
    ("http://239.255.255.250/", BlockedAddress),
    ("http://198.18.0.1/", BlockedAddress),
    ("http://192.0.0.1/", BlockedAddress),
    ("http://192.0.2.1/", BlockedAddress),
    ("http://240.0.0.1/", BlockedAddress),
    ("http://255.255.255.255/", BlockedAddress),
    # names whose answers are not public (all of them must be public)
    ("http://internal.test/", BlockedAddress),
    ("https://internal.test:8443/", BlockedAddress),
    ("http://mixed.test/", BlockedAddress),
    ("http://v6internal.test/", BlockedAddress),
    ("http://mapped.test/", BlockedAddress),
]


@pytest.mark.parametrize(("url", "error"), HOSTILE)
async def test_hostile_urls_are_refused(url: str, error: type[Exception]) -> None:
    http = HttpxSafeHttp(FakeResolver(HOSTILE_RESOLVER), allow_loopback=False, user_agent=UA)
    with pytest.raises(error) as caught:
        await http.fetch(url, max_bytes=10_000)
    assert "10.0.0" not in str(caught.value) and "127.0.0" not in str(caught.value)


@pytest.mark.parametrize(("url", "error"), HOSTILE)
async def test_hostile_urls_are_refused_for_webhooks(url: str, error: type[Exception]) -> None:
    http = HttpxSafeHttp(FakeResolver(HOSTILE_RESOLVER), allow_loopback=False, user_agent=UA)
    with pytest.raises(error):
        await http.post(url, body=b"{}", headers={"Content-Type": "application/json"}, timeout=2)


# -- the happy path against a loopback server -------------------------------------------------


async def test_fetch_connects_to_the_pinned_address_with_the_original_host(page_server: PageServer) -> None:
    resolver = FakeResolver({"example.test": ["127.0.0.1"]})
    http = loopback_http(page_server, resolver)
    page = await http.fetch(f"http://example.test:{page_server.port}/page?x=1", max_bytes=10_000)
    assert page.status == 200
    assert page.body == SMALL_HTML
    assert (page.content_type, page.charset) == ("text/html", "utf-8")
    assert page.final_url == f"http://example.test:{page_server.port}/page?x=1"
    [seen] = page_server.requests
    assert seen.path == "/page?x=1"
    assert seen.headers["host"] == f"example.test:{page_server.port}"
    assert seen.headers["user-agent"] == UA
    assert resolver.calls == [("example.test", page_server.port)]  # resolved once, by us only


async def test_fetch_decodes_gzip_and_raw_deflate(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    for path in ("/gzip", "/deflate-raw"):
        page = await http.fetch(f"http://example.test:{page_server.port}{path}", max_bytes=10_000)
        assert page.body == SMALL_HTML


async def test_fetch_accepts_only_the_requested_media_types(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    base = f"http://example.test:{page_server.port}"
    assert (await http.fetch(f"{base}/plain", max_bytes=100)).body == b"just text"
    with pytest.raises(UpstreamFetchFailed):
        await http.fetch(f"{base}/plain", max_bytes=100, accept=("text/html",))
    with pytest.raises(UpstreamFetchFailed) as caught:
        await http.fetch(f"{base}/image", max_bytes=100)
    assert "png" not in caught.value.message.lower()


async def test_fetch_follows_up_to_five_redirects(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    page = await http.fetch(f"http://example.test:{page_server.port}/hop/5", max_bytes=10_000)
    assert page.final_url.endswith("/hop/0")
    with pytest.raises(UpstreamFetchFailed, match="redirected too many times"):
        await http.fetch(f"http://example.test:{page_server.port}/hop/6", max_bytes=10_000)


@pytest.mark.parametrize(
    "location",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://metadata.test:{port}/",
        "http://internal.test:{port}/",
        "http://[::ffff:a9fe:a9fe]:{port}/",
        "http://2852039166:{port}/",  # 169.254.169.254 as one number
        "file:///etc/passwd",
        "gopher://example.test:{port}/",
        "http://example.test:22/",
    ],
)
async def test_a_redirect_to_a_blocked_location_is_blocked(page_server: PageServer, location: str) -> None:
    http = loopback_http(page_server)
    to = location.format(port=page_server.port)
    with pytest.raises(BlockedAddress):
        await http.fetch(f"http://example.test:{page_server.port}/redirect?to={to}", max_bytes=10_000)
    assert [seen.path.split("?")[0] for seen in page_server.requests] == ["/redirect"]


async def test_oversize_body_is_refused(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    with pytest.raises(UpstreamFetchFailed, match="larger than"):
        await http.fetch(f"http://example.test:{page_server.port}/big", max_bytes=100_000)
    page = await http.fetch(f"http://example.test:{page_server.port}/big", max_bytes=200_000)
    assert len(page.body) == 200_000


async def test_gzip_bomb_is_refused_without_inflating_it(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    assert len(BOMB) < 100_000
    with pytest.raises(UpstreamFetchFailed, match="larger than"):
        await http.fetch(f"http://example.test:{page_server.port}/bomb", max_bytes=1_000_000)


async def test_unsupported_content_encoding_is_refused(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    with pytest.raises(UpstreamFetchFailed):
        await http.fetch(f"http://example.test:{page_server.port}/brotli", max_bytes=1_000)


async def test_non_2xx_is_an_upstream_failure_that_does_not_echo_the_body(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    with pytest.raises(UpstreamFetchFailed) as caught:
        await http.fetch(f"http://example.test:{page_server.port}/missing", max_bytes=10_000)
    assert "secret" not in str(caught.value)
    assert caught.value.details == {"status": 404}


async def test_dns_failure_connect_failure_and_timeout_are_upstream_failures(page_server: PageServer) -> None:
    http = loopback_http(
        page_server,
        FakeResolver({"example.test": ["127.0.0.1"], "closed.test": ["127.0.0.1"]}),
        read_timeout=0.3,
        allowed_ports={page_server.port, 80},
    )
    with pytest.raises(UpstreamFetchFailed, match="could not be resolved"):
        await http.fetch(f"http://nxdomain.test:{page_server.port}/page", max_bytes=100)
    with pytest.raises(UpstreamFetchFailed, match="could not be reached"):
        await http.fetch("http://closed.test:80/", max_bytes=100)  # nothing listens on loopback :80
    with pytest.raises(UpstreamFetchFailed, match="did not answer in time"):
        await http.fetch(f"http://example.test:{page_server.port}/slow", max_bytes=10_000)


async def test_total_deadline_bounds_the_whole_fetch(page_server: PageServer) -> None:
    http = loopback_http(page_server, total_timeout=0.3)
    with pytest.raises(UpstreamFetchFailed, match="did not answer in time"):
        await http.fetch(f"http://example.test:{page_server.port}/slow", max_bytes=10_000)


async def test_mixed_answers_are_blocked(page_server: PageServer) -> None:
    http = loopback_http(page_server, FakeResolver({"example.test": ["127.0.0.1", "10.0.0.1"]}))
    with pytest.raises(BlockedAddress):
        await http.fetch(f"http://example.test:{page_server.port}/page", max_bytes=10_000)
    assert page_server.requests == []


async def test_dns_rebinding_on_a_redirect_is_blocked(page_server: PageServer) -> None:
    resolver = RebindingResolver(first=["127.0.0.1"], later=["10.0.0.1"])
    http = loopback_http(page_server, resolver)
    again = f"http://rebind.test:{page_server.port}/page"
    with pytest.raises(BlockedAddress):
        await http.fetch(f"http://rebind.test:{page_server.port}/redirect?to={again}", max_bytes=10_000)
    assert [seen.path.split("?")[0] for seen in page_server.requests] == ["/redirect"]
    assert len(resolver.calls) == 2  # every hop is resolved and checked again


async def test_loopback_is_refused_unless_allowed(page_server: PageServer) -> None:
    http = loopback_http(page_server, allow_loopback=False)
    with pytest.raises(BlockedAddress):
        await http.fetch(f"http://example.test:{page_server.port}/page", max_bytes=10_000)
    with pytest.raises(BlockedAddress):
        await http.fetch(f"http://127.0.0.1:{page_server.port}/page", max_bytes=10_000)
    with pytest.raises(BlockedAddress):
        await http.post(f"http://example.test:{page_server.port}/hook", body=b"{}", headers={}, timeout=2)
    assert page_server.requests == []


async def test_loopback_literal_works_when_allowed(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    page = await http.fetch(f"http://127.0.0.1:{page_server.port}/page", max_bytes=10_000)
    assert page.body == SMALL_HTML
    assert page_server.requests[0].headers["host"] == f"127.0.0.1:{page_server.port}"


# -- webhook posts ----------------------------------------------------------------------------


async def test_post_returns_status_headers_and_a_body_prefix(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    result = await http.post(
        f"http://example.test:{page_server.port}/hook",
        body=b'{"event":"call.ended"}',
        headers={"Content-Type": "application/json", "X-Parley-Signature": "sig", "Host": "evil.test"},
        timeout=5,
    )
    assert result.status == 201 and result.delivered and result.error is None
    assert result.headers["x-receiver"] == "ok"
    assert result.body_prefix == b"x" * 2048
    assert result.duration_ms >= 0
    [seen] = page_server.requests
    assert (seen.method, seen.path, seen.body) == ("POST", "/hook", b'{"event":"call.ended"}')
    assert seen.headers["host"] == f"example.test:{page_server.port}"
    assert seen.headers["x-parley-signature"] == "sig"
    assert seen.headers["content-type"] == "application/json"


async def test_post_does_not_follow_redirects(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    result = await http.post(f"http://example.test:{page_server.port}/hook-redirect", body=b"{}", headers={}, timeout=5)
    assert result.status == 302 and not result.delivered
    assert result.headers["location"] == "/page"
    assert result.body_prefix == b"moved"
    assert [(seen.method, seen.path) for seen in page_server.requests] == [("POST", "/hook-redirect")]


async def test_post_reports_receiver_errors_without_raising(page_server: PageServer) -> None:
    http = loopback_http(
        page_server,
        FakeResolver({"example.test": ["127.0.0.1"], "closed.test": ["127.0.0.1"]}),
        allowed_ports={page_server.port, 80},
    )
    failed = await http.post(f"http://example.test:{page_server.port}/hook-error", body=b"{}", headers={}, timeout=5)
    assert (failed.status, failed.body_prefix, failed.error) == (500, b"receiver exploded", None)
    slow = await http.post(f"http://example.test:{page_server.port}/hook-slow", body=b"{}", headers={}, timeout=0.3)
    assert slow.status is None and slow.error is not None and "time" in slow.error
    refused = await http.post("http://closed.test/", body=b"{}", headers={}, timeout=2)
    assert refused.status is None and refused.error is not None
    unknown = await http.post(f"http://nxdomain.test:{page_server.port}/hook", body=b"{}", headers={}, timeout=2)
    assert unknown.status is None and unknown.error is not None and "resolved" in unknown.error


async def test_post_checks_the_address_at_send_time(page_server: PageServer) -> None:
    resolver = RebindingResolver(first=["127.0.0.1"], later=["169.254.169.254"])
    http = loopback_http(page_server, resolver)
    url = f"http://hooks.test:{page_server.port}/hook"
    assert (await http.post(url, body=b"1", headers={}, timeout=5)).status == 201
    with pytest.raises(BlockedAddress):
        await http.post(url, body=b"2", headers={}, timeout=5)
    assert [seen.body for seen in page_server.requests] == [b"1"]


# -- TLS: the socket goes to the pinned address, SNI and the certificate use the host name --------


def _self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


async def test_https_uses_the_host_name_for_sni_and_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "secure.test")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    names: list[str | None] = []
    server_ctx.sni_callback = lambda _sock, name, _ctx: names.append(name)  # type: ignore[assignment,func-returns-value]
    client_ctx = ssl.create_default_context(cafile=str(cert))
    serving = _serve(server_ctx)
    tls_server = next(serving)
    try:
        resolver = FakeResolver({"secure.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
        http = HttpxSafeHttp(
            resolver, allow_loopback=True, user_agent=UA, ssl_context=client_ctx, allowed_ports={tls_server.port}
        )
        page = await http.fetch(f"https://secure.test:{tls_server.port}/page", max_bytes=10_000)
        assert page.body == SMALL_HTML
        assert names == ["secure.test"]
        assert tls_server.requests[0].headers["host"] == f"secure.test:{tls_server.port}"
        # Same address, another name: the certificate does not match, so the connection fails.
        with pytest.raises(UpstreamFetchFailed, match="could not be reached"):
            await http.fetch(f"https://other.test:{tls_server.port}/page", max_bytes=10_000)
    finally:
        serving.close()


# -- the system resolver --------------------------------------------------------------------------


async def test_system_resolver_resolves_and_fails_cleanly() -> None:
    resolver = SystemResolver(timeout=5)
    answers = await resolver.resolve("localhost", 80)
    assert answers and all(ipaddress.ip_address(a).is_loopback for a in answers)
    assert await resolver.resolve("127.0.0.1", 443) == ["127.0.0.1"]
    with pytest.raises(ResolutionFailed):
        await resolver.resolve("no-such-host.invalid", 80)


async def test_system_resolver_with_the_real_client_blocks_localhost() -> None:
    http = HttpxSafeHttp(SystemResolver(timeout=5), allow_loopback=False, user_agent=UA)
    with pytest.raises(BlockedAddress):
        await http.fetch("http://localhost/", max_bytes=100)


# -- API requests and streamed answers --------------------------------------------------------

async def test_request_returns_the_whole_answer_and_any_status(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    ok = await http.request("POST", f"http://example.test:{page_server.port}/hook", body=b"a=1",
                            headers={"Content-Type": "application/x-www-form-urlencoded", "Authorization": "Basic x"},
                            timeout=5)
    assert (ok.status, len(ok.body), ok.headers["x-receiver"]) == (201, 5000, "ok")
    [seen] = page_server.requests
    assert (seen.method, seen.body, seen.headers["authorization"]) == ("POST", b"a=1", "Basic x")
    failed = await http.request("POST", f"http://example.test:{page_server.port}/hook-error", headers={}, timeout=5)
    assert (failed.status, failed.body) == (500, b"receiver exploded")
    page = await http.request("GET", f"http://example.test:{page_server.port}/page", headers={}, timeout=5)
    assert page.status == 200 and page.body == SMALL_HTML


async def test_request_failures_say_whether_the_request_may_have_been_sent(page_server: PageServer) -> None:
    http = loopback_http(
        page_server,
        FakeResolver({"example.test": ["127.0.0.1"], "closed.test": ["127.0.0.1"]}),
        allowed_ports={page_server.port, 80},
    )
    with pytest.raises(RequestFailed) as slow:
        await http.request("POST", f"http://example.test:{page_server.port}/hook-slow", headers={}, timeout=0.3)
    assert slow.value.maybe_sent
    with pytest.raises(RequestFailed) as refused:
        await http.request("POST", "http://closed.test/", headers={}, timeout=2)
    assert not refused.value.maybe_sent
    with pytest.raises(RequestFailed) as unknown:
        await http.request("GET", f"http://nxdomain.test:{page_server.port}/page", headers={}, timeout=2)
    assert not unknown.value.maybe_sent
    with pytest.raises(RequestFailed) as big:
        await http.request("GET", f"http://example.test:{page_server.port}/big", headers={}, timeout=5, max_bytes=1000)
    assert big.value.maybe_sent
    with pytest.raises(BlockedAddress):
        await http.request("GET", "http://169.254.169.254/", headers={}, timeout=2)


async def test_stream_yields_the_answer_as_it_arrives(page_server: PageServer) -> None:
    http = loopback_http(page_server)
    async with http.stream("GET", f"http://example.test:{page_server.port}/plain", headers={}) as response:
        assert response.status == 200 and response.headers["content-type"].startswith("text/plain")
        assert [line async for line in response.lines()] == ["just text"]
    async with http.stream("GET", f"http://example.test:{page_server.port}/big", headers={}) as response:
        assert sum([len(chunk) async for chunk in response.chunks()]) == 200_000
    with pytest.raises(BlockedAddress):
        async with http.stream("GET", "http://internal.test/", headers={}):
            pass


async def test_requests_reuse_a_kept_alive_connection_and_still_check_every_address(page_server: PageServer) -> None:
    resolver = RebindingResolver(first=["127.0.0.1"], later=["127.0.0.1"])
    http = loopback_http(page_server, resolver)
    url = f"http://api.test:{page_server.port}/hook"
    for n in range(3):
        assert (await http.request("POST", url, body=str(n).encode(), headers={}, timeout=5)).status == 201
    assert len(resolver.calls) == 3  # resolved and checked before each request, pooled or not
    assert len({seen.client_port for seen in page_server.requests}) == 1  # one TCP connection for all three
    resolver.later = ["169.254.169.254"]  # the name now points inside: refused before anything is sent
    with pytest.raises(BlockedAddress):
        await http.request("POST", url, body=b"3", headers={}, timeout=5)
    assert [seen.body for seen in page_server.requests] == [b"0", b"1", b"2"]
    await http.aclose()
