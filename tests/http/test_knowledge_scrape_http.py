"""Scraping through the real HTTP API: the real httpx transport and sockets, a fake resolver
(wired by a dishka override), and a page server on a random loopback address at port 8080 (one
of the ports the fetcher allows), so the production wiring of the fetcher is what runs."""

from __future__ import annotations

import gzip
import random
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from application.ports.egress import ResolutionFailed, Resolver
from entrypoints.overrides import Pinned
from tests.knowledge_samples import HTML_PAGE, running_app
from tests.support.apps import Api, AppPool, Tenant

PORT = 8080
OTHER_HTML = b"<html><head><title>Shipping</title></head><body><article><p>Parcels leave the warehouse every " \
             b"weekday at noon and arrive within two working days.</p></article></body></html>"
BOMB = gzip.compress(b"\0" * (20 * 1024 * 1024), compresslevel=9)
BIG = b"big page text " * (6 * 1024 * 1024 // 14)
JUNK = random.Random(11).randbytes(4096)


@dataclass
class PageServer:
    host: str
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def base(self, name: str = "site.test") -> str:
        return f"http://{name}:{PORT}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", content_type: str = "text/html; charset=utf-8",
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        state: PageServer = self.server.state  # type: ignore[attr-defined]
        state.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        pages: dict[str, tuple[int, bytes, str]] = {
            "/page": (200, HTML_PAGE.encode(), "text/html; charset=utf-8"),
            "/copy": (200, HTML_PAGE.encode(), "text/html"),
            "/other": (200, OTHER_HTML, "text/html"),
            "/plain": (200, b"Support is open from nine to five, Monday to Friday.", "text/plain; charset=utf-8"),
            "/missing": (404, b"<html>secret internal error page</html>", "text/html"),
            "/big": (200, BIG, "text/plain"),
            "/image": (200, b"\x89PNG\r\n\x1a\n" + JUNK, "image/png"),
            "/empty": (200, b"<html><body><script>track()</script></body></html>", "text/html"),
            "/junk": (200, JUNK, "text/plain"),
        }
        if path == "/redirect":
            self._send(302, extra={"Location": query["to"][0]})
        elif path.startswith("/hop/"):
            left = int(path.removeprefix("/hop/"))
            if left == 0:
                self._send(200, OTHER_HTML.replace(b"noon", b"noon sharp"))
            else:
                self._send(301, extra={"Location": f"/hop/{left - 1}"})
        elif path == "/bomb":
            self._send(200, BOMB, "text/html", {"Content-Encoding": "gzip"})
        elif path in pages:
            status, body, content_type = pages[path]
            self._send(status, body, content_type)
        else:
            self._send(404)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the fetcher hangs up on oversize bodies on purpose


@pytest.fixture(scope="module")
def server() -> Iterator[PageServer]:
    rng = random.Random()
    for _ in range(20):
        host = f"127.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(1, 254)}"
        try:
            httpd = QuietServer((host, PORT), Handler)
            break
        except OSError:
            continue
    else:
        pytest.skip("no free loopback address for port 8080")
    httpd.daemon_threads = True
    state = PageServer(host)
    httpd.state = state  # type: ignore[attr-defined]
    # shutdown() waits for the loop to look at its flag: every 50 ms, not the standard library's 0.5 s
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


class FakeResolver:
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    async def resolve(self, host: str, port: int) -> list[str]:
        if host not in self.table:
            raise ResolutionFailed(host)
        return list(self.table[host])


def resolver_table(server: PageServer) -> dict[str, list[str]]:
    return {
        "site.test": [server.host],
        "other.test": [server.host],
        "localhost": ["127.0.0.1", "::1"],
        "internal.test": ["10.0.0.5"],
        "metadata.test": ["169.254.169.254"],
        "cgnat.test": ["100.64.1.1"],
        "mixed.test": [server.host, "10.0.0.1"],
        "v6internal.test": ["fd00::1"],
        "mapped.test": ["::ffff:192.168.0.1"],
        "nat64.test": ["64:ff9b::a9fe:a9fe"],
        "sixtofour.test": ["2002:a00:1::1"],
        "multicast.test": ["224.0.0.251"],
    }


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def module_db(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture(scope="module")
async def open_api(module_db: str, tmp_root: Path, server: PageServer, app_pool: AppPool) -> AsyncIterator[Api]:
    """PARLEY_ALLOW_LOOPBACK_TARGETS=true, as in local development."""
    resolver = Pinned(Resolver, FakeResolver(resolver_table(server)))
    async with running_app(app_pool, module_db, tmp_root / "var", resolver, allow_loopback_targets=True) as app:
        yield app


@pytest.fixture(scope="module")
async def closed_api(module_db: str, tmp_root: Path, server: PageServer, app_pool: AppPool) -> AsyncIterator[Api]:
    """The production default: loopback targets are refused like every other private range."""
    resolver = Pinned(Resolver, FakeResolver(resolver_table(server)))
    async with running_app(app_pool, module_db, tmp_root / "var", resolver, allow_loopback_targets=False) as app:
        yield app


async def _kb(api: Api) -> tuple[Tenant, int]:
    t = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]["id"]
    kb = await api.client.post("/v2/knowledge-bases", json={"name": "Web", "agent_id": agent}, headers=t.headers)
    return t, kb.json()["data"]["id"]


async def _scrape(api: Api, t: Tenant, kb: int, url: Any, **headers: str) -> Any:
    return await api.client.post(f"/v2/knowledge-bases/{kb}/scrape", json={"url": url},
                                 headers={**t.headers, **headers})


# -- the happy path ---------------------------------------------------------------------------


async def test_a_public_page_is_fetched_extracted_and_searchable(open_api: Api, server: PageServer) -> None:
    t, kb = await _kb(open_api)
    server.requests.clear()
    r = await _scrape(open_api, t, kb, f"{server.base()}/page")
    assert r.status_code == 201, r.text
    doc = r.json()["data"]
    assert (doc["source"], doc["file_type"], doc["status"]) == ("scrape", "html", "ready")
    assert doc["source_url"] == f"{server.base()}/page" and doc["file_name"] == "Returns & refunds"
    assert doc["chunk_count"] >= 1 and doc["knowledge_base_id"] == kb and doc["size_bytes"] == len(HTML_PAGE)
    [(path, headers)] = server.requests
    assert path == "/page"
    assert headers["host"] == f"site.test:{PORT}" and headers["user-agent"] == "Parley-Fetcher/2.0"

    hits = (await open_api.client.get(f"/v2/knowledge-bases/{kb}/search?q=refund%20days",
                                      headers=t.headers)).json()["data"]["results"]
    assert hits and hits[0]["document_id"] == doc["id"] and "thirty days" in hits[0]["text"]
    listed = (await open_api.client.get(f"/v2/knowledge-bases/{kb}/documents?file_type=html",
                                        headers=t.headers)).json()["data"]
    assert [d["id"] for d in listed["documents"]] == [doc["id"]]

    plain = await _scrape(open_api, t, kb, f"{server.base()}/plain")
    assert plain.status_code == 201 and plain.json()["data"]["file_type"] == "txt"


async def test_the_same_page_twice_is_a_duplicate(open_api: Api, server: PageServer) -> None:
    t, kb = await _kb(open_api)
    assert (await _scrape(open_api, t, kb, f"{server.base()}/page")).status_code == 201
    server.requests.clear()
    for same in (f"{server.base()}/page", f"HTTP://SITE.TEST:{PORT}/page#section", f" {server.base()}/page "):
        r = await _scrape(open_api, t, kb, same)
        assert r.status_code == 409 and r.json()["error"]["code"] == "duplicate_document", same
    assert server.requests == []  # recognised by URL before fetching
    same_text = await _scrape(open_api, t, kb, f"http://other.test:{PORT}/copy")
    assert same_text.status_code == 409 and same_text.json()["error"]["code"] == "duplicate_document"
    # another knowledge base may hold the same page
    _, other_kb = await _kb(open_api)
    assert (await _scrape(open_api, t, other_kb, f"{server.base()}/page")).status_code == 404  # not t's
    t2 = await open_api.key_for(t.organization_id, ("kb:*", "agents:*"))
    agent = (await open_api.client.get(f"/v2/knowledge-bases/{kb}", headers=t2.headers)).json()["data"]["agent_id"]
    kb2 = (await open_api.client.post("/v2/knowledge-bases", json={"name": "Again", "agent_id": agent},
                                      headers=t2.headers)).json()["data"]["id"]
    assert (await _scrape(open_api, t2, kb2, f"{server.base()}/page")).status_code == 201


async def test_redirects_are_followed_and_each_hop_is_checked(open_api: Api, server: PageServer) -> None:
    t, kb = await _kb(open_api)
    moved = await _scrape(open_api, t, kb, f"{server.base()}/redirect?to=/other")
    assert moved.status_code == 201
    assert moved.json()["data"]["source_url"] == f"{server.base()}/redirect?to=/other"
    five = await _scrape(open_api, t, kb, f"{server.base()}/hop/5")
    assert five.status_code == 201
    six = await _scrape(open_api, t, kb, f"{server.base()}/hop/6")
    assert six.status_code == 502 and six.json()["error"]["code"] == "upstream_fetch_failed"
    for location in ("http://169.254.169.254/latest/meta-data/", f"http://internal.test:{PORT}/",
                     f"http://10.0.0.1:{PORT}/", f"http://[::ffff:a9fe:a9fe]:{PORT}/", f"http://2852039166:{PORT}/",
                     f"http://cgnat.test:{PORT}/", f"http://nat64.test:{PORT}/", "file:///etc/passwd",
                     "http://site.test:22/"):
        server.requests.clear()
        r = await _scrape(open_api, t, kb, f"{server.base()}/redirect?to={location}")
        assert r.status_code == 400 and r.json()["error"]["code"] == "blocked_address", location
        assert r.json()["error"]["details"] == {"field": "url"}, location
        assert [p for p, _ in server.requests] == [f"/redirect?to={location}"]


@pytest.mark.parametrize(("path", "leak"), [
    ("/missing", "secret"),
    ("/big", "big page text"),
    ("/bomb", None),
    ("/image", "PNG"),
    ("/empty", "track"),
    ("/junk", None),
    ("/nothing-here", None),
])
async def test_fetch_problems_are_502_without_echoing_the_page(open_api: Api, server: PageServer, path: str,
                                                               leak: str | None) -> None:
    t, kb = await _kb(open_api)
    r = await _scrape(open_api, t, kb, f"{server.base()}{path}")
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_fetch_failed"
    if leak:
        assert leak not in r.text
    assert server.host not in r.text


async def test_dns_failure_is_502(open_api: Api) -> None:
    t, kb = await _kb(open_api)
    r = await _scrape(open_api, t, kb, "http://nxdomain.test/")
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_fetch_failed"


async def test_scrape_is_idempotent_with_a_key(open_api: Api, server: PageServer) -> None:
    t, kb = await _kb(open_api)
    server.requests.clear()
    first = await _scrape(open_api, t, kb, f"{server.base()}/other", **{"Idempotency-Key": "scrape-1"})
    again = await _scrape(open_api, t, kb, f"{server.base()}/other", **{"Idempotency-Key": "scrape-1"})
    assert first.status_code == again.status_code == 201
    assert again.headers.get("idempotency-replayed") == "true" and again.content == first.content
    assert len(server.requests) == 1


@pytest.mark.parametrize("body", [{}, {"url": 5}, {"url": ""}, {"url": "https://x.test/", "extra": 1},
                                  {"url": "https://x.test/" + "a" * 2100}])
async def test_invalid_scrape_bodies_are_400(open_api: Api, body: dict[str, Any]) -> None:
    t, kb = await _kb(open_api)
    r = await open_api.client.post(f"/v2/knowledge-bases/{kb}/scrape", json=body, headers=t.headers)
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"


# -- hostile URLs: refused before anything is connected to --------------------------------------

HOSTILE: list[tuple[str, str]] = [
    # not a plain public http(s) URL
    ("file:///etc/passwd", "bad_request"),
    ("gopher://127.0.0.1:70/_SET%20x", "bad_request"),
    ("ftp://site.test/", "bad_request"),
    ("javascript:alert(1)", "bad_request"),
    ("dict://127.0.0.1:11211/", "bad_request"),
    ("not a url", "bad_request"),
    ("site.test/page", "bad_request"),
    ("http:///nohost", "bad_request"),
    ("http://user:secret@site.test/", "bad_request"),
    ("http://site.test@127.0.0.1/", "bad_request"),
    ("http://site.test:22/", "bad_request"),
    ("http://127.0.0.1:6379/", "blocked_address"),  # loopback, whatever the port
    ("http://1.2.3.4.5/", "bad_request"),
    ("http://[fe80::1%25eth0]/", "bad_request"),
    # loopback, in every notation (the page server itself included)
    (f"http://site.test:{PORT}/page", "blocked_address"),
    ("http://127.0.0.1/", "blocked_address"),
    ("http://localhost/", "blocked_address"),
    ("http://2130706433/", "blocked_address"),
    ("http://0177.0.0.1/", "blocked_address"),
    ("http://0x7f000001/", "blocked_address"),
    ("http://0x7f.1/", "blocked_address"),
    ("http://127.1/", "blocked_address"),
    ("http://127.0.0.1./", "blocked_address"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "blocked_address"),
    ("http://[::1]/", "blocked_address"),
    ("http://[::ffff:127.0.0.1]/", "blocked_address"),
    ("http://[::127.0.0.1]/", "blocked_address"),
    ("http://[2002:7f00:1::]/", "blocked_address"),
    ("http://[64:ff9b::7f00:1]/", "blocked_address"),
    # private, link-local, metadata, carrier-grade NAT, unspecified, multicast, reserved
    ("http://10.0.0.1/", "blocked_address"),
    ("https://172.16.0.1:8443/", "blocked_address"),
    ("http://192.168.1.1:8080/", "blocked_address"),
    ("http://169.254.169.254/latest/meta-data/", "blocked_address"),
    ("http://2852039166/", "blocked_address"),
    ("http://100.64.0.1/", "blocked_address"),
    ("http://100.127.255.254/", "blocked_address"),
    ("http://0.0.0.0/", "blocked_address"),
    ("http://0/", "blocked_address"),
    ("http://[::]/", "blocked_address"),
    ("http://[::ffff:a9fe:a9fe]/", "blocked_address"),
    ("http://[64:ff9b::10.0.0.1]/", "blocked_address"),
    ("http://[2002:a9fe:a9fe::1]/", "blocked_address"),
    ("http://[2001:0:a00:1::f7f7:f7f7]/", "blocked_address"),
    ("http://[fe80::1]/", "blocked_address"),
    ("http://[fd12:3456::1]/", "blocked_address"),
    ("http://[ff02::1]/", "blocked_address"),
    ("http://224.0.0.1/", "blocked_address"),
    ("http://239.255.255.250/", "blocked_address"),
    ("http://198.18.0.1/", "blocked_address"),
    ("http://192.0.0.9/", "blocked_address"),
    ("http://240.0.0.1/", "blocked_address"),
    ("http://255.255.255.255/", "blocked_address"),
    # names whose answers are not public (every answer must be)
    ("http://internal.test/", "blocked_address"),
    ("http://metadata.test/latest/meta-data/", "blocked_address"),
    ("http://cgnat.test/", "blocked_address"),
    ("http://mixed.test:8080/page", "blocked_address"),
    ("http://v6internal.test/", "blocked_address"),
    ("http://mapped.test/", "blocked_address"),
    ("http://nat64.test/", "blocked_address"),
    ("http://sixtofour.test/", "blocked_address"),
    ("http://multicast.test/", "blocked_address"),
]


@pytest.fixture(scope="module")
async def closed_kb(closed_api: Api) -> tuple[Tenant, int]:
    return await _kb(closed_api)


@pytest.mark.parametrize(("url", "code"), HOSTILE)
async def test_hostile_urls_are_refused(closed_api: Api, closed_kb: tuple[Tenant, int], server: PageServer, url: str,
                                        code: str) -> None:
    t, kb = closed_kb
    server.requests.clear()
    r = await _scrape(closed_api, t, kb, url)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == code
    if code == "blocked_address":
        assert r.json()["error"]["details"] == {"field": "url"}
    assert server.requests == []
    for internal in ("10.0.0", "169.254", "192.168", "fd00", server.host):
        assert internal not in r.json()["error"]["message"]
    listed = (await closed_api.client.get(f"/v2/knowledge-bases/{kb}/documents", headers=t.headers)).json()
    assert listed["meta"]["total"] == 0


def test_the_hostile_table_is_large() -> None:
    assert len(HOSTILE) >= 25


async def test_loopback_targets_may_use_any_port_and_nothing_else_may(open_api: Api, closed_api: Api) -> None:
    """PARLEY_ALLOW_LOOPBACK_TARGETS: loopback pages on any port (a local server on a random port),
    the same rule as for webhooks; every other target keeps 80, 443, 8080 and 8443."""
    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.state = PageServer("127.0.0.1")  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)  # a quick shutdown()
    thread.start()
    port = httpd.server_address[1]
    try:
        t, kb = await _kb(open_api)
        local = await _scrape(open_api, t, kb, f"http://127.0.0.1:{port}/page")
        assert local.status_code == 201, local.text
        for other in (f"http://site.test:{port}/page", f"http://public.test:{port}/"):
            r = await _scrape(open_api, t, kb, other)
            assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", (other, r.text)
        t2, kb2 = await _kb(closed_api)
        refused = await _scrape(closed_api, t2, kb2, f"http://127.0.0.1:{port}/page")
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "blocked_address", refused.text
        assert "PARLEY_ALLOW_LOOPBACK_TARGETS=true" in refused.json()["error"]["message"]  # how to allow it
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
