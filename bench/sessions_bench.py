"""Dashboard sessions, measured in-process on a fresh SQLite database (the app behind httpx's ASGI transport):

  (a) GET /v2/cloud/status with a Bearer key      the peer
  (b) GET /v2/cloud/status with a session cookie  what resuming a session from the database costs beside it
  (c) POST /v2/auth/login                         argon2id verification (in a worker thread) + a new session
  (d) the event loop's longest stall while 4 sign-ins run at once (argon2 off the loop: it stays responsive)

(a) and (b) take turns request by request, so background load falls on both alike.

    .venv/bin/python bench/sessions_bench.py [--requests 300] [--logins 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from adapters.sql.schema import upgrade
from application.accounts import (
    CreateOrganization,
    CreateOrganizationCommand,
    CreateUser,
    CreateUserCommand,
    IssueApiKey,
    IssueApiKeyCommand,
)
from application.ports.platform import UnitOfWork
from entrypoints.asgi_app import http_container
from entrypoints.http.app import create_app
from entrypoints.ioc import build_container
from entrypoints.settings import Settings

PASSWORD = "bench-password-123"


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(ordered) * 1000:.2f} / {p99 * 1000:.2f}"


async def main(requests: int, logins: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        await asyncio.to_thread(upgrade, url)
        settings = Settings(database_url=url, var_dir=Path(tmp) / "var", secret_key="bench",
                            rate_limit_per_minute=1_000_000, rate_limit_per_hour=10_000_000,
                            auth_failures_per_minute=1_000_000)
        admin = build_container(settings)
        async with admin() as r:
            org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("Bench", "enterprise"))
            key = await (await r.get(IssueApiKey)).execute(IssueApiKeyCommand(org.id or 0, "bench", ("*",)))
            await (await r.get(CreateUser)).execute(CreateUserCommand(org.id or 0, "bench@example.com", PASSWORD))
            await (await r.get(UnitOfWork)).commit()
        await admin.close()
        app = create_app(http_container(settings), settings)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            body = {"email": "bench@example.com", "password": PASSWORD}
            opened = await client.post("/v2/auth/login", json=body)
            session = opened.cookies["parley_session"]
            client.cookies.clear()
            by_key, by_session = [], []
            for _ in range(requests):
                for sink, headers in ((by_key, {"Authorization": f"Bearer {key.secret}"}),
                                      (by_session, {"Cookie": f"parley_session={session}"})):
                    started = time.perf_counter()
                    answer = await client.get("/v2/cloud/status", headers=headers)
                    sink.append(time.perf_counter() - started)
                    assert answer.status_code == 200, answer.text
            login_times = []
            for _ in range(logins):
                started = time.perf_counter()
                answer = await client.post("/v2/auth/login", json=body)
                login_times.append(time.perf_counter() - started)
                assert answer.status_code == 200
                client.cookies.clear()

            stalls: list[float] = []
            done = asyncio.Event()

            async def ticker() -> None:
                while not done.is_set():
                    started = time.perf_counter()
                    await asyncio.sleep(0.001)
                    stalls.append(time.perf_counter() - started - 0.001)

            tick = asyncio.create_task(ticker())
            await asyncio.gather(*(client.post("/v2/auth/login", json=body) for _ in range(4)))
            done.set()
            await tick
        print(f"| scenario | n | p50 / p99 (ms) |\n|---|---|---|\n"
              f"| (a) cloud status, Bearer key | {requests} | {_ms(by_key)} |\n"
              f"| (b) cloud status, session cookie | {requests} | {_ms(by_session)} |\n"
              f"| (c) sign-in | {logins} | {_ms(login_times)} |\n\n"
              f"(d) longest event-loop stall during 4 concurrent sign-ins: {max(stalls) * 1000:.1f} ms "
              f"(sign-in p50 {statistics.median(login_times) * 1000:.1f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--logins", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.logins))
