"""What an agent page's "Place a call" form asks for: a field per placeholder the texts of the agent's published
version use (what a call runs; the draft's texts until it was first published)."""

from __future__ import annotations

from typing import Any

from application.agents import GetAgentCommand, GetPublishedAgent
from domain.agents import BUILT_IN_PLACEHOLDERS, Agent, call_placeholders
from domain.identity import persisted
from entrypoints.http.dashboard.view import View


def call_form(agent: Agent) -> dict[str, Any]:
    """``placeholders``: the names a call needs in custom_data (one field each); ``needs_contact_name``: the agent
    says ``{{contact_name}}``, so the contact's name is required."""
    names = call_placeholders(agent)
    return {"placeholders": [name for name in names if name not in BUILT_IN_PLACEHOLDERS],
            "needs_contact_name": "contact_name" in names}


async def published_call_form(view: View, published: GetPublishedAgent, agent: Agent) -> dict[str, Any]:
    """``call_form`` of the version a call would run: the latest published one, else the draft."""
    runs = await view.run(published, lambda actor: GetAgentCommand(actor, persisted(agent.id)))
    return call_form(runs or agent)
