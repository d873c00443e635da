"""Live views: the calls, campaigns, a campaign's and the appointments pages update themselves through
Server-Sent Events (``static/live.js`` and the browser's ``EventSource``), not by polling.

How a stream works: a **periodic diff**. Every ``TICK_SECONDS`` (half a second), the stream reads what the page
shows (the page's own use cases, in a unit of work of its own, its database connection given back at once) and
renders the page's ``live`` block; when that HTML differs from what it last sent, it sends it (``event: update``,
the block's HTML as data) and the script puts it in place. The first update is sent at once (whatever changed
between the page and the stream). The diff is made on the rendered block, so only a change the user would see is
sent. A change reaches the page within a tick and a read (well within a second), whichever process made it (the
API, the dashboard, a worker of another host): the stream reads the database, it waits for no signal of this
process.

Cost: the gate admits the stream like a live refresh (the session, one request of the user's live budget for the
whole connection, ``gate.STREAM``), never the request budget; the messages are not counted. Each tick costs one
read (the session's row and the page's queries, on one pooled connection taken and given back) per open page; no
database connection is held between ticks, and an unchanged view sends nothing.

The end: when the session ends (signed out, idle or absolute expiry, read on the ``Clock`` port; the stream checks
it each tick without using it, so an open page does not keep its session alive) the stream sends
``event: end`` with ``expired`` and closes; the script reloads, which leads to the sign-in page. A view that stops
changing (a campaign in a final status) sends ``end`` with ``reload``: the page reloads once (its buttons change).
A comment is sent every ``HEARTBEAT_SECONDS`` when nothing changed, so a proxy keeps the connection open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from litestar.response import ServerSentEvent, ServerSentEventMessage

from application.ports.platform import Unit, Units
from application.sessions import ResumeSession, ResumeSessionCommand, SessionInvalid
from domain.errors import DomainError
from entrypoints.http.authentication import cookie
from entrypoints.http.dashboard.templating import ENVIRONMENT
from entrypoints.http.dashboard.view import View
from entrypoints.http.routing import SESSION_COOKIE

TICK_SECONDS = 0.5
"""How often a stream reads its view again: a change shows within a tick and a read, under a second."""
HEARTBEAT_SECONDS = 15
BLOCK = "live"
"""The block of a page's template that changes while it is open (rendered alone for an update)."""
RETRY_MILLISECONDS = 3000
"""How long the browser waits before reconnecting when a stream breaks (``retry:``)."""

Values = Callable[[Unit], Awaitable[dict[str, Any]]]


def render_block(view: View, template: str, values: dict[str, Any]) -> str:
    """The ``live`` block of ``template`` rendered alone with the page's context."""
    compiled = ENVIRONMENT.get_template(template)
    return "".join(compiled.blocks[BLOCK](compiled.new_context(view.context(**values))))


async def stream(view: View, units: Units, template: str, values: Values) -> ServerSentEvent:
    """The Server-Sent Events of a live view: ``values(unit)`` reads the page's context in a unit of work, the
    ``live`` block of ``template`` is rendered from it, and sent when it changed. ``values`` may set ``live`` to
    False: the view will not change any more (the page reloads once). The first read is made before the stream
    answers: an id of another organization, or one that does not exist, is a 404 page like the page's."""
    async with units.begin() as unit:
        first = await values(unit)
    session_id = cookie(view.request.scope, SESSION_COOKIE) or ""
    return ServerSentEvent(_events(view, units, template, values, session_id, first),
                           retry_duration=RETRY_MILLISECONDS)


async def _events(view: View, units: Units, template: str, values: Values, session_id: str,
                  read: dict[str, Any]) -> AsyncGenerator[ServerSentEventMessage, None]:
    last: str | None = None
    quiet = 0.0
    while True:
        html = render_block(view, template, read)
        if html != last:
            last, quiet = html, 0.0
            yield ServerSentEventMessage(event="update", data=html)
        elif quiet >= HEARTBEAT_SECONDS:
            quiet = 0.0
            yield ServerSentEventMessage(comment="keep-alive")
        if read.get("live") is False:
            yield ServerSentEventMessage(event="end", data="reload")
            return
        await asyncio.sleep(TICK_SECONDS)
        quiet += TICK_SECONDS
        async with units.begin() as unit:
            try:
                await (await unit.get(ResumeSession)).execute(ResumeSessionCommand(session_id, touch=False))
            except SessionInvalid:
                yield ServerSentEventMessage(event="end", data="expired")
                return
            try:
                read = await values(unit)
            except DomainError:  # gone meanwhile (deleted): the page says so once reloaded
                yield ServerSentEventMessage(event="end", data="reload")
                return
