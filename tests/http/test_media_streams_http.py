"""The media-stream websocket against the real app (SQLite and PostgreSQL): tokens, both carriers' protocols,
pacing, marks, clear, the recording and the call's end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import AppPool
from tests.http.media_support import MediaApp, ended_call, media_app, open_stream, ringing_call
from tests.support.emulators.media_client import AsgiWebSocket, WebSocketClosed


@pytest.fixture
async def served(app_pool: AppPool, tmp_root: Path, sql_url: str) -> AsyncIterator[MediaApp]:
    async with media_app(app_pool, tmp_root, sql_url) as app:
        yield app


async def _refused(served: MediaApp, path: str) -> int | None:
    """The close code of a stream whose first frame is never even looked at."""
    try:
        socket = await AsgiWebSocket.connect(served.app, path)
    except WebSocketClosed as closed:
        return closed.code
    try:
        await socket.receive_text()
    except WebSocketClosed as closed:
        return closed.code
    return None


async def test_a_forged_token_is_refused_with_policy_violation(served: MediaApp, caplog: pytest.LogCaptureFixture
                                                                ) -> None:
    assert await _refused(served, "/v2/media-streams/forged-token") == 1008
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_the_greeting_plays_and_the_call_completes(served: MediaApp) -> None:
    call = await ringing_call(served, first_message="Hello there, this is Parley calling")
    caller = await open_stream(served, call.path)
    closed = await caller.finished(20)
    assert closed is not None
    assert caller.received.marks == ["first_message"]
    assert len(caller.received.media) >= 50
    data = await ended_call(served, call)
    assert data["status"] == "completed"
    assert data["end_reason"] == "agent_hangup"
