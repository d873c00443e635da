"""Media feature: the media-stream sessions of live calls (the websocket is on the HTTP side,
``entrypoints/http/media.py``): single-use stream tokens, the process's live sessions, controls sent to them from
any process, the conversation runtime they run (the agent's conversation, application/conversation, on the engines
its settings name; ``PARLEY_MEDIA_RUNTIME=echo`` plays the caller back, for the media bench, and ``first_message``
says the first message and hangs up), web calls (``POST /v2/calls/web``: the browser's protocol is
adapters/media/web.py) and the carrier line they hang up and transfer through (until the carriers' feature provides
it: the stream alone).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass

from dishka import Provider, Scope, provide
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.egress import HttpxSafeHttp, SystemResolver
from adapters.media import protocols, web
from adapters.media.stream import CarrierStreamSession, Transport
from adapters.memory.media import InMemoryMediaStreamTokens
from adapters.memory.store import InMemoryUnitOfWork
from adapters.sql.media import NotifyCallControl, SqlMediaStreamTokens, listen_for_controls
from adapters.sql.uow import SqlUnitOfWork
from application import media_session as cases
from application import web_calls
from application.ports.blobs import BlobStorage
from application.ports.conversation import ToolSecrets
from application.ports.engines import EngineFactory
from application.ports.media import (
    CallLine,
    ConversationRuntime,
    LiveCallControl,
    MediaStreamTokens,
    SessionInfo,
)
from application.ports.platform import Clock, Units
from entrypoints.features import Feature
from entrypoints.features.conversation import conversation_runtime
from entrypoints.observability import MEDIA_FRAME_GAP
from entrypoints.settings import Backend, Settings, SettingsError

log = logging.getLogger("parley.media")
TOOLS_AGENT = "Parley-Tools/2.0"

MULAW_RATE = protocols.MULAW_RATE
StreamStart = protocols.Start


async def read_start(transport: Transport) -> protocols.Start | None:
    """A carrier stream's frames up to its ``start`` message (``connected`` comes first); None when the stream
    ends first or speaks neither carrier's protocol (logged at INFO: hostile input is no error of Parley's)."""
    while True:
        frame = await transport.receive()
        if frame is None:
            return None
        try:
            message = protocols.read(frame)
        except protocols.StreamProtocolError as exc:
            log.info("media stream refused: %s", exc)
            return None
        if isinstance(message, protocols.Start):
            return message
        if not isinstance(message, protocols.Other):
            log.info("media stream refused: %s before its start message", type(message).__name__.lower())
            return None


def carrier_session(info: SessionInfo, start: protocols.Start, transport: Transport, line: CallLine
                    ) -> CarrierStreamSession:
    """The session over a carrier's stream (``start()`` it, run it, ``stop()`` it)."""
    return CarrierStreamSession(info, start, transport, line, frame_gap=MEDIA_FRAME_GAP.observe)


WEB_RATE = web.WEB_RATE
WebStart = web.WebStart
read_web_start = web.read_web_start


def web_session(info: SessionInfo, transport: Transport, line: CallLine) -> web.WebAudioSession:
    """The session over a browser's web call (``start()`` it, run it, ``stop()`` it)."""
    return web.WebAudioSession(info, transport, line, frame_gap=MEDIA_FRAME_GAP.observe)

PROCESS_SESSIONS = cases.LiveSessions()
"""The live sessions of this process on SQLite and memory, where controls are delivered in-process (every container
of the process shares it). On PostgreSQL each container has its own, fed by its own LISTEN."""
_REGISTRIES: weakref.WeakSet[cases.LiveSessions] = weakref.WeakSet([PROCESS_SESSIONS])


def registries() -> list[cases.LiveSessions]:
    """Every live-session registry of this process (what a shutdown drains), without building one."""
    return list(_REGISTRIES)


@dataclass(frozen=True)
class MediaSettings:
    media_token_ttl_seconds: int = 900
    """PARLEY_MEDIA_TOKEN_TTL_SECONDS: how long a media-stream token may wait to be used (it covers the ringing)."""
    media_drain_seconds: float = 30.0
    """PARLEY_MEDIA_DRAIN_SECONDS: on shutdown, how long live media sessions may go on before they are hung up."""
    media_runtime: str = "conversation"
    """PARLEY_MEDIA_RUNTIME: ``conversation`` (the agent's conversation), ``first_message`` (say the first message,
    hang up) or ``echo`` (the media bench)."""
    conversation_silence_timeout_seconds: float = 30.0
    """PARLEY_CONVERSATION_SILENCE_TIMEOUT_SECONDS: how long without caller speech (counted from the end of the
    agent's audio) ends a conversation with a short goodbye (``silence_timeout``)."""

    def __post_init__(self) -> None:
        if not self.conversation_silence_timeout_seconds > 0:
            raise SettingsError("PARLEY_CONVERSATION_SILENCE_TIMEOUT_SECONDS must be a number of seconds above 0")


class MediaPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    def line(self) -> CallLine:
        return cases.StreamOnlyLine()

    @provide
    def runtime(self, settings: MediaSettings, platform: Settings, units: Units, engines: EngineFactory,
                tool_secrets: ToolSecrets) -> ConversationRuntime:
        if settings.media_runtime == "echo":
            return cases.EchoRuntime()
        if settings.media_runtime == "first_message":
            return cases.FirstMessageRuntime(units)
        # custom tools' requests go through the egress, like every outbound request
        http = HttpxSafeHttp(SystemResolver(), allow_loopback=platform.allow_loopback_targets, user_agent=TOOLS_AGENT)
        return conversation_runtime(units, engines, http, tool_secrets,
                                    silence_timeout_ms=round(settings.conversation_silence_timeout_seconds * 1000))

    @provide
    def run_session(self, units: Units, sessions: cases.LiveSessions, runtime: ConversationRuntime,
                    blobs: BlobStorage, clock: Clock) -> cases.RunMediaSession:
        return cases.RunMediaSession(units, sessions, runtime, blobs, clock)

    redeem = provide(cases.RedeemMediaStream, scope=Scope.REQUEST)
    start_web_call = provide(web_calls.StartWebCall, scope=Scope.REQUEST)
    start_widget_web_call = provide(web_calls.StartWidgetWebCall, scope=Scope.REQUEST)

    @provide
    def web_call_policy(self, settings: MediaSettings) -> web_calls.WebCallPolicy:
        return web_calls.WebCallPolicy(token_ttl_seconds=settings.media_token_ttl_seconds)


class SqlMediaProvider(Provider):
    @provide(scope=Scope.APP)
    async def sessions(self, settings: Settings, engine: AsyncEngine) -> AsyncIterator[cases.LiveSessions]:
        if settings.backend is not Backend.POSTGRESQL:
            yield PROCESS_SESSIONS
            return
        sessions = cases.LiveSessions()
        _REGISTRIES.add(sessions)
        listener = await listen_for_controls(engine, sessions.deliver)
        try:
            yield sessions
        finally:
            if listener is not None:
                await listener.close()

    @provide(scope=Scope.REQUEST)
    def tokens(self, uow: SqlUnitOfWork, settings: MediaSettings) -> MediaStreamTokens:
        return SqlMediaStreamTokens(uow, settings.media_token_ttl_seconds)

    @provide(scope=Scope.REQUEST)
    def control(self, settings: Settings, uow: SqlUnitOfWork) -> LiveCallControl:
        """Sending a control needs no live-session registry here (nor its LISTEN, on PostgreSQL): SQLite's is the
        process's own."""
        if settings.backend is Backend.POSTGRESQL:
            return NotifyCallControl(uow)
        return cases.InProcessCallControl(PROCESS_SESSIONS)


class MemoryMediaProvider(Provider):
    @provide(scope=Scope.APP)
    def sessions(self) -> cases.LiveSessions:
        return PROCESS_SESSIONS

    @provide(scope=Scope.REQUEST)
    def tokens(self, uow: InMemoryUnitOfWork, settings: MediaSettings) -> MediaStreamTokens:
        return InMemoryMediaStreamTokens(uow, settings.media_token_ttl_seconds)

    @provide(scope=Scope.REQUEST)
    def control(self, sessions: cases.LiveSessions) -> LiveCallControl:
        return cases.InProcessCallControl(sessions)


FEATURE = Feature(
    name="media",
    providers=(MediaPlatformProvider,),
    sql=SqlMediaProvider,
    memory=MemoryMediaProvider,
    settings=MediaSettings,
)
