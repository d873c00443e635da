"""One phone-number rule everywhere: the fields checked at the HTTP edge (an agent's transfer_phone) accept and
reject exactly what the ``PhoneNormalizer`` port does for the calls, DNC and telephony use cases."""

from __future__ import annotations

import pytest

from adapters.phones.libphonenumber import LibPhoneNumberNormalizer
from application.phones import E164_RULE
from tests.support.apps import Api

ACCEPTED = [
    ("+1 (415) 555-0100", "+14155550100"),
    ("0049 30 1234567", "+49301234567"),  # international 00 prefix
    ("+1555010012", "+1555010012"),       # a simulator test number (too short to be real)
]
REJECTED = ["+1 253 0000", "4155550100", "12"]  # possible only locally; no country code; nonsense


def test_the_cases_are_the_ports_verdicts() -> None:
    port = LibPhoneNumberNormalizer()
    assert [port.normalize(raw) for raw, _ in ACCEPTED] == [e164 for _, e164 in ACCEPTED]
    assert [port.normalize(raw) for raw in REJECTED] == [None] * len(REJECTED)


@pytest.mark.parametrize(("raw", "e164"), ACCEPTED)
async def test_transfer_phone_takes_what_the_port_takes(api: Api, raw: str, e164: str) -> None:
    t = await api.tenant()
    created = await api.client.post("/v2/agents", json={"name": "A", "transfer_phone": raw}, headers=t.headers)
    assert created.status_code == 201 and created.json()["data"]["transfer_phone"] == e164
    patched = await api.client.patch(f"/v2/agents/{created.json()['data']['id']}", json={"transfer_phone": raw},
                                     headers=t.headers)
    assert patched.status_code == 200 and patched.json()["data"]["transfer_phone"] == e164


@pytest.mark.parametrize("raw", REJECTED)
async def test_transfer_phone_refuses_what_the_port_refuses(api: Api, raw: str) -> None:
    t = await api.tenant()
    r = await api.client.post("/v2/agents", json={"name": "A", "transfer_phone": raw}, headers=t.headers)
    assert r.status_code == 400
    assert r.json()["error"]["details"]["validation_errors"] == {"transfer_phone": E164_RULE}
