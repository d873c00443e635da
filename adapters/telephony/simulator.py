"""SimulatedTelephony: a faithful stand-in for a carrier, behind the Telephony port.

Dialling fixes the line's fate from the destination number (the test numbers of docs/calls.md): when it is
answered, busy, unanswered, failed, or picked up by a voicemail box. A line that is picked up asks for the agent's
conversation (signal ``conversation``, with the caller of ``callers.py``) and waits, like a carrier's media stream,
until the calls' pass hands the conversation's result back (``resume``); the conversation itself is the
application's, the one of live media sessions (``application/simulated_call.py``). The call then ends at the
pick-up plus the conversation's length. The timeline lives in the call's telephony state (JSON on the call row),
so any worker process can continue a call and nothing is lost in a restart; a conversation not handed back within
``offer_again_seconds`` (``OFFER_AGAIN_SECONDS`` by default; its worker died) is asked for again. Polling with the
clock's ``now`` reports every event whose time has come; the recording is a real WAV written through the
BlobStorage port when the call ends.

Time: simulated call time runs ``20 * speed`` times faster than wall time (``PARLEY_SIMULATOR_SPEED``,
default 1.0), so a typical call of about 20 simulated seconds ends within about 1.2 s of wall time.
Durations, transcript offsets and billable seconds are in simulated (call) time; timestamps (started_at,
answered_at, ended_at) are the wall-clock instants at which the simulator reported each event.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from adapters.telephony import callers, wav
from application.ports.blobs import BlobStorage
from application.ports.telephony import (
    CONVERSATION,
    CallSignal,
    DialHandle,
    DialRequest,
    PollResult,
    ScriptedCaller,
    TelephonyHealth,
)
from domain.calls import simulator_scenario

RING_SECONDS = {"complete": 4.0, "book": 4.0, "transfer": 4.0, "busy": 2.0, "no_answer": 30.0, "failed": 1.0,
                "voicemail": 15.0}
BASE_SPEEDUP = 20.0
OFFER_AGAIN_SECONDS = 60.0
"""Wall seconds a line waits for its conversation's result before it asks again (the default)."""


@dataclass(frozen=True, slots=True)
class SimulatorConfig:
    speed: float = 1.0
    offer_again_seconds: float = OFFER_AGAIN_SECONDS

    @property
    def wall_seconds_per_call_second(self) -> float:
        return 1.0 / (BASE_SPEEDUP * max(self.speed, 1e-6))


def recording_key(organization_id: int, call_id: str) -> str:
    return f"recordings/{organization_id}/{call_id}.wav"


class SimulatedTelephony:
    def __init__(self, blobs: BlobStorage, config: SimulatorConfig) -> None:
        self.blobs, self.config = blobs, config

    async def health(self) -> TelephonyHealth:
        """The simulator runs in-process: it can always place calls."""
        return TelephonyHealth(ok=True, provider="simulator")

    async def dial(self, request: DialRequest, now: datetime) -> DialHandle:
        scenario = simulator_scenario(request.to_phone)
        ring = RING_SECONDS[scenario]
        events: list[dict[str, Any]] = []
        caller: dict[str, Any] | None = None
        if scenario in ("complete", "book", "transfer", "voicemail"):
            script = callers.caller_for(scenario, request)
            caller = {"lines": list(script.lines), "hangs_up": script.hangs_up, "answered_by": script.answered_by,
                      "start_ms": script.start_ms, "max_duration_seconds": script.max_duration_seconds}
            if scenario != "voicemail":  # a voicemail box picks up, nobody answers
                events.append({"kind": "answered", "t": ring})
            events.append({"kind": CONVERSATION, "t": ring})
        else:
            status, reason = {"busy": ("busy", "busy"), "no_answer": ("no_answer", "no_answer"),
                              "failed": ("failed", "carrier_error")}[scenario]
            events.append({"kind": "ended", "t": ring, "status": status, "end_reason": reason, "duration": 0})
        state = {
            "simulator": 2,
            "scenario": scenario,
            "dialed_at": now.isoformat(),
            "scale": self.config.wall_seconds_per_call_second,
            "events": events,
            "cursor": 0,
            "caller": caller,
            "attempt": 0,
            "offered_at": None,
            "organization_id": request.organization_id,
            "call_id": request.call_id,
            "hung_up": False,
        }
        return DialHandle(f"sim-{request.call_id}", state, self._next_check(state))

    async def poll(self, handle: DialHandle, now: datetime) -> PollResult:
        state = copy.deepcopy(handle.state)
        signals: list[CallSignal] = []
        events = state["events"]
        while not state["hung_up"] and state["cursor"] < len(events):
            event = events[state["cursor"]]
            at = self._at(state, event)
            if at > now:
                break
            if event["kind"] == CONVERSATION:
                offered = state["offered_at"]
                again = timedelta(seconds=self.config.offer_again_seconds)
                if offered is None or now >= datetime.fromisoformat(offered) + again:
                    state["attempt"] += 1
                    state["offered_at"] = now.isoformat()
                    signals.append(CallSignal(CONVERSATION, at, tool=CONVERSATION, caller=ScriptedCaller(
                        lines=tuple(state["caller"]["lines"]), hangs_up=state["caller"]["hangs_up"],
                        answered_by=state["caller"]["answered_by"], start_ms=state["caller"]["start_ms"],
                        max_duration_seconds=state["caller"]["max_duration_seconds"]),
                        details={"attempt": state["attempt"]}))
                break  # the line waits for the conversation
            if event["kind"] == "answered":
                signals.append(CallSignal("answered", at))
            elif event["kind"] == "ended":
                signals.append(await self._ended(state, event, at))
            state["cursor"] += 1
        return PollResult(signals, DialHandle(handle.reference, state, self._next_check(state)))

    async def resume(self, handle: DialHandle, tool: str, result: dict[str, Any] | None) -> DialHandle:
        """The conversation's result (``application.simulated_call.conversation_result``) of the attempt the line
        asked for last; anything else changes nothing."""
        state = copy.deepcopy(handle.state)
        events = state["events"]
        waiting = state["cursor"] < len(events) and events[state["cursor"]]["kind"] == CONVERSATION
        if (tool != CONVERSATION or result is None or not waiting or state["hung_up"]
                or result.get("attempt") != state["attempt"]):
            return handle
        picked_up = events[state["cursor"]]["t"]
        state["cursor"] += 1
        duration_ms = max(0, int(result.get("duration_ms") or 0))
        events.append({"kind": "ended", "t": picked_up + duration_ms / 1000, "status": result["status"],
                       "end_reason": result["end_reason"], "duration": math.ceil(duration_ms / 1000),
                       "transcript": result.get("transcript") or [], "turns": result.get("turns") or [],
                       "analysis": result.get("analysis"), "booking": result.get("booking"),
                       "transferred_to": result.get("transferred_to"),
                       "message_left": bool(result.get("message_left"))})
        return DialHandle(handle.reference, state, self._next_check(state))

    async def hang_up(self, handle: DialHandle, now: datetime) -> DialHandle:
        state = copy.deepcopy(handle.state)
        state["hung_up"] = True
        state["hung_up_at"] = now.isoformat()
        return DialHandle(handle.reference, state, None)

    # ------------------------------------------------------------------------------------------------

    @staticmethod
    def _at(state: dict[str, Any], event: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(state["dialed_at"]) + timedelta(seconds=event["t"] * state["scale"])

    def _next_check(self, state: dict[str, Any]) -> datetime | None:
        if state["hung_up"] or state["cursor"] >= len(state["events"]):
            return None
        event = state["events"][state["cursor"]]
        if event["kind"] == CONVERSATION and state["offered_at"] is not None:
            return datetime.fromisoformat(state["offered_at"]) + timedelta(seconds=self.config.offer_again_seconds)
        return self._at(state, event)

    async def _ended(self, state: dict[str, Any], event: dict[str, Any], at: datetime) -> CallSignal:
        transcript = list(event.get("transcript") or [])
        if not transcript and state.get("turns"):  # a call dialled before the simulator ran the conversation
            transcript = [{"role": t["role"], "text": t["text"], "at_ms": t["at_ms"]} for t in state["turns"]
                          if not t.get("pending")]
        key = None
        if transcript:
            key = recording_key(state["organization_id"], state["call_id"])
            await self.blobs.put(key, wav.tones(transcript, seconds=int(event["duration"])), "audio/wav")
        return CallSignal(
            "ended", at, status=event["status"], end_reason=event["end_reason"],
            duration_seconds=int(event["duration"]), transcript=transcript, recording_key=key,
            transferred_to=event.get("transferred_to") if event["status"] == "transferred" else None,
            details={"booking": event.get("booking"), "message_left": bool(event.get("message_left")),
                     "turns": list(event.get("turns") or []), "analysis": event.get("analysis")},
        )
