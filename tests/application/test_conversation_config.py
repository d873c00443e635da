"""``conversation_config``: the agent's engine, tool and analysis settings reach what the conversation runs; without
resolved engines, the offline ones with the agent's options."""

from __future__ import annotations

from datetime import UTC, datetime

from application.ai_providers import AgentEngineChoices
from application.conversation.config import END_CALL, HttpTool, conversation_config
from application.ports.engines import EngineChoice
from domain.agents import Agent, Llm, Transcriber, Voice
from domain.agents import HttpTool as AgentTool
from domain.calls import Call

NOW = datetime(2026, 11, 27, 9, tzinfo=UTC)
SCHEMA = {"type": "object", "properties": {"booked": {"type": "boolean"}}}


def _call(**fields: object) -> Call:
    values: dict = {"id": "c1", "organization_id": 7, "agent_id": 3, "destination_phone": "", "from_phone": "",
                    "direction": "web", "custom_data": {"topic": "parking"}, "created_at": NOW, **fields}
    return Call(**values)


def _agent() -> Agent:
    return Agent(id=3, organization_id=7, name="Desk", prompt="Answer about {{topic}}.", first_message="Hi.",
                 language="en-GB", llm=Llm(model="gpt-4o-mini", temperature=0.2, provider_id=5),
                 voice=Voice(voice_id="en-gb+f3", provider_id=5, speed=1.25),
                 transcriber=Transcriber(model="whisper-1", language="en-US"),
                 tools=(AgentTool(name="lookup", url="https://tools.example/lookup", description="Find an order",
                                  parameters={"type": "object", "properties": {"id": {"type": "string"}}},
                                  timeout_ms=2500),),
                 analysis_schema=SCHEMA, end_of_turn_silence_ms=700)


def test_the_agents_tools_analysis_schema_and_end_of_turn_reach_the_conversation() -> None:
    config = conversation_config(_call(), _agent(), [11])
    assert config.prompt == "Answer about parking."
    assert config.http_tools == (HttpTool("lookup", "Find an order", {"type": "object", "properties": {
        "id": {"type": "string"}}}, "https://tools.example/lookup", 2500),)
    assert config.analysis_schema == SCHEMA and config.end_of_turn_silence_ms == 700
    assert config.built_in_tools == (END_CALL,) and config.knowledge_base_ids == (11,)
    # without resolved engines: the offline ones, with the agent's options
    assert config.llm == EngineChoice("offline", model="gpt-4o-mini", temperature=0.2, language="en-GB")
    assert config.voice == EngineChoice("offline", voice_id="en-gb+f3", speed=1.25, language="en-GB")
    assert config.transcriber.model == "whisper-1" and config.transcriber.language == "en-US"
    assert "Answer about {{topic}}." in config.transcriber.vocabulary


def test_resolved_engines_are_what_the_conversation_runs() -> None:
    remote = EngineChoice("openai_compatible", base_url="https://api.openai.com/v1", api_key="sk-1",
                          model="gpt-4o-mini", temperature=0.2)
    engines = AgentEngineChoices(llm=remote, voice=EngineChoice("offline"), transcriber=EngineChoice("offline"))
    config = conversation_config(_call(), _agent(), [], engines)
    assert config.llm == remote and config.voice == EngineChoice("offline")
