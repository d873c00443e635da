"""A real HTTP receiver on 127.0.0.1 (asyncio, port 0) that records every request and answers as
scripted: 200 by default, or a queue of replies per path (500 then 200, 410, 429 with
Retry-After, hang for a while or until the test says)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: tuple[tuple[str, str], ...] = ()
    hang: float = 0.0
    """Seconds to wait before answering (longer than the sender's timeout: a hang)."""
    hold: asyncio.Event | None = None
    """Answer only once this is set (after ``hang``): a request kept in flight for as long as the test wants."""


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def webhook_id(self) -> str:
        return self.headers.get("x-webhook-id", "")


_REASONS = {200: "OK", 201: "Created", 204: "No Content", 302: "Found", 410: "Gone", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}


class Receiver:
    def __init__(self, default: Reply | None = None) -> None:
        self.default = default or Reply()
        self.requests: list[Received] = []
        self._scripts: dict[str, deque[Reply]] = defaultdict(deque)
        self._server: asyncio.Server | None = None
        self._arrived = asyncio.Condition()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> Receiver:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, path: str, *replies: Reply) -> None:
        """The next answers on ``path``, in order; afterwards the default."""
        self._scripts[path].extend(replies)

    def on(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    async def wait_for(self, count: int, *, path: str | None = None, timeout: float = 10.0,  # noqa: ASYNC109
                       distinct: bool = False) -> list[Received]:
        """What arrived (at ``path``) once ``count`` requests have; with ``distinct``, once ``count`` different
        deliveries have (a delivery sent again, with its webhook id, counts once)."""
        def enough() -> bool:
            arrived = self.on(path) if path else self.requests
            return len({r.webhook_id for r in arrived} if distinct else arrived) >= count

        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(enough), timeout)
        return self.on(path) if path else list(self.requests)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                _method, target, _version = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                path = target.split("?", 1)[0]
                self.requests.append(Received(path, headers, body))
                async with self._arrived:
                    self._arrived.notify_all()
                queue = self._scripts.get(path)
                reply = queue.popleft() if queue else self.default
                if reply.hang:
                    await asyncio.sleep(reply.hang)
                if reply.hold is not None:
                    await reply.hold.wait()
                extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers)
                writer.write(
                    f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
                    f"Content-Type: text/plain\r\nContent-Length: {len(reply.body)}\r\n{extra}\r\n".encode()
                    + reply.body
                )
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:  # the test is over while a reply still hangs
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
