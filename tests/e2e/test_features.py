"""Features are (providers, jobs, settings section) without HTTP; their routes live on the HTTP side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from application.call_booking import AtomicSchedulingAppointmentBooker, NoAppointmentBooker
from application.ports.calls import AppointmentBooker
from application.ports.platform import UnitOfWork
from entrypoints.features import all_features
from entrypoints.features.calls import FEATURE as CALLS
from entrypoints.http.app import route_handlers
from entrypoints.http.routes import (
    ROUTES,
    accounts,
    agents,
    billing,
    calls,
    campaigns,
    cloud,
    dnc,
    knowledge,
    leads,
    meta,
    schedules,
    scheduling,
    sessions,
    sms,
    telephony,
    triggers,
    usage,
    webhooks,
    widget,
)
from entrypoints.ioc import DefaultTransactionModeProvider, build_container, make_container
from entrypoints.settings import Settings
from entrypoints.worker import jobs

ROOT = Path(__file__).resolve().parents[2]

WORKER_IMPORTS = """
import json, sys
from pathlib import Path

import pytest
import entrypoints.cli, entrypoints.worker, entrypoints.webhook_worker
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from entrypoints.worker import jobs

container = build_container(Settings(database_url="memory://", secret_key="k", var_dir=Path(sys.argv[1])))
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "litestar" or m.startswith("entrypoints.http")
                or m == "entrypoints.asgi_app")
print(json.dumps({"jobs": len(jobs()), "loaded": loaded}))
"""


@pytest.mark.slow  # a Python process that loads the worker
def test_the_worker_loads_no_litestar_module(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WORKER_IMPORTS, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    report = json.loads(done.stdout)
    assert report["jobs"] == len(jobs()) > 0
    assert report["loaded"] == []


def test_every_feature_is_a_module_with_a_unique_name() -> None:
    names = [feature.name for feature in all_features()]
    assert names == sorted(set(names)) == [
        "billing", "calls", "campaigns", "cloud", "housekeeping", "knowledge", "leads", "schedules", "scheduling",
        "sessions", "sms", "triggers", "usage", "webhooks", "widget",
    ]


def test_the_route_registry_names_installed_features_and_serves_every_handler_once() -> None:
    assert set(ROUTES) <= {"core"} | {feature.name for feature in all_features()}
    modules = [meta, agents, accounts, billing, calls, campaigns, cloud, dnc, telephony, knowledge, leads, scheduling,
               schedules, sessions, sms, triggers, usage, webhooks, widget]
    every = [handler for module in modules for handler in module.ROUTES]
    served = route_handlers()
    assert len(served) == len(every) == len({id(h) for h in served})
    assert {id(h) for h in served} == {id(h) for h in every}


async def test_the_backend_picks_each_features_storage(tmp_path: Path, sqlite_url: str) -> None:
    from adapters.memory.calls import InMemoryCallRepository
    from adapters.memory.store import InMemoryUnitOfWork
    from adapters.sql.calls import SqlCallRepository
    from adapters.sql.uow import SqlUnitOfWork
    from application.ports.calls import CallRepository

    for url, uow_type, calls_type in (("memory://", InMemoryUnitOfWork, InMemoryCallRepository),
                                      (sqlite_url, SqlUnitOfWork, SqlCallRepository)):
        container = build_container(Settings(database_url=url, secret_key="k", var_dir=tmp_path))
        try:
            async with container() as request:
                assert type(await request.get(UnitOfWork)) is uow_type
                assert type(await request.get(CallRepository)) is calls_type
        finally:
            await container.close()


async def test_calls_book_through_the_scheduling_feature_or_never(tmp_path: Path) -> None:
    settings = Settings(database_url="memory://", secret_key="k", var_dir=tmp_path)
    with_scheduling = build_container(settings)
    calls_only = make_container(settings, DefaultTransactionModeProvider(), features=[CALLS])
    try:
        async with with_scheduling() as request:
            assert isinstance(await request.get(AppointmentBooker), AtomicSchedulingAppointmentBooker)
        async with calls_only() as request:
            assert isinstance(await request.get(AppointmentBooker), NoAppointmentBooker)
    finally:
        await with_scheduling.close()
        await calls_only.close()

