"""Twilio against a real `parley serve` (worker in-process), on SQLite and PostgreSQL: the Twilio emulator is a real
HTTP server its REST requests reach, and its signed callbacks reach the server over HTTP at PARLEY_PUBLIC_BASE_URL
(an http loopback address, accepted with PARLEY_CARRIER_INSECURE_PUBLIC_URL).

A provider is connected, a number bought (Parley points it at itself) and released, a text sent and its receipts
received, an inbound STOP keeps the opt-out list, a forged callback is refused; a call is dialled, answered, and
its ``<Connect><Stream>`` media stream opened by the emulator over ws:// to the server (the caller's speech in, the
agent's first message back), hung up by Parley through Twilio's API and ended ``completed`` with a recording; an
inbound call reaches its agent's media session."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port, until
from tests.support.emulators.media_client import StreamingCallers
from tests.support.emulators.twilio import TwilioEmulator

pytestmark = pytest.mark.slow
PARLEY = [sys.executable, "-m", "entrypoints.cli"]
ROOT = Path(__file__).resolve().parents[2]


async def test_twilio_through_a_real_server(tmp_path: Path, private_sql_url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PARLEY_DATABASE_URL": private_sql_url, "PARLEY_VAR_DIR": str(tmp_path / "var"),
           "PARLEY_ALLOW_LOOPBACK_TARGETS": "true", "PARLEY_PUBLIC_BASE_URL": base,
           "PARLEY_CARRIER_INSECURE_PUBLIC_URL": "true", "PARLEY_SECRET_KEY": "e2e-twilio-secret-key-0123456789abcdef",
           "PYTHONPATH": str(ROOT), "PARLEY_RATE_LIMIT_PER_MINUTE": "10000", "PARLEY_RATE_LIMIT_PER_HOUR": "100000",
           "PARLEY_MEDIA_RUNTIME": "first_message"}
    made = await asyncio.to_thread(subprocess.run, [*PARLEY, "admin", "demo-key"], env=env, cwd=tmp_path,
                                   capture_output=True, text=True, timeout=60, check=True)
    key = json.loads(made.stdout.strip().splitlines()[-1])["key"]
    emulator = TwilioEmulator().start()
    server = await asyncio.to_thread(subprocess.Popen, [*PARLEY, "serve", "--port", str(port)], env=env,
                                     cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=10) as client:
            async def healthy() -> bool:
                try:
                    return (await client.get("/v2/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await until(healthy, 30, "the server")
            provider = (await client.post("/v2/telephony/providers", json={
                "name": "Twilio", "type": "twilio", "credentials": emulator.credentials, "is_default": True,
                "settings": {"api_base_url": emulator.url}})).json()["data"]
            pid = provider["id"]
            found = (await client.get(f"/v2/telephony/providers/{pid}/available-numbers?area_code=212")).json()
            assert [n["phone_number"] for n in found["data"]] == ["+12125550123"]
            bought = await client.post("/v2/telephony/phone-numbers", json={
                "provider_id": pid, "phone_number": "+12125550123", "purchase": True,
                "capabilities": {"voice": True, "sms": True}})
            assert bought.status_code == 201, bought.text
            assert emulator.owned["+12125550123"]["SmsUrl"] == f"{base}/v2/carriers/{pid}/sms"

            # SMS out, with its receipts over HTTP
            sent = (await client.post("/v2/sms", json={"to": "+14155550123", "body": "Hello from Parley"})).json()
            sid = next(iter(emulator.messages))
            assert (await emulator.sms_status(sid, "sent")).status_code == 204
            assert (await emulator.sms_status(sid, "delivered")).status_code == 204
            message = (await client.get(f"/v2/sms/{sent['data']['id']}")).json()["data"]
            assert message["status"] == "delivered"

            # inbound STOP keeps the opt-out list
            assert (await emulator.inbound_sms("+14155550166", "+12125550123", "stop")).status_code == 204
            refused = await client.post("/v2/sms", json={"to": "+14155550166", "body": "Hi"})
            assert refused.status_code == 422 and refused.json()["error"]["code"] == "recipient_opted_out"

            # a forged receipt is refused and changes nothing
            url = emulator.messages[sid]["StatusCallback"]
            forged = await emulator.send(url, {"MessageSid": sid, "MessageStatus": "failed"}, forged=True)
            assert forged.status_code == 403

            # a call through its media stream: the first message, then Parley hangs up through Twilio's API
            emulator.media = media = StreamingCallers(hang_up_after=10)
            agent = (await client.post("/v2/agents", json={"name": "Desk", "prompt": "Help.",
                                                           "first_message": "Hello, this is Parley."})).json()["data"]
            await client.post(f"/v2/agents/{agent['id']}/publish")
            call = (await client.post("/v2/calls", json={"bot_id": str(agent["id"]),
                                                         "destination_phone": "+14155550123"})).json()["data"]

            async def dialled() -> bool:
                return bool(emulator.calls)

            await until(dialled, 30, "the dial")
            sid = next(iter(emulator.calls))
            assert (await emulator.ring(sid)).status_code < 300
            assert (await emulator.answer(sid)).status_code < 300
            assert "direction" not in media.callers[sid].parameters  # outbound, the session's default
            caller = await media.ended(sid, within=30)
            assert media.hung_up[sid] is False and len(caller.received.media) >= 25  # the agent spoke, hung up
            assert [u.get("Status") for u in emulator.calls[sid].updates] == ["completed"]

            async def ended() -> bool:
                got = (await client.get(f"/v2/calls/{call['id']}")).json()["data"]
                return got["status"] not in ("queued", "ringing", "in_progress")

            await until(ended, 30, "the call's end")
            assert (await emulator.complete(sid, duration=2)).status_code < 300  # after the session's finish
            got = (await client.get(f"/v2/calls/{call['id']}")).json()["data"]
            assert (got["status"], got["end_reason"]) == ("completed", "agent_hangup")
            recorded = await client.get(f"/v2/call-logs/{got['call_log_id']}/recording")
            assert recorded.status_code == 200, recorded.text

            # an inbound call reaches its agent's media session
            patched = await client.patch(f"/v2/telephony/phone-numbers/{bought.json()['data']['id']}",
                                         json={"inbound_agent_id": agent["id"]})
            assert patched.status_code == 200
            inbound, answered = await emulator.inbound_call("+14155550142", "+12125550123")
            assert answered.status_code == 200 and "<Connect><Stream" in answered.text
            assert media.callers[inbound.sid].parameters["direction"] == "inbound"
            await media.ended(inbound.sid, within=30)
            calls = (await client.get("/v2/calls")).json()["data"]
            (taken,) = [c for c in calls if c["direction"] == "inbound"]

            async def taken_ended() -> bool:
                got = (await client.get(f"/v2/calls/{taken['id']}")).json()["data"]
                return got["status"] == "completed"

            await until(taken_ended, 30, "the inbound call's end")

            released = await client.delete(f"/v2/telephony/phone-numbers/{bought.json()['data']['id']}",
                                           params={"release": "true"})
            assert released.status_code == 204 and "+12125550123" not in emulator.owned
    finally:
        server.terminate()
        await asyncio.to_thread(server.wait, 30)
        emulator.stop()
