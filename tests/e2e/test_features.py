"""Features are (providers, jobs, settings section) without HTTP; their routes live on the HTTP side. The composition
root installs the features its registry lists, in order, and refuses a port two of them provide unless the later one
declares the override."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from dishka import Provider, Scope, provide

from application.ports.platform import UnitOfWork
from application.ports.telephony import SimulatedConversations
from application.ports.usage import QuotaGate
from application.simulated_call import ScriptedCallConversations
from application.usage import LedgerQuotaGate
from entrypoints.features import Feature, FeatureConflict
from entrypoints.features.usage import FEATURE as USAGE
from entrypoints.http import media as media_streams
from entrypoints.http.app import route_handlers
from entrypoints.http.routes import (
    ROUTES,
    accounts,
    agents,
    ai_providers,
    audit,
    billing,
    business_hours,
    calls,
    campaigns,
    carriers,
    cloud,
    dnc,
    knowledge,
    leads,
    meta,
    scheduling,
    sessions,
    sms,
    telephony,
    triggers,
    usage,
    webhooks,
    widget,
)
from entrypoints.ioc import FEATURES, DefaultTransactionModeProvider, build_container, make_container
from entrypoints.settings import Settings
from entrypoints.worker import jobs

ROOT = Path(__file__).resolve().parents[2]

WORKER_IMPORTS = """
import json, sys
from pathlib import Path
import entrypoints.cli, entrypoints.worker
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


def test_the_registry_lists_every_feature_module_once_in_its_own_order() -> None:
    import pkgutil

    import entrypoints.features

    names = [feature.name for feature in FEATURES]
    modules = {info.name for info in pkgutil.iter_modules(entrypoints.features.__path__)}
    assert len(names) == len(set(names)) and set(names) == modules
    assert names.index("calls") < names.index("campaigns") < names.index("leads")  # the order it is written in


def test_the_route_registry_names_the_registered_features_and_serves_every_handler_once() -> None:
    assert set(ROUTES) <= {"core"} | {feature.name for feature in FEATURES}
    modules = [meta, agents, accounts, ai_providers, audit, billing, calls, campaigns, carriers, cloud, dnc, telephony,
               knowledge, leads, scheduling, business_hours, sessions, sms, triggers, usage, webhooks, widget,
               media_streams]
    every = [handler for module in modules for handler in module.ROUTES]
    served = route_handlers()
    assert len(served) == len(every) == len({id(h) for h in served})
    assert {id(h) for h in served} == {id(h) for h in every}


@pytest.mark.slow
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


async def test_calls_pass_the_usage_features_quota_gate_and_simulate_through_the_conversation(
        tmp_path: Path) -> None:
    container = build_container(Settings(database_url="memory://", secret_key="k", var_dir=tmp_path))
    try:
        async with container() as request:
            assert isinstance(await request.get(QuotaGate), LedgerQuotaGate)
            assert isinstance(await request.get(SimulatedConversations), ScriptedCallConversations)
    finally:
        await container.close()


class _OtherQuotaGate:
    async def admit(self, organization_id: int, metric: str, reference: str, quantity: int, at: object) -> None:
        return None

    async def ensure_standing(self, organization_id: int, at: object) -> None:
        return None


class _OtherQuotaProvider(Provider):
    gate = provide(_OtherQuotaGate, provides=QuotaGate, scope=Scope.REQUEST)


def test_a_port_provided_twice_without_a_declared_override_is_refused(tmp_path: Path) -> None:
    settings = Settings(database_url="memory://", secret_key="k", var_dir=tmp_path)
    intruder = Feature(name="intruder", providers=(_OtherQuotaProvider,))
    with pytest.raises(FeatureConflict, match="'usage' and 'intruder' both provide"):
        make_container(settings, DefaultTransactionModeProvider(), features=(*FEATURES, intruder))
    wrong_owner = replace(intruder, overrides={QuotaGate: "calls"})
    with pytest.raises(FeatureConflict, match="'calls' does not provide it"):
        make_container(settings, DefaultTransactionModeProvider(), features=(*FEATURES, wrong_owner))
    nothing = replace(intruder, providers=(), overrides={QuotaGate: "usage"})
    with pytest.raises(FeatureConflict, match="does not provide it"):
        make_container(settings, DefaultTransactionModeProvider(), features=(*FEATURES, nothing))


async def test_a_declared_override_replaces_the_earlier_features_port(tmp_path: Path) -> None:
    settings = Settings(database_url="memory://", secret_key="k", var_dir=tmp_path)
    declared = Feature(name="declared", providers=(_OtherQuotaProvider,), overrides={QuotaGate: USAGE.name})
    container = make_container(settings, DefaultTransactionModeProvider(), features=(*FEATURES, declared))
    try:
        async with container() as request:
            assert isinstance(await request.get(QuotaGate), _OtherQuotaGate)
    finally:
        await container.close()
