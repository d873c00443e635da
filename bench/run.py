"""The HTTP benchmark: one run measures, on each database and server asked for,

  (a) GET /v2/health                      Parley, no authentication
  (b) GET /rows on bench/bare_app.py      Litestar + SQLAlchemy reading 25 of 10,000 rows (the floor)
  (c) GET /v2/agents?limit=25             Parley with a valid key, 10,000 agents in the organization
  (d), (e) GET /agents on the peers       FastAPI + SQLAlchemy ORM, and the raw floor (bench/peers.py)
  (f) POST /v2/calls                      Parley, a new Idempotency-Key and destination for every request
  (g), (h) POST /calls on the peers       the call's insert alone
  (i) POST /calls/full on the FastAPI peer  the same work as (f) in one transaction: idempotency record, agent,
                                          DNC lookup, call and outbox inserts

with wrk (the Debian package) from a second process, for a bounded time per scenario, against the real
servers started as in production (`parley serve --no-worker --workers N --server S`; the bare app with the same
server and worker count). Both servers run side by side and the scenarios take turns in --rounds slices, so a
change in the machine's background load falls on (b) and (c) alike. It prints requests/s, p50 and p99 per
scenario, the CPU the server (and PostgreSQL) spent per request, the share of the machine others used, and the
ratio c/b, as Markdown tables (and JSON with --json).

    .venv/bin/python bench/run.py [--database sqlite|postgres|both] [--server uvicorn|granian|both]
                                  [--workers N[,N...]] [--duration 15] [--connections 32] [--rounds 3]

Each database is fresh: a SQLite file in a temporary directory, or a PostgreSQL database
`parley_bench_<random>` on 127.0.0.1:5432 (user postgres) that is dropped at the end. Rate limits are
raised through PARLEY_RATE_LIMIT_PER_MINUTE/_PER_HOUR so the load is not throttled (the limiter still runs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
VENV_BIN = Path(sys.executable).parent
sys.path[:0] = [str(ROOT), str(BENCH)]

import bare_app  # noqa: E402

from application.ports.agents import AgentRepository  # noqa: E402
from application.ports.platform import UnitOfWork  # noqa: E402
from domain.agents import Agent, AgentVersion, Llm, Voice, Voicemail  # noqa: E402
from entrypoints.cli import create_key, create_org, migrate  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402

AGENTS = 10_000
PG_ADMIN = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
# the workers recommended per database (see docs/performance.md); --workers overrides
RECOMMENDED_WORKERS = {"sqlite": 1, "postgres": 1}
UNLIMITED = str(10**9)
SECRET = "bench-secret-key-not-for-production-use-0123456789abcdef"


# --- wrk ---------------------------------------------------------------------------------


@dataclass
class WrkResult:
    scenario: str
    url: str
    command: str
    requests: int
    rps: float
    p50_ms: float
    p75_ms: float
    p90_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: str | None
    server_cpu_ms: float | None = None  # CPU of the server's processes per request
    database_cpu_ms: float | None = None  # CPU of all PostgreSQL processes per request (0 on SQLite)
    others_cpu_share: float | None = None  # share of the machine used by everything else during the run


_TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command line, CPU seconds so far)."""
    table: dict[int, tuple[int, str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = stat[stat.rindex(")") + 2:].split()
        except (OSError, ValueError):
            continue
        table[int(entry)] = (int(fields[1]), command or stat[stat.index("(") + 1:stat.rindex(")")],
                             (int(fields[11]) + int(fields[12])) / _TICK)
    return table


def _cpu_used(before: dict[int, tuple[int, str, float]], after: dict[int, tuple[int, str, float]],
              server_pid: int | None, database: str | None) -> dict[str, float]:
    """CPU seconds between two snapshots, by group: the server's process tree, the benchmark database's
    PostgreSQL backends, wrk, everything else (processes that ended in between are not counted)."""
    tree = {server_pid} if server_pid in after else set()
    grew = True
    while grew:
        grew = False
        for pid, (parent, _, _) in after.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    used = {"server": 0.0, "database": 0.0, "wrk": 0.0, "others": 0.0}
    for pid, (_, command, cpu) in after.items():
        earlier = before.get(pid)
        delta = cpu - (earlier[2] if earlier and earlier[1] == command else 0.0)
        group = ("server" if pid in tree else "database" if database and command.startswith("postgres:")
                 and f" {database} " in command else "wrk" if command.startswith("wrk") else "others")
        used[group] += max(0.0, delta)
    return used


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not match:
        raise ValueError(f"unexpected wrk latency {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_wrk(output: str) -> dict[str, Any]:
    percentiles = {int(p): _ms(v) for p, v in re.findall(r"^\s+(\d+)%\s+(\S+)\s*$", output, re.M)}
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    total = re.search(r"^\s+(\d+) requests in", output, re.M)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    errors = re.search(r"Socket errors:\s+(.*)$", output, re.M)
    if not rps or not total or not {50, 75, 90, 99} <= percentiles.keys():
        raise ValueError(f"could not parse wrk output:\n{output}")
    return {
        "rps": float(rps.group(1)), "requests": int(total.group(1)),
        "p50_ms": percentiles[50], "p75_ms": percentiles[75], "p90_ms": percentiles[90], "p99_ms": percentiles[99],
        "non_2xx": int(non2xx.group(1)) if non2xx else 0, "socket_errors": errors.group(1).strip() if errors else None,
    }


def wrk_command(url: str, *, duration: int, connections: int, threads: int, headers: dict[str, str],
                script: Path | None = None, script_args: list[str] | None = None) -> list[str]:
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "--latency"]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    if script is not None:
        command += ["-s", str(script)]
    return [*command, url, *(["--", *script_args] if script_args else [])]


# POST /calls: a new Idempotency-Key (run, thread, counter) and destination number for every request
POST_CALLS_LUA = """
local counter = 0
local prefix, bot = "run", "1"
local n = 0
function setup(thread)
  n = n + 1
  thread:set("tid", n)
end
function init(args)
  prefix, bot = args[1] or prefix, args[2] or bot
end
request = function()
  counter = counter + 1
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = prefix .. "-" .. tostring(tid) .. "-" .. tostring(counter)
  local phone = string.format("+1415555%04d", (tid * 7919 + counter) % 10000)
  local body = '{"bot_id":"' .. bot .. '","destination_phone":"' .. phone ..
               '","contact_name":"Ann","custom_data":{"plan":"gold"}}'
  return wrk.format("POST", wrk.path, headers, body)
end
"""


def run_wrk(scenario: str, url: str, *, duration: int, connections: int, threads: int, headers: dict[str, str],
            warmup: int, server_pid: int | None = None, database: str | None = None,
            script: Path | None = None, script_args: list[str] | None = None) -> WrkResult:
    def args() -> list[str] | None:  # a fresh idempotency prefix for every wrk run
        return [f"{uuid.uuid4().hex[:10]}", *script_args[1:]] if script_args else None

    if warmup > 0:
        subprocess.run(wrk_command(url, duration=warmup, connections=connections, threads=threads, headers=headers,
                                   script=script, script_args=args()),
                       check=True, capture_output=True, timeout=warmup + 60)
    command = wrk_command(url, duration=duration, connections=connections, threads=threads, headers=headers,
                          script=script, script_args=args())
    before, started = _processes(), time.monotonic()
    done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=duration + 60)
    after, elapsed = _processes(), time.monotonic() - started
    visible = command[:command.index("--")] if "--" in command else command  # not the run's random prefix
    shown = shlex.join(["Authorization: Bearer $KEY" if c.startswith("Authorization:") else c for c in visible])
    result = WrkResult(scenario=scenario, url=url, command=shown, **parse_wrk(done.stdout))
    used = _cpu_used(before, after, server_pid, database)
    if result.requests:
        result.server_cpu_ms = round(used["server"] / result.requests * 1000, 3)
        result.database_cpu_ms = round(used["database"] / result.requests * 1000, 3)
    result.others_cpu_share = round(max(0.0, used["others"]) / (elapsed * (os.cpu_count() or 1)), 3)
    return result


# --- servers -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, headers: dict[str, str] | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], ready_url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server in its own process group; wait until ready_url answers 200; stop it afterwards."""
    with log.open("ab") as out:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}: {shlex.join(command)}; see {log}")
            try:
                if http_get(ready_url, timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not become ready: {shlex.join(command)}; see {log}")
            time.sleep(0.2)
        yield process
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the group this runner created for it
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # leftover workers of that same group, if any


# --- databases ---------------------------------------------------------------------------


@dataclass
class Database:
    kind: str
    url: str
    workdir: Path
    cleanup_name: str | None = None


async def _pg(admin: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.contextmanager
def fresh_database(kind: str, pg_admin: str) -> Iterator[Database]:
    workdir = Path(tempfile.mkdtemp(prefix=f"parley-bench-{kind}-"))
    db: Database | None = None
    try:
        if kind == "sqlite":
            db = Database(kind, f"sqlite+aiosqlite:///{workdir / 'bench.db'}", workdir)
        else:
            name = f"parley_bench_{uuid.uuid4().hex[:12]}"
            asyncio.run(_pg(pg_admin, f'CREATE DATABASE "{name}"'))
            db = Database(kind, pg_admin.rsplit("/", 1)[0] + f"/{name}", workdir, name)
        yield db
    finally:
        if db is not None and db.cleanup_name:
            asyncio.run(_pg(pg_admin, f'DROP DATABASE IF EXISTS "{db.cleanup_name}" WITH (FORCE)'))
        shutil.rmtree(workdir, ignore_errors=True)


def _settings(db: Database) -> Settings:
    return Settings(database_url=db.url, var_dir=db.workdir / "var", secret_key=SECRET)


async def _seed_agents(settings: Settings, organization_id: int) -> None:
    container = build_container(settings)
    try:
        async with container() as r:
            repo = await r.get(AgentRepository)
            at = datetime(2026, 1, 1, tzinfo=UTC)
            for n in range(1, AGENTS + 1):
                row = bare_app.sample_row(n, at)
                row.pop("organization_id")
                row["voice"], row["llm"] = Voice(**row["voice"]), Llm(**row["llm"])
                row["voicemail"] = Voicemail(**row["voicemail"])
                agent = await repo.add(Agent(id=None, organization_id=organization_id, **row))
                if agent.current_version is not None:  # a call runs the published version's snapshot
                    await repo.add_version(organization_id, AgentVersion(agent.id or 0, agent.current_version,
                                                                         agent.snapshot(), at, None))
            await (await r.get(UnitOfWork)).commit()
    finally:
        await container.close()


@dataclass
class Seeded:
    key: str
    organization_id: int


def seed(db: Database, *, bare: bool = True) -> Seeded:
    """Schema, an organization with a key holding agents:read and calls:schedule, 10,000 agents; the bare table
    (when scenario b is asked for)."""
    settings = _settings(db)
    migrate(settings)

    async def work() -> Seeded:
        org = await create_org(settings, "Bench Org", "enterprise", "standard", None)
        key = await create_key(settings, org["id"], ["agents:read", "calls:schedule"], "bench", None)
        await _seed_agents(settings, org["id"])
        if bare:
            await bare_app.seed(db.url)
        return Seeded(str(key["key"]), int(org["id"]))

    return asyncio.run(work())


# --- one database x server x workers -----------------------------------------------------


@dataclass
class Run:
    database: str
    server: str
    workers: int
    connections: int
    duration: int
    results: dict[str, WrkResult] = field(default_factory=dict)

    def rps_ratio(self, ours: str, peer: str) -> float | None:
        a, b = self.results.get(ours), self.results.get(peer)
        return a.rps / b.rps if a and b and b.rps else None

    def cpu_ratio(self, ours: str, peer: str) -> float | None:
        """The peer's CPU per request over ours (server and database): the ratio free of background load."""
        a, b = self.results.get(ours), self.results.get(peer)
        if not a or not b or a.server_cpu_ms is None or b.server_cpu_ms is None:
            return None
        cost_a, cost_b = a.server_cpu_ms + (a.database_cpu_ms or 0), b.server_cpu_ms + (b.database_cpu_ms or 0)
        return cost_b / cost_a if cost_a > 0 else None

    @property
    def ratio(self) -> float | None:
        return self.rps_ratio("c", "b")


# (ours, peer, target, what): the ratios reported, Parley's requests/s over the peer's; peers (g) and (h) only
# insert a row (no authentication, idempotency, DNC screen or outbox), so their ratios are reported without a
# target; peer (i) does the write path's work, and Parley is held to 1.5x it
RATIOS: list[tuple[str, str, float | None, str]] = [
    ("c", "d", 2.0, "GET agents: Parley / FastAPI peer"),
    ("c", "e", None, "GET agents: Parley / raw floor (a retired target, for information)"),
    ("f", "g", None, "POST /calls: Parley / FastAPI peer (insert only)"),
    ("f", "h", None, "POST /calls: Parley / raw floor (insert only)"),
    ("f", "i", 1.5, "POST /calls: Parley / FastAPI peer (same work, one transaction)"),
    ("c", "b", None, "GET agents: Parley / bare Litestar + SQLAlchemy Core (for information)"),
]


def _server_env(db: Database) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "PARLEY_DATABASE_URL": db.url,
        "PARLEY_VAR_DIR": str(db.workdir / "var"),
        "PARLEY_SECRET_KEY": SECRET,
        "PARLEY_RATE_LIMIT_PER_MINUTE": UNLIMITED,
        "PARLEY_RATE_LIMIT_PER_HOUR": UNLIMITED,
        "PARLEY_LOG_LEVEL": "WARNING",
    })
    return env


def _merge(scenario: str, slices: list[WrkResult]) -> WrkResult:
    """One scenario's slices as one result: requests and CPU add up; p50 is the median of the slices' p50s,
    p99 the worst slice's p99 (conservative: the slices' distributions cannot be merged exactly)."""
    first = slices[0]
    requests = sum(r.requests for r in slices)
    seconds = sum(r.requests / r.rps for r in slices if r.rps)
    p50s = sorted(r.p50_ms for r in slices)

    def weighted(name: str) -> float | None:
        values = [(getattr(r, name), r.requests) for r in slices if getattr(r, name) is not None]
        return round(sum(v * n for v, n in values) / max(1, sum(n for _, n in values)), 3) if values else None

    return WrkResult(
        scenario=scenario, url=first.url, command=first.command, requests=requests,
        rps=requests / seconds if seconds else 0.0, p50_ms=p50s[len(p50s) // 2],
        p75_ms=max(r.p75_ms for r in slices), p90_ms=max(r.p90_ms for r in slices),
        p99_ms=max(r.p99_ms for r in slices), non_2xx=sum(r.non_2xx for r in slices),
        socket_errors="; ".join(r.socket_errors for r in slices if r.socket_errors) or None,
        server_cpu_ms=weighted("server_cpu_ms"), database_cpu_ms=weighted("database_cpu_ms"),
        others_cpu_share=max((r.others_cpu_share or 0.0) for r in slices),
    )


def _agents_page(base: str, headers: dict[str, str]) -> dict[str, Any]:
    status, body = http_get(f"{base}?limit=25", headers)
    if status != 200:
        raise RuntimeError(f"unexpected answer {status} from {base}: {body[:300]!r}")
    return dict(json.loads(body))


def _post_call(url: str, headers: dict[str, str], bot: str) -> tuple[int, bytes]:
    body = json.dumps({"bot_id": bot, "destination_phone": "+14155550100", "contact_name": "Ann",
                       "custom_data": {"plan": "gold"}}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        **headers, "Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def measure(db: Database, seeded: Seeded, server: str, workers: int, args: argparse.Namespace) -> Run:
    """Parley and the peers run side by side (an idle server costs nothing) and the scenarios take turns in
    ``--rounds`` slices, so a change in the machine's background load falls on every one alike."""
    run = Run(db.kind, server, workers, args.connections, args.duration)
    env = _server_env(db)
    log = db.workdir / f"{server}-{workers}.log"
    auth = {"Authorization": f"Bearer {seeded.key}"}
    rounds = max(1, args.rounds)
    slice_seconds = max(1, round(args.duration / rounds))
    script = db.workdir / "post_calls.lua"
    script.write_text(POST_CALLS_LUA)

    ports = {name: free_port() for name in ("parley", "bare", "fastapi", "raw")}
    base = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    parley = [str(VENV_BIN / "parley"), "serve", "--no-worker", "--workers", str(workers), "--server", server,
              "--loop", args.parley_loop, "--host", "127.0.0.1", "--port", str(ports["parley"])]
    commands = {
        "bare": [sys.executable, str(BENCH / "bare_app.py"), "serve", "--database-url", db.url, "--server", server,
                 "--workers", str(workers), "--port", str(ports["bare"])],
        "fastapi": [sys.executable, str(BENCH / "peers.py"), "serve", "--app", "fastapi", "--database-url", db.url,
                    "--organization", str(seeded.organization_id), "--port", str(ports["fastapi"])],
        "raw": [sys.executable, str(BENCH / "peers.py"), "serve", "--app", "raw", "--database-url", db.url,
                "--organization", str(seeded.organization_id), "--server", server, "--port", str(ports["raw"])],
    }
    ready = {"bare": "/rows", "fastapi": "/agents", "raw": "/agents"}
    wanted = {"b": "bare", "d": "fastapi", "g": "fastapi", "i": "fastapi", "e": "raw", "h": "raw"}
    needed = {wanted[n] for n in args.scenarios if n in wanted}
    with contextlib.ExitStack() as stack:
        pids = {"parley": stack.enter_context(running(parley, env, f"{base['parley']}/v2/health", log)).pid}
        for name in sorted(needed):
            pids[name] = stack.enter_context(running(commands[name], env, base[name] + ready[name], log)).pid
        page = _agents_page(f"{base['parley']}/v2/agents", auth)
        if len(page["data"]) != 25 or page["meta"]["total"] != AGENTS:
            raise RuntimeError(f"unexpected /v2/agents answer: {str(page)[:300]}")
        for name in needed - {"bare"}:  # the peers answer the same agents, field for field
            theirs = _agents_page(f"{base[name]}/agents", {})
            served = set(theirs["data"][0]) if theirs["data"] else set()
            if served < set(page["data"][0]):  # fields Parley added since the peer was written
                print(f"warning: the {name} peer does not serve {sorted(set(page['data'][0]) - served)}",
                      file=sys.stderr)
            if theirs["data"] != [{k: a[k] for k in served} for a in page["data"]] or theirs["meta"]["total"] != AGENTS:
                raise RuntimeError(f"the {name} peer's agents differ from Parley's: {str(theirs)[:300]}")
        bot = str(next(a["id"] for a in page["data"] if a["status"] == "active"))
        full = [("fastapi", f"{base['fastapi']}/calls/full", {})] if "fastapi" in needed else []
        for name, url, headers in [("parley", f"{base['parley']}/v2/calls", auth),
                                   *[(n, f"{base[n]}/calls", {}) for n in sorted(needed - {"bare"})], *full]:
            status, body = _post_call(url, headers, bot)
            if status != 201:
                raise RuntimeError(f"POST /calls on {name} answered {status}: {body[:300]!r}")
        post = {"script": script, "script_args": ["prefix", bot]}
        targets: dict[str, tuple[str, dict[str, str], int, dict[str, Any]]] = {
            "a": (f"{base['parley']}/v2/health", {}, pids["parley"], {}),
            "b": (f"{base['bare']}/rows", {}, pids.get("bare", 0), {}),
            "c": (f"{base['parley']}/v2/agents?limit=25", auth, pids["parley"], {}),
            "d": (f"{base['fastapi']}/agents?limit=25", {}, pids.get("fastapi", 0), {}),
            "e": (f"{base['raw']}/agents?limit=25", {}, pids.get("raw", 0), {}),
            "f": (f"{base['parley']}/v2/calls", auth, pids["parley"], post),
            "g": (f"{base['fastapi']}/calls", {}, pids.get("fastapi", 0), post),
            "h": (f"{base['raw']}/calls", {}, pids.get("raw", 0), post),
            "i": (f"{base['fastapi']}/calls/full", {}, pids.get("fastapi", 0), post),
        }
        slices: dict[str, list[WrkResult]] = {name: [] for name in SCENARIOS if name in args.scenarios}
        for index in range(rounds):
            for name in slices:
                url, headers, pid, extra = targets[name]
                slices[name].append(run_wrk(
                    name, url, duration=slice_seconds, connections=args.connections, threads=args.threads,
                    headers=headers, warmup=args.warmup if index == 0 else 0, server_pid=pid,
                    database=db.cleanup_name, **extra))
    run.results = {name: _merge(name, parts) for name, parts in slices.items()}
    for result in run.results.values():
        if (result.others_cpu_share or 0) > 0.1:
            print(f"warning: {run.database}/{server}/{workers} scenario {result.scenario}: other processes used "
                  f"up to {result.others_cpu_share:.0%} of the machine during the run; the numbers are disturbed",
                  file=sys.stderr)
        if result.non_2xx or result.socket_errors:
            kept = ROOT / "var" / "bench-logs" / f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{run.database}-{log.name}"
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, kept)  # the servers' log outlives the run's directory, to read the answers' cause
            print(f"warning: {run.database}/{server}/{workers} scenario {result.scenario}: "
                  f"{result.non_2xx} non-2xx, socket errors: {result.socket_errors}; the servers' log: {kept}",
                  file=sys.stderr)
    return run


# --- report ------------------------------------------------------------------------------

SCENARIOS = "abcdefghi"
_NAMES = {"a": "(a) Parley GET /v2/health", "b": "(b) bare Litestar + SQLAlchemy Core, 25 rows",
          "c": "(c) Parley GET /v2/agents?limit=25", "d": "(d) FastAPI peer GET /agents",
          "e": "(e) raw floor GET /agents", "f": "(f) Parley POST /v2/calls",
          "g": "(g) FastAPI peer POST /calls (insert)", "h": "(h) raw floor POST /calls (insert)",
          "i": "(i) FastAPI peer POST /calls/full (same work)"}


def markdown(runs: list[Run]) -> str:
    lines: list[str] = []
    for run in runs:
        lines += [f"### {run.database}, {run.server}, {run.workers} worker{'s' if run.workers > 1 else ''} "
                  f"({run.connections} connections, {run.duration} s per scenario)", "",
                  "| scenario | requests/s | p50 ms | p99 ms | server CPU ms/req | PostgreSQL CPU ms/req | non-2xx "
                  "| others |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name in SCENARIOS:
            r = run.results.get(name)
            if r:
                lines.append(f"| {_NAMES[name]} | {r.rps:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | "
                             f"{r.server_cpu_ms or 0:.2f} | {r.database_cpu_ms or 0:.2f} | {r.non_2xx} | "
                             f"{r.others_cpu_share or 0:.0%} |")
        lines.append("")
        for ours, peer, target, what in RATIOS:
            ratio = run.rps_ratio(ours, peer)
            if ratio is None:
                continue
            cpu = run.cpu_ratio(ours, peer)
            verdict = ("reported, no target" if target is None
                       else f"target >= {target}: {'met' if ratio >= target else 'MISSED'}")
            lines.append(f"- {what} ({ours}/{peer}) = **{ratio:.2f}** ({verdict}); by CPU per request {cpu or 0:.2f}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Parley HTTP benchmark (wrk against the real server)")
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--server", choices=["uvicorn", "granian", "both"], default="both")
    parser.add_argument("--workers", default="recommended",
                        help=f"comma-separated worker counts, or 'recommended' ({RECOMMENDED_WORKERS})")
    parser.add_argument("--duration", type=int, default=15, help="seconds of load per scenario (default 15)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of unmeasured load before each scenario")
    parser.add_argument("--rounds", type=int, default=3,
                        help="the scenarios take turns in this many slices of duration/rounds seconds (default 3)")
    parser.add_argument("--scenarios", default="cdefghi",
                        help="any of a-i (default cdefghi: Parley and the peers, reads and writes)")
    parser.add_argument("--parley-loop", choices=["auto", "asyncio", "uvloop"], default="auto",
                        help="`parley serve --loop` (auto: uvloop when installed)")
    parser.add_argument("--postgres-admin-url", default=os.environ.get("PARLEY_BENCH_POSTGRES_URL", PG_ADMIN))
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install -y wrk", file=sys.stderr)
        return 2
    if args.duration <= 0 or args.connections <= 0:
        parser.error("--duration and --connections must be positive")

    databases = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    servers = ["uvicorn", "granian"] if args.server == "both" else [args.server]
    runs: list[Run] = []
    print(f"# {os.cpu_count()} CPUs, {sys.version.split()[0]}, {shlex.join(sys.argv)}", flush=True)
    for kind in databases:
        counts = ([RECOMMENDED_WORKERS[kind]] if args.workers == "recommended"
                  else [int(n) for n in args.workers.split(",")])
        with fresh_database(kind, args.postgres_admin_url) as db:
            started = time.monotonic()
            seeded = seed(db, bare="b" in args.scenarios)
            print(f"# {kind}: seeded {AGENTS} agents in "
                  f"{time.monotonic() - started:.1f} s", flush=True)
            for server in servers:
                for workers in counts:
                    run = measure(db, seeded, server, workers, args)
                    runs.append(run)
                    print(markdown([run]), flush=True)
    if runs:
        print("Exact wrk commands:")
        for command in sorted({r.command for run in runs for r in run.results.values()}):
            print(f"    {command}")
    if args.json:
        args.json.write_text(json.dumps([{
            **asdict(r), "ratios": {f"{o}/{p}": r.rps_ratio(o, p) for o, p, _, _ in RATIOS},
            "cpu_ratios": {f"{o}/{p}": r.cpu_ratio(o, p) for o, p, _, _ in RATIOS}} for r in runs], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
