"""A client's whole day with calls, against a real `parley serve` (worker in-process, real clock, default
simulator speed): publish an agent, subscribe to call events, call every simulator test number and receive
the right final state, signed webhook events, call log, transcript and a playable recording."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import os
import subprocess
import sys
import time
import wave
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import free_port, until
from tests.support.receiver import Receiver

pytestmark = pytest.mark.slow
PARLEY = [sys.executable, "-m", "entrypoints.cli"]
ROOT = Path(__file__).resolve().parents[2]
FINAL = {"completed", "busy", "no_answer", "failed", "voicemail", "cancelled", "transferred"}





async def test_calls_end_to_end_on_a_real_server(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}",
           "PARLEY_VAR_DIR": str(tmp_path / "var"), "PARLEY_ALLOW_LOOPBACK_TARGETS": "true",
           "PARLEY_PUBLIC_BASE_URL": base, "PARLEY_SECRET_KEY": "e2e-secret", "PYTHONPATH": str(ROOT),
           "PARLEY_RATE_LIMIT_PER_MINUTE": "10000", "PARLEY_RATE_LIMIT_PER_HOUR": "100000"}
    made = await asyncio.to_thread(subprocess.run, [*PARLEY, "admin", "demo-key"], env=env, cwd=tmp_path,
                                   capture_output=True, text=True, timeout=60, check=True)
    demo = json.loads(made.stdout.strip().splitlines()[-1])
    receiver = await Receiver().start()
    server = await asyncio.to_thread(subprocess.Popen, [*PARLEY, "serve", "--port", str(port)], env=env,
                                     cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    headers = {"Authorization": f"Bearer {demo['key']}"}
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client:
            async def healthy() -> bool:
                try:
                    return (await client.get("/v2/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await until(healthy, 30, "the server")
            calendar = (await client.post("/v2/scheduling/calendars", json={
                "name": "Demos", "timezone": "UTC", "slot_duration_minutes": 30})).json()["data"]
            for weekday in range(7):
                await client.post(f"/v2/scheduling/calendars/{calendar['id']}/rules",
                                  json={"weekday": weekday, "start_time": "00:00", "end_time": "23:30"})
            agent = (await client.post("/v2/agents", json={
                "name": "Front desk", "prompt": "You call {{contact_name}} about the {{product}} demo.",
                "first_message": "Hi {{contact_name}}!", "transfer_phone": "+14155550199",
                "calendar_id": calendar["id"],
                "voicemail": {"action": "leave_message", "message": "Hi {{contact_name}}, please call back."},
            })).json()["data"]
            assert (await client.post(f"/v2/agents/{agent['id']}/publish")).status_code == 200
            hook = (await client.post("/v2/webhooks", json={
                "url": receiver.url("/hook"),
                "events": ["call.started", "call.answered", "call.ended", "call.completed", "call.failed",
                           "call.transferred", "appointment.booked"]})).json()["data"]

            expected = {"00": "completed", "01": "busy", "02": "no_answer", "03": "failed", "04": "voicemail",
                        "05": "transferred", "06": "completed"}
            ids: dict[str, str] = {}
            for suffix in expected:
                body = {"bot_id": str(agent["id"]), "destination_phone": f"+15550100{suffix}",
                        "contact_name": "Ada", "custom_data": {"product": "solar"}}
                key = {"Idempotency-Key": f"e2e-{suffix}"}
                created = await client.post("/v2/calls", json=body, headers=key)
                assert created.status_code == 201, created.text
                replay = await client.post("/v2/calls", json=body, headers=key)
                assert replay.headers.get("idempotency-replayed") == "true"
                assert replay.json()["data"]["id"] == created.json()["data"]["id"]
                ids[suffix] = created.json()["data"]["id"]
            started = time.monotonic()

            async def all_final() -> dict[str, Any] | None:
                calls = {s: (await client.get(f"/v2/calls/{i}")).json()["data"] for s, i in ids.items()}
                return calls if all(c["status"] in FINAL for c in calls.values()) else None

            calls = await until(all_final, 30, "every call to end")
            assert time.monotonic() - started < 15
            assert (await client.get("/v2/calls")).json()["meta"]["total"] == len(expected)
            for suffix, status in expected.items():
                assert calls[suffix]["status"] == status, suffix
            assert calls["06"]["outcome"] == "appointment_booked"
            assert calls["05"]["transferred_to"] == "+14155550199"

            want = {"00": ["call.started", "call.answered", "call.ended", "call.completed"],
                    "01": ["call.started", "call.ended", "call.failed"],
                    "02": ["call.started", "call.ended", "call.failed"],
                    "03": ["call.started", "call.ended", "call.failed"],
                    "04": ["call.started", "call.ended", "call.failed"],
                    "05": ["call.started", "call.answered", "call.transferred", "call.ended"],
                    "06": ["call.started", "call.answered", "call.ended", "call.completed"]}
            total = sum(len(v) for v in want.values()) + 1  # + appointment.booked
            await receiver.wait_for(total, path="/hook", timeout=30)
            deliveries = []
            for request in receiver.on("/hook"):
                timestamp = request.headers["x-webhook-timestamp"]
                signed = hmac.new(hook["secret"].encode(), f"{timestamp}.".encode() + request.body,
                                  hashlib.sha256).hexdigest()
                assert hmac.compare_digest(signed, request.headers["x-webhook-signature"])
                deliveries.append(json.loads(request.body))
            for suffix, kinds in want.items():
                got = [d["event"] for d in deliveries if d["data"].get("id") == ids[suffix]]
                assert sorted(got) == sorted(kinds), suffix
                ended = next(d for d in deliveries if d["event"] == "call.ended" and d["data"]["id"] == ids[suffix])
                assert ended["data"]["status"] == expected[suffix]
            booked = [d for d in deliveries if d["event"] == "appointment.booked"]
            assert len(booked) == 1

            for suffix in ("00", "04", "05", "06"):
                log_id = calls[suffix]["call_log_id"]
                log = (await client.get(f"/v2/call-logs/{log_id}")).json()["data"]
                assert log["recording_available"] and log["transcript"], suffix
                link = (await client.get(f"/v2/call-logs/{log_id}/recording")).json()["data"]
                async with httpx.AsyncClient(timeout=10) as anonymous:
                    audio = await anonymous.get(link["url"])
                    assert audio.status_code == 200 and audio.headers["content-type"].startswith("audio/wav")
                    with wave.open(io.BytesIO(audio.content)) as wav:
                        assert wav.getframerate() == 4000 and wav.getnframes() > 4000
                    tampered = await anonymous.get(link["url"].replace("expires=", "expires=9"))
                    assert tampered.status_code == 403
            transcript = (await client.get(f"/v2/call-logs/{calls['06']['call_log_id']}/transcript")).json()["data"]
            assert transcript[0] == {"role": "agent", "text": "Hi Ada!", "at_ms": 0}
            assert any("booked for" in turn["text"] for turn in transcript)
            stats = (await client.get("/v2/telephony/stats")).json()["data"]
            assert stats["total_calls"] == len(expected) and stats["total_minutes"] > 0
    finally:
        server.terminate()
        await asyncio.to_thread(server.wait, 30)
        await receiver.close()
