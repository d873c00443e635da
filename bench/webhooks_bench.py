"""Webhook delivery benchmark: outbox -> dispatcher -> delivery workers -> a local receiver.

    .venv/bin/python bench/webhooks_bench.py [--subscriptions 10] [--events 500] [--workers 2]
                                             [--latency-samples 50] [--database-url URL]

Without --database-url it creates a private PostgreSQL database on PARLEY_BENCH_POSTGRES_URL
(default postgresql+asyncpg://postgres@127.0.0.1:5432/postgres) and drops it afterwards.

1. Throughput: N subscriptions to one event type; E events committed in one transaction while
   the workers (``parley worker --jobs webhooks.dispatch,webhooks.deliver`` processes) are idle and warm. Measured
   from the commit to the arrival of the last of the N x E deliveries at the receiver.
2. Latency: with the system idle, single events (one subscriber) committed one at a time; the
   time from commit to arrival at the receiver, p50 / p95 / max.

The receiver is a minimal asyncio HTTP/1.1 server in this process answering 200 at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.sql.schema import upgrade  # noqa: E402
from application.accounts import CreateOrganization, CreateOrganizationCommand  # noqa: E402
from application.context import Actor  # noqa: E402
from application.ports.platform import UnitOfWork  # noqa: E402
from application.webhooks import CreateSubscription, CreateSubscriptionCommand  # noqa: E402
from domain.events import event  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402

SECRET_KEY = "bench-secret-key"
DEFAULT_ADMIN = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"


class Receiver:
    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.by_seq: dict[int, float] = {}
        self.count = 0
        self.duplicates = 0
        self.changed = asyncio.Event()
        self.port = 0

    async def start(self) -> None:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=4096)
        self.port = server.sockets[0].getsockname()[1]
        self.server = server

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                webhook_id = ""
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    lowered = name.strip().lower()
                    if lowered == b"content-length":
                        length = int(value)
                    elif lowered == b"x-webhook-id":
                        webhook_id = value.strip().decode()
                body = await reader.readexactly(length)
                now = time.monotonic()
                if webhook_id in self.arrivals:
                    self.duplicates += 1
                else:
                    self.arrivals[webhook_id] = now
                    self.count += 1
                    if b'"seq"' in body:
                        self.by_seq[json.loads(body)["data"]["seq"]] = now
                self.changed.set()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def wait_count(self, count: int, timeout: float) -> bool:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while self.count < count:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
        return True


async def _create_pg(admin: str) -> str:
    import asyncpg

    name = f"parley_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    return admin.rsplit("/", 1)[0] + f"/{name}"


async def _drop_pg(admin: str, url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    await conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    await conn.close()


async def _in_transaction(container: Any, work: Any) -> Any:
    async with container() as request:
        result = await work(request)
        await (await request.get(UnitOfWork)).commit()
    return result


async def _emit(container: Any, org: int, kind: str, items: list[dict[str, Any]]) -> float:
    async def work(request: Any) -> None:
        uow = await request.get(UnitOfWork)
        for data in items:
            uow.record(event(org, kind, data))

    await _in_transaction(container, work)
    return time.monotonic()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_workers(count: int, url: str, var_dir: str) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PARLEY_DATABASE_URL": url, "PARLEY_SECRET_KEY": SECRET_KEY,
           "PARLEY_ALLOW_LOOPBACK_TARGETS": "1", "PARLEY_VAR_DIR": var_dir, "PARLEY_LOG_LEVEL": "WARNING",
           "PARLEY_DB_POOL_SIZE": "5"}
    return [subprocess.Popen([sys.executable, "-m", "entrypoints.cli", "worker", "--no-migrate",
                              "--jobs", "webhooks.dispatch,webhooks.deliver"], cwd=ROOT, env=env)
            for _ in range(count)]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    admin = os.environ.get("PARLEY_BENCH_POSTGRES_URL", DEFAULT_ADMIN)
    url = args.database_url or await _create_pg(admin)
    var_dir = tempfile.mkdtemp(prefix="parley-bench-")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        await asyncio.to_thread(upgrade, url)
        settings = Settings(database_url=url, secret_key=SECRET_KEY, allow_loopback_targets=True,
                            var_dir=Path(var_dir))
        container = build_container(settings)
        receiver = Receiver()
        await receiver.start()

        async def setup(request: Any) -> int:
            org = await (await request.get(CreateOrganization)).execute(
                CreateOrganizationCommand("Bench", "enterprise", "standard"))
            actor = Actor.system(org.id or 0)
            create = await request.get(CreateSubscription)
            for n in range(args.subscriptions):
                await create.execute(CreateSubscriptionCommand(
                    actor, f"http://127.0.0.1:{receiver.port}/hook/{n}", ["contact.completed"]))
            await create.execute(CreateSubscriptionCommand(
                actor, f"http://127.0.0.1:{receiver.port}/latency", ["call.ended"]))
            return org.id or 0

        org = await _in_transaction(container, setup)
        workers = _start_workers(args.workers, url, var_dir)

        # warm up: every worker process is up and has delivered something
        await _emit(container, org, "call.ended", [{"warmup": n} for n in range(args.workers * 5)])
        if not await receiver.wait_count(args.workers * 5, 60):
            raise SystemExit("the workers did not start")
        await asyncio.sleep(1.0)

        # 1. throughput
        base = receiver.count
        expected = args.subscriptions * args.events
        cpu_before = sum(_cpu_seconds(p.pid) for p in workers)
        committed = await _emit(container, org, "contact.completed", [{"n": n} for n in range(args.events)])
        if not await receiver.wait_count(base + expected, 300):
            raise SystemExit(f"only {receiver.count - base} of {expected} deliveries arrived")
        last = max(receiver.arrivals.values())
        elapsed = last - committed
        throughput = expected / elapsed
        worker_cpu = sum(_cpu_seconds(p.pid) for p in workers) - cpu_before

        # 2. latency when idle
        await asyncio.sleep(1.0)
        latencies = []
        for seq in range(args.latency_samples):
            sent = await _emit(container, org, "call.ended", [{"seq": seq}])
            deadline = time.monotonic() + 10
            while seq not in receiver.by_seq and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.002)
            if seq in receiver.by_seq:
                latencies.append((receiver.by_seq[seq] - sent) * 1000)
            await asyncio.sleep(args.latency_gap)
        latencies.sort()
        await container.close()
        return {
            "database": url.split("://", 1)[0],
            "workers": args.workers,
            "subscriptions": args.subscriptions,
            "events": args.events,
            "deliveries": expected,
            "seconds": round(elapsed, 2),
            "deliveries_per_second": round(throughput, 1),
            "duplicates": receiver.duplicates,
            "worker_cpu_ms_per_delivery": round(worker_cpu * 1000 / expected, 2),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "latency_ms": {
                "samples": len(latencies),
                "p50": round(statistics.median(latencies), 1) if latencies else None,
                "p95": round(latencies[int(len(latencies) * 0.95) - 1], 1) if latencies else None,
                "max": round(latencies[-1], 1) if latencies else None,
            },
        }
    finally:
        for process in workers:
            process.terminate()
        for process in workers:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        if not args.database_url:
            await _drop_pg(admin, url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--subscriptions", type=int, default=10)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--latency-samples", type=int, default=50)
    parser.add_argument("--latency-gap", type=float, default=0.2, help="seconds between latency samples")
    result = asyncio.run(run(parser.parse_args()))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
