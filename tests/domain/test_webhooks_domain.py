"""Webhook rules: the catalogue, URLs, the status machine, the retry schedule, verdicts and
signatures (with the test vector of docs/webhooks.md and a round-trip property)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain import events
from domain import webhooks as wh
from domain.errors import BlockedAddress, InvalidTransition, ValidationFailed

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_signature_matches_the_published_test_vector() -> None:
    body = b'{"id":"evt_123","type":"call.completed"}'
    assert wh.sign("whsec_test_secret", 1700000000, body) == (
        "f3fd0b27745d1ca9a35c893e0c71df2742840d6519f282aaaf6088baf3b6246b")
    assert wh.sign("whsec_test_secret", "1700000000", body) == wh.sign("whsec_test_secret", 1700000000, body)


def test_verify_accepts_the_vector_within_tolerance_and_rejects_outside() -> None:
    body = b'{"id":"evt_123","type":"call.completed"}'
    header = "f3fd0b27745d1ca9a35c893e0c71df2742840d6519f282aaaf6088baf3b6246b"
    assert wh.verify_signature("whsec_test_secret", "1700000000", body, header, now=1700000100)
    assert not wh.verify_signature("whsec_test_secret", "1700000000", body, header, now=1700000301)
    assert not wh.verify_signature("whsec_test_secret", "1700000000", body, header, now=1699999699)
    assert wh.verify_signature("whsec_test_secret", "1700000000", body, header, now=1700000301,
                               tolerance_seconds=400)
    assert not wh.verify_signature("whsec_test_secret", "1700000000", body + b" ", header, now=1700000000)
    assert not wh.verify_signature("other", "1700000000", body, header, now=1700000000)
    assert not wh.verify_signature("whsec_test_secret", "nope", body, header, now=1700000000)
    when = datetime.fromtimestamp(1700000000, UTC)
    assert wh.verify_signature("whsec_test_secret", 1700000000, body, header, now=when)


def test_verify_accepts_any_of_several_signatures_during_a_rotation() -> None:
    body = b'{"event":"webhook.test"}'
    header = wh.signature_header(["new-secret", "old-secret"], 1700000000, body)
    assert header.count(",") == 1
    for secret in ("new-secret", "old-secret"):
        assert wh.verify_signature(secret, 1700000000, body, header, now=1700000000)
    assert not wh.verify_signature("third", 1700000000, body, header, now=1700000000)


@given(secret=st.text(min_size=1, max_size=80), body=st.binary(max_size=4096),
       timestamp=st.integers(min_value=0, max_value=2**40), skew=st.integers(min_value=-300, max_value=300))
def test_signature_round_trips_for_any_body(secret: str, body: bytes, timestamp: int, skew: int) -> None:
    header = wh.signature_header([secret], timestamp, body)
    assert len(header) == 64 and header == header.lower()
    assert wh.verify_signature(secret, str(timestamp), body, header, now=timestamp + skew)


@given(body=st.binary(min_size=1, max_size=512), flip=st.integers(min_value=0, max_value=511))
def test_any_changed_byte_breaks_the_signature(body: bytes, flip: int) -> None:
    header = wh.sign("s3cret", 1700000000, body)
    index = flip % len(body)
    tampered = body[:index] + bytes([body[index] ^ 0x01]) + body[index + 1:]
    assert not wh.verify_signature("s3cret", 1700000000, tampered, header, now=1700000000)


def test_catalogue_has_every_documented_event_the_emitted_knowledge_events_and_the_test_event() -> None:
    documented = {
        "call.started", "call.answered", "call.ended", "call.completed", "call.failed", "call.transferred",
        "campaign.started", "campaign.paused", "campaign.completed", "campaign.failed", "contact.completed",
        "contact.failed", "appointment.booked", "appointment.cancelled", "appointment.rescheduled", "webhook.test",
    }
    knowledge = {"knowledge_base.created", "knowledge_base.updated", "knowledge_base.deleted",
                 "knowledge_base.attached", "knowledge_base.detached", "document.ready", "document.deleted"}
    added = {"lead.created", "sms.sent", "sms.delivered", "sms.failed", "sms.received", "usage.threshold",
             "trigger.failed", "subscription.updated", "invoice.created", "invoice.paid", "invoice.payment_failed"}
    assert set(events.CATALOGUE) == documented | knowledge | added
    assert all(e.description and "\n" not in e.description for e in events.EventType)
    assert events.EventType("contact.failed").group == "campaigns"
    assert events.EventType("document.ready").group == "knowledge_bases"
    assert events.EventType("lead.created").group == "leads"
    assert events.EventType("sms.received").group == "sms"


def test_event_factory_refuses_names_outside_the_catalogue() -> None:
    e = events.event(7, "appointment.booked", {"appointment_id": 1})
    assert (e.organization_id, e.type, e.data) == (7, "appointment.booked", {"appointment_id": 1})
    with pytest.raises(ValueError):
        events.event(7, "appointment.exploded")
    with pytest.raises(ValueError):
        events.event(7, "webhook.test")


def test_events_are_validated_and_deduplicated() -> None:
    assert wh.normalize_events(["call.ended", "call.started", "call.ended"]) == ("call.ended", "call.started")
    with pytest.raises(ValidationFailed) as unknown:
        wh.normalize_events(["call.ended", "call.exploded"])
    assert "call.exploded" in unknown.value.details["validation_errors"]["events"]
    with pytest.raises(ValidationFailed):
        wh.normalize_events([])


@pytest.mark.parametrize("url", [
    "ftp://example.com/x", "http://", "http://user:pw@example.com/", "http://example.com:22/", "not a url",
    "http://exa mple.com/",
])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ValidationFailed):
        wh.check_target(url, allow_loopback=False)


@pytest.mark.parametrize("url", [
    "http://10.0.0.1/hook", "http://169.254.169.254/latest", "http://[::1]/", "http://127.0.0.1/",
    "http://2130706433/", "http://localhost/hook", "http://api.localhost/", "http://[::ffff:192.168.0.1]/",
])
def test_private_and_reserved_targets_are_blocked(url: str) -> None:
    with pytest.raises(BlockedAddress):
        wh.check_target(url, allow_loopback=False)


def test_loopback_and_any_port_only_in_development_mode() -> None:
    assert wh.check_target("http://127.0.0.1:54321/hook", allow_loopback=True) == "http://127.0.0.1:54321/hook"
    assert wh.check_target("http://localhost:8080/x", allow_loopback=True) == "http://localhost:8080/x"
    with pytest.raises(BlockedAddress):
        wh.check_target("http://10.1.2.3:8080/x", allow_loopback=True)
    assert wh.check_target("HTTPS://Example.COM/hooks?a=1", allow_loopback=False) == "https://example.com/hooks?a=1"


def test_default_name_comes_from_the_url() -> None:
    assert wh.default_name("https://hooks.example.com/parley/in?token=1") == "hooks.example.com/parley/in"
    assert wh.default_name("https://example.com/") == "example.com"


def _sub(status: str = "active") -> wh.Subscription:
    return wh.Subscription(1, 1, "n", "https://example.com/", ("call.ended",), status=status, sealed_secret="s")


def test_pause_resume_and_disabled_moves() -> None:
    paused = _sub().move_to("paused", NOW)
    assert paused.status == "paused" and not paused.wants("call.ended")
    assert paused.move_to("paused", NOW) is paused
    resumed = paused.move_to("active", NOW)
    assert resumed.status == "active" and resumed.wants("call.ended") and not resumed.wants("call.started")
    revived = _sub("disabled").move_to("active", NOW)
    assert revived.status == "active" and revived.disabled_reason is None
    with pytest.raises(InvalidTransition):
        _sub().move_to("disabled", NOW)


def test_rotation_keeps_the_old_secret_for_the_grace_period() -> None:
    rotated = _sub().rotated("new", timedelta(hours=2), NOW)
    assert rotated.signing_secrets(NOW) == ("new", "s")
    assert rotated.signing_secrets(NOW + timedelta(hours=2)) == ("new",)
    assert _sub().rotated("new", timedelta(0), NOW).signing_secrets(NOW) == ("new",)


def test_retry_schedule_follows_the_documented_delays_with_jitter_and_scale() -> None:
    expected = [5, 300, 1800, 7200, 18000, 36000, 36000]
    assert [wh.retry_delay(n).total_seconds() for n in range(1, 8)] == expected
    assert wh.retry_delay(8) is None and wh.retry_delay(0) is None
    assert wh.retry_delay(1, jitter=1.0).total_seconds() == pytest.approx(5.5)
    assert wh.retry_delay(1, jitter=-1.0).total_seconds() == pytest.approx(4.5)
    assert wh.retry_delay(2, scale=0.01).total_seconds() == pytest.approx(3.0)
    assert sum(expected) / 3600 < 28  # one delivery gives up after about 27.6 hours


@given(attempt=st.integers(min_value=1, max_value=7), jitter=st.floats(min_value=-5, max_value=5))
def test_jitter_stays_within_ten_percent(attempt: int, jitter: float) -> None:
    base = wh.RETRY_DELAYS[attempt - 1]
    delay = wh.retry_delay(attempt, jitter=jitter)
    assert delay is not None and base * 0.9 <= delay <= base * 1.1


def _judge(status: int | None, attempt: int = 1, auto_retry: bool = True, retry_after: str | None = None,
           error: str | None = None) -> wh.Verdict:
    return wh.judge(attempt=attempt, auto_retry=auto_retry, status=status, error=error, retry_after=retry_after,
                    now=NOW, scale=1.0, jitter=0.0)


def test_verdicts() -> None:
    assert _judge(204).succeeded and _judge(204).delivery_status == "succeeded"
    failed = _judge(500)
    assert failed.delivery_status == "pending" and failed.next_attempt_at == NOW + timedelta(seconds=5)
    assert "500" in (failed.error or "")
    assert "redirect" in (_judge(302).error or "")
    assert _judge(None, error="the server did not answer in time").error == "the server did not answer in time"
    gone = _judge(410)
    assert gone.delivery_status == "failed" and gone.disable_reason
    assert _judge(500, attempt=8).delivery_status == "failed"
    assert _judge(500, auto_retry=False).delivery_status == "failed"
    assert _judge(429, retry_after="120").next_attempt_at == NOW + timedelta(seconds=120)
    assert _judge(503, retry_after="1").next_attempt_at == NOW + timedelta(seconds=5)  # never sooner than planned
    assert _judge(429, retry_after="999999").next_attempt_at == NOW + wh.MAX_RETRY_AFTER
    http_date = "Sun, 01 Mar 2026 12:10:00 GMT"
    assert _judge(503, retry_after=http_date).next_attempt_at == NOW + timedelta(minutes=10)
    assert _judge(500, retry_after="600").next_attempt_at == NOW + timedelta(seconds=5)  # only 429/503


def test_five_days_of_failures() -> None:
    assert not wh.failing_too_long(None, NOW)
    assert not wh.failing_too_long(NOW - timedelta(days=4, hours=23), NOW)
    assert wh.failing_too_long(NOW - timedelta(days=5), NOW)
    assert "5 days" in wh.failure_reason(NOW, "HTTP 500")


def test_body_is_compact_json_with_event_timestamp_and_data() -> None:
    body = wh.delivery_body("call.ended", NOW, {"call_id": "c1", "name": "Zoë"})
    expected = '{"event":"call.ended","timestamp":"2026-03-01T12:00:00.000Z","data":{"call_id":"c1","name":"Zoë"}}'
    assert body == expected.encode()
