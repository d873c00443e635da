"""SimulatedTelephony: a faithful stand-in for a carrier, behind the Telephony port.

Dialling fixes the call's whole timeline from the destination number (the test numbers of docs/calls.md) and the
agent: when the line is answered, what is said and when, and how it ends. The timeline lives in the call's
telephony state (JSON on the call row), so any worker process can continue a call and nothing is lost in
a restart. Polling with the clock's ``now`` reports every event whose time has come; the recording is a
real WAV written through the BlobStorage port when the call ends.

Time: simulated call time runs ``20 * speed`` times faster than wall time (``PARLEY_SIMULATOR_SPEED``,
default 1.0), so a typical call of about 45 simulated seconds ends within about 2.5 s of wall time.
Durations, transcript offsets and billable seconds are in simulated (call) time; timestamps (started_at,
answered_at, ended_at) are the wall-clock instants at which the simulator reported each event.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from adapters.telephony import conversation, wav
from application.ports.blobs import BlobStorage
from application.ports.telephony import CallSignal, DialHandle, DialRequest, PollResult, TelephonyHealth
from domain.calls import simulator_scenario

RING_SECONDS = {"complete": 4.0, "book": 4.0, "transfer": 4.0, "busy": 2.0, "no_answer": 30.0, "failed": 1.0,
                "voicemail": 15.0}
BASE_SPEEDUP = 20.0


@dataclass(frozen=True, slots=True)
class SimulatorConfig:
    speed: float = 1.0

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
        turns: list[dict[str, Any]] = []
        if scenario in ("complete", "book", "transfer"):
            script = conversation.build(request, scenario)
            turns = script.turns
            events.append({"kind": "answered", "t": ring})
            if script.tool_at_ms is not None:
                events.append({"kind": "tool", "t": ring + script.tool_at_ms / 1000, "tool": "book_appointment"})
            status = "transferred" if scenario == "transfer" else "completed"
            natural = "transferred" if scenario == "transfer" else "hangup"
            reason = "max_duration" if script.truncated else natural
            events.append({"kind": "ended", "t": ring + script.end_ms / 1000, "status": status, "end_reason": reason,
                           "duration": math.ceil(script.end_ms / 1000), "record": bool(turns)})
        elif scenario == "voicemail":
            leave = request.voicemail_action == "leave_message" and bool(request.voicemail_message)
            turns, held_ms = conversation.voicemail_turns(request.voicemail_message if leave else None)
            held_ms = min(held_ms, request.max_duration_seconds * 1000)
            turns = [t for t in turns if t["at_ms"] < held_ms]
            events.append({"kind": "ended", "t": ring + held_ms / 1000, "status": "voicemail",
                           "end_reason": "voicemail_message_left" if leave else "voicemail_hangup",
                           "duration": math.ceil(held_ms / 1000), "record": bool(turns),
                           "message_left": leave})
        else:
            status, reason = {"busy": ("busy", "busy"), "no_answer": ("no_answer", "no_answer"),
                              "failed": ("failed", "carrier_error")}[scenario]
            events.append({"kind": "ended", "t": ring, "status": status, "end_reason": reason, "duration": 0,
                           "record": False})
        state = {
            "simulator": 1,
            "scenario": scenario,
            "dialed_at": now.isoformat(),
            "scale": self.config.wall_seconds_per_call_second,
            "events": events,
            "cursor": 0,
            "turns": turns,
            "tool_results": {},
            "organization_id": request.organization_id,
            "call_id": request.call_id,
            "transfer_to": request.transfer_phone,
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
            if event["kind"] == "tool":
                if event["tool"] in state["tool_results"]:
                    state["cursor"] += 1
                    continue
                signals.append(CallSignal("tool", at, tool=event["tool"]))
                break  # the conversation waits for the tool's answer
            if event["kind"] == "answered":
                signals.append(CallSignal("answered", at))
            elif event["kind"] == "ended":
                signals.append(await self._ended(state, event, at))
            state["cursor"] += 1
        return PollResult(signals, DialHandle(handle.reference, state, self._next_check(state)))

    async def resume(self, handle: DialHandle, tool: str, result: dict[str, Any] | None) -> DialHandle:
        state = copy.deepcopy(handle.state)
        state["tool_results"][tool] = {"result": result}
        events = state["events"]
        if state["cursor"] < len(events) and events[state["cursor"]].get("tool") == tool:
            state["cursor"] += 1
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
        return self._at(state, state["events"][state["cursor"]])

    async def _ended(self, state: dict[str, Any], event: dict[str, Any], at: datetime) -> CallSignal:
        transcript = conversation.finish_transcript(state["turns"], state["tool_results"])
        key = None
        if event.get("record") and transcript:
            key = recording_key(state["organization_id"], state["call_id"])
            await self.blobs.put(key, wav.tones(transcript, seconds=int(event["duration"])), "audio/wav")
        booking = (state["tool_results"].get("book_appointment") or {}).get("result")
        return CallSignal(
            "ended", at, status=event["status"], end_reason=event["end_reason"],
            duration_seconds=int(event["duration"]), transcript=transcript, recording_key=key,
            transferred_to=state.get("transfer_to") if event["status"] == "transferred" else None,
            details={"booking": booking, "message_left": bool(event.get("message_left"))},
        )
