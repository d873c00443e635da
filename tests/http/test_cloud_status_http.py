"""GET /cloud/status: each component measured (a database round trip, the worker's heartbeat, the outbox backlog,
the telephony health check, failing webhook subscriptions), degraded or down when it is, the overall status the
worst; a Bearer key with cloud:read or a dashboard session (a test authenticator stands for the session one), and
the heartbeat as a recurring job of the worker. Each test runs on a database of its own (the components read
platform-wide state), on SQLite and PostgreSQL, with a manual clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from dishka import Provider, Scope, provide

from adapters.memory.clock import ManualClock
from adapters.sql.cloud import SqlPlatformHealth
from adapters.sql.uow import SqlUnitOfWork
from application.accounts import CreateUser, CreateUserCommand
from application.cloud import RecordHeartbeat, RecordHeartbeatCommand
from application.outbox import CONSUMERS
from application.ports.accounts import OrganizationRepository
from application.ports.cloud import PlatformHealth
from application.ports.events import OutboxReader
from application.ports.platform import Clock, UnitOfWork
from application.ports.telephony import Telephony, TelephonyHealth
from application.ports.webhooks import SubscriptionRepository
from application.principals import Principal, PrincipalKind
from domain.events import event
from domain.scopes import ScopeSet
from entrypoints.features.cloud import KIND, CloudStatusSettings, heartbeat_job
from entrypoints.http.authentication import Refused, SessionAuthenticator
from entrypoints.ioc import build_container
from entrypoints.overrides import Pinned
from entrypoints.units import ScopedUnits
from entrypoints.worker import jobs, make_runner
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 1, 5, 9, tzinfo=UTC)
COOKIE = "parley_session"



class SessionsForTests(SessionAuthenticator):
    """Stands for the dashboard-session authenticator: a ``parley_session`` cookie it issued is a session."""

    def __init__(self) -> None:
        self.sessions: dict[str, Principal] = {}

    def open(self, principal: Principal) -> str:
        token = uuid.uuid4().hex
        self.sessions[token] = principal
        return token

    async def authenticate(self, scope: Any) -> Principal:
        cookies = [v.decode("latin-1") for k, v in scope["headers"] if k == b"cookie"]
        values = dict(part.strip().split("=", 1) for c in cookies for part in c.split(";") if "=" in part)
        token = values.get(COOKIE)
        if token is None:
            raise Refused("MISSING_AUTH", "A dashboard session is required")
        if token not in self.sessions:
            raise Refused("INVALID_SESSION", "The session is not valid", presented=True)
        return self.sessions[token]


class SteppingPing(SqlPlatformHealth):
    """The database round trip, taking ``latency`` on the manual clock (or failing)."""

    latency = timedelta(0)
    fails = False

    def __init__(self, uow: SqlUnitOfWork, clock: Clock) -> None:
        super().__init__(uow)
        self.clock = clock

    async def ping(self) -> None:
        if SteppingPing.fails:
            raise ConnectionError("the database did not answer")
        await super().ping()
        self.clock.advance(seconds=SteppingPing.latency.total_seconds())  # type: ignore[attr-defined]


class SteppingPingProvider(Provider):
    @provide(scope=Scope.REQUEST)
    def health(self, uow: SqlUnitOfWork, clock: Clock) -> PlatformHealth:
        return SteppingPing(uow, clock)


class FakeTelephony:
    def __init__(self) -> None:
        self.answer: TelephonyHealth | Exception = TelephonyHealth(ok=True, provider="fake")

    async def health(self) -> TelephonyHealth:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture(autouse=True)
def _reset_ping() -> Iterator[None]:
    SteppingPing.latency, SteppingPing.fails = timedelta(0), False
    yield
    SteppingPing.latency, SteppingPing.fails = timedelta(0), False


async def status(api: Api, headers: dict[str, str] | None = None, cookies: dict[str, str] | None = None
                 ) -> httpx.Response:
    return await api.client.get("/v2/cloud/status", headers={**(headers or {}), **as_header(cookies)})


def as_header(cookies: dict[str, str] | None) -> dict[str, str]:
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}


async def components(api: Api, tenant: Tenant) -> dict[str, Any]:
    response = await status(api, tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def in_admin(api: Api, work: Any) -> Any:
    async with api._admin()() as request:
        result = await work(request)
        await (await request.get(UnitOfWork)).commit()
    return result


async def beat(api: Api, process: str = "test-worker:1") -> datetime:
    container = api.worker()
    return await ScopedUnits(container).execute(RecordHeartbeat, RecordHeartbeatCommand(process))


async def consume_everything(api: Api) -> None:
    """Every outbox consumer has processed every event (as the worker would)."""
    async def work(request: Any) -> None:
        reader = await request.get(OutboxReader)
        for consumer in CONSUMERS:
            while events := await reader.pending(consumer, 1000):
                await reader.advance(consumer, events[-1].id, START)
    await in_admin(api, work)


async def record_events(api: Api, tenant: Tenant, count: int = 1) -> None:
    """Events recorded as a use case records them (committed to the outbox at the clock's now)."""
    async def work(request: Any) -> None:
        uow = await request.get(UnitOfWork)
        for n in range(count):
            uow.record(event(tenant.organization_id, "call.completed", {"call_id": f"c{n}"}))
    await in_admin(api, work)


async def healthy(make_api: ApiFactory, url: str, *overrides: Provider) -> tuple[Api, ManualClock, Tenant]:
    clock = ManualClock(START)
    api = await make_api(url, clock=clock, overrides=(SteppingPingProvider(), *overrides))
    tenant = await api.tenant(scopes=("cloud:read", "webhooks:write", "agents:write"))
    await beat(api)
    await consume_everything(api)
    return api, clock, tenant


async def test_a_healthy_platform_is_operational_and_measured(make_api: ApiFactory, private_sql_url: str) -> None:
    api, _clock, tenant = await healthy(make_api, private_sql_url)
    SteppingPing.latency = timedelta(milliseconds=7)
    data = await components(api, tenant)
    assert data == {
        "status": "operational",
        "checked_at": "2026-01-05T09:00:00Z",
        "components": {
            "database": {"status": "operational", "latency_ms": 7.0},
            "worker": {"status": "operational", "last_heartbeat_at": "2026-01-05T09:00:00Z"},
            "outbox": {"status": "operational", "pending": 0, "oldest_pending_seconds": 0.0},
            "telephony": {"status": "operational", "provider": "simulator"},
            "webhooks": {"status": "operational", "failing_subscriptions": 0},
        },
    }


async def test_the_database_is_degraded_when_slow_and_down_when_it_fails(make_api: ApiFactory,
                                                                         private_sql_url: str) -> None:
    api, _clock, tenant = await healthy(make_api, private_sql_url)
    SteppingPing.latency = timedelta(milliseconds=251)
    data = await components(api, tenant)
    assert data["components"]["database"] == {"status": "degraded", "latency_ms": 251.0}
    assert data["status"] == "degraded"
    SteppingPing.fails = True
    data = await components(api, tenant)
    assert data["components"]["database"] == {"status": "down", "latency_ms": None}
    assert data["status"] == "down"


async def test_the_worker_is_degraded_then_down_as_its_heartbeat_ages(
        make_api: ApiFactory, private_sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(private_sql_url, clock=clock, overrides=(SteppingPingProvider(),))
    tenant = await api.tenant(scopes=("cloud:read",))
    # no worker ever beat
    assert (await components(api, tenant))["components"]["worker"] == {"status": "down", "last_heartbeat_at": None}
    await beat(api, "a:1")
    clock.advance(seconds=30)
    await beat(api, "b:2")  # the newest heartbeat of any process counts
    clock.advance(seconds=61)
    worker = (await components(api, tenant))["components"]["worker"]
    assert worker == {"status": "degraded", "last_heartbeat_at": "2026-01-05T09:00:30Z"}
    clock.advance(seconds=240)  # 301 s after the newest heartbeat
    data = await components(api, tenant)
    assert data["components"]["worker"]["status"] == "down" and data["status"] == "down"
    await beat(api, "a:1")
    assert (await components(api, tenant))["components"]["worker"]["status"] == "operational"


async def test_the_outbox_is_degraded_then_down_while_events_wait_for_a_consumer(make_api: ApiFactory,
                                                                                  private_sql_url: str) -> None:
    api, clock, tenant = await healthy(make_api, private_sql_url)
    await record_events(api, tenant)
    await beat(api)
    outbox = (await components(api, tenant))["components"]["outbox"]
    assert outbox == {"status": "operational", "pending": 1, "oldest_pending_seconds": 0.0}
    clock.advance(seconds=61)
    await beat(api)
    outbox = (await components(api, tenant))["components"]["outbox"]
    assert outbox == {"status": "degraded", "pending": 1, "oldest_pending_seconds": 61.0}
    clock.advance(seconds=840)
    await beat(api)
    data = await components(api, tenant)
    assert data["components"]["outbox"]["status"] == "down" and data["status"] == "down"
    assert data["components"]["outbox"]["oldest_pending_seconds"] == 901.0
    await consume_everything(api)
    outbox = (await components(api, tenant))["components"]["outbox"]
    assert outbox == {"status": "operational", "pending": 0, "oldest_pending_seconds": 0.0}


async def test_a_long_backlog_is_degraded_however_young(make_api: ApiFactory, private_sql_url: str) -> None:
    clock = ManualClock(START)
    section = CloudStatusSettings(outbox_degraded_pending=1)
    api = await make_api(private_sql_url, clock=clock, overrides=(SteppingPingProvider(),), sections=(section,))
    tenant = await api.tenant(scopes=("cloud:read", "agents:write"))
    await beat(api)
    await consume_everything(api)
    await record_events(api, tenant, 2)
    outbox = (await components(api, tenant))["components"]["outbox"]
    assert outbox == {"status": "degraded", "pending": 2, "oldest_pending_seconds": 0.0}


async def test_failing_webhook_subscriptions_degrade_the_organizations_status(make_api: ApiFactory,
                                                                             private_sql_url: str) -> None:
    api, _clock, tenant = await healthy(make_api, private_sql_url)
    other = await api.tenant(scopes=("cloud:read",))
    ids = []
    for n in range(3):
        made = await api.client.post("/v2/webhooks", headers=tenant.headers,
                                     json={"url": f"http://127.0.0.1:9/hook{n}", "events": ["call.completed"]})
        assert made.status_code == 201, made.text
        ids.append(made.json()["data"]["id"])
    await consume_everything(api)
    assert (await components(api, tenant))["components"]["webhooks"] == {"status": "operational",
                                                                         "failing_subscriptions": 0}

    async def fail_two(request: Any) -> None:
        subs = await request.get(SubscriptionRepository)
        await subs.mark_failing(tenant.organization_id, ids[0], START)  # deliveries failing, still active
        disabled = await subs.get(tenant.organization_id, ids[1])
        await subs.update(replace(disabled, status="disabled", disabled_reason="the receiver answered 410",
                                  disabled_at=START))
    await in_admin(api, fail_two)
    data = await components(api, tenant)
    assert data["components"]["webhooks"] == {"status": "degraded", "failing_subscriptions": 2}
    assert data["status"] == "degraded"
    # another organization's subscriptions are none of its business
    assert (await components(api, other))["components"]["webhooks"]["failing_subscriptions"] == 0


async def test_the_telephony_health_check_decides_its_status(make_api: ApiFactory, private_sql_url: str) -> None:
    fake = FakeTelephony()
    api, _clock, tenant = await healthy(make_api, private_sql_url, Pinned(Telephony, fake))
    assert (await components(api, tenant))["components"]["telephony"] == {"status": "operational",
                                                                           "provider": "fake"}
    fake.answer = TelephonyHealth(ok=False, provider="fake", detail="carrier unreachable")
    data = await components(api, tenant)
    assert data["components"]["telephony"] == {"status": "down", "provider": "fake"}
    assert data["status"] == "down"
    fake.answer = TimeoutError("no answer")
    assert (await components(api, tenant))["components"]["telephony"] == {"status": "down", "provider": None}


async def test_a_bearer_key_needs_cloud_read(make_api: ApiFactory, private_sql_url: str) -> None:
    api, _clock, tenant = await healthy(make_api, private_sql_url)
    assert (await status(api, tenant.headers)).status_code == 200
    other = await api.key_for(tenant.organization_id, ("calls:read",))
    refused = await status(api, other.headers)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    wildcard = await api.key_for(tenant.organization_id, ("cloud:*",))
    assert (await status(api, wildcard.headers)).status_code == 200
    missing = await status(api)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "MISSING_AUTH"


async def test_a_dashboard_session_is_accepted_here_and_nowhere_else(
        make_api: ApiFactory, private_sql_url: str) -> None:
    sessions = SessionsForTests()
    api, _clock, tenant = await healthy(make_api, private_sql_url, Pinned(SessionAuthenticator, sessions))

    async def sign_in(request: Any) -> Principal:
        user_id = await (await request.get(CreateUser)).execute(
            CreateUserCommand(tenant.organization_id, "owner@example.com", "correct horse battery staple"))
        organization = await (await request.get(OrganizationRepository)).get(tenant.organization_id)
        return Principal(PrincipalKind.SESSION, organization, ScopeSet.of(["cloud:read", "billing:*"]),
                         user_id=user_id)
    principal = await in_admin(api, sign_in)
    cookie = {COOKIE: sessions.open(principal)}

    answered = await status(api, cookies=cookie)
    assert answered.status_code == 200, answered.text
    assert answered.json()["data"]["status"] == "operational"
    assert answered.headers.get("x-ratelimit-limit")  # a session spends its own rate-limit bucket
    unknown = await status(api, cookies={COOKIE: "forged"})
    assert unknown.status_code == 401 and unknown.json()["error"]["code"] == "INVALID_SESSION"
    # a key-only route refuses the same session: no Bearer key, whatever the cookie
    for path in ("/v2/agents", "/v2/webhooks"):
        refused = await api.client.get(path, headers=as_header(cookie))
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "MISSING_AUTH", refused.text
    # a session without the scope is refused like a key without it
    narrow = sessions.open(replace(principal, scopes=ScopeSet.of(["billing:read"])))
    refused = await status(api, cookies={COOKIE: narrow})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "INSUFFICIENT_SCOPE"


async def test_the_heartbeat_is_a_recurring_worker_job(make_api: ApiFactory, private_sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(private_sql_url, clock=clock, overrides=(SteppingPingProvider(),))
    tenant = await api.tenant(scopes=("cloud:read",))
    assert heartbeat_job in jobs()  # `parley worker` and the in-process worker of `parley serve` run it
    container = build_container(api.settings, *api.overrides)
    try:
        kind = heartbeat_job(container, api.settings)
        assert (kind.name, kind.recurring, kind.on_wake) == (KIND, True, False)
        runner = await make_runner(container, api.settings, kinds=[kind])
        await runner.start()
        assert await runner.run_due() == 1  # a fresh start beats at once
        worker = (await components(api, tenant))["components"]["worker"]
        assert worker == {"status": "operational", "last_heartbeat_at": "2026-01-05T09:00:00Z"}
        assert await runner.run_due() == 0
        clock.advance(seconds=14)
        assert await runner.run_due() == 0  # not before its period
        clock.advance(seconds=1)
        assert await runner.run_due() == 1
        worker = (await components(api, tenant))["components"]["worker"]
        assert worker == {"status": "operational", "last_heartbeat_at": "2026-01-05T09:00:15Z"}
        clock.advance(seconds=61)  # a worker that stopped running its jobs
        assert (await components(api, tenant))["components"]["worker"]["status"] == "degraded"
        assert await runner.run_due() == 1
        assert (await components(api, tenant))["components"]["worker"]["status"] == "operational"
    finally:
        await container.close()


def test_the_settings_section_reads_its_variables() -> None:
    from entrypoints.settings import load_section

    section = load_section(CloudStatusSettings, {"PARLEY_CLOUD_STATUS_WORKER_DEGRADED_SECONDS": "90",
                                                 "PARLEY_CLOUD_STATUS_HEARTBEAT_SECONDS": "5"})
    assert (section.worker_degraded_seconds, section.heartbeat_seconds) == (90.0, 5.0)
    assert section.thresholds().worker_degraded_seconds == 90.0
