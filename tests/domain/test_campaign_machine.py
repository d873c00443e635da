"""The campaign and contact status machines, and the retry decision (hypothesis where it is a machine or algebra)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from domain.campaigns import (
    CAMPAIGN_MACHINE,
    CONTACT_MACHINE,
    CONTACT_STATUSES,
    DELETABLE_STATUSES,
    EDITABLE_STATUSES,
    FINAL_CONTACT_STATUSES,
    FINAL_STATUSES,
    RETRY_OUTCOMES,
    STATUSES,
    CallingHours,
    Campaign,
    CampaignStats,
    Contact,
    RetryPolicy,
    RetryRule,
    decide_retry,
)
from domain.errors import InvalidTransition, ValidationFailed
from tests.properties import examples

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
CAMPAIGN_TRIGGERS = sorted({t for _, t in CAMPAIGN_MACHINE.moves})
CONTACT_TRIGGERS = sorted({t for _, t in CONTACT_MACHINE.moves})

# the documented moves, written out once more as the reference the machines are checked against
CAMPAIGN_MOVES = {
    ("draft", "start"): "running", ("paused", "start"): "running", ("running", "pause"): "paused",
    ("running", "complete"): "completed", ("running", "fail"): "failed", ("draft", "cancel"): "cancelled",
    ("running", "cancel"): "cancelled", ("paused", "cancel"): "cancelled",
}
CONTACT_MOVES = {
    ("pending", "dial"): "dialing", ("retry_wait", "dial"): "dialing", ("dialing", "complete"): "completed",
    ("dialing", "retry"): "retry_wait", ("dialing", "fail"): "failed", ("pending", "skip_dnc"): "skipped_dnc",
    ("retry_wait", "skip_dnc"): "skipped_dnc", ("pending", "cancel"): "cancelled",
    ("retry_wait", "cancel"): "cancelled",
}


def campaign(status: str = "draft") -> Campaign:
    return Campaign(1, 1, "Spring", 7, status=status, created_at=T0, updated_at=T0)


def contact(status: str = "pending") -> Contact:
    return Contact(1, 1, 1, "+14155550100", status=status, created_at=T0, updated_at=T0)


def test_the_machines_are_the_documented_tables() -> None:
    assert dict(CAMPAIGN_MACHINE.moves) == CAMPAIGN_MOVES
    assert dict(CONTACT_MACHINE.moves) == CONTACT_MOVES
    assert CAMPAIGN_MACHINE.states() == set(STATUSES)
    assert CONTACT_MACHINE.states() == set(CONTACT_STATUSES)


def test_final_states_are_absorbing() -> None:
    assert not any(src in FINAL_STATUSES for src, _ in CAMPAIGN_MACHINE.moves)
    assert not any(src in FINAL_CONTACT_STATUSES for src, _ in CONTACT_MACHINE.moves)


@given(st.sampled_from(STATUSES), st.sampled_from(CAMPAIGN_TRIGGERS))
@settings(max_examples=examples(200))
def test_every_campaign_move_is_the_table_or_invalid_transition(status: str, trigger: str) -> None:
    expected = CAMPAIGN_MOVES.get((status, trigger))
    if expected is None:
        with pytest.raises(InvalidTransition) as refused:
            campaign(status).move(trigger, T0)
        assert refused.value.code == "invalid_transition"
        assert refused.value.details and refused.value.details["current_status"] == status
    else:
        moved = campaign(status).move(trigger, T0 + timedelta(minutes=1))
        assert moved.status == expected and moved.updated_at == T0 + timedelta(minutes=1)
        assert (moved.ended_at is not None) == (expected in FINAL_STATUSES)


@given(st.sampled_from(CONTACT_STATUSES), st.sampled_from(CONTACT_TRIGGERS))
@settings(max_examples=examples(200))
def test_every_contact_move_is_the_table_or_invalid_transition(status: str, trigger: str) -> None:
    expected = CONTACT_MOVES.get((status, trigger))
    if expected is None:
        with pytest.raises(InvalidTransition) as refused:
            contact(status).move(trigger, T0)
        assert refused.value.code == "invalid_transition"
    else:
        assert contact(status).move(trigger, T0).status == expected


def test_edit_and_delete_are_allowed_only_in_their_states() -> None:
    for status in STATUSES:
        c = campaign(status)
        if status in EDITABLE_STATUSES:
            c.ensure_editable()
        else:
            with pytest.raises(InvalidTransition, match="update is only possible while it is draft or paused"):
                c.ensure_editable()
        if status in DELETABLE_STATUSES:
            c.ensure_deletable()
        else:
            with pytest.raises(InvalidTransition):
                c.ensure_deletable()
    contact("pending").ensure_deletable()
    for status in set(CONTACT_STATUSES) - {"pending"}:
        with pytest.raises(InvalidTransition):
            contact(status).ensure_deletable()


def test_a_dial_counts_an_attempt_and_clears_the_wait() -> None:
    waiting = replace(contact("retry_wait"), attempts=1, next_attempt_at=T0)
    dialing = waiting.move("dial", T0)
    assert dialing.status == "dialing" and dialing.attempts == 2 and dialing.next_attempt_at is None


class CampaignLifecycle(RuleBasedStateMachine):
    """Random sequences of requests: the campaign follows the table, refuses the rest, never leaves a final
    state, and remembers when it first started."""

    def __init__(self) -> None:
        super().__init__()
        self.campaign = campaign()
        self.model = "draft"
        self.clock = T0
        self.first_start: datetime | None = None

    @rule(trigger=st.sampled_from(CAMPAIGN_TRIGGERS))
    def request(self, trigger: str) -> None:
        self.clock += timedelta(minutes=1)
        expected = CAMPAIGN_MOVES.get((self.model, trigger))
        if expected is None:
            with pytest.raises(InvalidTransition):
                self.campaign.move(trigger, self.clock)
            return
        self.campaign = self.campaign.move(trigger, self.clock)
        if expected == "running" and self.first_start is None:
            self.first_start = self.clock
        self.model = expected

    @invariant()
    def follows_the_model(self) -> None:
        assert self.campaign.status == self.model
        assert self.campaign.started_at == self.first_start
        assert (self.campaign.ended_at is not None) == (self.model in FINAL_STATUSES)


TestCampaignLifecycle = CampaignLifecycle.TestCase
TestCampaignLifecycle.settings = settings(max_examples=examples(50), stateful_step_count=20)


class ContactLifecycle(RuleBasedStateMachine):
    """A contact driven by dials and their outcomes under the default policy: attempts never exceed the
    policy's maximum for the last outcome, and a final contact stays final."""

    def __init__(self) -> None:
        super().__init__()
        self.contact = contact()
        self.policy = RetryPolicy()
        self.clock = T0

    @rule()
    def dial(self) -> None:
        if self.contact.status in ("pending", "retry_wait"):
            self.contact = self.contact.move("dial", self.clock)
        else:
            with pytest.raises(InvalidTransition):
                self.contact.move("dial", self.clock)

    @rule(outcome=st.sampled_from((*RETRY_OUTCOMES, "completed")))
    def call_ended(self, outcome: str) -> None:
        self.clock += timedelta(minutes=5)
        if self.contact.status != "dialing":
            with pytest.raises(InvalidTransition):
                self.contact.move("complete", self.clock)
            return
        if outcome == "completed":
            self.contact = self.contact.move("complete", self.clock)
            return
        decision = decide_retry(outcome, self.contact.attempts, self.policy, self.clock)
        if decision.status == "retry_wait":
            assert self.contact.attempts < self.policy.rule(outcome).max_attempts
            self.contact = self.contact.move("retry", self.clock, next_attempt_at=decision.next_attempt_at,
                                             reason=outcome)
        else:
            assert self.contact.attempts >= self.policy.rule(outcome).max_attempts
            self.contact = self.contact.move("fail", self.clock, reason=outcome)

    @rule(trigger=st.sampled_from(("skip_dnc", "cancel")))
    def stop(self, trigger: str) -> None:
        if self.contact.status in ("pending", "retry_wait"):
            self.contact = self.contact.move(trigger, self.clock)
        else:
            with pytest.raises(InvalidTransition):
                self.contact.move(trigger, self.clock)

    @invariant()
    def attempts_are_bounded(self) -> None:
        most = max(rule.max_attempts for rule in (self.policy.rule(o) for o in RETRY_OUTCOMES))
        assert 0 <= self.contact.attempts <= most + 1
        assert (self.contact.next_attempt_at is not None) == (self.contact.status == "retry_wait")


TestContactLifecycle = ContactLifecycle.TestCase
TestContactLifecycle.settings = settings(max_examples=examples(50), stateful_step_count=25)


@given(outcome=st.sampled_from(RETRY_OUTCOMES), attempts=st.integers(1, 12), max_attempts=st.integers(1, 10),
       delay=st.integers(1, 10_080), minutes=st.integers(0, 10**6))
@settings(max_examples=examples(300))
def test_retry_waits_the_delay_until_the_attempts_are_used_up(outcome: str, attempts: int, max_attempts: int,
                                                              delay: int, minutes: int) -> None:
    now = T0 + timedelta(minutes=minutes)
    policy = RetryPolicy(**{outcome: RetryRule(max_attempts, delay)})
    decision = decide_retry(outcome, attempts, policy, now)
    assert decision.reason == outcome
    if attempts < max_attempts:
        assert decision.status == "retry_wait" and decision.next_attempt_at == now + timedelta(minutes=delay)
    else:
        assert decision.status == "failed" and decision.next_attempt_at is None


def test_the_default_policy_is_the_documented_one() -> None:
    policy = RetryPolicy()
    assert policy.view() == {"busy": {"max_attempts": 3, "delay_minutes": 10},
                             "no_answer": {"max_attempts": 3, "delay_minutes": 60},
                             "voicemail": {"max_attempts": 1, "delay_minutes": 60},
                             "failed": {"max_attempts": 2, "delay_minutes": 30}}
    assert decide_retry("voicemail", 1, policy, T0).status == "failed"
    assert decide_retry("busy", 2, policy, T0).next_attempt_at == T0 + timedelta(minutes=10)
    with pytest.raises(ValueError):
        decide_retry("completed", 1, policy, T0)
    with pytest.raises(ValueError):
        decide_retry("busy", 0, policy, T0)


@pytest.mark.parametrize(("hours", "field"), [
    (CallingHours("21:00", "08:00"), "calling_hours.end"), (CallingHours("9:00", "17:00"), "calling_hours.start"),
    (CallingHours("08:00", "24:01"), "calling_hours.end"), (CallingHours("24:00", "24:00"), "calling_hours.start"),
])
def test_calling_hours_are_an_ordered_local_window(hours: CallingHours, field: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        hours.validate()
    assert refused.value.details == {"validation_errors": {field: refused.value.details["validation_errors"][field]}}
    CallingHours("00:00", "24:00").validate()


def test_retry_bounds_name_the_field() -> None:
    with pytest.raises(ValidationFailed, match=r"retry\.no_answer\.delay_minutes"):
        RetryPolicy(no_answer=RetryRule(3, 10_081)).validate()
    with pytest.raises(ValidationFailed, match=r"retry\.busy\.max_attempts"):
        RetryPolicy(busy=RetryRule(11, 10)).validate()


def test_stats_total_every_status() -> None:
    stats = CampaignStats.of({"pending": 3, "completed": 2, "cancelled": 1})
    assert stats.total == 6 and stats.dialing == 0
