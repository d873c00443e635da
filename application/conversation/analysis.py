"""The after-call analysis: one language-model call asking for a JSON object ``{summary, successful, data}``, with
``data`` following the agent's ``analysis_schema``. An answer that is not such an object, or whose ``data`` breaks
the schema, leaves ``data`` empty and ``successful`` unknown (the summary is kept when it is text)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from application.ports.engines import ChatMessage, ChatRequest, EngineError, LanguageModel, TextDelta
from domain import json_schema

log = logging.getLogger("parley.conversation")
TRANSCRIPT_MAX_CHARS = 24_000

INSTRUCTIONS = (
    "You analyse a finished phone call between a voice agent and a caller. Answer with one JSON object only: "
    '{"summary": a short summary of the call in the agent\'s language, "successful": true or false (did the call '
    'reach its goal as the agent\'s instructions describe it), "data": an object}.'
)


def _transcript_text(transcript: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'Agent' if entry.get('role') == 'agent' else 'Caller'}: {entry.get('text', '')}"
             for entry in transcript]
    text = "\n".join(lines)
    return text[-TRANSCRIPT_MAX_CHARS:]


def empty(summary: str = "") -> dict[str, Any]:
    return {"summary": summary, "successful": None, "data": {}}


def read_answer(text: str, schema: dict[str, Any] | None) -> dict[str, Any]:
    """The analysis from the model's answer, checked (see the module)."""
    try:
        answer = json.loads(text)
    except ValueError:
        return empty()
    if not isinstance(answer, dict):
        return empty()
    found = answer.get("summary")
    summary = found if isinstance(found, str) else ""
    successful, data = answer.get("successful"), answer.get("data", {})
    if not isinstance(successful, bool) or not isinstance(data, dict):
        return empty(summary)
    if schema is not None and json_schema.errors(data, schema):
        return empty(summary)
    return {"summary": summary, "successful": successful, "data": data}


async def analyse(llm: LanguageModel, model: str, prompt: str, transcript: Sequence[dict[str, Any]],
                  schema: dict[str, Any] | None) -> dict[str, Any]:
    """One call to the model; never raises."""
    instructions = INSTRUCTIONS
    if schema is not None:
        instructions += " data must follow this JSON Schema: " + json.dumps(schema, separators=(",", ":"))
    else:
        instructions += " data is {} (no schema was given)."
    call = _transcript_text(transcript)
    messages = [ChatMessage("system", instructions),
                ChatMessage("user", f"The agent's instructions:\n{prompt}\n\nThe call:\n{call}")]
    parts: list[str] = []
    try:
        async for event in llm.stream(ChatRequest(model=model, messages=messages, temperature=0,
                                                  response_format_json=True)):
            if isinstance(event, TextDelta):
                parts.append(event.text)
    except EngineError as error:
        log.warning("the after-call analysis failed: %s", error.message)
        return empty()
    return read_answer("".join(parts), schema)
