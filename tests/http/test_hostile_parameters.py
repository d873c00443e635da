"""Property test: every route's path, query and header parameters, driven with hostile values (huge and
negative integers, Unicode digits, instants at and beyond the ends of the calendar, odd text), never
produce a server error, and every refusal comes in the JSON error envelope.

The parameters are read from the served OpenAPI document, so routes added later are covered. The
requests go through the real app (the test client on the test's event loop); hypothesis runs in a
thread and waits for each response. Bounded: ``PARLEY_HOSTILE_EXAMPLES`` examples per backend, shared
by the operations (PostgreSQL gets half).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.apps import Api, ApiFactory

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("PARLEY_HOSTILE_EXAMPLES", "400"))
SWEEP = ["\u00b2", "\u0661\u0662", "9" * 26, str(2**63), "-1", "0001-01-01T00:00:00+14:00",
         "9999-12-31T23:59:59-14:00", "2026-01-05T09:00:00", "\u00e9", "\u20ac", "", "a" * 300]
_UNIT = 1_000_000  # integers below this could name a real row (or the key in use): left to the other tests

HOSTILE_WORDS = [
    "\u00b2", "\u0661\u0662", "\u06f1", "\U0001d7d9", "\u0967\u0968", "\u216b", "\u00bd",
    "9" * 26, "-1", "0", "-0", "+1", " 1", "1 ", "0x10", "1e309", "1.5",
    "NaN", "Infinity", str(2**53), str(2**53 + 1), str(2**63 - 1), str(2**63), str(2**64), "-" + "9" * 30,
    "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
    "0000-00-00T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-05T09:00:00+24:00", "2026-01-05T09:00:00",
    "2026-01-05", "0001-01-01", "9999-12-31", "10000-01-01T00:00:00Z", "2026-01-05T25:61:61Z",
    "", " ", "null", "true", "[]", "{}", "é", "€", "\u202e", "\ufeff", "a" * 300, "../..", "%", "%2F", ";", ",",
    "1,2", "Z", "T",
]
_hostile = st.one_of(
    st.sampled_from(HOSTILE_WORDS),
    st.sampled_from(HOSTILE_WORDS),
    st.integers(min_value=-(2**80), max_value=2**80).filter(lambda n: not 0 < n < _UNIT).map(str),
    st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=6),
    st.datetimes().map(lambda d: d.isoformat()) | st.builds(
        lambda d, h, m, sign: f"{d.isoformat(timespec='seconds')}{sign}{h:02d}:{m:02d}",
        st.datetimes(), st.integers(0, 30), st.integers(0, 70), st.sampled_from("+-")),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12),
)


def _operations(document: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    found = []
    for path, item in sorted(document["paths"].items()):
        for method, operation in sorted(item.items()):
            if isinstance(operation, dict) and "responses" in operation:
                parameters = [p for p in operation.get("parameters", []) if p["in"] in ("path", "query", "header")]
                found.append((method.upper(), path, parameters))
    return found


def _header_value(value: str) -> str | bytes:
    return value if value.isascii() else value.encode()  # as a raw client would send it: UTF-8 bytes


async def test_hostile_parameters_never_cause_a_server_error(make_api: ApiFactory, sql_url: str) -> None:
    api: Api = await make_api(sql_url, rate_limit_per_minute=10_000_000, rate_limit_per_hour=100_000_000)
    tenant = await api.tenant(plan="enterprise", org_type="partner")
    document = (await api.client.get("/v2/openapi.json")).json()
    operations = _operations(document)
    assert len(operations) >= 20
    loop = asyncio.get_running_loop()
    failures: list[str] = []

    def wait(coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=60)

    share = 1.0 if sql_url.startswith("sqlite") else 0.5
    per_operation = max(6, int(EXAMPLES * share) // len(operations))

    def fuzz(method: str, path: str, parameters: list[dict[str, Any]]) -> None:
        @given(data=st.data())
        @settings(max_examples=per_operation, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
                  print_blob=False)
        def run(data: st.DataObject) -> None:
            url, query, headers = path, {}, dict(tenant.headers)
            for parameter in parameters:
                required = parameter["in"] == "path" or parameter.get("required", False)
                if not required and not data.draw(st.booleans(), label=f"send {parameter['name']}"):
                    continue
                value = data.draw(_hostile, label=parameter["name"])
                if parameter["in"] == "path":
                    if parameter.get("schema", {}).get("type") == "string":  # file names: <id>.wav, <token>.ics
                        value += data.draw(st.sampled_from(["", ".wav", ".ics"]), label="extension")
                    url = url.replace("{" + parameter["name"] + "}", quote(value, safe="") or "%20")
                elif parameter["in"] == "query":
                    query[parameter["name"]] = value
                else:
                    headers[parameter["name"]] = _header_value(value)  # type: ignore[assignment]
            send(method, url, query, headers)

        run()

    def send(method: str, url: str, query: dict[str, str], headers: dict[str, Any]) -> None:
        response: httpx.Response = wait(api.client.request(method, "/v2" + url, params=query, headers=headers))
        sent = {k: v for k, v in headers.items() if k != "Authorization"}
        label = f"{method} {url} query={query!r} headers={sent!r}"
        if response.status_code >= 500:
            failures.append(f"{label}: {response.status_code} {response.text[:200]}")
        elif response.status_code >= 400 and response.headers.get("content-type", "").startswith("application/json"):
            body = response.json()
            if body.get("success") is not False or "error" not in body:
                failures.append(f"{label}: {response.status_code} outside the envelope: {response.text[:200]}")
        elif response.status_code >= 400:
            failures.append(f"{label}: {response.status_code} without a JSON body")

    def sweep(method: str, path: str, parameters: list[dict[str, Any]]) -> None:
        """Each parameter alone, with each of the sharpest values (the others unknown but well-formed)."""
        for target in parameters:
            for word in SWEEP:
                for extension in (["", ".wav"] if target.get("schema", {}).get("type") == "string"
                                  and target["in"] == "path" else [""]):
                    url, query, headers = path, {}, dict(tenant.headers)
                    for parameter in parameters:
                        if parameter is target:
                            value: str = word + extension
                        elif parameter["in"] == "path":
                            value = "999999" if parameter.get("schema", {}).get("type") == "integer" else "unknown"
                        else:
                            continue
                        if parameter["in"] == "path":
                            url = url.replace("{" + parameter["name"] + "}", quote(value, safe="") or "%20")
                        elif parameter["in"] == "query":
                            query[parameter["name"]] = value
                        else:
                            headers[parameter["name"]] = _header_value(value)
                    send(method, url, query, headers)

    def run_all() -> None:
        for method, path, parameters in operations:
            if parameters:
                sweep(method, path, parameters)
                fuzz(method, path, parameters)

    await asyncio.to_thread(run_all)
    assert not failures, "\n".join(failures[:20])
