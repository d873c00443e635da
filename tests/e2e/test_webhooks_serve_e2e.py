"""`parley serve` with its in-process worker delivers a test event to a real receiver."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from domain.webhooks import verify_signature
from tests.processes import free_port
from tests.support.receiver import Receiver

ROOT = Path(__file__).resolve().parents[2]
PARLEY = [sys.executable, "-m", "entrypoints.cli"]



def _serve(port: int, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*PARLEY, "serve", "--port", str(port)], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
async def test_serve_runs_the_webhook_worker(receiver: Receiver, tmp_path: Path) -> None:
    env = {**os.environ, "PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}",
           "PARLEY_VAR_DIR": str(tmp_path / "var"), "PARLEY_ALLOW_LOOPBACK_TARGETS": "1",
           "PYTHONPATH": str(ROOT), "PARLEY_LOG_LEVEL": "WARNING"}
    demo = await asyncio.to_thread(subprocess.run, [*PARLEY, "admin", "demo-key"], env=env, cwd=tmp_path,
                                   capture_output=True, text=True, timeout=60, check=True)
    key = json.loads(demo.stdout.strip().splitlines()[-1])["key"]
    port = free_port()
    server = _serve(port, env, tmp_path)
    base = f"http://127.0.0.1:{port}/v2"
    headers = {"Authorization": f"Bearer {key}"}
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=5) as client:
            for _ in range(150):
                try:
                    if (await client.get("/health")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.2)
            created = await client.post("/webhooks", json={"url": receiver.url(), "events": ["call.ended"]})
            assert created.status_code == 201, created.text
            hook = created.json()["data"]
            queued = await client.post(f"/webhooks/{hook['id']}/test")
            assert queued.status_code == 202
            [got] = await receiver.wait_for(1, timeout=15)
            assert got.webhook_id == queued.json()["data"]["message_id"]
            assert verify_signature(hook["secret"], got.headers["x-webhook-timestamp"], got.body,
                                    got.headers["x-webhook-signature"], now=int(got.headers["x-webhook-timestamp"]))
            for _ in range(50):
                logs = (await client.get(f"/webhooks/{hook['id']}/logs")).json()["data"]
                if logs:
                    break
                await asyncio.sleep(0.1)
            assert [(x["event"], x["status"]) for x in logs] == [("webhook.test", "succeeded")]
    finally:
        server.terminate()
        for _ in range(200):
            if server.poll() is not None:
                break
            await asyncio.sleep(0.1)
        else:
            server.kill()
