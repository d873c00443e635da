"""SimulatedSmsCarrier: a stand-in for an SMS carrier behind the SmsCarrier port.

Sending fixes the message's receipts from the destination number (the test numbers of docs/sms.md): ``sent``
after SENT_AFTER, then ``delivered`` (or ``undelivered``, error 30003) after DONE_AFTER; ``+1555010003`` is
refused (``failed``, error 30008) without a ``sent``. The pending receipts live in the message's carrier state
(JSON on its row), so any worker process reports them; polling with the clock's ``now`` hands over those whose
time has come. Wall-clock delays are divided by ``PARLEY_SIMULATOR_SPEED``.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from adapters.telephony.simulator import SimulatorConfig
from application.ports.sms import CarrierNews, CarrierReceipt, OutboundSms, Submission
from domain.sms import SIMULATOR_FAILED, SIMULATOR_UNDELIVERED

SENT_AFTER = timedelta(milliseconds=500)
DONE_AFTER = timedelta(seconds=2)
ERROR_UNREACHABLE = "30003"
ERROR_CARRIER = "30008"


def timeline(to_phone: str) -> list[tuple[str, timedelta, str | None]]:
    """(status, delay after sending, error code) of the receipts the simulator produces for ``to_phone``."""
    if to_phone == SIMULATOR_FAILED:
        return [("failed", SENT_AFTER, ERROR_CARRIER)]
    if to_phone == SIMULATOR_UNDELIVERED:
        return [("sent", SENT_AFTER, None), ("undelivered", DONE_AFTER, ERROR_UNREACHABLE)]
    return [("sent", SENT_AFTER, None), ("delivered", DONE_AFTER, None)]


class SimulatedSmsCarrier:
    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config

    async def send(self, message: OutboundSms, now: datetime) -> Submission:
        factor = 1.0 / max(self.config.speed, 1e-6)
        pending = [{"status": status, "at": (now + delay * factor).isoformat(), "error_code": code}
                   for status, delay, code in timeline(message.to_phone)]
        return Submission(f"SM{secrets.token_hex(16)}", {"pending": pending}, _first(pending))

    async def poll(self, carrier_id: str, state: dict[str, Any], now: datetime) -> CarrierNews:
        pending = list(state.get("pending") or [])
        due = [r for r in pending if datetime.fromisoformat(r["at"]) <= now]
        left = [r for r in pending if datetime.fromisoformat(r["at"]) > now]
        receipts = [CarrierReceipt(carrier_id, r["status"], datetime.fromisoformat(r["at"]), r.get("error_code"))
                    for r in due]
        return CarrierNews(receipts, {**state, "pending": left}, _first(left))


def _first(pending: list[dict[str, Any]]) -> datetime | None:
    return min((datetime.fromisoformat(r["at"]) for r in pending), default=None)
