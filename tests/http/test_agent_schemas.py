"""The agent's response schema is built positionally (entrypoints/http/schemas/agents.py): every field must carry
the agent's attribute of the same name, which an agent whose every field differs from the others shows."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import msgspec

from domain.agents import Agent, HttpTool, Llm, Transcriber, Voice, Voicemail
from entrypoints.http.schemas.agents import AgentOut


def test_agent_out_carries_each_attribute_under_its_own_name() -> None:
    agent = Agent(
        id=7, organization_id=3, name="Nora", description="desc", status="paused", agent_mode="inbound",
        language="fr-CA", voice=Voice("eleven", "v-9", 5, 1.2), llm=Llm("model-x", 0.3, 6), prompt="prompt text",
        first_message="hello", max_call_duration_seconds=321, voicemail=Voicemail("leave_message", "call back"),
        transfer_phone="+15550001111", calendar_id=11, timezone="Europe/Paris", metadata={"k": "v"},
        transcriber=Transcriber(8, "whisper-1", "fr"),
        tools=(HttpTool("lookup", "https://tools.example.com/lookup", "Find an order",
                        {"type": "object", "properties": {"id": {"type": "string"}}}, 2500),),
        analysis_schema={"type": "object"}, end_of_turn_silence_ms=700,
        current_version=4, has_unpublished_changes=False,
        created_at=datetime(2026, 1, 2, tzinfo=UTC), updated_at=datetime(2026, 3, 4, tzinfo=UTC))
    out = msgspec.structs.asdict(AgentOut.of(agent))
    expected = {name: getattr(agent, name) for name in out}
    for nested in ("voice", "llm", "voicemail", "transcriber"):
        out[nested] = msgspec.structs.asdict(out[nested])
        expected[nested] = dataclasses.asdict(expected[nested])
    out["tools"] = [msgspec.structs.asdict(tool) for tool in out["tools"]]
    expected["tools"] = [dataclasses.asdict(tool) for tool in expected["tools"]]
    assert out == expected
    # published_version is the API's name for current_version (an Agent property)
    assert set(out) == {f.name for f in dataclasses.fields(Agent)} - {"organization_id"} | {"published_version"}
