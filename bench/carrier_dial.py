"""Dial rate through a carrier adapter: a worker's passes dialling a campaign through the Twilio or Telnyx adapter,
against that carrier's emulator over HTTP (tests/support/emulators: a real HTTP server on 127.0.0.1, in a thread of
this process), on SQLite or PostgreSQL.

  One running campaign (calling hours 00:00-24:00, ``max_concurrent_calls`` = ``--cap``) of ``--contacts``
  contacts, its organization on the enterprise plan (50 lines: the campaign's cap is the one that binds). Each
  round is what `parley worker` does: a dialer pass (``RunDialerPass``: outcomes settled, contacts dialled while
  the campaign is under its cap), then a calls pass (``RunCallProgress``: every queued call dialled at the carrier,
  one ``Calls.json`` / ``POST /v2/calls`` each, from the organization's number, with its media-stream URL and status
  callback). Then the callees: ``--answer-share`` of the calls live at the carrier answer and hang up, through the
  carrier's signed status callbacks delivered to the app in this process (the serve side of the work, timed apart),
  so the next round finds the campaign partly full and the cap decides how many it may dial (a pass dials at most
  10 of one campaign, the dialer's campaign budget: with the default cap of 15 and half the calls ending each round,
  the cap binds, not the budget).

Measured: dials a second over the worker's passes (the target: at least 50 a second per worker), the passes' CPU
(this process: the emulator's threads included, PostgreSQL's backends not) and what one free core would give at that
CPU per dial (1000 / CPU ms: an estimate for a loaded machine, not a measurement), the callbacks' time, and
the cap: the most calls live at the carrier at once and the most active calls of the campaign in Parley's database
after any pass, each against ``--cap`` (the benchmark exits non-zero when either exceeded it, or a contact was
dialled twice).

    .venv/bin/python bench/carrier_dial.py [--carrier twilio|telnyx|both] [--database sqlite|postgres|both]
                                           [--contacts 1500] [--cap 15] [--answer-share 0.5] [--seconds 20]

A PostgreSQL database `parley_bench_<random>` is created on 127.0.0.1:5432 (user postgres; PARLEY_BENCH_POSTGRES_URL
or --postgres-admin-url to change) and dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from run import PG_ADMIN, Database, fresh_database  # noqa: E402

from adapters.sql.calls_tables import calls as calls_table  # noqa: E402
from adapters.sql.uow import SqlUnitOfWork  # noqa: E402
from application.call_progress import RunCallProgressCommand  # noqa: E402
from application.dialer_pass import RunDialerPassCommand  # noqa: E402
from entrypoints.asgi_app import http_container  # noqa: E402
from entrypoints.cli import create_key, create_org, migrate  # noqa: E402
from entrypoints.features import calls as calls_feature  # noqa: E402
from entrypoints.features import campaigns as campaigns_feature  # noqa: E402
from entrypoints.http.app import create_app  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402
from tests.support.emulators.telnyx import TelnyxEmulator  # noqa: E402
from tests.support.emulators.twilio import TwilioEmulator  # noqa: E402

PUBLIC = "https://parley.bench"
SECRET = "bench-secret-key-not-for-production-use-0123456789abcdef"
TARGET_PER_S = 50.0
ACTIVE = ("queued", "ringing", "in_progress")
ORG_NUMBER = "+14155550100"


@dataclass
class Result:
    carrier: str
    database: str
    dials: int
    rounds: int
    pass_seconds: float
    pass_cpu_seconds: float
    callbacks: int
    callback_seconds: float
    wall_seconds: float
    cap: int
    most_live_at_carrier: int
    most_active_in_parley: int
    capped_rounds: int  # rounds whose dialer pass found the campaign at its cap once the calls pass had run
    dialled_twice: int
    load_1min: float

    @property
    def per_s(self) -> float:
        return self.dials / self.pass_seconds if self.pass_seconds else 0.0

    @property
    def cap_held(self) -> bool:
        return self.most_live_at_carrier <= self.cap and self.most_active_in_parley <= self.cap


class Carrier:
    """What differs between the emulators: the provider's credentials, the number, the live calls, the callees."""

    name = ""

    async def start(self, client: httpx.AsyncClient) -> None: ...
    def provider(self) -> dict[str, Any]: ...
    async def number(self, client: httpx.AsyncClient, provider_id: int) -> None: ...
    def live(self) -> list[str]: ...
    def dialled(self) -> list[str]: ...
    async def talk(self, call_id: str) -> int: ...
    async def close(self) -> None: ...


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any], status: int = 201) -> Any:
    response = await client.post(path, json=body)
    if response.status_code != status:
        raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:400]}")
    return response.json()["data"]


class Twilio(Carrier):
    name = "twilio"

    def __init__(self) -> None:
        self.emulator = TwilioEmulator()

    async def start(self, client: httpx.AsyncClient) -> None:
        self.emulator.start()

        async def deliver(url: str, params: dict[str, str], headers: dict[str, str]) -> httpx.Response:
            parts = urlsplit(url)
            return await client.post(parts.path + (f"?{parts.query}" if parts.query else ""), content=urlencode(
                params), headers={**headers, "Content-Type": "application/x-www-form-urlencoded"})

        self.emulator.deliver = deliver
        self.emulator.own(ORG_NUMBER)

    def provider(self) -> dict[str, Any]:
        return {"name": "Twilio", "type": "twilio", "credentials": self.emulator.credentials,
                "settings": {"api_base_url": self.emulator.url}, "is_default": True}

    async def number(self, client: httpx.AsyncClient, provider_id: int) -> None:
        await _post(client, "/v2/telephony/phone-numbers", {"phone_number": ORG_NUMBER, "provider_id": provider_id})

    def live(self) -> list[str]:
        return [sid for sid, c in list(self.emulator.calls.items()) if c.status not in ("completed", "busy",
                                                                                         "no-answer", "failed")]

    def dialled(self) -> list[str]:
        return [c.to for c in list(self.emulator.calls.values())]

    async def talk(self, call_id: str) -> int:
        answered = await self.emulator.answer(call_id)
        completed = await self.emulator.complete(call_id, duration=30)
        assert (answered.status_code, completed.status_code) == (204, 204), (answered.text, completed.text)
        return 2

    async def close(self) -> None:
        self.emulator.stop()


class Telnyx(Carrier):
    name = "telnyx"

    def __init__(self) -> None:
        self.emulator = TelnyxEmulator()

    async def start(self, client: httpx.AsyncClient) -> None:
        await self.emulator.start(thread=True)

        async def deliver(url: str, headers: dict[str, str], body: bytes) -> int:
            parts = urlsplit(url)
            answer = await client.post(parts.path + (f"?{parts.query}" if parts.query else ""), content=body,
                                       headers=headers)
            return answer.status_code

        self.emulator.deliver = deliver

    def provider(self) -> dict[str, Any]:
        return {"name": "Telnyx", "type": "telnyx", "credentials": self.emulator.credentials(),
                "settings": {"api_base_url": self.emulator.base_url}, "is_default": True}

    async def number(self, client: httpx.AsyncClient, provider_id: int) -> None:
        await _post(client, "/v2/telephony/phone-numbers", {"phone_number": ORG_NUMBER, "provider_id": provider_id,
                                                            "purchase": True})

    def live(self) -> list[str]:
        return [ccid for ccid, c in list(self.emulator.calls.items()) if c.direction == "outgoing" and c.alive]

    def dialled(self) -> list[str]:
        return [c.to_phone for c in list(self.emulator.calls.values()) if c.direction == "outgoing"]

    async def talk(self, call_id: str) -> int:
        sent = [*await self.emulator.answer(call_id), await self.emulator.hangup(call_id)]
        assert all(d.status == 204 for d in sent), [d.status for d in sent]
        return len(sent)

    async def close(self) -> None:
        await self.emulator.close()


async def _active_in_parley(container: Any, campaign_id: int) -> int:
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        found = await conn.execute(sa.select(sa.func.count()).select_from(calls_table).where(
            calls_table.c.campaign_id == campaign_id, calls_table.c.status.in_(ACTIVE)))
        return int(found.scalar_one())


async def measure(db: Database, carrier: Carrier, args: argparse.Namespace) -> Result:
    settings = Settings(database_url=db.url, var_dir=db.workdir / "var", secret_key=SECRET, public_base_url=PUBLIC,
                        allow_loopback_targets=True)
    org = await create_org(settings, "Bench Org", "enterprise", "standard", None)
    key = await create_key(settings, org["id"], ["*"], "bench", None)
    app = create_app(http_container(settings), settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench", timeout=60,
                                 headers={"Authorization": f"Bearer {key['key']}"}) as client:
        await carrier.start(client)
        worker = build_container(settings)
        try:
            provider = await _post(client, "/v2/telephony/providers", carrier.provider())
            await carrier.number(client, provider["id"])
            agent = await _post(client, "/v2/agents", {"name": "Caller", "prompt": "You call about the renewal.",
                                                       "first_message": "Hello, this is Parley."})
            await _post(client, f"/v2/agents/{agent['id']}/publish", {}, 200)
            campaign = await _post(client, "/v2/campaigns", {
                "name": "Renewals", "agent_id": agent["id"], "timezone_mode": "campaign",
                "calling_hours": {"start": "00:00", "end": "24:00"}, "max_concurrent_calls": args.cap})
            phones = [f"+1415{2_000_000 + n}" for n in range(args.contacts)]
            for start in range(0, len(phones), 5_000):
                await _post(client, f"/v2/campaigns/{campaign['id']}/contacts",
                            {"contacts": [{"phone": p} for p in phones[start:start + 5_000]]})
            await _post(client, f"/v2/campaigns/{campaign['id']}/start", {}, 200)

            dial = campaigns_feature.dial_pass(worker, settings)
            progress = calls_feature.progress(worker)
            dials = rounds = callbacks = capped = most_live = most_active = 0
            pass_s = pass_cpu = callback_s = 0.0
            load = os.getloadavg()[0]
            begun = time.perf_counter()
            warm = True
            while time.perf_counter() - begun < args.seconds:
                started, cpu = time.perf_counter(), time.process_time()
                await dial.execute(RunDialerPassCommand())
                report = await progress.execute(RunCallProgressCommand())
                elapsed, used = time.perf_counter() - started, time.process_time() - cpu
                live = carrier.live()
                active = await _active_in_parley(worker, campaign["id"])
                most_live, most_active = max(most_live, len(live)), max(most_active, active)
                capped += active >= args.cap
                if warm:  # the first round warms the process (imports, connections, caches): not counted
                    warm = False
                    begun = time.perf_counter()
                else:
                    dials += report.dialled
                    pass_s += elapsed
                    pass_cpu += used
                    rounds += 1
                if not live and report.dialled == 0:
                    break  # every contact called
                started = time.perf_counter()
                for call_id in live[:max(1, round(len(live) * args.answer_share))]:
                    callbacks += await carrier.talk(call_id)
                callback_s += time.perf_counter() - started
            wall = time.perf_counter() - begun
            dialled_twice = sum(n - 1 for n in Counter(carrier.dialled()).values() if n > 1)
        finally:
            await worker.close()
            await carrier.close()
    return Result(carrier.name, db.kind, dials, rounds, pass_s, pass_cpu, callbacks, callback_s, wall, args.cap,
                  most_live, most_active, capped, dialled_twice, load)


def run_one(kind: str, carrier_name: str, args: argparse.Namespace) -> Result:
    with fresh_database(kind, args.postgres_admin_url) as db:
        migrate(Settings(database_url=db.url, var_dir=db.workdir / "var", secret_key=SECRET))
        carrier: Carrier = Twilio() if carrier_name == "twilio" else Telnyx()
        return asyncio.run(measure(db, carrier, args))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--carrier", choices=("twilio", "telnyx", "both"), default="both")
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--contacts", type=int, default=1500)
    parser.add_argument("--cap", type=int, default=15)
    parser.add_argument("--answer-share", type=float, default=0.5,
                        help="share of the calls live at the carrier that end after each round")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--postgres-admin-url", default=os.environ.get("PARLEY_BENCH_POSTGRES_URL", PG_ADMIN))
    args = parser.parse_args(argv)
    carriers = ("twilio", "telnyx") if args.carrier == "both" else (args.carrier,)
    databases = ("sqlite", "postgres") if args.database == "both" else (args.database,)
    results = [run_one(kind, name, args) for kind in databases for name in carriers]
    print(f"Dial rate through a carrier adapter (cap {args.cap}, {args.contacts} contacts, "
          f"answer share {args.answer_share:g}, up to {args.seconds:g} s; target >= {TARGET_PER_S:g} dials/s)\n")
    print("| carrier | database | dials | rounds | dials/s (worker passes) | CPU ms/dial "
          "| 1 core's worth (1000/CPU ms) | callbacks/s (serve side) | most live at carrier "
          "| most active in Parley | rounds at cap | dialled twice | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    failed = False
    for r in results:
        cpu_ms = r.pass_cpu_seconds / max(1, r.dials) * 1000
        print(f"| {r.carrier} | {r.database} | {r.dials} | {r.rounds} | {r.per_s:.0f} | {cpu_ms:.1f} | "
              f"{1000 / cpu_ms if cpu_ms else 0:.0f} | "
              f"{r.callbacks / r.callback_seconds if r.callback_seconds else 0:.0f} | {r.most_live_at_carrier} | "
              f"{r.most_active_in_parley} | {r.capped_rounds} | {r.dialled_twice} | {r.load_1min:.1f} |")
        if not r.cap_held or r.dialled_twice:
            failed = True
            print(f"FAILED: {r.carrier}/{r.database}: cap {r.cap}, at most {r.most_live_at_carrier} live at the "
                  f"carrier and {r.most_active_in_parley} active in Parley; {r.dialled_twice} dialled twice",
                  file=sys.stderr)
    verdicts = [f"{r.carrier}/{r.database}: {'meets' if r.per_s >= TARGET_PER_S else 'misses'} the target, cap "
                f"{'held' if r.cap_held else 'EXCEEDED'}" for r in results]
    print("\n" + "; ".join(verdicts))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
