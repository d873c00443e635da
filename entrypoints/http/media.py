"""The media-stream websocket: ``/v2/media-streams/{token}`` (docs/telephony.md, Media streams).

A carrier (Twilio Media Streams, Telnyx streaming) opens it when the call is answered. The single-use token in the
path is redeemed before the first frame is read: a forged, expired or already used one closes the socket with 1008
(policy violation), logged at INFO. Then the stream's ``start`` message says which carrier speaks (its shape) and
the audio format (μ-law 8 kHz mono; anything else closes with 1003) — or a browser's ``start`` says it speaks the
web protocol of web calls (16 kHz PCM, adapters/media/web.py) — and the call's session runs
(``application/media_session.RunMediaSession``) until the call ends. A process that drains closes new streams with
1013 (try again later) before redeeming anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Annotated, Any

from litestar import WebSocket
from litestar.params import PathParameter

from application.media_session import (
    LiveSessions,
    RedeemMediaStream,
    RedeemMediaStreamCommand,
    RunMediaSession,
    RunMediaSessionCommand,
)
from application.ports.media import CallLine, SessionInfo, StreamGrant
from application.ports.platform import Clock, Units
from entrypoints.features.media import (
    MULAW_RATE,
    WEB_RATE,
    WebStart,
    carrier_session,
    read_start,
    read_web_start,
    registries,
    web_session,
)
from entrypoints.http.routing import stream_endpoint
from entrypoints.outages import is_database_outage

log = logging.getLogger("parley.media")

POLICY_VIOLATION, UNSUPPORTED_DATA, INTERNAL_ERROR, TRY_AGAIN_LATER = 1008, 1003, 1011, 1013
CLOSE_TIMEOUT_SECONDS = 2.0
START_TIMEOUT_SECONDS = 10.0
"""How long a stream may take to send its ``start`` message after it connected."""


class SocketTransport:
    """A Litestar websocket as the session's transport (raw ASGI messages: text or bytes frames)."""

    def __init__(self, socket: WebSocket[Any, Any, Any]) -> None:
        self.socket = socket
        self.open = True
        self.pending: list[str | bytes] = []

    def push_back(self, frame: str | bytes | None) -> None:
        """A frame read ahead (to tell the protocol), handed out again by the next ``receive``."""
        if frame is not None:
            self.pending.append(frame)

    async def send(self, text: str | bytes) -> None:
        if isinstance(text, bytes):  # a web call's audio
            await self.socket.send_bytes(text)
        else:
            await self.socket.send_text(text)

    async def receive(self) -> str | bytes | None:
        if self.pending:
            return self.pending.pop(0)
        if not self.open:
            return None
        message = await self.socket.receive()
        if message["type"] == "websocket.disconnect":
            self.open = False
            return None
        frame = message.get("text") or message.get("bytes") or ""
        return frame if isinstance(frame, str | bytes) else ""

    async def close(self, code: int = 1000) -> None:
        if self.open:
            self.open = False
            # a server that is shutting down may never complete the close (granian after SIGTERM): the session
            # goes on to finish its call regardless
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.socket.close(code=code), CLOSE_TIMEOUT_SECONDS)


REDEEM_RETRIES = (0.1, 0.2, 0.4, 0.8)
"""Pauses before a token that is not (yet) valid is asked again: Telnyx opens an inbound call's stream as soon as
Parley's ``answer`` command reaches it, which is before the webhook that issued the token has committed."""

@stream_endpoint("/media-streams/{token:str}", name="media_stream",
                 summary="A call's bidirectional media stream (Twilio Media Streams or Telnyx streaming protocol)")
async def media_stream(socket: WebSocket[Any, Any, Any], token: Annotated[str, PathParameter()]) -> None:
    await socket.accept()
    transport = SocketTransport(socket)
    try:
        await _serve(socket.app.state.dishka_container, transport, token,
                     socket.query_params.get("direction") or "")
    except Exception as exc:  # never an unhandled task: the stream ends with 1011, the call is left to the sweeper
        if is_database_outage(exc):
            log.warning("media stream ended: the database cannot be reached (%s)", type(exc).__name__)
        else:
            log.exception("media stream failed")
        await transport.close(INTERNAL_ERROR)


async def _serve(container: Any, transport: SocketTransport, token: str, query_direction: str = "") -> None:
    """``query_direction``: the stream URL's ``direction`` (Telnyx's inbound calls; Twilio's come as a stream
    parameter)."""
    sessions: LiveSessions = await container.get(LiveSessions)
    if sessions.draining:
        await transport.close(TRY_AGAIN_LATER)
        return
    units: Units = await container.get(Units)
    grant = await units.execute(RedeemMediaStream, RedeemMediaStreamCommand(token))
    for pause in REDEEM_RETRIES:  # a carrier may open the stream before the request that issued its token committed
        if grant is not None:
            break
        await asyncio.sleep(pause)
        grant = await units.execute(RedeemMediaStream, RedeemMediaStreamCommand(token))
    if grant is None:
        log.info("media stream refused: its token is not valid (forged, expired or already used)")
        await transport.close(POLICY_VIOLATION)
        return
    try:
        first = await asyncio.wait_for(transport.receive(), timeout=START_TIMEOUT_SECONDS)
    except TimeoutError:
        first = None
    web = read_web_start(first) if first is not None else None
    if web is not None:
        await _serve_web(container, transport, grant, web)
        return
    transport.push_back(first)
    try:
        start = await asyncio.wait_for(read_start(transport), timeout=START_TIMEOUT_SECONDS)
    except TimeoutError:
        start = None
    if start is None or not start.is_mulaw_8k:
        if start is not None:
            log.warning("call %s: media stream refused: %s at %d Hz, %d channel(s) (μ-law 8 kHz mono only)",
                        grant.call_id, start.encoding, start.sample_rate, start.channels)
        await transport.close(UNSUPPORTED_DATA)
        return
    clock: Clock = await container.get(Clock)
    direction = start.parameters.get("direction") or query_direction or "outbound"
    info = SessionInfo(call_id=grant.call_id, organization_id=grant.organization_id,
                       direction="inbound" if direction == "inbound" else "outbound", channel=start.carrier,
                       sample_rate=MULAW_RATE, started_at=clock.now(), parameters=dict(start.parameters))
    session = carrier_session(info, start, transport, await container.get(CallLine))
    session.start()
    try:
        run: RunMediaSession = await container.get(RunMediaSession)
        await run.execute(RunMediaSessionCommand(grant, session))
    finally:
        await session.stop()
        await transport.close(1000)


async def _serve_web(container: Any, transport: SocketTransport, grant: StreamGrant, start: WebStart) -> None:
    """A browser's web call: 16 kHz PCM both ways (adapters/media/web.py)."""
    if not start.supported:
        log.info("call %s: web stream refused: %s at %d Hz (pcm_s16le 16 kHz only)", grant.call_id, start.encoding,
                 start.sample_rate)
        await transport.close(UNSUPPORTED_DATA)
        return
    clock: Clock = await container.get(Clock)
    info = SessionInfo(call_id=grant.call_id, organization_id=grant.organization_id, direction="web", channel="web",
                       sample_rate=WEB_RATE, started_at=clock.now())
    session = web_session(info, transport, await container.get(CallLine))
    await transport.send(f'{{"event":"started","call_id":"{grant.call_id}","sample_rate":{WEB_RATE}}}')
    session.start()
    try:
        run: RunMediaSession = await container.get(RunMediaSession)
        await run.execute(RunMediaSessionCommand(grant, session))
    finally:
        await session.stop()
        await transport.close(1000)


ROUTES = [media_stream]


async def drain(deadline_seconds: float) -> None:
    """On shutdown: no new media session is admitted, the live ones finish up to the deadline (then hang up)."""
    left = sum(await asyncio.gather(*(sessions.drain(deadline_seconds) for sessions in registries())))
    if left:
        log.warning("shutting down with %d media session(s) still live", left)
