"""Media relay: concurrent emulated callers on one ``parley serve`` process whose runtime echoes the caller
(``PARLEY_MEDIA_RUNTIME=echo``), over real websockets (granian, TCP on 127.0.0.1).

Each caller opens its call's stream (Twilio's protocol), speaks for ``--seconds`` at real-time pace (20 ms μ-law
frames) and hangs up; Parley plays every frame back paced by its one sender task per session. Reported: the gaps
between the outbound frames each caller received (p50 / p99 / max; the target is p99 < 40 ms), the server
process's CPU per call-second (from /proc), how many calls ended ``completed``.

    .venv/bin/python bench/media_sessions.py [--calls 100] [--seconds 20] [--database-url URL] [--port 8791]

The callers run in this process (their own μ-law and websocket framing cost CPU here, not in the server's
figure); both share the machine's cores, so a busy machine shows in the gaps.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import statistics
import struct
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.sql.schema import upgrade
from application.accounts import CreateOrganization, CreateOrganizationCommand
from application.ports.agents import AgentRepository
from application.ports.calls import CallRepository
from application.ports.media import MediaStreamTokens
from application.ports.platform import UnitOfWork
from domain.agents import Agent
from domain.calls import Call
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.support.emulators.media_client import MediaStreamCaller, TcpWebSocket, ulaw_from_pcm

TICKS = os.sysconf("SC_CLK_TCK")
METRICS_TOKEN = "bench-metrics"


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(root: int) -> float:
    """CPU time (user + system) of ``root`` and every process below it (granian's workers are its children)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
    tree, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    total = 0.0
    for pid in tree:
        with contextlib.suppress(OSError, IndexError):
            fields = _stat(pid)
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


async def seed(settings: Settings, calls: int) -> list[tuple[str, str]]:
    """An organization, an agent and ``calls`` ringing calls, each with its stream token."""
    container = build_container(settings)
    now = datetime.now(UTC)
    out: list[tuple[str, str]] = []
    try:
        async with container() as r:
            org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("Bench", "enterprise"))
            agent = await (await r.get(AgentRepository)).add(Agent(None, org.id or 0, "Echo", created_at=now,
                                                                   updated_at=now))
            for _ in range(calls):
                call_id = str(uuid.uuid4())
                await (await r.get(CallRepository)).add(Call(
                    id=call_id, organization_id=org.id or 0, agent_id=agent.id or 0,
                    destination_phone="+15005550006", from_phone="+15005550001", status="ringing",
                    max_duration_seconds=3600, created_at=now, updated_at=now, started_at=now,
                    deadline_at=now + timedelta(hours=2), telephony_ref="bench"))
                out.append((call_id, await (await r.get(MediaStreamTokens)).issue(call_id, org.id or 0, now)))
            await (await r.get(UnitOfWork)).commit()
    finally:
        await container.close()
    return out


async def wait_port(port: int, seconds: float = 30) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"the server did not listen on {port}")


async def one_call(port: int, token: str, ulaw: bytes, started: asyncio.Event) -> MediaStreamCaller:
    socket = await TcpWebSocket.connect(f"ws://127.0.0.1:{port}/v2/media-streams/{token}")
    caller = MediaStreamCaller(socket, "twilio", echo_marks=False)
    await caller.start()
    await started.wait()
    await caller.play_ulaw(ulaw)
    await asyncio.sleep(0.3)  # the last echoes
    await caller.hang_up()
    return caller


async def frame_gaps(port: int) -> tuple[dict[float, float], float]:
    """The server's own histogram of gaps between consecutive outbound frames (``/metrics``): cumulative counts by
    upper bound, and the count."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics",
                                 headers={"Authorization": f"Bearer {METRICS_TOKEN}"})).text
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("parley_media_frame_gap_seconds_bucket"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float("inf") if bound == "+Inf" else float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets, buckets.get(float("inf"), 0.0)


def quantile_bound(buckets: dict[float, float], total: float, q: float) -> float:
    """The upper bound of the bucket holding the ``q`` quantile."""
    return next((bound for bound, count in sorted(buckets.items()) if count >= q * total), float("inf"))


async def ended(settings: Settings, call_ids: list[str], within: float = 60) -> tuple[dict[str, int], float]:
    """The calls' statuses once none is live any more (or after ``within`` seconds), and how long that took."""
    container = build_container(settings)
    started = time.monotonic()
    try:
        while True:
            async with container() as r:
                repo = await r.get(CallRepository)
                calls = [await repo.get(1, call_id) for call_id in call_ids]
            statuses: dict[str, int] = {}
            for call in calls:
                status = call.status if call is not None else "gone"
                statuses[status] = statuses.get(status, 0) + 1
            if not {"ringing", "in_progress"} & set(statuses) or time.monotonic() - started > within:
                return statuses, time.monotonic() - started
            await asyncio.sleep(0.5)
    finally:
        await container.close()


async def main(calls: int, seconds: float, database_url: str | None, port: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        await asyncio.to_thread(upgrade, url)
        settings = Settings(database_url=url, var_dir=Path(tmp), secret_key="bench-secret-key")
        tokens = await seed(settings, calls)
        env = {**os.environ, "PARLEY_DATABASE_URL": url, "PARLEY_VAR_DIR": tmp, "PARLEY_SECRET_KEY": "bench-secret-key",
               "PARLEY_MEDIA_RUNTIME": "echo", "PARLEY_LOG_LEVEL": "WARNING", "PARLEY_METRICS_TOKEN": METRICS_TOKEN}
        server = await asyncio.create_subprocess_exec(sys.executable, "-m", "entrypoints.cli", "serve", "--no-worker",
                                                      "--no-migrate", "--port", str(port), env=env)
        try:
            await wait_port(port)
            speech = struct.pack(f"<{int(8000 * seconds)}h", *(int(6000 * math.sin(2 * math.pi * 220 * i / 8000))
                                                               for i in range(int(8000 * seconds))))
            ulaw = ulaw_from_pcm(speech)
            started = asyncio.Event()
            tasks = [asyncio.create_task(one_call(port, token, ulaw, started)) for _, token in tokens]
            await asyncio.sleep(1.0)  # every stream connected and started
            cpu_before, wall_before = cpu_seconds(server.pid), time.monotonic()
            started.set()
            callers = await asyncio.gather(*tasks)
            cpu = cpu_seconds(server.pid) - cpu_before
            wall = time.monotonic() - wall_before
            buckets, sent_gaps = await frame_gaps(port)
            statuses, settled = await ended(settings, [call_id for call_id, _ in tokens])
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(server.wait(), 60)
            except TimeoutError:
                server.kill()
    gaps = sorted(gap for caller in callers for gap in caller.received.gaps_ms())
    frames = sum(len(caller.received.media) for caller in callers)
    p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] if gaps else float("nan")
    load = os.getloadavg()[0]
    print(f"{calls} calls x {seconds:.0f} s, {'PostgreSQL' if 'postgresql' in url else 'SQLite'}, load {load:.1f}")
    print(f"outbound frames received: {frames} of {calls * int(seconds * 50)} expected")
    under_40 = buckets.get(0.04, 0.0) / sent_gaps if sent_gaps else float("nan")
    p50_sent, p99_sent = (1000 * quantile_bound(buckets, sent_gaps, q) for q in (0.5, 0.99))
    print(f"gap between outbound frames, as the server sent them: p50 <= {p50_sent:.0f} ms, p99 <= {p99_sent:.0f} ms, "
          f"{100 * under_40:.2f} % under 40 ms ({sent_gaps:.0f} gaps)")
    print(f"gap between outbound frames, as the callers received them: p50 {statistics.median(gaps):.1f} ms, "
          f"p99 {p99:.1f} ms, max {gaps[-1]:.1f} ms")
    print(f"server CPU: {cpu:.2f} s over {wall:.1f} s = {100 * cpu / wall:.0f} % of a core; "
          f"{1000 * cpu / (calls * seconds):.2f} ms per call-second")
    print(f"calls after the hang-ups: {statuses}, all ended {settled:.1f} s after the last caller hung up")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--database-url")
    parser.add_argument("--port", type=int, default=8791)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.seconds, args.database_url, args.port))
