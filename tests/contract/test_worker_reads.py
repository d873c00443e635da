"""The worker's passes read their work lists in units without a transaction (``Units.read``): on SQLite, where a
transaction that may write takes the database's one write lock up front (``BEGIN IMMEDIATE``), a pass with nothing
to change neither waits for a writer nor holds one up."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest

from application.call_progress import RunCallProgress, RunCallProgressCommand
from application.dialer_pass import DialerPolicy, RunDialerPass, RunDialerPassCommand
from application.ports.platform import Units
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.support.databases import run_dir

WAIT = 5.0
"""Far below SQLite's busy timeout (30 s), which a write transaction would wait for the lock."""


async def test_passes_with_nothing_to_do_run_while_another_process_holds_the_write_lock(
        sqlite_url: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    # a database of its own, a copy of the run's migrated template (which ``sqlite_url`` makes): the worker's
    # shared database may hold other tests' calls, due now
    own = tmp_path / "own.db"
    shutil.copyfile(run_dir(tmp_path_factory) / "parley-template.db", own)
    container = build_container(Settings(database_url=f"sqlite+aiosqlite:///{own}", var_dir=tmp_path / "var",
                                         secret_key="test-secret-key"))
    writer = sqlite3.connect(own, isolation_level=None)
    try:
        units = await container.get(Units)
        writer.execute("BEGIN IMMEDIATE")  # another process's write transaction, open
        calls = await asyncio.wait_for(RunCallProgress(units).execute(RunCallProgressCommand()), WAIT)
        dialer = await asyncio.wait_for(RunDialerPass(units, DialerPolicy()).execute(RunDialerPassCommand()), WAIT)
        assert (calls.total, dialer.settled, dialer.dialled) == (0, 0, 0)
        writer.execute("COMMIT")
    finally:
        writer.close()
        await container.close()
