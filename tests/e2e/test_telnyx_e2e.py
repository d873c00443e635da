"""Telnyx against a real `parley serve` (worker in-process), on SQLite and PostgreSQL: the Telnyx emulator is a real
HTTP server its REST requests reach, and its Ed25519-signed webhooks reach the server over HTTP at
PARLEY_PUBLIC_BASE_URL (an http loopback address, accepted with PARLEY_CARRIER_INSECURE_PUBLIC_URL).

A provider is connected, a number bought (Parley points the Call Control application and the messaging profile at
itself) and released, a text sent and its receipts received, an inbound STOP keeps the opt-out list, forged and
stale webhooks are refused; a call is dialled, answered, and its media stream (``stream_url``) opened by the emulator
over ws:// to the server (the caller's speech in, the agent's first message back), hung up by Parley through Call
Control and ended ``completed`` with a recording; an inbound call is answered with its stream and reaches its
agent's media session."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.processes import free_port, until
from tests.support.emulators.media_client import StreamingCallers
from tests.support.emulators.telnyx import TelnyxEmulator

pytestmark = pytest.mark.slow
PARLEY = [sys.executable, "-m", "entrypoints.cli"]
ROOT = Path(__file__).resolve().parents[2]


async def test_telnyx_through_a_real_server(tmp_path: Path, private_sql_url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PARLEY_DATABASE_URL": private_sql_url, "PARLEY_VAR_DIR": str(tmp_path / "var"),
           "PARLEY_ALLOW_LOOPBACK_TARGETS": "true", "PARLEY_PUBLIC_BASE_URL": base,
           "PARLEY_CARRIER_INSECURE_PUBLIC_URL": "true", "PARLEY_SECRET_KEY": "e2e-telnyx-secret-key-0123456789abcdef",
           "PYTHONPATH": str(ROOT), "PARLEY_RATE_LIMIT_PER_MINUTE": "10000", "PARLEY_RATE_LIMIT_PER_HOUR": "100000",
           "PARLEY_MEDIA_RUNTIME": "first_message"}
    made = await asyncio.to_thread(subprocess.run, [*PARLEY, "admin", "demo-key"], env=env, cwd=tmp_path,
                                   capture_output=True, text=True, timeout=60, check=True)
    key = json.loads(made.stdout.strip().splitlines()[-1])["key"]
    emulator = await TelnyxEmulator().start()
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
            created = await client.post("/v2/telephony/providers", json={
                "name": "Telnyx", "type": "telnyx", "credentials": emulator.credentials(), "is_default": True,
                "settings": {"api_base_url": emulator.base_url}})
            assert created.status_code == 201, created.text
            pid = created.json()["data"]["id"]
            found = (await client.get(f"/v2/telephony/providers/{pid}/available-numbers",
                                      params={"country": "US", "area_code": "212", "limit": 1})).json()
            assert [n["phone_number"] for n in found["data"]] == ["+12125550100"]
            bought = await client.post("/v2/telephony/phone-numbers", json={
                "provider_id": pid, "phone_number": "+12125550100", "purchase": True,
                "capabilities": {"voice": True, "sms": True}})
            assert bought.status_code == 201, bought.text
            assert emulator.application["webhook_event_url"] == f"{base}/v2/carriers/{pid}/voice/inbound"
            assert emulator.profile["webhook_url"] == f"{base}/v2/carriers/{pid}/sms"

            # SMS out, with its receipts over HTTP
            sent = (await client.post("/v2/sms", json={"to": "+14155550123", "body": "Hello from Parley"})).json()
            message = await emulator.wait_for_message()
            assert (await emulator.message_sent(message.id)).status == 204
            assert (await emulator.message_finalized(message.id, "delivered")).status == 204
            assert (await client.get(f"/v2/sms/{sent['data']['id']}")).json()["data"]["status"] == "delivered"

            # inbound STOP keeps the opt-out list
            assert (await emulator.inbound_sms("+14155550166", "+12125550100", "stop")).status == 204
            refused = await client.post("/v2/sms", json={"to": "+14155550166", "body": "Hi"})
            assert refused.status_code == 422 and refused.json()["error"]["code"] == "recipient_opted_out"

            # forged and stale receipts are refused and change nothing
            url = message.webhook_url or ""
            payload = emulator.message_payload(message, "sending_failed")
            forged = await emulator.send(url, "message.finalized", payload, key=Ed25519PrivateKey.generate())
            stale = await emulator.send(url, "message.finalized", payload, timestamp=int(time.time()) - 600)
            assert (forged.status, stale.status) == (403, 403)
            assert (await client.get(f"/v2/sms/{sent['data']['id']}")).json()["data"]["status"] == "delivered"

            # a call through its media stream: the first message, then Parley hangs up through Call Control
            emulator.media = media = StreamingCallers(hang_up_after=10)
            agent = (await client.post("/v2/agents", json={"name": "Desk", "prompt": "Help.",
                                                           "first_message": "Hello, this is Parley."})).json()["data"]
            await client.post(f"/v2/agents/{agent['id']}/publish")
            call = (await client.post("/v2/calls", json={"bot_id": str(agent["id"]),
                                                         "destination_phone": "+14155550123"})).json()["data"]

            async def dialled() -> bool:
                return bool(emulator.calls)

            await until(dialled, 30, "the dial")
            ccid = next(iter(emulator.calls))
            await emulator.answer(ccid)
            caller = await media.ended(ccid, within=30)
            assert media.hung_up[ccid] is False and len(caller.received.media) >= 25  # the agent spoke, hung up
            assert "hangup" in [name for name, _ in emulator.calls[ccid].commands]

            async def ended() -> bool:
                got = (await client.get(f"/v2/calls/{call['id']}")).json()["data"]
                return got["status"] not in ("queued", "ringing", "in_progress")

            await until(ended, 30, "the call's end")
            got = (await client.get(f"/v2/calls/{call['id']}")).json()["data"]
            assert (got["status"], got["end_reason"]) == ("completed", "agent_hangup")
            recorded = await client.get(f"/v2/call-logs/{got['call_log_id']}/recording")
            assert recorded.status_code == 200, recorded.text

            # an inbound call is answered with its stream and reaches its agent's media session
            patched = await client.patch(f"/v2/telephony/phone-numbers/{bought.json()['data']['id']}",
                                         json={"inbound_agent_id": agent["id"]})
            assert patched.status_code == 200
            inbound, delivery = await emulator.inbound_call("+14155550142", "+12125550100")
            assert delivery.status == 200
            await media.ended(inbound.call_control_id, within=30)
            assert inbound.commands[0][0] == "answer"
            assert (inbound.stream_url or "").endswith("?direction=inbound")
            calls = (await client.get("/v2/calls")).json()["data"]
            (taken,) = [c for c in calls if c["direction"] == "inbound"]

            async def taken_ended() -> bool:
                got = (await client.get(f"/v2/calls/{taken['id']}")).json()["data"]
                return got["status"] == "completed"

            await until(taken_ended, 30, "the inbound call's end")

            released = await client.delete(f"/v2/telephony/phone-numbers/{bought.json()['data']['id']}",
                                           params={"release": "true"})
            assert released.status_code == 204
            assert all(n.phone_number != "+12125550100" for n in emulator.numbers.values())
    finally:
        server.terminate()
        await asyncio.to_thread(server.wait, 30)
        await emulator.close()
