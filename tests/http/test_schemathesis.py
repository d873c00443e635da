"""Property-based fuzzing of the whole OpenAPI document with schemathesis.

Every operation the served document lists is exercised with generated requests sent through the
real ASGI app (the same event loop and test client as the other HTTP tests) with a full-access key
of an enterprise partner organization. No response may be a server error, and every response must
match what the document promises: status code, content type, headers and body schema.

Each operation gets schemathesis' coverage phase (deterministic boundary values), a positive and a
negative hypothesis pass, and, for paths with parameters, a positive pass pinned to freshly seeded
resources so that updates and actions run on real rows. Routes of later features are covered
automatically; give their resources a seed in ``_seed`` to have them fuzzed on real rows too.

The budget is a number of requests per backend shared by the operations (``Budget``), so the run
stays within a few minutes as routes are added; PostgreSQL gets half of SQLite's. Environment
overrides: ``PARLEY_FUZZ_EXAMPLES`` (positive examples per operation and pass),
``PARLEY_FUZZ_BUDGET`` and ``PARLEY_FUZZ_COVERAGE_BUDGET`` (totals per backend).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.apps import Api, ApiFactory, Tenant

pytestmark = pytest.mark.slow

FUZZ_BUDGET = int(os.environ.get("PARLEY_FUZZ_BUDGET", "600"))  # positive examples per backend
COVERAGE_BUDGET = int(os.environ.get("PARLEY_FUZZ_COVERAGE_BUDGET", "3000"))  # coverage cases per backend
BACKEND_SHARE = {"sqlite": 1.0, "postgresql": 0.5}
BASE_URL = "http://testserver.local/api/v2"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
HEALTH_CHECKS = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
                 HealthCheck.large_base_example]


@dataclass(frozen=True)
class Budget:
    """Per operation: positive examples (also for the seeded pass), negative examples, coverage cases."""

    examples: int
    negative: int
    coverage: int

    @classmethod
    def share(cls, operations: int, database_url: str) -> Budget:
        share = BACKEND_SHARE.get(database_url.split("+", 1)[0].split(":", 1)[0], 0.5)
        fixed = os.environ.get("PARLEY_FUZZ_EXAMPLES")
        examples = int(fixed) if fixed else min(25, max(5, int(FUZZ_BUDGET * share) // operations))
        coverage = min(100, max(10, int(COVERAGE_BUDGET * share) // operations))
        return cls(examples, max(2, examples // 3), coverage)


def _httpx_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """schemathesis prepares `requests` arguments; the app's test client speaks httpx."""
    out = {k: v for k, v in kwargs.items() if k in ("method", "url", "params", "json")}
    # negative cases put non-ASCII text in header parameters (Idempotency-Key): send it as UTF-8 bytes, as a
    # raw client could, instead of letting httpx refuse to encode it
    headers = dict(kwargs.get("headers") or {})
    if kwargs.get("cookies"):  # as the request's own Cookie header (httpx deprecates cookies per request)
        headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in kwargs["cookies"].items())
    out["headers"] = {name: value if not isinstance(value, str) or value.isascii() else value.encode()
                      for name, value in headers.items()}
    if "data" in kwargs:
        out["content"] = kwargs["data"]
    out["follow_redirects"] = False
    return out


async def _seed(api: Api, tenant: Tenant) -> dict[str, dict[str, Any]]:
    """Fresh resources for pinned path parameters, by path prefix."""
    c, h = api.client, tenant.headers
    # fuzzing PATCH /billing/subscription changes the organization's plan: the seeds below need enterprise
    restored = await c.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=h)
    assert restored.status_code == 200, restored.text
    agent = (await c.post("/v2/agents", json={"name": "Seeded"}, headers=h)).json()["data"]["id"]
    await c.post(f"/v2/agents/{agent}/publish", headers=h)
    org = (await c.post("/v2/organizations", json={"name": "Seeded child"}, headers=h)).json()["data"]["id"]
    spare = (await c.post("/v2/api-keys", json={"name": "spare", "scopes": ["agents:read"]},
                          headers=h)).json()["data"]["id"]
    campaign = (await c.post("/v2/campaigns", json={"name": "Seeded", "agent_id": agent},
                             headers=h)).json()["data"]["id"]
    await c.post(f"/v2/campaigns/{campaign}/contacts", json={"contacts": [{"phone": "+14155550100"}]}, headers=h)
    contact = (await c.get(f"/v2/campaigns/{campaign}/contacts", headers=h)).json()["data"][0]["id"]
    trigger = (await c.post("/v2/triggers", json={
        "name": "Seeded", "event": "call.ended", "conditions": {"all": [{"field": "data.status", "op": "eq",
                                                                         "value": "completed"}]},
        "actions": [{"type": "chat_message", "config": {"url": "https://hooks.example.com/x",
                                                        "text": "{{data.contact_name}}"}}]},
                          headers=h)).json()["data"]["id"]
    return {
        "/triggers/{id}": {"id": trigger},
        "/campaigns/{id}/contacts/{contactId}": {"id": campaign, "contactId": contact},
        "/campaigns/{id}": {"id": campaign},
        "/agents/{id}/versions/{version}": {"id": agent, "version": 1},
        "/agents/{id}": {"id": agent},
        "/organizations/{id}": {"id": org},
        "/api-keys/{id}": {"id": spare},
    }


def _pinned(path: str, seeds: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    for prefix, parameters in seeds.items():
        if path == prefix or path.startswith(prefix + "/"):
            return parameters
    return None


def _has_inputs(operation: Any) -> bool:
    definition = operation.definition.raw
    return bool(definition.get("parameters") or definition.get("requestBody") or "{" in operation.path)


def _fuzz(operation: Any, mode: GenerationMode, examples: int, path_parameters: dict[str, Any] | None,
          headers: dict[str, str], send: Callable[[dict[str, Any]], httpx.Response]) -> None:
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True, print_blob=False,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=HEALTH_CHECKS)
    def run(case: Any) -> None:
        kwargs = case.as_transport_kwargs(base_url=BASE_URL, headers=headers)
        response = send(kwargs)
        case.validate_response(response, checks=CHECKS, headers=kwargs["headers"])

    run()


def _cover(schema: Any, operation: Any, limit: int, headers: dict[str, str],
           send: Callable[[dict[str, Any]], httpx.Response]) -> list[str]:
    """schemathesis' coverage phase: deterministic boundary and near-boundary values (min - 1, max + 1,
    missing and extra fields, wrong types, unexpected methods) for every parameter and body field."""
    failures: list[str] = []
    config = schema.config.generation_for(operation=operation, phase="coverage")
    cases = list(schema.iter_coverage_cases(operation, generation_modes=list(GenerationMode),
                                            generation_config=config))
    stride = max(1, -(-len(cases) // limit))  # over budget: an even sample, every boundary kind has a chance
    for case in cases[::stride]:
        kwargs = case.as_transport_kwargs(base_url=BASE_URL, headers=headers)
        try:
            case.validate_response(send(kwargs), checks=CHECKS, headers=kwargs["headers"])
        except (Exception, BaseExceptionGroup) as exc:
            failures.append(str(exc))
            if len(failures) >= 3:
                break
    return failures


async def _fuzz_document(api: Api, tenant: Tenant) -> list[str]:
    document = (await api.client.get("/v2/openapi.json")).json()
    schema = schemathesis.openapi.from_dict(document)
    schema.config.update(base_url=BASE_URL)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, "the document lists fewer operations than the foundation serves"
    budget = Budget.share(len(operations), api.settings.database_url)
    loop = asyncio.get_running_loop()

    def wait(coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=120)

    def send(kwargs: dict[str, Any]) -> httpx.Response:
        return wait(api.client.request(**_httpx_arguments(kwargs)))  # type: ignore[no-any-return]

    failures: list[str] = []

    def run_all() -> None:
        for operation in operations:
            # a key of its own: fuzzing DELETE /api-keys/{id} may well revoke the key it runs with
            key = wait(api.key_for(tenant.organization_id, ("*",)))
            passes: list[tuple[str, GenerationMode, int, dict[str, Any] | None]] = [
                ("positive", GenerationMode.POSITIVE, budget.examples, None)]
            if _has_inputs(operation):
                passes.append(("negative", GenerationMode.NEGATIVE, budget.negative, None))
            if "{" in operation.path:
                pinned = _pinned(operation.path, wait(_seed(api, key)))
                if pinned is not None:
                    passes.append(("positive, seeded ids", GenerationMode.POSITIVE, budget.examples, pinned))
            failures.extend(f"{operation.label} (coverage): {failure}"
                            for failure in _cover(schema, operation, budget.coverage, key.headers, send))
            for name, mode, examples, path_parameters in passes:
                try:
                    _fuzz(operation, mode, examples, path_parameters, key.headers, send)
                except (Exception, BaseExceptionGroup) as exc:  # report every failing operation at once
                    failures.append(f"{operation.label} ({name}): {exc}")

    await asyncio.to_thread(run_all)
    return failures


async def test_every_operation_survives_fuzzing_and_conforms_to_the_document(make_api: ApiFactory,
                                                                          sql_url: str) -> None:
    api = await make_api(sql_url, rate_limit_per_minute=100_000, rate_limit_per_hour=1_000_000)
    tenant = await api.tenant(plan="enterprise", org_type="partner")
    failures = await _fuzz_document(api, tenant)
    assert not failures, "\n\n".join(failures)
