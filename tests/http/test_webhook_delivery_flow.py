"""Events reach subscribers: a real loopback receiver, the HTTP API on a manual clock, and the
worker driven one pass at a time (dispatch, claim, send, record)."""

from __future__ import annotations

import json

from dishka import Provider, Scope, provide

from adapters.egress import HttpxSafeHttp
from application.ports.egress import ResolutionFailed
from application.ports.webhooks import WebhookHttp
from application.webhooks import WebhookPolicy
from domain.webhooks import verify_signature
from tests.support.apps import ApiFactory
from tests.support.receiver import Receiver, Reply
from tests.support.webhooks import Harness, make_harness


async def test_event_reaches_its_subscriber_signed_and_logged(harness: Harness) -> None:
    h = harness
    t, other = await h.api.tenant(), await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"], "/mine")
    await h.subscribe(t, ["call.started"], "/not-this-event")
    await h.subscribe(other, ["call.ended"], "/other-org")

    await h.emit(t.organization_id, "call.ended", {"call_id": "c-1", "duration_seconds": 42})
    await h.drain()

    assert [r.path for r in h.receiver.requests] == ["/mine"]
    got = h.receiver.requests[0]
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"] == "Parley-Webhooks/2.0"
    assert got.headers["x-webhook-event"] == "call.ended"
    assert got.webhook_id.startswith("msg_")
    timestamp = got.headers["x-webhook-timestamp"]
    assert int(timestamp) == int(h.clock.now().timestamp())
    assert verify_signature(hook["secret"], timestamp, got.body, got.headers["x-webhook-signature"],
                            now=h.clock.now())
    body = json.loads(got.body)
    assert body == {"event": "call.ended", "timestamp": "2026-01-05T09:00:00.000Z",
                    "data": {"call_id": "c-1", "duration_seconds": 42}}

    logs = await h.logs(t, hook["id"])
    assert len(logs) == 1
    log = logs[0]
    assert (log["status"], log["attempt"], log["event"], log["response_status"], log["response_body"]) == (
        "succeeded", 1, "call.ended", 200, "ok")
    assert log["message_id"] == got.webhook_id and log["webhook_id"] == hook["id"]  # the subscription's id
    assert log["next_retry_at"] is None and log["error"] is None
    assert await h.drain() == 0  # nothing is sent twice


async def test_500_then_200_is_retried_with_the_same_webhook_id(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["appointment.booked"])
    h.receiver.script("/hook", Reply(500, b"database down"))

    await h.emit(t.organization_id, "appointment.booked", {"appointment_id": 9})
    await h.drain()
    assert len(h.receiver.requests) == 1
    [failed] = await h.logs(t, hook["id"])
    assert (failed["status"], failed["response_status"], failed["response_body"]) == ("failed", 500, "database down")
    assert "500" in failed["error"]
    retry_at = failed["next_retry_at"]
    assert retry_at is not None

    await h.drain()  # not due yet
    assert len(h.receiver.requests) == 1
    h.clock.advance(seconds=6)  # the first retry comes after about 5 s (±10 %)
    await h.drain()
    first, second = h.receiver.requests
    assert first.webhook_id == second.webhook_id
    assert first.body == second.body
    assert second.headers["x-webhook-timestamp"] != first.headers["x-webhook-timestamp"]  # signed anew
    assert verify_signature(hook["secret"], second.headers["x-webhook-timestamp"], second.body,
                            second.headers["x-webhook-signature"], now=h.clock.now())
    logs = await h.logs(t, hook["id"])
    assert [(x["attempt"], x["status"]) for x in logs] == [(2, "succeeded"), (1, "failed")]
    assert [x["id"] for x in await h.logs(t, hook["id"], "&status=failed")] == [logs[1]["id"]]
    assert (await h.hook(t, hook["id"]))["failing_since"] is None
    h.clock.advance(hours=12)
    assert await h.drain() == 0


async def test_failing_delivery_gives_up_after_the_schedule(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.failed"])
    h.receiver.default = Reply(503, b"nope")
    await h.emit(t.organization_id, "call.failed", {})
    for delay in (0, 5, 300, 1800, 7200, 18000, 36000, 36000):
        h.clock.advance(seconds=delay * 1.11)
        await h.drain()
    logs = await h.logs(t, hook["id"])
    assert [x["attempt"] for x in logs] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert logs[0]["next_retry_at"] is None and all(x["next_retry_at"] for x in logs[1:])
    h.clock.advance(days=3)
    await h.drain()
    assert len(h.receiver.requests) == 8
    assert (await h.hook(t, hook["id"]))["status"] == "active"  # about 28 hours of failures: not yet 5 days


async def test_paused_subscription_gets_nothing_and_resumes_from_then_on(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["contact.completed", "contact.failed"])
    h.receiver.script("/hook", Reply(500))
    await h.emit(t.organization_id, "contact.failed", {"n": 0})
    await h.drain()  # fails; a retry is scheduled
    r = await h.client.patch(f"/v2/webhooks/{hook['id']}", json={"status": "paused"}, headers=t.headers)
    assert r.json()["data"]["status"] == "paused"

    await h.emit(t.organization_id, "contact.completed", {"n": 1})  # while paused
    h.clock.advance(minutes=1)
    await h.drain()
    assert len(h.receiver.requests) == 1  # neither the retry nor the new event

    await h.client.patch(f"/v2/webhooks/{hook['id']}", json={"status": "active"}, headers=t.headers)
    await h.drain()
    assert len(h.receiver.requests) == 1  # events from the pause are never delivered later
    await h.emit(t.organization_id, "contact.completed", {"n": 2})
    await h.drain()
    assert [json.loads(x.body)["data"]["n"] for x in h.receiver.requests] == [0, 2]
    secret_still_works = h.receiver.requests[-1]
    assert verify_signature(hook["secret"], secret_still_works.headers["x-webhook-timestamp"],
                            secret_still_works.body, secret_still_works.headers["x-webhook-signature"],
                            now=h.clock.now())


async def test_fan_out_happens_at_dispatch_time(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    await h.emit(t.organization_id, "campaign.started", {"campaign_id": 1})
    hook = await h.subscribe(t, ["campaign.started"])  # subscribed after the event, before its dispatch
    await h.drain()
    assert len(h.receiver.requests) == 1
    await h.client.patch(f"/v2/webhooks/{hook['id']}", json={"status": "paused"}, headers=t.headers)
    await h.emit(t.organization_id, "campaign.started", {"campaign_id": 2})
    await h.drain()  # dispatched while paused: nothing, ever
    await h.client.patch(f"/v2/webhooks/{hook['id']}", json={"status": "active"}, headers=t.headers)
    await h.drain()
    assert len(h.receiver.requests) == 1


async def test_410_disables_the_subscription_with_a_reason(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"])
    h.receiver.script("/hook", Reply(410, b"gone"))
    await h.emit(t.organization_id, "call.ended", {})
    await h.drain()
    got = await h.hook(t, hook["id"])
    assert got["status"] == "disabled" and "410" in got["disabled_reason"] and got["disabled_at"]
    [log] = await h.logs(t, hook["id"])
    assert log["status"] == "failed" and log["next_retry_at"] is None
    await h.emit(t.organization_id, "call.ended", {})
    h.clock.advance(hours=1)
    await h.drain()
    assert len(h.receiver.requests) == 1
    refused = await h.client.post(f"/v2/webhooks/{hook['id']}/test", headers=t.headers)
    assert refused.status_code == 409
    revived = await h.client.patch(f"/v2/webhooks/{hook['id']}", json={"status": "active"}, headers=t.headers)
    assert revived.json()["data"]["status"] == "active" and revived.json()["data"]["disabled_reason"] is None


async def test_429_retry_after_delays_the_next_attempt(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"])
    h.receiver.script("/hook", Reply(429, headers=(("Retry-After", "120"),)))
    await h.emit(t.organization_id, "call.ended", {})
    await h.drain()
    [log] = await h.logs(t, hook["id"])
    assert log["response_status"] == 429
    h.clock.advance(seconds=100)
    await h.drain()
    assert len(h.receiver.requests) == 1
    h.clock.advance(seconds=21)
    await h.drain()
    assert len(h.receiver.requests) == 2


async def test_redirects_are_failures_and_not_followed(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"])
    h.receiver.script("/hook", Reply(302, headers=(("Location", "/elsewhere"),)))
    await h.emit(t.organization_id, "call.ended", {})
    await h.drain()
    assert [r.path for r in h.receiver.requests] == ["/hook"]
    [log] = await h.logs(t, hook["id"])
    assert log["status"] == "failed" and log["response_status"] == 302 and "redirect" in log["error"]
    assert log["next_retry_at"] is not None


async def test_a_hanging_receiver_times_out(make_api: ApiFactory, fresh_sqlite_url: str, receiver: Receiver) -> None:
    h, jobs = await make_harness(make_api, fresh_sqlite_url, receiver,
                                 WebhookPolicy(allow_loopback=True, timeout_seconds=0.3))
    try:
        t = await h.api.tenant()
        hook = await h.subscribe(t, ["call.ended"])
        h.receiver.script("/hook", Reply(200, hang=1.5))
        await h.emit(t.organization_id, "call.ended", {})
        await h.drain()
        [log] = await h.logs(t, hook["id"])
        assert log["status"] == "failed" and log["response_status"] is None
        assert "time" in log["error"] and log["duration_ms"] < 1500 and log["next_retry_at"]
    finally:
        await jobs.close()


async def test_five_days_of_failures_disable_and_a_success_resets_the_streak(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    steady = await h.subscribe(t, ["call.ended"], "/steady")
    flaky = await h.subscribe(t, ["call.ended"], "/flaky")
    h.receiver.script("/steady", *[Reply(500)] * 100)
    h.receiver.script("/flaky", *[Reply(500)] * 8, Reply(200), *[Reply(500)] * 100)
    await h.emit(t.organization_id, "call.ended", {"day": 0})
    await h.drain()
    for _ in range(10):  # the first delivery fails through its whole schedule (about 28 hours)
        h.clock.advance(hours=10.5)
        await h.drain()
    assert (await h.hook(t, steady["id"]))["failing_since"] == "2026-01-05T09:00:00Z"
    h.clock.advance(days=1)
    await h.emit(t.organization_id, "call.ended", {"day": 5})  # /flaky answers 200 to this one
    await h.drain()
    assert (await h.hook(t, flaky["id"]))["failing_since"] is None
    h.clock.advance(days=1)
    await h.emit(t.organization_id, "call.ended", {"day": 6})
    await h.drain()
    dead = await h.hook(t, steady["id"])
    assert dead["status"] == "disabled" and "5 days" in dead["disabled_reason"]
    alive = await h.hook(t, flaky["id"])
    assert alive["status"] == "active" and alive["failing_since"] is not None


async def test_test_send_and_redelivery_keep_the_webhook_id(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"])
    queued = (await h.client.post(f"/v2/webhooks/{hook['id']}/test", headers=t.headers)).json()["data"]
    h.receiver.script("/hook", Reply(500))
    await h.drain()
    [sample] = h.receiver.requests
    assert sample.headers["x-webhook-event"] == "webhook.test" and sample.webhook_id == queued["message_id"]
    assert json.loads(sample.body)["data"]["subscription_id"] == hook["id"]
    [log] = await h.logs(t, hook["id"], "&event=webhook.test")
    assert log["status"] == "failed" and log["next_retry_at"] is None  # a test is one attempt
    h.clock.advance(hours=1)
    await h.drain()
    assert len(h.receiver.requests) == 1

    again = await h.client.post(f"/v2/webhooks/{hook['id']}/logs/{log['id']}/redeliver", headers=t.headers)
    assert again.status_code == 202 and again.json()["data"]["message_id"] == queued["message_id"]
    assert again.json()["data"]["webhook_id"] == queued["webhook_id"] == hook["id"]
    await h.drain()
    assert [r.webhook_id for r in h.receiver.requests] == [queued["message_id"]] * 2
    logs = await h.logs(t, hook["id"])
    assert [(x["attempt"], x["status"]) for x in logs] == [(2, "succeeded"), (1, "failed")]
    missing = await h.client.post(f"/v2/webhooks/{hook['id']}/logs/{log['id'] + 999}/redeliver", headers=t.headers)
    assert missing.status_code == 404


async def test_rotation_signs_with_both_secrets_during_the_grace_period(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"])
    rotated = (await h.client.post(f"/v2/webhooks/{hook['id']}/rotate-secret", json={"grace_period_hours": 1},
                                   headers=t.headers)).json()["data"]
    await h.emit(t.organization_id, "call.ended", {})
    await h.drain()
    got = h.receiver.requests[-1]
    signature, timestamp = got.headers["x-webhook-signature"], got.headers["x-webhook-timestamp"]
    assert len(signature.split(",")) == 2
    for secret in (rotated["secret"], hook["secret"]):
        assert verify_signature(secret, timestamp, got.body, signature, now=h.clock.now())
    h.clock.advance(hours=1, seconds=1)
    await h.emit(t.organization_id, "call.ended", {})
    await h.drain()
    got = h.receiver.requests[-1]
    assert "," not in got.headers["x-webhook-signature"]
    assert verify_signature(rotated["secret"], got.headers["x-webhook-timestamp"], got.body,
                            got.headers["x-webhook-signature"], now=h.clock.now())
    assert not verify_signature(hook["secret"], got.headers["x-webhook-timestamp"], got.body,
                                got.headers["x-webhook-signature"], now=h.clock.now())


async def test_deleted_subscription_pending_retries_are_cancelled(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"])
    h.receiver.script("/hook", Reply(500))
    await h.emit(t.organization_id, "call.ended", {})
    await h.drain()
    assert (await h.client.delete(f"/v2/webhooks/{hook['id']}", headers=t.headers)).status_code == 204
    h.clock.advance(minutes=10)
    await h.drain()
    assert len(h.receiver.requests) == 1


class _Resolver:
    """A DNS that answers a private address at send time (rebinding after creation)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        if host == "rebind.example":
            return ["10.0.0.7"]
        raise ResolutionFailed(host)


class _RebindingHttp(Provider):
    @provide(scope=Scope.APP)
    def http(self) -> WebhookHttp:
        return HttpxSafeHttp(_Resolver(), allow_loopback=True, user_agent="t")


async def test_targets_are_checked_again_at_send_time(make_api: ApiFactory, fresh_sqlite_url: str,
                                                      receiver: Receiver) -> None:
    h, jobs = await make_harness(make_api, fresh_sqlite_url, receiver, None, _RebindingHttp())
    try:
        t = await h.api.tenant()
        r = await h.client.post("/v2/webhooks", json={"url": "http://rebind.example:8080/in",
                                                      "events": ["call.ended"]}, headers=t.headers)
        hook = r.json()["data"]
        await h.emit(t.organization_id, "call.ended", {})
        await h.drain()
        [log] = await h.logs(t, hook["id"])
        assert log["status"] == "failed" and log["error"].startswith("blocked_address")
        assert log["response_status"] is None and log["next_retry_at"]
    finally:
        await jobs.close()


async def test_other_organizations_logs_and_redelivery_are_hidden(harness: Harness) -> None:
    h = harness
    a, b = await h.api.tenant(), await h.api.tenant()
    hook = await h.subscribe(a, ["call.ended"])
    await h.emit(a.organization_id, "call.ended", {})
    await h.drain()
    [log] = await h.logs(a, hook["id"])
    assert (await h.client.get(f"/v2/webhooks/{hook['id']}/logs", headers=b.headers)).status_code == 404
    other = await h.subscribe(b, ["call.ended"], "/b")
    r = await h.client.post(f"/v2/webhooks/{other['id']}/logs/{log['id']}/redeliver", headers=b.headers)
    assert r.status_code == 404


async def test_knowledge_base_events_can_be_subscribed_to_and_arrive_in_order(harness: Harness) -> None:
    h = harness
    t = await h.api.tenant()
    await h.subscribe(t, ["knowledge_base.created", "knowledge_base.updated", "knowledge_base.deleted"])
    agent = await h.client.post("/v2/agents", json={"name": "Desk", "prompt": "Answer."}, headers=t.headers)
    kb = (await h.client.post("/v2/knowledge-bases", json={"name": "FAQ", "agent_id": agent.json()["data"]["id"]},
                              headers=t.headers)).json()["data"]
    assert (await h.client.patch(f"/v2/knowledge-bases/{kb['id']}", json={"name": "Product FAQ"},
                                 headers=t.headers)).status_code == 200
    assert (await h.client.delete(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)).status_code == 204
    await h.drain()
    received = [json.loads(r.body) for r in h.receiver.requests]
    assert [b["event"] for b in received] == ["knowledge_base.created", "knowledge_base.updated",
                                              "knowledge_base.deleted"]
    assert {b["data"]["knowledge_base_id"] for b in received} == {kb["id"]}
