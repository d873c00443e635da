"""A call finished with a conversation's outcome shows its latency per turn and its after-call analysis on the call
log (GET /call-logs/{id} and the list); a call log without a conversation (a busy line) shows turns [] and analysis
null."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.memory.clock import ManualClock
from application.calls import CallFinisher
from application.ports.calls import CallRepository
from application.ports.platform import UnitOfWork
from tests.http.calls_support import active_agent, finish_calls, place
from tests.support.apps import ApiFactory

START = datetime(2026, 1, 5, 9, tzinfo=UTC)
TURNS = [{"end_of_speech_to_first_audio_ms": 640, "stt_ms": 120, "llm_first_token_ms": 310,
          "tts_first_audio_ms": 90, "parley_ms": 12},
         {"end_of_speech_to_first_audio_ms": 700, "stt_ms": 150, "llm_first_token_ms": 280,
          "tts_first_audio_ms": None, "parley_ms": 9}]
ANALYSIS = {"summary": "Booked a check-up for Tuesday.", "successful": True, "data": {"booked": True}}


async def test_turns_and_analysis_reach_the_call_log(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    agent = await active_agent(api, t)
    talked = (await place(api, t, agent, "+14155550123")).json()["data"]
    plain = (await place(api, t, agent, "+1555010001")).json()["data"]  # busy: no conversation
    async with api.worker()() as scope:  # the media session's finish, as it ends a conversation
        calls = await scope.get(CallRepository)
        call = await calls.get_for_update(t.organization_id, talked["id"])
        assert call is not None
        now = clock.now()
        call, _ = call.move("dial", now, telephony_ref="media-test", deadline_at=now + timedelta(hours=1))
        call, _ = call.move("answer", now)
        call = await calls.update(call)
        transcript: list[dict[str, Any]] = [{"role": "agent", "text": "Hello Ada.", "at_ms": 80},
                                            {"role": "user", "text": "Hi, book me in.", "at_ms": 1500,
                                             "knowledge_documents": [3]}]
        await (await scope.get(CallFinisher)).finish(call, "complete", now + timedelta(seconds=30),
                                                    end_reason="agent_hangup", duration_seconds=30,
                                                    transcript=transcript, turns=TURNS, analysis=ANALYSIS)
        await (await scope.get(UnitOfWork)).commit()
    await finish_calls(api, t.organization_id)
    talked = (await api.client.get(f"/v2/calls/{talked['id']}", headers=t.headers)).json()["data"]
    log = (await api.client.get(f"/v2/call-logs/{talked['call_log_id']}", headers=t.headers)).json()["data"]
    assert log["turns"] == TURNS
    assert log["analysis"] == ANALYSIS
    assert log["transcript"] == [{"role": "agent", "text": "Hello Ada.", "at_ms": 80},
                                 {"role": "user", "text": "Hi, book me in.", "at_ms": 1500,
                                  "knowledge_documents": [3]}]
    listed = (await api.client.get("/v2/call-logs", headers=t.headers)).json()["data"]
    by_call = {entry["call_id"]: entry for entry in listed}
    assert by_call[talked["id"]]["analysis"] == ANALYSIS
    assert (by_call[plain["id"]]["turns"], by_call[plain["id"]]["analysis"]) == ([], None)
