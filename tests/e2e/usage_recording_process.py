"""A process that records a call's usage the way the call's final transaction does (call seconds and the call,
through ``UsageRecorder``), then either commits or hangs before committing (to be killed mid-record).

    python -m tests.e2e.usage_recording_process URL VAR_DIR ORGANIZATION_ID CALL_ID commit|hang
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from application.ports.platform import UnitOfWork
from application.ports.usage import CALL_SECONDS, CALLS, UsageRecorder
from entrypoints.ioc import build_container
from entrypoints.settings import Settings

ENDED_AT = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
SECONDS = 94.2


async def main(url: str, var_dir: str, organization_id: int, call_id: str, mode: str) -> None:
    container = build_container(Settings(database_url=url, var_dir=Path(var_dir), secret_key="test-secret-key"))
    try:
        async with container() as request:
            recorder = await request.get(UsageRecorder)
            await recorder.record(organization_id, CALL_SECONDS, SECONDS, ENDED_AT, f"call:{call_id}")
            await recorder.record(organization_id, CALLS, 1, ENDED_AT, f"call:{call_id}")
            if mode == "hang":
                print("recorded", flush=True)  # the rows are written, the transaction is open
                await asyncio.Event().wait()
            await (await request.get(UnitOfWork)).commit()
            print("committed", flush=True)
    finally:
        await container.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]))
