"""A worker process that closes January and collects its invoices the way the worker's close and collection jobs
do (``close_period``, then passes of ``CollectDueInvoices`` until nothing is due), at a fixed instant in February,
against a payment gateway emulator that keeps its charges in a journal file outside the process (so a charge
survives the process being killed): a charge sent again with the same idempotency key gets the journal's first
answer, as a processor's idempotency keys do. Prints ``collected N`` after each pass (the test kills it after a few).

    python -m tests.e2e.billing_collection_process URL VAR_DIR JOURNAL
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from adapters.memory.clock import ManualClock
from adapters.payments.simulator import SimulatedPaymentGateway
from application.billing import CollectDueInvoices, CollectDueInvoicesCommand, close_period
from application.ports.billing import ChargeResult, ChargeStatus, PaymentGateway
from application.ports.platform import Clock
from entrypoints.ioc import build_container
from entrypoints.overrides import Pinned
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

AT = datetime(2026, 2, 1, 0, 5, tzinfo=UTC)
BATCH = 40


class JournalGateway(SimulatedPaymentGateway):
    """The simulator's cards (``pm_card_chargeDeclined`` declines), with its charges appended to a journal file,
    one JSON line each, written and fsynced before the answer is returned."""

    def __init__(self, journal: Path) -> None:
        super().__init__()
        self.journal = journal
        self.known: dict[str, ChargeResult] = {}
        if journal.exists():
            for line in journal.read_text().splitlines():
                row = json.loads(line)
                self.known[row["key"]] = ChargeResult(ChargeStatus(row["status"]), row["charge"], row["code"])

    async def charge(self, amount_cents: int, currency: str, gateway_id: str, idempotency_key: str,
                     metadata: Mapping[str, str] | None = None) -> ChargeResult:
        if idempotency_key in self.known:
            return self.known[idempotency_key]
        declined = gateway_id.startswith("pm_card_chargeDeclined")
        result = ChargeResult(ChargeStatus.DECLINED if declined else ChargeStatus.SUCCEEDED,
                              f"ch_{secrets.token_hex(8)}", "card_declined" if declined else None)
        with self.journal.open("a") as out:
            out.write(json.dumps({"key": idempotency_key, "amount": amount_cents, "status": result.status.value,
                                  "charge": result.charge_id, "code": result.code}) + "\n")
            out.flush()
            os.fsync(out.fileno())
        self.known[idempotency_key] = result
        await asyncio.sleep(0.002)  # a processor's round trip: a kill lands inside a batch's transaction
        return result


async def main(url: str, var_dir: str, journal: str) -> None:
    settings = Settings(database_url=url, var_dir=Path(var_dir), secret_key="test-secret-key")
    container = build_container(settings, Pinned(Clock, ManualClock(AT)),
                                Pinned(PaymentGateway, JournalGateway(Path(journal))))
    try:
        await close_period(ScopedUnits(container), "2026-01", 500)
        print("closed", flush=True)
        while True:
            collected = await ScopedUnits(container).execute(CollectDueInvoices, CollectDueInvoicesCommand(BATCH))
            print(f"collected {collected}", flush=True)
            if collected < BATCH:
                break
        print("done", flush=True)
    finally:
        await container.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
