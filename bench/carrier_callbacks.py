"""Verified carrier status callbacks per second, in process (the app behind httpx's ASGI transport), on PostgreSQL
(or SQLite):

  N live Twilio calls (ringing, stored as the dialler leaves them) each receive ``ringing``, ``in-progress`` and
  ``completed`` status callbacks, signed as Twilio signs them (X-Twilio-Signature, computed before the clock starts),
  ``--concurrency`` at a time: each is verified before it is read, applied forward only, and the answer and the end
  write the call's events (and its call log, usage) in the same transaction.

The client shares the process and its CPU with the server, so the figure is a lower bound of one `parley serve`
process. Target (issue 27): at least 500 verified callbacks a second.

    .venv/bin/python bench/carrier_callbacks.py --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/bench \
        [--calls 500] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import httpx
from twilio.request_validator import RequestValidator

from adapters.sql.schema import upgrade
from application.accounts import CreateOrganization, CreateOrganizationCommand, IssueApiKey, IssueApiKeyCommand
from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand
from application.context import Actor
from application.ports.calls import CallRepository
from application.ports.platform import UnitOfWork
from application.telephony import CreateProvider, CreateProviderCommand
from domain.calls import Call
from entrypoints.asgi_app import http_container
from entrypoints.http.app import create_app
from entrypoints.ioc import build_container
from entrypoints.settings import Settings

PUBLIC = "https://parley.bench"
TOKEN = "bench-auth-token-0123456789abcdef"
SID = "AC" + "0" * 32


async def seed(settings: Settings, calls: int) -> tuple[int, int, list[tuple[str, str]]]:
    container = build_container(settings)
    now = datetime.now(UTC)
    async with container() as r:
        org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("Bench", "enterprise"))
        await (await r.get(IssueApiKey)).execute(IssueApiKeyCommand(org.id or 0, "bench", ("*",)))
        actor = Actor.system(org.id or 0)
        provider = await (await r.get(CreateProvider)).execute(CreateProviderCommand(
            actor, "Twilio", "twilio", {"account_sid": SID, "auth_token": TOKEN}, {}, True))
        agent = await (await r.get(CreateAgent)).execute(CreateAgentCommand(actor, "Bench"))
        await (await r.get(PublishAgent)).execute(PublishAgentCommand(actor, agent.id or 0))
        repository = await r.get(CallRepository)
        made = []
        for _ in range(calls):
            call_id, sid = str(uuid.uuid4()), "CA" + uuid.uuid4().hex
            await repository.add(Call(
                id=call_id, organization_id=org.id or 0, agent_id=agent.id or 0, destination_phone="+14155550123",
                from_phone="+14155550100", status="ringing", provider_id=provider.id, telephony_ref=sid,
                telephony_state={"carrier": "twilio", "provider_id": provider.id}, created_at=now, updated_at=now,
                started_at=now, next_check_at=now + timedelta(minutes=5), deadline_at=now + timedelta(hours=1),
                agent_version=1))
            made.append((call_id, sid))
        await (await r.get(UnitOfWork)).commit()
    await container.close()
    return org.id or 0, provider.id or 0, made


def signed(provider_id: int, call_id: str, sid: str, status: str, sequence: int) -> tuple[str, bytes, dict[str, str]]:
    path = f"/v2/carriers/{provider_id}/voice/status?call_id={call_id}"
    params = {"AccountSid": SID, "CallSid": sid, "CallStatus": status, "Direction": "outbound-api",
              "SequenceNumber": str(sequence), "From": "+14155550100", "To": "+14155550123"}
    if status == "completed":
        params["CallDuration"] = "30"
    signature = RequestValidator(TOKEN).compute_signature(PUBLIC + path, params)
    return path, urlencode(params).encode(), {"X-Twilio-Signature": signature,
                                              "Content-Type": "application/x-www-form-urlencoded"}


async def main(database_url: str | None, calls: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        await asyncio.to_thread(upgrade, url)
        settings = Settings(database_url=url, var_dir=Path(tmp) / "var", secret_key="bench-secret-key",
                            public_base_url=PUBLIC)
        org_id, provider_id, made = await seed(settings, calls)
        batches = [[signed(provider_id, call_id, sid, status, n) for call_id, sid in made]
                   for n, status in enumerate(("ringing", "in-progress", "completed"), 1)]
        app = create_app(http_container(settings), settings)
        transport = httpx.ASGITransport(app=app)
        statuses: dict[int, int] = {}
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            gate = asyncio.Semaphore(concurrency)

            async def one(path: str, body: bytes, headers: dict[str, str]) -> None:
                async with gate:
                    answer = await client.post(path, content=body, headers=headers)
                    statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1

            started = time.perf_counter()
            for batch in batches:  # each call's callbacks in order; the calls of a batch side by side
                await asyncio.gather(*(one(*request) for request in batch))
            elapsed = time.perf_counter() - started
        total = sum(len(batch) for batch in batches)
        print(f"{url.split('://')[0]}: {total} verified callbacks for {calls} calls in {elapsed:.2f} s: "
              f"{total / elapsed:.0f}/s (concurrency {concurrency}); answers {statuses}")
        container = build_container(settings)
        async with container() as r:
            repository = await r.get(CallRepository)
            ended = [await repository.get(org_id, call_id) for call_id, _ in made[:5]]
        await container.close()
        print("sample:", [c.status if c else None for c in ended])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.database_url, args.calls, args.concurrency))
