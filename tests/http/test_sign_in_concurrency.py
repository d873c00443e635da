"""The sign-in throttle under concurrency, on SQLite and PostgreSQL, through the real HTTP API.

Requests run through httpx's ASGITransport, so the ones gathered interleave on the test's event loop at every
database await, as on a server (Litestar's test client would run them one after another). Each test has a
database of its own: the throttle counts per client address, which every test's client shares.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.crypto.argon2_hasher import Argon2PasswordHasher
from application.ports.passwords import PasswordHasher
from entrypoints.asgi_app import http_container
from entrypoints.overrides import Pinned
from entrypoints.settings import Settings
from tests.http.dashboard_support import PASSWORD, new_user
from tests.support.apps import CHEAP_HASHING, Api, AppPool

Factory = Callable[..., Any]


class GatedHasher:
    """The tests' argon2 whose checks wait for the test to open a gate (open from the start with ``open=True``):
    how many checks run, and how many at once, can be seen."""

    def __init__(self, *, waiting: int = 2, open: bool = False) -> None:
        self.inner = Argon2PasswordHasher(time_cost=1, memory_kib=8 * 1024, parallelism=1)
        self.gate = asyncio.Event()
        if open:
            self.gate.set()
        self.waiting = waiting
        self.all_waiting = asyncio.Event()  # set once ``waiting`` checks wait at the gate together
        self.running = 0
        self.most = 0
        self.checks = 0

    async def hash(self, password: str) -> str:
        return await self.inner.hash(password)

    async def verify(self, password: str, stored: str) -> bool:
        self.running += 1
        self.checks += 1
        self.most = max(self.most, self.running)
        if self.running >= self.waiting:
            self.all_waiting.set()
        try:
            await self.gate.wait()
            return await self.inner.verify(password, stored)
        finally:
            self.running -= 1

    def needs_rehash(self, stored: str) -> bool:
        return self.inner.needs_rehash(stored)


async def _answered(tasks: list[asyncio.Task[httpx.Response]], count: int) -> set[asyncio.Task[httpx.Response]]:
    """Waits (at most 60 s) until ``count`` of ``tasks`` are answered; returns those answered."""
    done: set[asyncio.Task[httpx.Response]] = set()
    while len(done) < count:
        finished, _ = await asyncio.wait(set(tasks) - done, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        assert finished, f"only {len(done)} of {len(tasks)} answered, {count} expected"
        done |= finished
    return done


@pytest.fixture
async def concurrent_api(private_sql_url: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Factory]:
    """An app on a database of its own behind httpx's ASGITransport, with the given sign-in settings (the counters
    in the database, as whenever several processes serve) and overrides."""
    opened: list[tuple[httpx.AsyncClient, Any, Api]] = []

    async def make(environ: dict[str, str] | None = None, overrides: tuple[Any, ...] = (),
                   backend: str = "database") -> Api:
        settings = Settings(database_url=private_sql_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                            rate_limit_backend=backend, environ=environ or {}, **CHEAP_HASHING)
        app, release = await app_pool.lend_app(settings, http_container(settings, *overrides))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("203.0.113.7", 4242)),
                                   base_url="http://parley.test")
        api = Api(client, settings, None, ())  # type: ignore[arg-type]
        opened.append((client, release, api))
        return api

    yield make
    for client, release, api in opened:
        await client.aclose()
        await api.close_admin()
        await release()


def _outcomes(responses: list[httpx.Response]) -> Counter[int]:
    return Counter(response.status_code for response in responses)


async def test_concurrent_wrong_passwords_never_exceed_the_email_budget(concurrent_api: Factory) -> None:
    """24 wrong sign-ins at once for one email, then the right one: each attempt takes a failed-attempt slot before
    its password is checked, so 5 are checked, 19 get 429 at once, and the right one, sent while the five checks
    run, is refused too (the budget is spent); it was not checked either."""
    hasher = GatedHasher(waiting=5)
    api = await concurrent_api({"PARLEY_SESSION_LOGIN_CHECKS_PER_ADDRESS": "100"},
                               overrides=(Pinned(PasswordHasher, hasher),))
    user = await new_user(api)
    wrong = [asyncio.create_task(api.client.post("/v2/auth/login", json={"email": user.email, "password": f"x{n}"}))
             for n in range(24)]
    answered = await _answered(wrong, 19)
    assert _outcomes([task.result() for task in answered]) == {429: 19}
    await asyncio.wait_for(hasher.all_waiting.wait(), timeout=60)
    right = await asyncio.wait_for(
        api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD}), timeout=60)
    assert right.status_code == 429, right.text
    assert right.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED" and int(right.headers["retry-after"]) >= 1
    hasher.gate.set()
    responses = await asyncio.gather(*wrong)
    assert _outcomes(responses) == {401: 5, 429: 19}
    assert hasher.checks == 5 and hasher.most == 5
    for refused in (r for r in responses if r.status_code == 429):
        assert refused.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
        assert int(refused.headers["retry-after"]) >= 1
    again = await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD})
    assert again.status_code == 429 and hasher.checks == 5


async def test_a_burst_with_the_right_password_inside_checks_no_more_than_the_budget(concurrent_api: Factory
                                                                                      ) -> None:
    """25 sign-ins at once, 24 wrong and 1 right: at most 5 wrong passwords are checked (the right one, if it got a
    slot, gives it back: one more may then be checked), the rest get 429."""
    hasher = GatedHasher(open=True)
    api = await concurrent_api({"PARLEY_SESSION_LOGIN_CHECKS_PER_ADDRESS": "100"},
                               overrides=(Pinned(PasswordHasher, hasher),))
    user = await new_user(api)
    attempts = [{"email": user.email, "password": f"wrong-{n}"} for n in range(24)]
    attempts.insert(12, {"email": user.email, "password": PASSWORD})
    responses = await asyncio.gather(*(api.client.post("/v2/auth/login", json=body) for body in attempts))
    outcomes = _outcomes(responses)
    assert outcomes[401] <= 5 and set(outcomes) <= {200, 401, 429}, outcomes
    assert hasher.checks == outcomes[401] + outcomes[200] <= 6, (hasher.checks, outcomes)


async def test_a_right_password_gives_its_slot_back(concurrent_api: Factory) -> None:
    """A sign-in that succeeds is no failed attempt: any number of them leave the email's budget whole."""
    api = await concurrent_api()
    user = await new_user(api)
    for _ in range(8):
        response = await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD})
        assert response.status_code == 200, response.text
    for _ in range(5):
        assert (await api.client.post("/v2/auth/login", json={"email": user.email, "password": "nope-nope"})
                ).status_code == 401
    refused = await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD})
    assert refused.status_code == 429


@pytest.mark.parametrize("backend", ["database", "memory"])
async def test_at_most_two_checks_at_once_per_address(concurrent_api: Factory, backend: str) -> None:
    """40 sign-ins at once to unknown emails from one address: two passwords are checked, the other 38 get 429
    with Retry-After at once, without a check (the counters in the database or in the process alike)."""
    hasher = GatedHasher()
    api = await concurrent_api(overrides=(Pinned(PasswordHasher, hasher),), backend=backend)
    await hasher.hash("warm the decoy")  # (the decoy hash of unknown emails is made on first use)
    tasks = [asyncio.create_task(api.client.post("/v2/auth/login",
                                                 json={"email": f"nobody{n}@example.test", "password": "guess"}))
             for n in range(40)]
    await _answered(tasks, 38)  # the refused ones are answered while the two checks wait at the gate
    await asyncio.wait_for(hasher.all_waiting.wait(), timeout=60)
    assert hasher.running == 2
    hasher.gate.set()
    responses = await asyncio.gather(*tasks)
    assert _outcomes(responses) == {401: 2, 429: 38}
    assert hasher.most == 2 and hasher.checks == 2
    for refused in (r for r in responses if r.status_code == 429):
        assert refused.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
        assert "at once" in refused.json()["error"]["message"]
        assert refused.headers["retry-after"] == "1"
    # the places are given back: the next sign-ins are checked again
    follow = await api.client.post("/v2/auth/login", json={"email": "nobody@example.test", "password": "guess"})
    assert follow.status_code == 401


async def test_the_dashboard_form_takes_the_same_slots(concurrent_api: Factory) -> None:
    """The dashboard's sign-in form goes through the same use case: concurrent wrong passwords there are bounded
    by the same budget, and no more passwords than the budget are checked."""
    hasher = GatedHasher(open=True)
    api = await concurrent_api({"PARLEY_SESSION_LOGIN_CHECKS_PER_ADDRESS": "100"},
                               overrides=(Pinned(PasswordHasher, hasher),))
    user = await new_user(api)
    responses = await asyncio.gather(*(
        api.client.post("/dashboard/login", data={"email": user.email, "password": f"wrong-{n}"},
                        headers={"Origin": "http://parley.test"}) for n in range(12)))
    outcomes = _outcomes(responses)
    assert outcomes == {401: 5, 429: 7}, outcomes
    assert hasher.checks == 5
