"""A phone number belongs to one organization at a time (409 phone_number_unavailable, naming no holder),
enforced by the database."""

from __future__ import annotations

import asyncio
import itertools

from tests.support.apps import Api

_SUFFIX = itertools.count(100)


def _number() -> str:
    return f"+1415557{next(_SUFFIX):04d}"


async def test_a_number_claimed_by_one_organization_cannot_be_claimed_by_another(any_api: Api) -> None:
    first, second = await any_api.tenant(), await any_api.tenant()
    number = _number()
    c = any_api.client
    claimed = await c.post("/v2/telephony/phone-numbers", json={"phone_number": number}, headers=first.headers)
    assert claimed.status_code == 201, claimed.text
    # the same number written differently normalizes to the claimed one
    spaced = f"{number[:2]} {number[2:5]} {number[5:8]} {number[8:]}"
    refused = await c.post("/v2/telephony/phone-numbers", json={"phone_number": spaced}, headers=second.headers)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "phone_number_unavailable" and "not available" in error["message"]
    assert "organization" not in error["message"]  # who holds it is never said
    assert error["details"] == {"field": "phone_number", "phone_number": number}
    assert (await c.get("/v2/telephony/phone-numbers", headers=second.headers)).json()["meta"]["total"] == 0
    again = await c.post("/v2/telephony/phone-numbers", json={"phone_number": number}, headers=first.headers)
    assert again.status_code == 409 and "this organization" in again.json()["error"]["message"]

    # released by its owner, the number can be claimed by another organization
    deleted = await c.delete(f"/v2/telephony/phone-numbers/{claimed.json()['data']['id']}", headers=first.headers)
    assert deleted.status_code == 204
    moved = await c.post("/v2/telephony/phone-numbers", json={"phone_number": number}, headers=second.headers)
    assert moved.status_code == 201, moved.text


async def test_concurrent_claims_of_one_number_leave_one_owner(concurrent_api: Api) -> None:
    tenants = [await concurrent_api.tenant() for _ in range(4)]
    number = _number()
    results = await asyncio.gather(*(
        concurrent_api.client.post("/v2/telephony/phone-numbers",
                                   json={"phone_number": number}, headers=t.headers)
        for t in tenants))
    assert sorted(r.status_code for r in results) == [201, 409, 409, 409], [r.text for r in results]
    owners = [t for t in tenants
              if (await concurrent_api.client.get("/v2/telephony/phone-numbers", headers=t.headers)).json()[
                  "meta"]["total"] == 1]
    assert len(owners) == 1
