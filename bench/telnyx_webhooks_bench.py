"""The Telnyx adapter's share of a webhook's cost: Ed25519 verification (``TelnyxCarrier.verify``) and reading the
event (``read_voice_webhook``), per second, on one core, for realistic ``call.answered`` / ``call.hangup`` bodies
signed as Telnyx signs them (made before the clock starts). What the rest of a callback costs (the HTTP pipeline,
the transaction) is measured by bench/carrier_callbacks.py.

    .venv/bin/python bench/telnyx_webhooks_bench.py [--events 20000]

First figures (2026-11-27, load 12 on the 2-core machine): 83-85 µs of CPU a webhook, 2,560-2,900 a second.
"""

from __future__ import annotations

import argparse
import base64
import json
import time
import uuid
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from adapters.carriers.telnyx import TelnyxCarrier
from application.ports.carriers import CarrierAccount, WebhookRequest


class NoHttp:
    async def request(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("no request is made")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    key = Ed25519PrivateKey.generate()
    public = base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    account = CarrierAccount(1, 1, "telnyx", {"api_key": "KEY", "public_key": public, "connection_id": "1",
                                              "messaging_profile_id": "p"}, "https://api.telnyx.com")
    now = datetime.now(UTC)
    stamp = str(int(now.timestamp()))
    requests = []
    for n in range(args.events):
        event = "call.hangup" if n % 2 else "call.answered"
        body = json.dumps({"data": {"record_type": "event", "id": str(uuid.uuid4()), "event_type": event,
                                    "occurred_at": now.isoformat().replace("+00:00", "Z"), "payload": {
                                        "call_control_id": f"v3:{uuid.uuid4().hex}", "call_leg_id": str(uuid.uuid4()),
                                        "call_session_id": str(uuid.uuid4()), "connection_id": "1",
                                        "from": "+14155550100", "to": "+14155550199", "direction": "outgoing",
                                        "state": "hangup", "hangup_cause": "normal_clearing",
                                        "sip_hangup_cause": "16", "client_state": "cGFybGV5OmNhbGw="}},
                           "meta": {"attempt": 1}}).encode()
        signature = base64.b64encode(key.sign(stamp.encode() + b"|" + body)).decode()
        requests.append(WebhookRequest("https://parley.bench/v2/carriers/1/voice/status",
                                       {"telnyx-timestamp": stamp, "telnyx-signature-ed25519": signature}, body))
    carrier = TelnyxCarrier(NoHttp())  # type: ignore[arg-type]
    started_cpu, started = time.process_time(), time.perf_counter()
    for request in requests:
        assert carrier.verify(account, request, now)
        assert carrier.read_voice_webhook(request) is not None
    wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    print(f"{args.events} webhooks verified and read in {wall:.2f} s: {args.events / wall:,.0f}/s, "
          f"{cpu / args.events * 1e6:.0f} µs of CPU each")


if __name__ == "__main__":
    main()
