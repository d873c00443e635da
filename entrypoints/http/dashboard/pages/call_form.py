"""What an agent page's "Place a call" form asks for: a field per placeholder the agent's texts use."""

from __future__ import annotations

from typing import Any

from domain.agents import BUILT_IN_PLACEHOLDERS, Agent, call_placeholders


def call_form(agent: Agent) -> dict[str, Any]:
    """``placeholders``: the names a call needs in custom_data (one field each); ``needs_contact_name``: the agent
    says ``{{contact_name}}``, so the contact's name is required."""
    names = call_placeholders(agent)
    return {"placeholders": [name for name in names if name not in BUILT_IN_PLACEHOLDERS],
            "needs_contact_name": "contact_name" in names}
