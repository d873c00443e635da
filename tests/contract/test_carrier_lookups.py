"""What the carriers' webhooks look up, the same on memory, SQLite and PostgreSQL: a call by its carrier's id
(within one organization), its direction and the carrier's message kept, and a provider by its id alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from application.ports.calls import CallRepository
from application.ports.platform import UnitOfWork
from application.ports.telephony import TelephonyProviderRepository
from domain.telephony import TelephonyProvider
from tests.contract.test_calls_ports import NOW, _agent, _call
from tests.support.apps import new_organization


async def test_a_call_is_found_by_its_carriers_id_in_its_organization(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    agent = await _agent(container, org)
    sid = f"CA{org:08d}"
    async with container() as r:
        calls = await r.get(CallRepository)
        await calls.add(_call(org, agent, 1, status="ringing", telephony_ref=sid, direction="inbound"))
        await calls.add(_call(org, agent, 2))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        calls = await r.get(CallRepository)
        found = await calls.find_by_telephony_ref(org, sid)
        assert found is not None and found.id == _call(org, agent, 1).id and found.direction == "inbound"
        assert await calls.find_by_telephony_ref(other, sid) is None
        assert await calls.find_by_telephony_ref(org, "CA-unknown") is None
        await calls.update(replace(found, status="failed", end_message="Twilio said no"))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        again = await (await r.get(CallRepository)).get(org, _call(org, agent, 1).id)
        assert again is not None and (again.end_message, again.direction) == ("Twilio said no", "inbound")
        plain = await (await r.get(CallRepository)).get(org, _call(org, agent, 2).id)
        assert plain is not None and (plain.direction, plain.end_message) == ("outbound", None)


async def test_a_provider_is_found_by_its_id_alone(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        providers = await r.get(TelephonyProviderRepository)
        added = await providers.add(TelephonyProvider(None, org, "Twilio", "twilio", credentials_sealed="sealed",
                                                      credential_fields=("account_sid", "auth_token"),
                                                      created_at=NOW, updated_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        providers = await r.get(TelephonyProviderRepository)
        found = await providers.find(added.id or 0)
        assert found is not None and (found.organization_id, found.type) == (org, "twilio")
        assert await providers.find(999_999_999) is None
