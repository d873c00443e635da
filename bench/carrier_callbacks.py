"""Verified carrier status callbacks per second, on PostgreSQL and SQLite.

N live Twilio calls (ringing, stored as the dialler leaves them) each receive ``ringing``, ``in-progress`` and
``completed`` status callbacks, signed as Twilio signs them (X-Twilio-Signature, computed before the clock starts),
``--concurrency`` at a time: each is verified before it is read, applied forward only, and the answer and the end
write the call's events (and its call log, usage) in the same transaction. Then every callback is sent once more
(a carrier's retry): verified, changes nothing.

Two modes:

``serve`` (the default): a real ``parley serve --no-worker`` (granian, one worker) on a fresh database, driven over
HTTP on 127.0.0.1 with ``--concurrency`` connections by wrk (``--client wrk``, the default: the requests, signed
beforehand, are handed to it in a Lua script, one wrk run per status, each request sent exactly once), or by as
many httpx clients in this process (``--client httpx``: they cost the two cores about as much CPU as the server, so
they measure the pair, not the server). In the same run the same client sends as many ``GET /v2/health`` (no
database, no authentication) before and after the callbacks: the ceiling of this client and server on this machine
at that moment. Reported: callbacks/s, health/s, the server's CPU per request (and PostgreSQL's), the client's CPU,
the share of the machine others used.

``inprocess``: the app behind httpx's ASGI transport in this process (client and server share one core).

    .venv/bin/python bench/carrier_callbacks.py [--database sqlite|postgres|both] [--calls 1000] [--concurrency 16]
    .venv/bin/python bench/carrier_callbacks.py --client httpx --database postgres
    .venv/bin/python bench/carrier_callbacks.py --mode inprocess --database postgres --calls 500

PostgreSQL databases are made on 127.0.0.1:5432 (user postgres, ``--postgres-admin-url``) as
``parley_bench_<random>`` and dropped afterwards. Target: at least 500 verified callbacks a second per process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import httpx
from twilio.request_validator import RequestValidator

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

from run import (  # noqa: E402  (bench/run.py: databases, servers, CPU by process group)
    PG_ADMIN,
    SECRET,
    UNLIMITED,
    Database,
    _cpu_used,
    _processes,
    free_port,
    fresh_database,
    running,
)

from adapters.sql.schema import upgrade  # noqa: E402
from application.accounts import CreateOrganization, CreateOrganizationCommand  # noqa: E402
from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand  # noqa: E402
from application.context import Actor  # noqa: E402
from application.ports.calls import CallRepository  # noqa: E402
from application.ports.platform import UnitOfWork  # noqa: E402
from application.telephony import CreateProvider, CreateProviderCommand  # noqa: E402
from domain.calls import Call  # noqa: E402
from entrypoints.asgi_app import http_container  # noqa: E402
from entrypoints.http.app import create_app  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402

PUBLIC = "https://parley.bench"
TOKEN = "bench-auth-token-0123456789abcdef"
SID = "AC" + "0" * 32
Request = tuple[str, bytes, dict[str, str]]


def settings_for(url: str, workdir: Path) -> Settings:
    return Settings(database_url=url, var_dir=workdir / "var", secret_key=SECRET, public_base_url=PUBLIC)


async def seed(settings: Settings, calls: int) -> tuple[int, int, list[tuple[str, str]]]:
    container = build_container(settings)
    now = datetime.now(UTC)
    async with container() as r:
        org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("Bench", "enterprise"))
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


def signed(provider_id: int, call_id: str, sid: str, status: str, sequence: int) -> Request:
    path = f"/v2/carriers/{provider_id}/voice/status?call_id={call_id}"
    params = {"AccountSid": SID, "CallSid": sid, "CallStatus": status, "Direction": "outbound-api",
              "SequenceNumber": str(sequence), "From": "+14155550100", "To": "+14155550123"}
    if status == "completed":
        params["CallDuration"] = "30"
    signature = RequestValidator(TOKEN).compute_signature(PUBLIC + path, params)
    return path, urlencode(params).encode(), {"X-Twilio-Signature": signature,
                                              "Content-Type": "application/x-www-form-urlencoded"}


def batches(provider_id: int, made: list[tuple[str, str]]) -> list[list[Request]]:
    """Each call's callbacks in order (a batch per status, the calls of a batch side by side)."""
    return [[signed(provider_id, call_id, sid, status, n) for call_id, sid in made]
            for n, status in enumerate(("ringing", "in-progress", "completed"), 1)]


@dataclass
class Phase:
    name: str
    requests: int
    seconds: float
    statuses: dict[int, int]
    client_cpu: float
    used: dict[str, float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def line(self) -> str:
        n, others = self.requests, self.used.get("others", 0.0)
        server = f"server {1000 * self.used.get('server', 0) / n:.2f} ms" if "server" in self.used else ""
        database = f", PostgreSQL {1000 * self.used['database'] / n:.2f} ms" if self.used.get("database") else ""
        return (f"| {self.name} | {n} | {self.rate:.0f}/s | {server}{database} | "
                f"{1000 * self.client_cpu / n:.2f} ms | {100 * others / self.seconds / (os.cpu_count() or 1):.0f} % "
                f"| {self.statuses} |")


async def drive(client: httpx.AsyncClient, groups: list[list[Request]], concurrency: int, name: str,
                server_pid: int | None, database: str | None, method: str = "POST") -> Phase:
    gate = asyncio.Semaphore(concurrency)
    statuses: dict[int, int] = {}

    async def one(path: str, body: bytes, headers: dict[str, str]) -> None:
        async with gate:
            answer = await client.request(method, path, content=body or None, headers=headers)
            statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1

    before, cpu, started = _processes(), time.process_time(), time.perf_counter()
    for group in groups:
        await asyncio.gather(*(one(*request) for request in group))
    seconds, client_cpu = time.perf_counter() - started, time.process_time() - cpu
    used = _cpu_used(before, _processes(), server_pid, database) if server_pid else {}
    if server_pid is None:
        used = {}
    used.pop("wrk", None)
    used["others"] = max(0.0, used.get("others", 0.0) - client_cpu)  # this process is the client, not an other
    return Phase(name, sum(len(g) for g in groups), seconds, statuses, client_cpu, used)


WRK_SCRIPT = r"""
-- Each wrk thread sends its share of the batch (requests i, i + threads, ...), each exactly once, then marks
-- itself done in a file and stops; past its share a connection asks for a path that is not there (a 404, not
-- counted) until the last answer is in. The requests, signed before the clock starts, are in the Lua file this
-- script loads.
local batch = dofile("%(requests)s")
local threads, counter = {}, 0
function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end
function init(args)
  -- wrk 4 calls the first thread's request() once before it starts, to check the request (that one is not sent)
  share, sent, answered, statuses = {}, id == 1 and -1 or 0, 0, {}
  for i = id, #batch, %(threads)d do table.insert(share, batch[i]) end
  if #share == 0 then io.open("%(marker)s" .. id, "w"):close() end
end
function request()
  sent = sent + 1
  local one = share[sent]
  if one == nil then return wrk.format("GET", "/v2/no-such-path") end
  if one[1] == "GET" then return wrk.format("GET", one[2]) end
  return wrk.format("POST", one[2], {["Content-Type"] = "application/x-www-form-urlencoded",
                                      ["X-Twilio-Signature"] = one[4]}, one[3])
end
function response(status, headers, body)
  if answered >= #share or status == 404 then return end  -- past the share
  answered = answered + 1
  statuses[status] = (statuses[status] or 0) + 1
  if answered == #share then
    io.open("%(marker)s" .. id, "w"):close()
    wrk.thread:stop()
  end
end
function done(summary, latency, requests)
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do io.write(string.format("status %%d %%d\n", status, n)) end
  end
end
"""


def _lua_string(value: str | bytes) -> str:
    text = value.decode() if isinstance(value, bytes) else value
    return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\""


def drive_wrk(port: int, groups: list[list[Request]], concurrency: int, threads: int, name: str, server_pid: int,
              database: str | None, workdir: Path, method: str = "POST") -> Phase:
    """Each group sent by one wrk run (a group's requests side by side, the groups one after another): wrk's
    client costs the machine far less than httpx's, so more of the two cores are left to the server."""
    statuses: dict[int, int] = {}
    runs = []
    tag = uuid.uuid4().hex[:8]
    for n, group in enumerate(groups):
        requests, script = workdir / f"wrk-requests-{tag}-{n}.lua", workdir / f"wrk-{tag}-{n}.lua"
        requests.write_text("return {\n" + ",\n".join(
            f"{{{_lua_string(method)}, {_lua_string(path)}, {_lua_string(body)}, "
            f"{_lua_string(headers.get('X-Twilio-Signature', ''))}}}"
            for path, body, headers in group) + "\n}\n")
        marker = str(workdir / f"wrk-done-{tag}-{n}-")
        script.write_text(WRK_SCRIPT % {"requests": requests, "threads": threads, "marker": marker})
        runs.append((script, marker))
    before, seconds = _processes(), 0.0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # wrk's CPU, counted once each run is waited for
    for script, marker in runs:
        command = ["wrk", f"-t{threads}", f"-c{concurrency}", "-d120s", "--timeout", "30s", "-s", str(script),
                   f"http://127.0.0.1:{port}"]
        started = time.perf_counter()
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as wrk:
            while not all(Path(f"{marker}{i}").exists() for i in range(1, threads + 1)):
                if wrk.poll() is not None:
                    raise RuntimeError(f"wrk ended early: {wrk.stdout.read() if wrk.stdout else ''}")
                time.sleep(0.002)
            seconds += time.perf_counter() - started
            wrk.send_signal(signal.SIGINT)
            output, _ = wrk.communicate(timeout=30)
        for line in output.splitlines():
            if line.startswith("status "):
                _, status, count = line.split()
                statuses[int(status)] = statuses.get(int(status), 0) + int(count)
    used = _cpu_used(before, _processes(), server_pid, database)
    used.pop("wrk", None)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    return Phase(name, sum(len(g) for g in groups), seconds, statuses, client, used)


async def check_ended(settings: Settings, org_id: int, made: list[tuple[str, str]]) -> dict[str, int]:
    container = build_container(settings)
    found: dict[str, int] = {}
    async with container() as r:
        repository = await r.get(CallRepository)
        for call_id, _ in made:
            call = await repository.get(org_id, call_id)
            status = call.status if call else "gone"
            found[status] = found.get(status, 0) + 1
    await container.close()
    return found


def serve_mode(db: Database, args: argparse.Namespace) -> None:
    settings = settings_for(db.url, db.workdir)
    upgrade(db.url)
    org_id, provider_id, made = asyncio.run(seed(settings, args.calls))
    groups = batches(provider_id, made)
    total = sum(len(g) for g in groups)
    health = [[("/v2/health", b"", {})] * total]
    port = free_port()
    env = {**os.environ, "PARLEY_DATABASE_URL": db.url, "PARLEY_VAR_DIR": str(db.workdir / "var"),
           "PARLEY_SECRET_KEY": SECRET, "PARLEY_PUBLIC_BASE_URL": PUBLIC, "PARLEY_LOG_LEVEL": "WARNING",
           "PARLEY_RATE_LIMIT_PER_MINUTE": UNLIMITED, "PARLEY_RATE_LIMIT_PER_HOUR": UNLIMITED,
           # a pool smaller than the requests in flight opens (and closes) a connection for each one over it
           "PARLEY_DB_POOL_SIZE": str(args.pool_size or max(10, args.concurrency))}
    command = [sys.executable, "-m", "entrypoints.cli", "serve", "--no-worker", "--no-migrate", "--server",
               args.server, "--workers", "1", "--port", str(port)]
    pg_name = db.cleanup_name

    async def measure(pid: int) -> list[Phase]:
        limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60) as http:

            async def send(groups: list[list[Request]], name: str, pid: int, pg_name: str | None,
                           method: str = "POST") -> Phase:
                if args.client == "httpx":
                    return await drive(http, groups, args.concurrency, name, pid, pg_name, method)
                return await asyncio.to_thread(drive_wrk, port, groups, args.concurrency, args.threads, name, pid,
                                               pg_name, db.workdir, method)

            await send([health[0][:200]], "warm-up", pid, pg_name, "GET")
            phases = [await send(health, "`GET /v2/health` (ceiling)", pid, pg_name, "GET")]
            spy = None
            if args.py_spy:  # py-spy (pip install py-spy) samples the server while it takes the callbacks
                spy = await asyncio.create_subprocess_exec(
                    str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "--subprocesses",
                    "--nonblocking", "-r", "250", "-f", "raw", "-o", args.py_spy, stdout=asyncio.subprocess.DEVNULL)
                await asyncio.sleep(1)
            phases.append(await send(groups, "verified status callbacks", pid, pg_name))
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                await spy.wait()
            phases.append(await send(groups, "the same again (replays: no-ops)", pid, pg_name))
            phases.append(await send(health, "`GET /v2/health` (ceiling)", pid, pg_name, "GET"))
        return phases

    with running(command, env, f"http://127.0.0.1:{port}/v2/health", db.workdir / "server.log") as server:
        phases = asyncio.run(measure(server.pid))
    ended = asyncio.run(check_ended(settings, org_id, made))
    load = os.getloadavg()
    client = "wrk" if args.client == "wrk" else "httpx (this process)"
    print(f"\n{db.kind}: {args.calls} calls, concurrency {args.concurrency}, client {client}, "
          f"pool {env['PARLEY_DB_POOL_SIZE']}, "
          f"`parley serve --no-worker --server {args.server} --workers 1`, load average {load[0]:.1f} / {load[1]:.1f}")
    print("\n| phase | requests | rate | CPU per request | client CPU per request | others | answers |")
    print("|---|---:|---:|---|---:|---:|---|")
    for phase in phases:
        print(phase.line())
    print(f"\ncalls afterwards: {ended}")


async def inprocess_mode(db: Database, args: argparse.Namespace) -> None:
    settings = settings_for(db.url, db.workdir)
    await asyncio.to_thread(upgrade, db.url)
    org_id, provider_id, made = await seed(settings, args.calls)
    groups = batches(provider_id, made)
    app = create_app(http_container(settings), settings)
    profiler = None
    if args.profile:  # CPU time, not wall time: on a shared machine the wall clock counts others' work too
        import cProfile

        profiler = cProfile.Profile(time.process_time)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
        await drive(client, [groups[0][:20]], args.concurrency, "warm-up", None, None)  # ringing: the first 20 calls
        counter = None
        if args.statements:
            from profile_pipeline import StatementCounter

            counter = StatementCounter()
            counter.install()
            counter.on = True
        if profiler is not None:
            profiler.enable()
        phase = await drive(client, groups, args.concurrency, "in process", None, None)
        if counter is not None:
            counter.on = False
            counter.report(phase.requests)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
    print(f"{db.kind}: {phase.requests} verified callbacks for {args.calls} calls in {phase.seconds:.2f} s: "
          f"{phase.rate:.0f}/s (concurrency {args.concurrency}, in process); answers {phase.statuses}; "
          f"CPU {1000 * phase.client_cpu / phase.requests:.2f} ms per callback; "
          f"calls afterwards {await check_ended(settings, org_id, made)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["serve", "inprocess"], default="serve")
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--postgres-admin-url", default=os.environ.get("PARLEY_BENCH_POSTGRES_URL", PG_ADMIN))
    parser.add_argument("--server", choices=["granian", "uvicorn"], default="granian")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--client", choices=["wrk", "httpx"], default="wrk",
                        help="serve: who sends the callbacks: wrk (default; apt-get install -y wrk), or httpx "
                             "clients in this process (they cost the machine about as much CPU as the server)")
    parser.add_argument("--threads", type=int, default=2, help="serve: wrk threads")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--pool-size", type=int, default=0,
                        help="serve: PARLEY_DB_POOL_SIZE (default: the concurrency, at least 10)")
    parser.add_argument("--py-spy", metavar="FILE", help="serve: py-spy's raw samples of the server's callbacks")
    parser.add_argument("--statements", action="store_true", help="inprocess: count the statements per callback")
    parser.add_argument("--profile", metavar="FILE", help="inprocess: a cProfile (CPU time) of the callbacks to FILE")
    args = parser.parse_args()
    if args.mode == "serve" and args.client == "wrk" and shutil.which("wrk") is None:
        parser.error("wrk is not installed (apt-get install -y wrk); or --client httpx")
    for kind in (("sqlite", "postgres") if args.database == "both" else (args.database,)):
        with fresh_database(kind, args.postgres_admin_url) as db:
            if args.mode == "serve":
                serve_mode(db, args)
            else:
                asyncio.run(inprocess_mode(db, args))


if __name__ == "__main__":
    main()
