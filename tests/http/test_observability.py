"""What a Parley process logs and exposes: one JSON object per line, with the request's fields on every
request line and the job's on every job line; no secret the run created ever appears in the logs; the
metrics at GET /metrics (behind PARLEY_METRICS_TOKEN, not in the OpenAPI document)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from entrypoints.cli import create_user
from entrypoints.ioc import build_container
from entrypoints.observability import _SECRET_SHAPES, REDACTED, redact
from entrypoints.runtime import QUIET_LOGGERS, configure_logging
from entrypoints.worker import make_runner
from tests.support.apps import Api, ApiFactory

PASSWORD = "correct-Horse-battery-staple-42"
PROVIDER_TOKEN = "tw-auth-token-9f8e7d6c5b4a"


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    """The logging `parley serve` sets up (JSON lines), at DEBUG, written to a buffer."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    stream = io.StringIO()
    configure_logging("DEBUG", "json", stream)
    try:
        yield stream
    finally:
        root.handlers[:], level, quiet = saved
        root.setLevel(level)
        for name, value in quiet.items():
            logging.getLogger(name).setLevel(value)


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


@pytest.mark.slow
async def test_no_secret_created_in_a_run_reaches_the_logs(api: Api, captured_logs: io.StringIO) -> None:
    t = await api.tenant()
    secrets: list[str] = [t.key]
    key = await api.client.post("/v2/api-keys", json={"name": "crm", "scopes": ["agents:read"]}, headers=t.headers)
    assert key.status_code == 201, key.text
    secrets.append(key.json()["data"]["key"])
    rotated = await api.client.post(f"/v2/api-keys/{key.json()['data']['id']}/rotate",
                                    json={"grace_period_hours": 1}, headers=t.headers)
    assert rotated.status_code in (200, 201), rotated.text
    secrets.append(rotated.json()["data"]["key"])
    hook = await api.client.post("/v2/webhooks", json={"url": "https://hooks.example.com/p", "events": ["call.ended"]},
                                 headers=t.headers)
    assert hook.status_code == 201, hook.text
    secrets.append(hook.json()["data"]["secret"])
    provider = await api.client.post("/v2/telephony/providers", json={
        "name": "Vonage US", "type": "vonage", "credentials": {"api_key": "AC123", "api_secret": PROVIDER_TOKEN},
        "settings": {}}, headers=t.headers)
    assert provider.status_code == 201, provider.text
    secrets.append(PROVIDER_TOKEN)
    await create_user(api.settings, t.organization_id, "ops@example.com", PASSWORD)
    secrets.append(PASSWORD)
    # a refused key and a failing request are logged too
    assert (await api.client.get("/v2/agents", headers={"Authorization": "Bearer parley_sk_notakey"})).status_code \
        == 401
    container = build_container(api.settings)
    try:
        runner = await make_runner(container, api.settings)
        await runner.start()
        await runner.run_due()
    finally:
        await container.close()

    text = captured_logs.getvalue()
    lines = _lines(captured_logs)
    assert any(line.get("route") == "/v2/webhooks" for line in lines)
    assert any("job_kind" in line for line in lines), "the job runner wrote job lines"
    for secret in secrets:
        assert secret not in text, secret


async def test_a_request_line_carries_the_request_fields(api: Api, captured_logs: io.StringIO) -> None:
    t = await api.tenant()
    agent = await api.client.get("/v2/agents/999999", headers={**t.headers, "X-Request-Id": "req-observed-1"})
    assert agent.status_code == 404
    [line] = [x for x in _lines(captured_logs) if x.get("request_id") == "req-observed-1"
              and x["logger"] == "parley.http.request"]
    assert line["route"] == "/v2/agents/{id}" and line["method"] == "GET" and line["status"] == 404
    assert line["organization_id"] == t.organization_id and line["outcome"] == "rejected"
    assert isinstance(line["duration_ms"], float) and line["level"] == "info"


async def test_the_logged_route_is_the_template_the_client_used(api: Api, captured_logs: io.StringIO) -> None:
    t = await api.tenant()
    sent = {"/v2/agents/7": "/v2/agents/{id}", "/api/v2/agents/7": "/api/v2/agents/{id}", "/v2/health": "/v2/health",
            "/api/v2/health": "/api/v2/health", "/widget.js": "/widget.js", "/v2/widget.js": "/v2/widget.js",
            "/v2/nothing-here": "unmatched"}
    for path in sent:
        await api.client.get(path, headers={**t.headers, "X-Request-Id": f"route-{abs(hash(path))}"})
    logged = {x["request_id"]: x for x in _lines(captured_logs) if x["logger"] == "parley.http.request"}
    for path, route in sent.items():
        line = logged[f"route-{abs(hash(path))}"]
        assert line["route"] == route, (path, line)
        assert line["message"].split()[1] == route, (path, line)


async def test_a_job_line_carries_the_job_fields(api: Api, captured_logs: io.StringIO) -> None:
    container = build_container(api.settings)
    try:
        runner = await make_runner(container, api.settings)
        await runner.start()
        assert await runner.run_due() > 0
    finally:
        await container.close()
    jobs = [x for x in _lines(captured_logs) if x["logger"] == "parley.jobs" and "job_kind" in x]
    assert jobs and all({"job_id", "outcome", "duration_ms", "attempt"} <= set(x) for x in jobs)
    assert {x["outcome"] for x in jobs} <= {"ok", "retry", "failed"}


def test_known_secret_shapes_are_redacted() -> None:
    hexed = "ab" * 32
    line = redact(f"key parley_sk_Abc123XYZ sent, Authorization: Bearer tok.en-1 password=hunter2 {hexed} "
                  "postgresql://app:pw0rd@db/x")
    for secret in ("Abc123XYZ", "tok.en-1", "hunter2", hexed, "pw0rd"):
        assert secret not in line
    assert line.count(REDACTED) == 5


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["parley_sk_", "abc", "Bearer ", "basic x", "token=", "PASSWORD: ", "'secret'",
                                 "0123456789abcdef" * 3, "://user:", "pw@", "host/", " ", ",", "\"", "=", "é"]))
       .map("".join) | st.text())
def test_redaction_with_its_first_look_matches_every_shape_applied(text: str) -> None:
    slow = text
    for pattern, replacement in _SECRET_SHAPES:
        slow = pattern.sub(replacement, slow)
    assert redact(text) == slow


@pytest.mark.slow
async def test_metrics_need_the_token_and_count_requests_by_route(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, metrics_token="scrape-token-1")
    t = await api.tenant()
    assert (await api.client.get("/v2/agents/424242", headers=t.headers)).status_code == 404
    assert (await api.client.get("/metrics")).status_code == 401
    assert (await api.client.get("/metrics", headers={"Authorization": "Bearer wrong"})).status_code == 401
    scraped = await api.client.get("/metrics", headers={"Authorization": "Bearer scrape-token-1"})
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(scraped.text)}
    requests = [s for s in families["parley_http_requests"].samples if s.name == "parley_http_requests_total"]
    assert any(s.labels == {"route": "/api/v2/agents/{id}", "method": "GET", "status": "404"} and s.value >= 1
               for s in requests)
    assert "parley_http_request_duration_seconds" in families
    for gauge in ("parley_outbox_backlog", "parley_outbox_oldest_age_seconds", "parley_dialer_in_flight",
                  "parley_dialer_due"):
        assert gauge in families, gauge
    document = (await api.client.get("/v2/openapi.json")).json()
    assert "/metrics" not in document["paths"] and "/api/v2/metrics" not in document["paths"]


async def test_metrics_are_not_served_without_a_token(api: Api) -> None:
    assert api.settings.metrics_token == ""
    assert (await api.client.get("/metrics", headers={"Authorization": "Bearer "})).status_code == 404


def _sample(text: str, name: str, labels: dict[str, str]) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


async def test_a_rate_limit_refusal_is_counted(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, metrics_token="scrape-token-2", rate_limit_per_minute=1)
    auth = {"Authorization": "Bearer scrape-token-2"}
    before = _sample((await api.client.get("/metrics", headers=auth)).text, "parley_rate_limit_refusals_total",
                     {"reason": "rate_limit"})
    t = await api.tenant()
    assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 200
    assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 429
    after = _sample((await api.client.get("/metrics", headers=auth)).text, "parley_rate_limit_refusals_total",
                    {"reason": "rate_limit"})
    assert after == before + 1


MULTIPROCESS_CHILD = """
from entrypoints.observability import count_request
count_request("/api/v2/agents", "GET", 200, 0.01)
"""
MULTIPROCESS_SCRAPE = """
from entrypoints.observability import render
print(render().decode())
"""


@pytest.mark.slow  # three Python processes
def test_multiprocess_mode_adds_up_every_process(tmp_path: Path) -> None:
    """With PROMETHEUS_MULTIPROC_DIR, a scrape in one process shows what two other processes counted."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", MULTIPROCESS_CHILD], env=env, check=True, timeout=60)
    scraped = subprocess.run([sys.executable, "-c", MULTIPROCESS_SCRAPE], env=env, check=True, timeout=60,
                             capture_output=True, text=True).stdout
    assert _sample(scraped, "parley_http_requests_total",
                   {"route": "/api/v2/agents", "method": "GET", "status": "200"}) == 2


def _others(text: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "parley_http_requests_total" and sample.labels["method"] == "other")


def _series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(sample.name, tuple(sorted(sample.labels.items())))
            for family in text_string_to_metric_families(text) for sample in family.samples}


async def test_invented_methods_add_no_series_and_no_created_twins(make_api: ApiFactory, sqlite_url: str) -> None:
    """An anonymous client sending twenty invented methods (one of them 2,000 characters long) makes at most the
    ``other`` series of the routes it hit; no counter has a ``_created`` twin."""
    api = await make_api(sqlite_url, metrics_token="scrape-token-3")
    auth = {"Authorization": "Bearer scrape-token-3"}
    await api.client.request("FROBNICATE", "/v2/agents")  # the one series of an unknown method on this route
    await api.client.get("/metrics", headers=auth)  # the scrape's own series exist from here on
    before = (await api.client.get("/metrics", headers=auth)).text
    invented = [f"INVENTED{n}" for n in range(19)] + ["X" * 2000]
    for method in invented:
        response = await api.client.request(method, "/v2/agents")
        assert response.status_code in (400, 401, 405), (method[:20], response.status_code)
    after = (await api.client.get("/metrics", headers=auth)).text
    assert _series(after) == _series(before)
    assert not any(method in after for method in invented)
    assert _others(after) == _others(before) + len(invented)
    assert "_created" not in after


async def test_the_metrics_401_carries_the_headers_of_every_response(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, metrics_token="scrape-token-4")
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        refused = await api.client.get("/metrics", headers={**headers, "X-Request-ID": "scrape-1"})
        assert refused.status_code == 401
        assert refused.headers["x-request-id"] == "scrape-1"
        assert refused.headers["x-content-type-options"] == "nosniff"
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.headers["cache-control"] == "no-store"
        body = refused.json()
        assert body["success"] is False and body["error"]["code"] in ("MISSING_AUTH", "INVALID_METRICS_TOKEN")
    generated = await api.client.get("/metrics")
    assert generated.headers["x-request-id"] != "scrape-1"


async def test_carrier_tokens_and_signatures_never_reach_the_logs(tmp_root: Path, app_pool: Any, sqlite_url: str,
                                                                  captured_logs: io.StringIO) -> None:
    """A Twilio provider's auth token, and the X-Twilio-Signature of every callback (good or forged), appear in no
    log line, while the provider is created, a call is dialled, its callbacks are received and an SMS is sent."""
    from tests.http import calls_support
    from tests.http.twilio_support import app, twilio_line
    from tests.support.emulators.twilio import TwilioEmulator

    emulator = TwilioEmulator(auth_token="tw-secret-auth-token-5e4d3c2b1a09").start()
    try:
        async for api_with in calls_support.apps_with_providers(tmp_root, app_pool):
            api, tokens = await app(api_with, sqlite_url)
            line, agent = await twilio_line(api, tokens, emulator)
            placed = await calls_support.place(api, line.tenant, agent, "+14155550123")
            await calls_support.drive(api, line.tenant.organization_id)
            call = emulator.only_call()
            url = call.status_callback or ""
            signatures = []
            for status in ("ringing", "in-progress", "completed"):
                params = emulator.status_params(call, status)
                signatures.append(emulator.sign(url, params)["X-Twilio-Signature"])
                await emulator.send(url, params)
            forged = emulator.status_params(call, "completed")
            signatures.append(emulator.sign(url, forged, forged=True)["X-Twilio-Signature"])
            assert (await emulator.send(url, forged, forged=True)).status_code == 403
            sent = await api.client.post("/v2/sms", headers=line.tenant.headers, json={"to": "+14155550123",
                                                                                          "body": "Hi"})
            assert placed.status_code == 201 and sent.status_code == 201
            await calls_support.close_workers()
    finally:
        emulator.stop()
    text = captured_logs.getvalue()
    assert "carriers" in text or "/v2/carriers" in text or text, "the run logged"
    for secret in (emulator.auth_token, *signatures):
        assert secret not in text, secret
