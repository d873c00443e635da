"""Campaign benchmarks.

  import     a 100,000-contact CSV file through the real route POST /v2/campaigns/{id}/contacts/import of a real
             server process (`parley serve --no-worker`, started as bench/run.py starts it), on a fresh SQLite
             file and on a fresh PostgreSQL database: the request's wall time (target < 10 s) and the server
             process's peak memory (VmHWM in /proc/<pid>/status, target < 300 MB), beside its RSS before the
             import (the peer: what the idle server already holds). A floor is measured in the same run: the
             per-row work alone (CSV reader, row checks, phone normalisation) in the benchmark's process, no
             HTTP, no database.

    .venv/bin/python bench/campaigns_bench.py import [--database sqlite|postgres|both] [--rows 100000]
                                                     [--rounds 3] [--server granian|uvicorn]

The file (generated, deterministic): columns phone, name, timezone, plan, account_ref. Phones are valid numbers of
several countries written in mixed formats (+1 (415) 555-0123, 0049 30 ..., dots, dashes, no separators); about
1 % of the rows have an invalid or empty phone and about 1 % repeat an earlier row's number in another format;
about a third carry a timezone; plan and account_ref go to custom_data. It is sent as multipart/form-data without
an Idempotency-Key (the route refuses a key on bodies over 1 MiB). Every round uses a fresh database and a fresh
server process, so each VmHWM belongs to that round alone; the rounds' median and range are printed, with the
1-minute load average, the CPU time the server (and PostgreSQL) spent, and the share of the machine others used.

  decision   PostgreSQL: 100 running campaigns, 1,000,000 contacts bulk-loaded with generate_series (most with
             next_attempt_at in the future, i.e. outside their calling hours; 1 % due). Times the selection of
             one dialer pass through the dialer's own store (`DialerStore`) as the job `campaigns.dial` does it:
             campaign_turns (every running campaign with its first open contact, one statement, one unit of
             work), then next_due (target < 50 ms for the selection); beside it the previous form
             (due_contacts for every running campaign, a unit of work each, or all in one transaction); and
             prints EXPLAIN (ANALYZE, BUFFERS) of the
             exact statements those methods sent, with a verdict: an index on the next due time, or a scan.

    .venv/bin/python bench/campaigns_bench.py decision [--campaigns 100] [--contacts 1000000] [--due-share 0.01]
                                                       [--passes 20] [--rounds 3]

  sustained  PostgreSQL: campaigns of due contacts (calling hours 00:00-24:00) and real `parley worker`
             processes with the simulator at high speed (PARLEY_SIMULATOR_SPEED, default 1000 here): one worker
             running every job kind, then the dialer's worker (`--jobs campaigns.dial`) beside a worker for the
             rest (`--exclude-jobs campaigns.dial`). Dial decisions per second (attempts recorded by the
             dialer; target >= 50/s from one worker), calls ended per second, and CPU per dial of each worker
             process and of PostgreSQL, over a window after a warm-up; a fresh database for each run.

    .venv/bin/python bench/campaigns_bench.py sustained [--campaigns 100] [--contacts 10000] [--seconds 20]
                                                        [--speed 1000] [--rounds 3]

A PostgreSQL database `parley_bench_<random>` is created on 127.0.0.1:5432 (user postgres;
PARLEY_BENCH_POSTGRES_URL or --postgres-admin-url to change) and dropped afterwards. Output: Markdown tables
(and JSON with --json).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
VENV_BIN = Path(sys.executable).parent
sys.path[:0] = [str(ROOT), str(BENCH)]

import bare_app  # noqa: E402
import httpx  # noqa: E402
from run import (  # noqa: E402
    PG_ADMIN,
    Database,
    _cpu_used,
    _processes,
    _server_env,
    _settings,
    free_port,
    fresh_database,
    running,
)

from adapters.phones.libphonenumber import LibPhoneNumberNormalizer  # noqa: E402
from application.ports.agents import AgentRepository  # noqa: E402
from application.ports.platform import UnitOfWork  # noqa: E402
from domain.agents import Agent, Llm, Voice, Voicemail  # noqa: E402
from domain.campaigns import MAX_IMPORT_BYTES, ContactDraft, check_row, csv_contacts  # noqa: E402
from domain.errors import ValidationFailed  # noqa: E402
from domain.timezones import validate_timezone  # noqa: E402
from entrypoints.cli import create_key, create_org, migrate  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402

IMPORT_TARGET_S = 10.0
MEMORY_TARGET_MB = 300.0

# --- the CSV file ------------------------------------------------------------------------------------------------

FIRST = ["Ada", "Grace", "Alan", "Maria", "José", "Fatima", "Wei", "Olga", "Jean-Luc", "Priya", "Noah", "Emma",
         "Liam", "Sofia", "Mateo", "Aisha", "Lukas", "Chloé", "Kenji", "Zoë"]
LAST = ["Lovelace", "Hopper", "Turing", "Schmidt", "García", "Khan", "Zhang", "Ivanova", "Picard", "Patel", "Smith",
        "Müller", "O'Brien", "Rossi", "Dubois", "Nakamura", "van der Berg", "Nowak", "Silva", "Johnson"]
ZONES = ["America/New_York", "America/Chicago", "America/Los_Angeles", "Europe/London", "Europe/Berlin",
         "Europe/Paris", "Europe/Madrid", "Asia/Tokyo"]
PLANS = ["basic", "pro", "enterprise", "trial"]
INVALID = ["12345", "n/a", "+1 555", "call me", "", "+999 1234", "0000", "+44 20"]


def _number(n: int) -> tuple[str, list[str]]:
    """The n-th distinct valid number, as digits after the country code, and ways of writing it."""
    kind = n % 4
    if kind in (0, 1):  # US/Canada: +1 NPA NXX XXXX
        npa, rest = 201 + (n // 8_000_000) % 700, n % 8_000_000
        nxx, line = 200 + rest // 10_000, rest % 10_000
        return f"+1{npa}{nxx}{line:04d}", [f"+1 ({npa}) {nxx}-{line:04d}", f"+1{npa}{nxx}{line:04d}",
                                          f"001 {npa} {nxx} {line:04d}", f"+1.{npa}.{nxx}.{line:04d}"]
    if kind == 2:  # Germany, Berlin: +49 30 + 8 digits
        sub = 20_000_000 + n % 70_000_000
        s = str(sub)
        return f"+4930{sub}", [f"+49 30 {s}", f"0049 30 {s[:4]} {s[4:]}", f"+49 (30) {s}", f"+4930{s}"]
    # the United Kingdom, London: +44 20 + 8 digits
    sub = 30_000_000 + n % 60_000_000
    s = str(sub)
    return f"+4420{sub}", [f"+44 20 {s[:4]} {s[4:]}", f"0044 20 {s}", f"+44-20-{s[:4]}-{s[4:]}", f"+4420{s}"]


@dataclass
class CsvFile:
    data: bytes
    rows: int
    invalid: int
    duplicates: int

    @property
    def expected_accepted(self) -> int:
        return self.rows - self.invalid - self.duplicates


def make_csv(rows: int, seed: int = 20261124) -> CsvFile:
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["phone", "name", "timezone", "plan", "account_ref"])
    issued: list[list[str]] = []
    invalid = duplicates = 0
    fresh = 0
    for n in range(rows):
        roll = rng.random()
        if roll < 0.01:
            phone = rng.choice(INVALID)
            invalid += 1
        elif roll < 0.02 and issued:
            phone = rng.choice(rng.choice(issued))  # an earlier row's number, maybe written another way
            duplicates += 1
        else:
            _, forms = _number(fresh * 7919 + 13)  # spread over area codes and formats
            fresh += 1
            issued.append(forms)
            phone = rng.choice(forms)
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}" if rng.random() < 0.95 else ""
        zone = rng.choice(ZONES) if rng.random() < 0.35 else ""
        writer.writerow([phone, name, zone, rng.choice(PLANS), f"AC-{n:07d}"])
    return CsvFile(out.getvalue().encode(), rows, invalid, duplicates)


# --- servers, processes ------------------------------------------------------------------------------------------


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in kB."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0])
    return values


def _tree(root: int) -> list[int]:
    """root and its descendants."""
    table = _processes()
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, (parent, _, _) in table.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sorted(tree)


def _memory(root: int) -> dict[int, dict[str, int]]:
    found: dict[int, dict[str, int]] = {}
    for pid in _tree(root):
        try:
            found[pid] = _status(pid)
        except OSError:
            continue
    return found


async def _seed_agent(db: Database, organization_id: int) -> int:
    container = build_container(_settings(db))
    try:
        async with container() as r:
            row = bare_app.sample_row(1, datetime(2026, 1, 1, tzinfo=UTC))
            row.pop("organization_id")
            row["voice"], row["llm"] = Voice(**row["voice"]), Llm(**row["llm"])
            row["voicemail"] = Voicemail(**row["voicemail"])
            row["status"] = "active"
            agent = await (await r.get(AgentRepository)).add(Agent(id=None, organization_id=organization_id, **row))
            await (await r.get(UnitOfWork)).commit()
            assert agent.id is not None
            return agent.id
    finally:
        await container.close()


def seed(db: Database) -> tuple[str, int]:
    """Schema, an organization with a key holding campaigns:* and agents:read, one active agent."""
    settings = _settings(db)
    migrate(settings)

    async def work() -> tuple[str, int]:
        org = await create_org(settings, "Bench Org", "enterprise", "standard", None)
        key = await create_key(settings, org["id"], ["campaigns:*", "agents:read"], "bench", None)
        return str(key["key"]), await _seed_agent(db, org["id"])

    return asyncio.run(work())


# --- import ------------------------------------------------------------------------------------------------------


@dataclass
class ImportRound:
    database: str
    seconds: float
    accepted: int
    duplicates: int
    rejected: int
    stored: int
    rss_before_mb: float  # the serving process's VmRSS just before the request
    hwm_before_mb: float  # its VmHWM then (start-up included)
    hwm_after_mb: float  # its VmHWM after the request: the peak of the whole run
    tree_hwm_mb: float  # the largest VmHWM of any process of the server's tree
    server_cpu_s: float
    database_cpu_s: float
    others_share: float
    load_1min: float


def _serving_pid(memory: dict[int, dict[str, int]], root: int) -> int:
    """The process that serves requests: with granian a worker child of the root process; with uvicorn and one
    worker the root itself. Taken as the process of the tree with the largest RSS."""
    return max(memory, key=lambda pid: (memory[pid].get("VmRSS", 0), pid != root))


def import_round(kind: str, csv_file: CsvFile, args: argparse.Namespace) -> ImportRound:
    with fresh_database(kind, args.postgres_admin_url) as db:
        key, agent_id = seed(db)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        command = [str(VENV_BIN / "parley"), "serve", "--no-worker", "--workers", "1", "--server", args.server,
                   "--host", "127.0.0.1", "--port", str(port)]
        auth = {"Authorization": f"Bearer {key}"}
        with running(command, _server_env(db), f"{base}/v2/health", db.workdir / "server.log") as server, \
                httpx.Client(base_url=base, headers=auth, timeout=300) as client:
            created = client.post("/v2/campaigns", json={"name": "Import bench", "agent_id": agent_id})
            if created.status_code != 201:
                raise RuntimeError(f"creating the campaign: {created.status_code} {created.text[:300]}")
            campaign_id = created.json()["data"]["id"]
            time.sleep(1.0)  # let the server settle after start-up and the first request
            before = _memory(server.pid)
            pid = _serving_pid(before, server.pid)
            load = os.getloadavg()[0]
            cpu_before, started = _processes(), time.perf_counter()
            answer = client.post(f"/v2/campaigns/{campaign_id}/contacts/import",
                                 files={"file": ("contacts.csv", csv_file.data, "text/csv")})
            seconds = time.perf_counter() - started
            cpu_after = _processes()
            after = _memory(server.pid)
            if answer.status_code != 201:
                raise RuntimeError(f"import: {answer.status_code} {answer.text[:500]}")
            result = answer.json()["data"]
            stats = client.get(f"/v2/campaigns/{campaign_id}").json()["data"]["stats"]
        used = _cpu_used(cpu_before, cpu_after, server.pid, db.cleanup_name)
        machine = seconds * (os.cpu_count() or 1)
        return ImportRound(
            database=kind, seconds=seconds, accepted=result["accepted"], duplicates=result["duplicates"],
            rejected=result["rejected_count"], stored=stats["total"],
            rss_before_mb=before[pid]["VmRSS"] / 1024, hwm_before_mb=before[pid]["VmHWM"] / 1024,
            hwm_after_mb=after[pid]["VmHWM"] / 1024,
            tree_hwm_mb=max(m.get("VmHWM", 0) for m in after.values()) / 1024,
            server_cpu_s=used["server"], database_cpu_s=used["database"],
            others_share=min(1.0, used["others"] / machine) if machine else 0.0, load_1min=load)


def row_floor(csv_file: CsvFile) -> float:
    """Seconds for the per-row work of an import alone, in this process: the CSV reader, the row checks, phone
    normalisation and the timezone check, as the import's intake does them, without HTTP or a database."""
    phones = LibPhoneNumberNormalizer()
    text = io.TextIOWrapper(io.BytesIO(csv_file.data), encoding="utf-8-sig", newline="")
    started, kept = time.process_time(), 0
    for item in csv_contacts(text):
        if isinstance(item, ContactDraft) and check_row(item) is None and phones.normalize(item.phone):
            if item.timezone is not None:
                try:
                    validate_timezone(item.timezone)
                except ValidationFailed:
                    continue
            kept += 1
    seconds = time.process_time() - started
    if kept != csv_file.rows - csv_file.invalid:
        raise RuntimeError(f"the floor kept {kept:,} rows, expected {csv_file.rows - csv_file.invalid:,}")
    return seconds


def _spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def import_markdown(csv_file: CsvFile, results: dict[str, list[ImportRound]], floors: list[float],
                    args: argparse.Namespace) -> str:
    lines = [f"### import: {csv_file.rows:,} rows, {len(csv_file.data) / 2**20:.2f} MiB "
             f"(limit {MAX_IMPORT_BYTES / 2**20:.0f} MiB), {csv_file.invalid:,} invalid, "
             f"{csv_file.duplicates:,} duplicates; {args.server}, 1 worker; median (range) of "
             f"{args.rounds} rounds", "",
             "| database | request wall s | target < 10 s | peak RSS (VmHWM) MB | target < 300 MB | "
             "RSS before MB | server CPU s | PostgreSQL CPU s | others | load 1 min |",
             "|---|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    for kind, rounds in results.items():
        seconds = [r.seconds for r in rounds]
        peaks = [r.hwm_after_mb for r in rounds]
        lines.append(
            f"| {kind} | {_spread(seconds)} | {'met' if statistics.median(seconds) < IMPORT_TARGET_S else 'MISSED'} "
            f"| {_spread(peaks, '{:.0f}')} | "
            f"{'met' if statistics.median(peaks) < MEMORY_TARGET_MB else 'MISSED'} "
            f"| {_spread([r.rss_before_mb for r in rounds], '{:.0f}')} "
            f"| {_spread([r.server_cpu_s for r in rounds])} | {_spread([r.database_cpu_s for r in rounds])} "
            f"| {_spread([r.others_share * 100 for r in rounds], '{:.0f}')} % "
            f"| {_spread([r.load_1min for r in rounds], '{:.1f}')} |")
    lines += ["", f"Floor (the per-row work alone in one process: CSV reader, row checks, phone normalisation, "
                  f"timezone check; no HTTP, no database), CPU s: {_spread(floors)}", ""]
    for kind, rounds in results.items():
        r = rounds[0]
        lines.append(f"- {kind}: accepted {r.accepted:,}, duplicates {r.duplicates:,}, rejected {r.rejected:,}, "
                     f"stored {r.stored:,} (expected {csv_file.expected_accepted:,} accepted); "
                     f"per round: " + ", ".join(f"{x.seconds:.2f} s / {x.hwm_after_mb:.0f} MB" for x in rounds))
    return "\n".join(lines) + "\n"


def run_import(args: argparse.Namespace) -> dict[str, Any]:
    csv_file = make_csv(args.rows)
    if len(csv_file.data) > MAX_IMPORT_BYTES:
        raise SystemExit(f"the file is {len(csv_file.data):,} bytes, over the route's {MAX_IMPORT_BYTES:,}")
    kinds = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    results: dict[str, list[ImportRound]] = {kind: [] for kind in kinds}
    floors: list[float] = []
    for index in range(args.rounds):  # the databases take turns, so a change of load falls on both
        floors.append(row_floor(csv_file))
        for kind in kinds:
            r = import_round(kind, csv_file, args)
            for name, got, want in (("accepted", r.accepted, csv_file.expected_accepted),
                                    ("stored", r.stored, csv_file.expected_accepted),
                                    ("rejected", r.rejected, csv_file.invalid)):
                if got != want:
                    print(f"warning: {kind} round {index + 1}: {name} {got:,}, expected {want:,}", file=sys.stderr)
            results[kind].append(r)
            print(f"# {kind} round {index + 1}: {r.seconds:.2f} s, VmHWM {r.hwm_after_mb:.0f} MB "
                  f"(RSS before {r.rss_before_mb:.0f} MB), load {r.load_1min:.1f}", flush=True)
    print(import_markdown(csv_file, results, floors, args), flush=True)
    return {"rows": csv_file.rows, "bytes": len(csv_file.data), "invalid": csv_file.invalid,
            "duplicates": csv_file.duplicates, "floor_cpu_s": floors,
            "rounds": {kind: [asdict(r) for r in rounds] for kind, rounds in results.items()}}


# --- campaigns through the API, contacts bulk-loaded (decision, sustained) ----------------------------------------


def _dialer_modules() -> tuple[Any, Any, Any]:
    """The dialer's store port and the job's constants, or SystemExit when the dialer is not in this tree."""
    try:
        from application import dialer
        from application import dialer_pass as feature
        from application.ports.dialer import DialerStore
    except ImportError as exc:
        raise SystemExit(f"the campaign dialer is not in this tree ({exc}): nothing to measure") from None
    return dialer, DialerStore, feature


def _serve_command(port: int, server: str) -> list[str]:
    return [sys.executable, "-m", "entrypoints.cli", "serve", "--no-worker", "--workers", "1", "--server", server,
            "--host", "127.0.0.1", "--port", str(port)]


def _expect(response: httpx.Response, status: int, what: str) -> Any:
    if response.status_code != status:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:400]}")
    return response.json()["data"] if response.content else None


CONTACTS_SQL = """
INSERT INTO campaign_contacts (organization_id, campaign_id, phone, name, timezone, custom_data, status, attempts,
                               next_attempt_at, reason, created_at, updated_at)
SELECT $1, c.id, '+1' || (2012000000 + g)::text, 'Contact ' || g, NULL, '{"plan": "pro"}', 'pending', 0,
       CASE WHEN g % 10000 < $3::float8 * 5000 THEN now()  -- never tried: due from when it was added
            WHEN g % 10000 < $3::float8 * 10000 THEN now() - make_interval(mins => 1 + g % 60)
            ELSE now() + make_interval(mins => 60 + g % 4320) END,
       CASE WHEN g % 10000 < $3::float8 * 10000 THEN NULL ELSE 'outside_calling_hours' END,
       now(), now()
FROM unnest($2::bigint[]) AS c(id), generate_series(1, $4::int) AS g
"""


@dataclass
class Seeded:
    organization_id: int
    campaign_ids: list[int]
    load_seconds: float


def seed_campaigns(db: Database, campaigns: int, contacts: int, due_share: float, campaign_fields: dict[str, Any],
                   server: str) -> Seeded:
    """An organization (enterprise plan), a published agent and ``campaigns`` campaigns through the real API; the
    contacts bulk-loaded in one INSERT ... SELECT over generate_series (``due_share`` of them due now, half never
    tried and half due since a few minutes, the rest due in 1-73 hours, as contacts deferred to their calling
    hours are); then every campaign started through the API."""
    import asyncpg

    settings = _settings(db)
    migrate(settings)

    async def org_and_key() -> tuple[int, str]:
        org = await create_org(settings, "Bench Org", "enterprise", "standard", None)
        key = await create_key(settings, org["id"], ["campaigns:*", "agents:*"], "bench", None)
        return int(org["id"]), str(key["key"])

    organization_id, key = asyncio.run(org_and_key())
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    per_campaign = contacts // campaigns
    with running(_serve_command(port, server), _server_env(db), f"{base}/v2/health", db.workdir / "seed.log"), \
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        agent = _expect(client.post("/v2/agents", json={"name": "Caller", "prompt": "You call about the renewal."}),
                        201, "creating the agent")
        _expect(client.post(f"/v2/agents/{agent['id']}/publish"), 200, "publishing the agent")
        ids = [_expect(client.post("/v2/campaigns", json={"name": f"Campaign {n}", "agent_id": agent["id"],
                                                          **campaign_fields}), 201, "creating a campaign")["id"]
               for n in range(campaigns)]

        async def load() -> float:
            conn = await asyncpg.connect(db.url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                started = time.perf_counter()
                await conn.execute(CONTACTS_SQL, organization_id, ids, due_share, per_campaign)
                await conn.execute("ANALYZE campaign_contacts")
                return time.perf_counter() - started
            finally:
                await conn.close()

        load_seconds = asyncio.run(load())
        for campaign_id in ids:
            _expect(client.post(f"/v2/campaigns/{campaign_id}/start"), 200, "starting a campaign")

    async def analyze() -> None:  # statistics as autovacuum would have them: the campaigns are running
        conn = await asyncpg.connect(db.url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            await conn.execute("ANALYZE")
        finally:
            await conn.close()

    asyncio.run(analyze())
    return Seeded(organization_id, ids, load_seconds)


# --- decision ----------------------------------------------------------------------------------------------------


_SCAN_NODE = re.compile(r"(Seq Scan|Index Scan|Index Only Scan|Bitmap Heap Scan)(?: Backward)? (?:using \w+ )?on "
                        r"campaign_contacts\b.*actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)")


def contacts_read(plan: str) -> int:
    """Rows of campaign_contacts the plan's scan nodes produced or removed by a filter (times their loops)."""
    total, loops = 0, 0
    for line in plan.splitlines():
        node = _SCAN_NODE.search(line)
        if node:
            loops = int(node.group(3))
            total += int(node.group(2)) * loops
            continue
        removed = re.search(r"Rows Removed by (?:Filter|Index Recheck): (\d+)", line)
        if removed and loops:
            total += int(removed.group(1)) * loops
        elif re.search(r"\(actual time", line):
            loops = 0
    return total


def plan_verdict(plan: str, contacts: int) -> str:
    indexes = sorted(set(re.findall(r"(?:Index|Index Only|Bitmap Index) Scan (?:Backward )?using (\w+)", plan)
                         + re.findall(r"Bitmap Index Scan on (\w+)", plan)))
    top = re.search(r"actual time=[\d.]+\.\.[\d.]+ rows=(\d+)", plan)
    returned = int(top.group(1)) if top else 0
    read = contacts_read(plan)
    how = ("a sequential SCAN of campaign_contacts" if "Seq Scan on campaign_contacts" in plan
           else "index " + ", ".join(indexes) if indexes else "no index")
    share = read / contacts if contacts else 0.0
    if "Seq Scan on campaign_contacts" in plan or share > 0.1:
        verdict = "READS MOST CONTACTS"
    elif read > 1000 and read > 10 * max(returned, 1):
        verdict = "reads far more contacts than it returns"
    else:
        verdict = "reads about what it returns"
    return f"{how}; {read:,} contact rows read ({share:.1%} of {contacts:,}) for {returned:,} returned: {verdict}"


async def _decision_rounds(db: Database, seeded: Seeded, args: argparse.Namespace) -> dict[str, Any]:
    import sqlalchemy as sa

    dialer, dialer_store, feature = _dialer_modules()
    from application.ports.platform import Clock
    from entrypoints.units import ScopedUnits

    container = build_container(_settings(db))
    captured: dict[str, tuple[str, Any]] = {}
    current: list[str] = []
    listening: list[Any] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if current and current[0] not in captured and statement.lstrip().upper().startswith("SELECT"):
            captured[current[0]] = (statement, parameters)

    async def call(r: Any, name: str, *call_args: Any) -> Any:
        """One DialerStore method, as the job calls it; its first SELECT is kept for EXPLAIN."""
        store = await r.get(dialer_store)
        if not listening:
            engine = (await (await r.get(UnitOfWork)).connection()).sync_engine
            sa.event.listen(engine, "before_cursor_execute", capture)
            listening.append(engine)
        current[:] = [name]
        try:
            return await getattr(store, name)(*call_args)
        finally:
            current.clear()

    async def unit(work: Any) -> Any:
        return await ScopedUnits(container).run(work)

    async def one_pass(now: datetime, mode: str) -> dict[str, Any]:
        """The selection of a pass, then next_due. ``job``: as the job does it, campaign_turns (the running
        campaigns with their first open contact, one statement) in one unit of work, ``wants_turn`` picking the
        campaigns a step is given. The peers, the previous form: campaign_turns, then due_contacts(FIRST_LOOK)
        for each campaign, each call in its own unit of work (``separate``) or all in one transaction
        (``one_tx``)."""
        timings: dict[str, Any] = {"due": []}

        async def body(r: Any | None) -> int:
            async def run(name: str, *call_args: Any) -> Any:
                if r is not None:
                    return await call(r, name, *call_args)
                return await unit(lambda req: call(req, name, *call_args))

            started = time.perf_counter()
            turns = await run("campaign_turns", feature.DialerPolicy().batch)
            timings["running"] = time.perf_counter() - started
            found = 0
            if mode == "job":
                found = sum(1 for turn in turns if dialer.wants_turn(turn, now))
            else:
                for turn in turns:
                    one = time.perf_counter()
                    found += bool(await run("due_contacts", turn.ref.organization_id, turn.ref.campaign_id, now,
                                            dialer.FIRST_LOOK))
                    timings["due"].append(time.perf_counter() - one)
            timings["selection"] = time.perf_counter() - started
            one = time.perf_counter()
            await run("next_due", now)
            timings["next_due"] = time.perf_counter() - one
            timings["pass"] = time.perf_counter() - started
            timings["campaigns"] = len(turns)
            return found

        timings["found"] = await body(None) if mode != "one_tx" else await unit(body)
        return timings

    async def clock_now(r: Any) -> datetime:
        return (await r.get(Clock)).now()

    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    try:
        now = await unit(clock_now)
        rounds: list[dict[str, Any]] = []
        for _ in range(args.rounds):
            row: dict[str, Any] = {"load_1min": os.getloadavg()[0]}
            for label in ("job", "separate", "one_tx"):  # taking turns, so a change of load falls on each
                passes = [await one_pass(now, label) for _ in range(args.passes)]
                due = sorted(d for p in passes for d in p["due"]) or [float("nan")]
                row.update({f"{label}_pass_ms": ms([p["pass"] for p in passes]),
                            f"{label}_selection_ms": ms([p["selection"] for p in passes]),
                            f"{label}_running_ms": ms([p["running"] for p in passes]),
                            f"{label}_due_ms": ms(due), f"{label}_due_p95_ms": due[int(len(due) * 0.95)] * 1000,
                            f"{label}_next_due_ms": ms([p["next_due"] for p in passes]),
                            f"{label}_found": passes[0]["found"], "campaigns": passes[0]["campaigns"]})
            if "due_contacts" in captured:  # the peer: the same statement, its rows left as rows
                statement, parameters = captured["due_contacts"]

                async def raw(r: Any, statement: str = statement, parameters: Any = parameters) -> list[float]:
                    conn = await (await r.get(UnitOfWork)).connection()
                    spent = []
                    for _ in range(args.passes * 5):
                        one = time.perf_counter()
                        (await conn.exec_driver_sql(statement, parameters)).all()
                        spent.append(time.perf_counter() - one)
                    return spent
                row["raw_due_ms"] = ms(await unit(raw))
            rounds.append(row)
        # what a step asks when its campaign has nothing due (the campaign's earliest deferred contact)
        await unit(lambda r: call(r, "earliest_attempt", seeded.organization_id, seeded.campaign_ids[0]))
        plans: dict[str, str] = {}
        for name, (statement, parameters) in captured.items():
            async def explain(r: Any, statement: str = statement, parameters: Any = parameters) -> str:
                conn = await (await r.get(UnitOfWork)).connection()
                result = await conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters)
                return "\n".join(str(row[0]) for row in result)
            plans[name] = await unit(explain)
        return {"rounds": rounds, "plans": plans, "statements": {k: v[0] for k, v in captured.items()}}
    finally:
        for engine in listening:
            sa.event.remove(engine, "before_cursor_execute", capture)
        await container.close()


def run_decision(args: argparse.Namespace) -> dict[str, Any]:
    _dialer_modules()
    with fresh_database("postgres", args.postgres_admin_url) as db:
        started = time.perf_counter()
        seeded = seed_campaigns(db, args.campaigns, args.contacts, args.due_share, {}, args.server)
        print(f"# seeded {args.campaigns} running campaigns, {args.contacts:,} contacts in "
              f"{time.perf_counter() - started:.1f} s (contacts loaded and analysed in {seeded.load_seconds:.1f} s)",
              flush=True)
        result = asyncio.run(_decision_rounds(db, seeded, args))
    rounds = result["rounds"]

    def cell(key: str) -> str:
        return _spread([r[key] for r in rounds])

    n = rounds[0]["campaigns"]
    job = statistics.median([r["job_selection_ms"] for r in rounds])
    lines = [f"### decision: {args.campaigns} running campaigns, {args.contacts:,} contacts "
             f"({args.due_share:.0%} due), PostgreSQL; ms, median (range) of {args.rounds} rounds, each the median "
             f"of {args.passes} passes", "",
             "| DialerStore call | the job: campaign_turns, one statement | previous form: + due_contacts per "
             "campaign, a unit of work each | previous form, all in one transaction |",
             "|---|---:|---:|---:|",
             f"| campaign_turns (running campaigns + first open contact each) | {cell('job_running_ms')} | "
             f"{cell('separate_running_ms')} | {cell('one_tx_running_ms')} |",
             f"| due_contacts, one campaign (p50) | - | {cell('separate_due_ms')} | {cell('one_tx_due_ms')} |",
             f"| due_contacts, one campaign (p95) | - | {cell('separate_due_p95_ms')} | {cell('one_tx_due_p95_ms')} |",
             f"| **selection of a pass** ({n} campaigns) | **{cell('job_selection_ms')}** | "
             f"{cell('separate_selection_ms')} | {cell('one_tx_selection_ms')} |",
             f"| next_due (when the job runs next) | {cell('job_next_due_ms')} | {cell('separate_next_due_ms')} | "
             f"{cell('one_tx_next_due_ms')} |",
             f"| whole pass (selection + next_due) | {cell('job_pass_ms')} | {cell('separate_pass_ms')} | "
             f"{cell('one_tx_pass_ms')} |",
             f"| peer: due_contacts' statement alone, rows not made into contacts (p50) | - | - | "
             f"{cell('raw_due_ms') if all('raw_due_ms' in r for r in rounds) else '-'} |",
             "", f"Target < 50 ms for the selection of a pass: {'met' if job < 50 else 'MISSED'} as the job does it "
             f"({job:.1f} ms). Campaigns given a step: {rounds[0]['job_found']:,} of {n} (the previous form found a "
             f"due contact in {rounds[0]['separate_found']:,}); load average (1 min) "
             f"{_spread([r['load_1min'] for r in rounds], '{:.1f}')}.", ""]
    for name, plan in result["plans"].items():
        lines += [f"#### {name}: {plan_verdict(plan, args.contacts)}", "", "```", result["statements"][name].strip(),
                  "", plan, "```", ""]
    print("\n".join(lines), flush=True)
    return result


# --- sustained ---------------------------------------------------------------------------------------------------


async def _counts(url: str) -> tuple[int, int, int]:
    """Attempts the dialer recorded, calls that reached a final status, contacts still waiting to be dialled."""
    import asyncpg

    from domain.calls import FINAL_STATUSES

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        row = await conn.fetchrow("SELECT (SELECT count(*) FROM contact_attempts) AS attempts, "
                                  "(SELECT count(*) FROM calls WHERE status = ANY($1::text[])) AS ended, "
                                  "(SELECT count(*) FROM campaign_contacts WHERE status IN ('pending', 'retry_wait'))"
                                  " AS waiting", sorted(FINAL_STATUSES))
        return int(row["attempts"]), int(row["ended"]), int(row["waiting"])
    finally:
        await conn.close()


@dataclass
class Window:
    """One measured window of real `parley worker` processes."""

    dials: int
    calls_ended: int
    seconds: float
    cpu_s: dict[str, float]  # by worker role
    database_cpu_s: float
    others_share: float
    load_1min: float
    waiting_after: int

    @property
    def dials_per_s(self) -> float:
        return self.dials / self.seconds

    @property
    def ended_per_s(self) -> float:
        return self.calls_ended / self.seconds

    def ms_per_dial(self, cpu_s: float) -> float:
        return cpu_s / max(1, self.dials) * 1000


@dataclass
class SustainedRound:
    one: Window  # one `parley worker` running every job kind
    split: Window  # `parley worker --jobs campaigns.dial` beside `parley worker --exclude-jobs campaigns.dial`
    alone_dials: int  # the peer: the dialer's pass alone, in this process, calls left queued
    alone_dials_per_s: float
    alone_cpu_ms_per_dial: float
    alone_database_cpu_ms_per_dial: float
    recording_cpu_ms: float  # the simulator's WAV of one completed call at its length cap


SUSTAINED_FIELDS = {"calling_hours": {"start": "00:00", "end": "24:00"}, "timezone_mode": "campaign",
                    "max_concurrent_calls": 50}
ONE_WORKER = {"worker": []}
SPLIT_WORKERS = {"dialer": ["--jobs", "campaigns.dial"], "calls": ["--exclude-jobs", "campaigns.dial"]}


def _worker_window(db: Database, args: argparse.Namespace, roles: dict[str, list[str]], label: str) -> Window:
    """Start `parley worker` processes (``roles``: name -> options), wait for the first dial, let ``--warmup``
    seconds pass, then count attempts and ended calls and take the processes' CPU over ``--seconds``.
    ``--py-spy DIR``: each worker is sampled by py-spy during the window (a profile, not a measurement)."""
    from run import _stop

    env = {**_server_env(db), "PARLEY_SIMULATOR_SPEED": str(args.speed)}
    workers: dict[str, subprocess.Popen[bytes]] = {}
    spies: list[subprocess.Popen[bytes]] = []
    try:
        for role, options in roles.items():
            with (db.workdir / f"worker-{role}.log").open("ab") as log:
                workers[role] = subprocess.Popen([sys.executable, "-m", "entrypoints.cli", "worker", *options],
                                                 env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                                 start_new_session=True)
        deadline = time.monotonic() + 90
        while asyncio.run(_counts(db.url))[0] == 0:
            if any(w.poll() is not None for w in workers.values()) or time.monotonic() > deadline:
                raise RuntimeError(f"the workers dialled nothing; see {db.workdir}/worker-*.log")
            time.sleep(0.2)
        time.sleep(args.warmup)
        if args.py_spy:
            args.py_spy.mkdir(parents=True, exist_ok=True)
            spies = [subprocess.Popen([str(VENV_BIN / "py-spy"), "record", "--nonblocking", "--format", "raw",
                                       "-d", str(int(args.seconds)), "-p", str(w.pid), "-o",
                                       str(args.py_spy / f"{label}-{role}.txt")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for role, w in workers.items()]
        (first, first_ended, _), cpu_before, load = asyncio.run(_counts(db.url)), _processes(), os.getloadavg()[0]
        started = time.perf_counter()
        time.sleep(args.seconds)
        last, last_ended, waiting = asyncio.run(_counts(db.url))
        seconds, cpu_after = time.perf_counter() - started, _processes()
    finally:
        for spy in spies:
            spy.wait(timeout=60)
        for w in workers.values():
            _stop(w)
    used = {role: _cpu_used(cpu_before, cpu_after, w.pid, db.cleanup_name) for role, w in workers.items()}
    ours = sum(u["server"] for u in used.values())
    anyone = next(iter(used.values()))
    others = anyone["others"] + anyone["server"] - ours  # every process outside the workers and this database
    if waiting == 0:
        print("warning: the campaigns ran out of due contacts within the window; raise --contacts", file=sys.stderr)
    return Window(dials=last - first, calls_ended=last_ended - first_ended, seconds=seconds,
                  cpu_s={role: u["server"] for role, u in used.items()}, database_cpu_s=anyone["database"],
                  others_share=min(1.0, max(0.0, others) / (seconds * (os.cpu_count() or 1))), load_1min=load,
                  waiting_after=waiting)


async def _dialer_alone(db: Database, seconds: float) -> dict[str, Any]:
    """The job's own pass (``RunDialerPass``) in a loop in this process, no calls worker: every dial places a call
    that stays queued, until the campaigns' caps (max_concurrent_calls each) or ``seconds`` run out. The first
    pass warms the process up and is not counted."""
    _, _, feature = _dialer_modules()
    from entrypoints.features.campaigns import dial_pass

    settings = _settings(db)
    container = build_container(settings)
    try:
        run = dial_pass(container, settings)
        await run.execute(feature.RunDialerPassCommand())
        dials, cpu, before, started = 0, time.process_time(), _processes(), time.perf_counter()
        while time.perf_counter() - started < seconds:
            report = await run.execute(feature.RunDialerPassCommand())
            if report.dialled == 0:
                break
            dials += report.dialled
        elapsed, cpu, after = time.perf_counter() - started, time.process_time() - cpu, _processes()
    finally:
        await container.close()
    used = _cpu_used(before, after, None, db.cleanup_name)
    return {"dials": dials, "seconds": elapsed, "cpu": cpu, "database": used["database"]}


def recording_cpu_ms() -> float:
    """CPU of the simulator's WAV recording of one completed call, at its length cap (adapters/telephony/wav.py):
    the calls worker writes one per completed call, in the same process as the dialer."""
    from adapters.telephony import wav

    turns = [{"role": "agent" if n % 2 else "user", "text": "a sentence of about ten words said on the call"}
             for n in range(16)]
    wav.tones(turns)  # as in a worker that has written a few: anything it caches per process is warm
    started = time.process_time()
    for _ in range(20):
        wav.tones(turns)
    return (time.process_time() - started) / 20 * 1000


def sustained_round(args: argparse.Namespace) -> SustainedRound:
    windows = {}
    for label, roles in (("one", ONE_WORKER), ("split", SPLIT_WORKERS)):
        with fresh_database("postgres", args.postgres_admin_url) as db:
            seed_campaigns(db, args.campaigns, args.contacts, 1.0, SUSTAINED_FIELDS, args.server)
            windows[label] = _worker_window(db, args, roles, label)
    with fresh_database("postgres", args.postgres_admin_url) as db:
        seed_campaigns(db, args.campaigns, args.contacts, 1.0, SUSTAINED_FIELDS, args.server)
        alone = asyncio.run(_dialer_alone(db, args.seconds))
    alone_dials = max(1, alone["dials"])
    return SustainedRound(
        one=windows["one"], split=windows["split"], alone_dials=alone["dials"],
        alone_dials_per_s=alone["dials"] / alone["seconds"], alone_cpu_ms_per_dial=alone["cpu"] / alone_dials * 1000,
        alone_database_cpu_ms_per_dial=alone["database"] / alone_dials * 1000, recording_cpu_ms=recording_cpu_ms())


def run_sustained(args: argparse.Namespace) -> dict[str, Any]:
    _dialer_modules()
    rounds: list[SustainedRound] = []
    for index in range(args.rounds):
        r = sustained_round(args)
        rounds.append(r)
        one, split = r.one, r.split
        print(f"# round {index + 1}: one worker {one.dials} dials in {one.seconds:.1f} s = {one.dials_per_s:.1f}/s, "
              f"{one.ms_per_dial(one.cpu_s['worker']):.1f} ms CPU per dial; dialer worker {split.dials_per_s:.1f}/s "
              f"at {split.ms_per_dial(split.cpu_s['dialer']):.1f} ms, calls worker "
              f"{split.ms_per_dial(split.cpu_s['calls']):.1f} ms per dial, calls ended {split.ended_per_s:.1f}/s; "
              f"dialer alone {r.alone_dials_per_s:.1f}/s at {r.alone_cpu_ms_per_dial:.1f} ms; load "
              f"{one.load_1min:.1f}/{split.load_1min:.1f}", flush=True)

    def cell(values: list[float], fmt: str = "{:.1f}") -> str:
        return _spread(values, fmt)

    def w(label: str) -> list[Window]:
        return [getattr(r, label) for r in rounds]

    def per_dial(label: str, role: str | None) -> str:
        return cell([x.ms_per_dial(x.cpu_s[role] if role else x.database_cpu_s) for x in w(label)])

    dialer_rates = [x.dials_per_s for x in w("split")]
    one_rates = [x.dials_per_s for x in w("one")]
    lines = [f"### sustained: PostgreSQL, {args.campaigns} running campaigns x {args.contacts // args.campaigns:,} due "
             f"contacts (calling hours 00:00-24:00, max_concurrent_calls 50), PARLEY_SIMULATOR_SPEED={args.speed:g}; "
             f"{args.seconds:g} s windows after {args.warmup:g} s; median (range) of {args.rounds} rounds, a fresh "
             f"database for each run", "",
             "A dial decision: the dialer placed a call for a contact (an attempt row). Calls ended: calls that "
             "reached a final status in the window (the simulator's whole call: dialling, answer, conversation, "
             "recording, the call's end with its transcript, usage and events).", "",
             "| run | dial decisions/s | calls ended/s | CPU ms per dial: dialer's process | other worker | "
             "PostgreSQL | load |", "|---|---:|---:|---:|---:|---:|---:|",
             f"| one `parley worker` (every job kind) | {cell(one_rates)} | "
             f"{cell([x.ended_per_s for x in w('one')])} | {per_dial('one', 'worker')} | - | {per_dial('one', None)} "
             f"| {cell([x.load_1min for x in w('one')])} |",
             f"| `parley worker --jobs campaigns.dial` beside `parley worker --exclude-jobs campaigns.dial` "
             f"| **{cell(dialer_rates)}** | {cell([x.ended_per_s for x in w('split')])} "
             f"| {per_dial('split', 'dialer')} | {per_dial('split', 'calls')} | {per_dial('split', None)} "
             f"| {cell([x.load_1min for x in w('split')])} |",
             f"| peer: the dialer's pass alone (`RunDialerPass` looped, one process; calls stay queued, no simulator) "
             f"| {cell([r.alone_dials_per_s for r in rounds])} | - | {cell([r.alone_cpu_ms_per_dial for r in rounds])} "
             f"| - | {cell([r.alone_database_cpu_ms_per_dial for r in rounds])} | - |", "",
             "Target >= 50 dial decisions/s from one worker: "
             f"{'met' if statistics.median(dialer_rates) >= 50 else 'MISSED'} by the dialer's worker with the calls "
             f"in another ({statistics.median(dialer_rates):.1f}/s); "
             f"{'met' if statistics.median(one_rates) >= 50 else 'MISSED'} by one worker running every job kind "
             f"({statistics.median(one_rates):.1f}/s). The simulator's WAV recording of one completed call (8 s cap): "
             f"{cell([r.recording_cpu_ms for r in rounds])} ms of CPU. Others used "
             f"{cell([x.others_share for r in rounds for x in (r.one, r.split)], '{:.2f}')} of the machine during the "
             f"windows.", ""]
    print("\n".join(lines), flush=True)
    return {"rounds": [asdict(r) for r in rounds]}


# --- main --------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Parley campaign benchmarks")
    parser.add_argument("scenario", choices=["import", "decision", "sustained"])
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both", help="import only")
    parser.add_argument("--rows", type=int, default=100_000, help="import: contacts in the file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--campaigns", type=int, default=None, help="decision and sustained: 100")
    parser.add_argument("--contacts", type=int, default=None, help="decision: 1,000,000; sustained: 10,000")
    parser.add_argument("--due-share", type=float, default=0.01, help="decision: share of contacts due now")
    parser.add_argument("--passes", type=int, default=20, help="decision: passes timed per round")
    parser.add_argument("--speed", type=float, default=1000.0, help="sustained: PARLEY_SIMULATOR_SPEED")
    parser.add_argument("--seconds", type=float, default=20.0, help="sustained: the measured window")
    parser.add_argument("--warmup", type=float, default=5.0, help="sustained: seconds after the first dial")
    parser.add_argument("--py-spy", type=Path, default=None,
                        help="sustained: sample each worker with py-spy during its window, raw stacks in this folder")
    parser.add_argument("--server", choices=["granian", "uvicorn"], default="granian")
    parser.add_argument("--postgres-admin-url", default=os.environ.get("PARLEY_BENCH_POSTGRES_URL", PG_ADMIN))
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    print(f"# {os.cpu_count()} CPUs, {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}, "
          f"{' '.join(sys.argv)}", flush=True)
    defaults = {"decision": (100, 1_000_000), "sustained": (100, 10_000)}.get(args.scenario, (1, 1))
    args.campaigns = args.campaigns or defaults[0]
    args.contacts = args.contacts or defaults[1]
    runner = {"import": run_import, "decision": run_decision, "sustained": run_sustained}[args.scenario]
    result = runner(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
