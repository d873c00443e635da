"""The simulated conversation: what the agent and the contact say, built from the agent's rendered prompt,
first message and the call's custom_data, timed by word count, cut at the agent's maximum duration."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from application.ports.telephony import DialRequest
from domain.agents import spoken
from domain.calls import spoken_time

MS_PER_WORD = 380
GAP_MS = 700
BOOKING_PENDING = "booking"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Script:
    turns: list[dict[str, Any]]
    tool_at_ms: int | None
    end_ms: int
    truncated: bool


def _first_sentence(prompt: str) -> str | None:
    text = " ".join((prompt or "").split())
    if not text:
        return None
    sentence = _SENTENCE_END.split(text, maxsplit=1)[0]
    return sentence if len(sentence) <= 240 else sentence[:237].rstrip() + "..."


def _custom_lines(custom_data: dict[str, Any]) -> list[tuple[str, str]]:
    lines = []
    for key, value in custom_data.items():
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip():
            label = key.replace("_", " ").strip()
            lines.append((f"I have your {label} as {spoken(value)}. Is that correct?", "Yes, that's correct."))
        if len(lines) == 3:
            break
    return lines


def booking_text(result: dict[str, Any] | None) -> str:
    """The agent's answer to the booking tool: the slot in the calendar's local time, in words."""
    if result and result.get("slot_start"):
        when = spoken_time(datetime.fromisoformat(result["slot_start"]), result.get("timezone"))
        return f"You're booked for {when}. You'll receive a confirmation shortly."
    return "I'm sorry, I couldn't find an open slot right now. We'll call you back to arrange a time."


def build(request: DialRequest, scenario: str) -> Script:
    """Turns with ``at_ms`` counted from the answer. Scenario ``book`` asks to run the booking tool (when
    the agent has a calendar) and leaves a pending turn for its answer; ``transfer`` ends with a hand-over."""
    contact = request.contact_name
    lines: list[tuple[str, str, str | None]] = []  # role, text, pending marker

    def say(role: str, text: str, pending: str | None = None) -> None:
        lines.append((role, text, pending))

    say("agent", request.first_message or f"Hello{', ' + contact if contact else ''}! This is {request.agent_name}.")
    say("user", f"Hi, {'this is ' + contact if contact else 'yes'}. How can I help?")
    sentence = _first_sentence(request.prompt)
    say("agent", f"I'm calling about the following: {sentence}" if sentence else "I'm calling to follow up with you.")
    say("user", "Sure, go ahead.")
    for question, answer in _custom_lines(request.custom_data):
        say("agent", question)
        say("user", answer)
    tool_index: int | None = None
    if scenario == "book":
        say("agent", "Would you like me to book an appointment for you?")
        say("user", "Yes, please.")
        if request.calendar_id is not None:
            tool_index = len(lines)
            say("agent", booking_text(None), BOOKING_PENDING)
        else:
            say("agent", booking_text(None))
        say("user", "Perfect, thank you.")
    if scenario == "transfer":
        say("agent", "Let me transfer you to a colleague who can help you further. One moment, please.")
    else:
        say("user", "That's everything, thank you.")
        say("agent", "Thank you for your time. Goodbye!")

    turns: list[dict[str, Any]] = []
    at = 0
    tool_at_ms: int | None = None
    for index, (role, text, pending) in enumerate(lines):
        if index == tool_index:
            tool_at_ms = at
        turn: dict[str, Any] = {"role": role, "text": text, "at_ms": at}
        if pending:
            turn["pending"] = pending
        turns.append(turn)
        at += len(text.split()) * MS_PER_WORD + GAP_MS
    natural_end = at
    limit = request.max_duration_seconds * 1000
    if natural_end <= limit:
        return Script(turns, tool_at_ms, natural_end, False)
    kept = [t for t in turns if t["at_ms"] < limit]
    if tool_at_ms is not None and tool_at_ms >= limit:
        tool_at_ms = None
    return Script(kept, tool_at_ms, limit, True)


def voicemail_turns(message: str | None) -> tuple[list[dict[str, Any]], int]:
    """The message left after the beep (2 s in) and the time the line is held, in ms."""
    if not message:
        return [], 2000
    return [{"role": "agent", "text": message, "at_ms": 2000}], 2000 + len(message.split()) * MS_PER_WORD + GAP_MS


def finish_transcript(turns: list[dict[str, Any]], tool_results: dict[str, Any]) -> list[dict[str, Any]]:
    """The transcript as reported: pending turns filled with their tool's answer."""
    out = []
    for turn in turns:
        if turn.get("pending") == BOOKING_PENDING:
            result = tool_results.get("book_appointment", {}).get("result")
            out.append({"role": turn["role"], "text": booking_text(result), "at_ms": turn["at_ms"]})
        else:
            out.append({"role": turn["role"], "text": turn["text"], "at_ms": turn["at_ms"]})
    return out
