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
import statistics
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


# --- main --------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Parley campaign benchmarks")
    parser.add_argument("scenario", choices=["import"])
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", choices=["granian", "uvicorn"], default="granian")
    parser.add_argument("--postgres-admin-url", default=os.environ.get("PARLEY_BENCH_POSTGRES_URL", PG_ADMIN))
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    print(f"# {os.cpu_count()} CPUs, {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}, "
          f"{' '.join(sys.argv)}", flush=True)
    result = run_import(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
