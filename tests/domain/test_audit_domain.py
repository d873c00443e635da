"""Audit actions read from operation ids (the API's and the dashboard forms'), and field names kept without values."""

from __future__ import annotations

import pytest

from domain.audit import action_of, field_names, past_tense, resource_type_of


@pytest.mark.parametrize(("operation", "action"), [
    ("createAgent", "agent.created"), ("updateAgent", "agent.updated"), ("rotateApiKey", "api_key.rotated"),
    ("addCampaignContacts", "campaign_contacts.added"), ("payInvoice", "invoice.paid"),
    ("cancelCall", "call.canceled"), ("verifySession", "session.verified"), ("logout", "session.ended"),
    ("setDefaultPaymentMethod", "payment_method.made_default"), ("restoreAgentVersion", "agent_version.restored"),
])
def test_an_operation_reads_as_resource_and_verb(operation: str, action: str) -> None:
    assert action_of(operation) == action


def test_past_tense_and_names_that_are_not_operations() -> None:
    assert [past_tense(v) for v in ("publish", "duplicate", "verify", "pay", "dial")] == [
        "published", "duplicated", "verified", "paid", "dialed"]
    assert resource_type_of("campaign_contacts.added") == "campaign_contacts"
    for bad in ("agents", "Agent", "update_agent", ""):
        with pytest.raises(ValueError):
            action_of(bad)


def test_field_names_keep_identifiers_only() -> None:
    assert field_names(["prompt", "name", "x y", "parley_sk_" + "a" * 60, 3]) == ("name", "prompt")
    assert field_names("name") == ()
    assert len(field_names([f"f{i}" for i in range(80)])) == 50
