"""The lead's rules: its status machine, its one target, its outcome from a call or a campaign contact."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from domain.errors import InvalidTransition, ValidationFailed
from domain.leads import (
    CONTACT_OUTCOMES,
    LEAD_MACHINE,
    STATUSES,
    Lead,
    LeadTargetInvalid,
    call_trigger,
    check_email,
    check_target,
    check_text,
)

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


def test_only_a_queued_lead_moves_and_only_to_called_or_failed() -> None:
    assert LEAD_MACHINE.states() == {"queued", "called", "failed"} and set(STATUSES) > LEAD_MACHINE.states()
    lead = Lead(1, 7, "+14155550100", agent_id=3, created_at=NOW, updated_at=NOW)
    called = lead.move("reach", NOW, call_id="c-1")
    assert (called.status, called.call_id, called.is_final) == ("called", "c-1", True)
    assert lead.move("fail", NOW, reason="busy").status == "failed"
    for final in ("called", "failed", "blocked_dnc"):
        for trigger in ("reach", "fail"):
            with pytest.raises(InvalidTransition):
                Lead(1, 7, "+14155550100", status=final).move(trigger, NOW)


def test_a_call_reaches_the_lead_when_it_connected() -> None:
    assert {s for s in ("completed", "voicemail", "transferred", "busy", "no_answer", "failed", "cancelled")
            if call_trigger(s) == "reach"} == {"completed", "voicemail", "transferred"}
    assert CONTACT_OUTCOMES == {"completed": "reach", "failed": "fail", "skipped_dnc": "fail", "cancelled": "fail"}


def test_a_lead_goes_to_exactly_one_agent_or_campaign() -> None:
    check_target(1, None)
    check_target(None, 2)
    with pytest.raises(LeadTargetInvalid) as both:
        check_target(1, 2)
    assert both.value.code == "invalid_target" and set(both.value.details["validation_errors"]) == {"campaign_id"}
    with pytest.raises(LeadTargetInvalid) as neither:
        check_target(None, None)
    assert set(neither.value.details["validation_errors"]) == {"agent_id", "campaign_id"}


def test_text_and_email_are_stripped_bounded_and_named() -> None:
    assert check_email("  ada@example.com ") == "ada@example.com" and check_email(" ") is None
    with pytest.raises(ValidationFailed) as bad:
        check_email("ada@")
    assert bad.value.details == {"validation_errors": {"email": "must be an email address such as ada@example.com"}}
    assert check_text("  web ", "source", 10) == "web" and check_text("", "source", 10) is None
    for value in ("x" * 11, "a\x00b"):
        with pytest.raises(ValidationFailed) as refused:
            check_text(value, "source", 10)
        assert "source" in refused.value.details["validation_errors"]


def test_the_event_view_carries_the_lead() -> None:
    view = Lead(5, 7, "+14155550100", name="Ada", campaign_id=2, contact_id=9, external_id="x-1",
                created_at=NOW, updated_at=NOW).view()
    assert (view["id"], view["status"], view["campaign_id"], view["contact_id"], view["created_at"]) == (
        5, "queued", 2, 9, "2026-03-02T09:00:00Z")
