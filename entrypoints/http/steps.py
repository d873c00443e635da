"""The steps a request goes through, shared by the API's pipeline (``pipeline.py``) and the dashboard's gate
(``dashboard/gate.py``), and the one rule about transactions they follow: every step that touches the database
runs in a short transaction of its own on the request's unit of work, written where the step is:

    async with transaction(uow):    # the first statement begins it
        ...                         # committed when the block ends, rolled back when it raises

The handler's step (``run_handler``) is the one exception to "committed when the block ends": it commits once, when
the handler answered below 400 (with what ``keep`` adds to the transaction: the idempotency record), and rolls
back every other answer. No adapter commits or rolls back its caller's transaction.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime

from litestar.types import ASGIApp, HTTPRequestEvent, Message, Receive, ReceiveMessage, Scope

from application.ports.accounts import RateLimiter
from application.ports.platform import UnitOfWork
from domain.rate_limit import RateLimitDecision, Window, tightest

log = logging.getLogger("parley.http")


async def quietly_roll_back(uow: UnitOfWork) -> None:
    """Roll back what can be (the connection may be gone with the database)."""
    try:
        await uow.rollback()
    except Exception:  # the failure that led here already decides the answer
        log.debug("rollback failed", exc_info=True)


@asynccontextmanager
async def transaction(uow: UnitOfWork) -> AsyncIterator[None]:
    """One step's transaction: begun by the block's first statement, committed when the block ends, rolled back
    (and the exception passed on) when it raises."""
    try:
        yield
    except BaseException:
        await quietly_roll_back(uow)
        raise
    await uow.commit()


@asynccontextmanager
async def statements_alone(uow: UnitOfWork) -> AsyncIterator[None]:
    """A step whose work holds one statement at a time (the rate-limit count, the idempotency claim): each of its
    statements commits on its own, without ``BEGIN`` and ``COMMIT`` round trips (``UnitOfWork.autocommit``), as a
    GET's statements do; rolled back (what is left to) when it raises, like ``transaction``."""
    async with transaction(uow), uow.autocommit():
        yield


@dataclass
class Captured:
    """A handler's response, held back until its transaction has ended."""

    messages: list[Message] = field(default_factory=list)
    status: int = 500

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        self.messages.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")

    def headers(self) -> list[tuple[bytes, bytes]]:
        for m in self.messages:
            if m["type"] == "http.response.start":
                return list(m.get("headers", []))
        return []


async def count_request(limiter: RateLimiter, bucket: str, windows: tuple[Window, ...], now: datetime,
                        ceiling: tuple[str, tuple[Window, ...]] | None = None) -> tuple[RateLimitDecision, bool]:
    """The rate-limit step's work (the caller's transaction holds it): one request counted in ``bucket``'s windows
    and in the ``ceiling`` (another bucket and its windows: the organization's, over all its keys), together (one
    statement on PostgreSQL): when either refuses, neither counts it, so a refusal consumes nothing. Returns the
    tightest decision (the bucket's own refusal first) and whether the ceiling refused it."""
    if ceiling is None:
        return await limiter.hit(bucket, windows, now), False
    decision, over_all = await limiter.hit_all([(bucket, windows), ceiling], now)
    if not decision.allowed:
        return decision, False
    return tightest(decision, over_all), not over_all.allowed


async def run_handler(app: ASGIApp, scope: Scope, receive: Receive, uow: UnitOfWork,
                 keep: Callable[[Captured], Awaitable[None]] | None = None) -> Captured:
    """The handler's step: the handler runs in one transaction, committed once when it answered below 400
    (``keep`` adds to that transaction first: the idempotency record), rolled back for any other answer and when
    the handler raises (the exception is passed on)."""
    captured = Captured()
    try:
        await app(scope, receive, captured.send)
        if captured.status < 400:
            if keep is not None:
                await keep(captured)
            await uow.commit()
        else:
            await uow.rollback()
    except BaseException:
        await quietly_roll_back(uow)
        raise
    return captured


def replayed_body(body: bytes, receive: Receive) -> Receive:
    """``receive`` for a handler whose request body a step has already read: the body, then the client's messages."""
    delivered = False

    async def replayed() -> ReceiveMessage:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        request: HTTPRequestEvent = {"type": "http.request", "body": body, "more_body": False}
        return request

    return replayed
