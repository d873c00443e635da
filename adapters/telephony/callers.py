"""The simulator's callers: what the person (or the voicemail box) at each test number says to the agent.

The agent's side is the conversation runtime's (``application/simulated_call.py``): these are only the caller's
lines, said in order, each once the agent's audio has played. They are plain requests any model understands, and
the built-in ``offline`` model answers them (the prompt's purpose, the calendar's slots, a transfer).
"""

from __future__ import annotations

from application.ports.telephony import DialRequest, ScriptedCaller

VOICEMAIL_BEEP_MS = 2000
"""The voicemail box's greeting and beep, before the agent can leave its message."""


def _hello(request: DialRequest) -> str:
    contact = (request.contact_name or "").strip()
    return f"Hi, this is {contact}. What is this call about?" if contact else "Hi. What is this call about?"


def caller_for(scenario: str, request: DialRequest) -> ScriptedCaller:
    """The caller of a line that is answered: ``complete``, ``book``, ``transfer`` or ``voicemail``."""
    limit = request.max_duration_seconds
    if scenario == "voicemail":
        return ScriptedCaller((), hangs_up=False, answered_by="machine", start_ms=VOICEMAIL_BEEP_MS,
                              max_duration_seconds=limit)
    lines = [_hello(request)]
    if scenario == "book":
        lines += ["Can I book an appointment?", "Yes, please book the earliest."]
    elif scenario == "transfer":
        lines.append("Can I speak to a person, please?")
    lines.append("Okay. That's all I needed, thank you.")
    return ScriptedCaller(tuple(lines), max_duration_seconds=limit)
