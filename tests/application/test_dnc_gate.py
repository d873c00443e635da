"""The one gate of every dial and text: the destination policy, then screening, which fails closed (an error or a
slow store means "do not dial")."""

from __future__ import annotations

import asyncio

import pytest

from adapters.phones.libphonenumber import LibPhoneNumberNormalizer
from application.dnc import DncGate, normalize_all
from domain.destinations import DestinationNotAllowed, DialingPolicy
from domain.dnc import DncUnavailable
from domain.errors import DncBlocked, ValidationFailed
from domain.organizations import Organization
from domain.sms import RecipientOptedOut


class Orgs:
    """The organization repository the gate reads the dialing policy from."""

    def __init__(self, policy: DialingPolicy | None = None) -> None:
        self.policy = policy or DialingPolicy()

    async def get(self, org_id: int) -> Organization:
        from datetime import UTC, datetime
        now = datetime(2026, 1, 1, tzinfo=UTC)
        return Organization(org_id, "Org", "business", "standard", None, now, now, self.policy)


def gate_over(screener: object, policy: DialingPolicy | None = None) -> DncGate:
    return DncGate(screener, Orgs(policy), LibPhoneNumberNormalizer())  # type: ignore[arg-type]


class Listed:
    async def opt_out_list_ids(self, organization_id: int) -> list[int]:
        return []

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        return {n: [2, 1, 2] for n in numbers if n.endswith("0")}


class Broken:
    async def opt_out_list_ids(self, organization_id: int) -> list[int]:
        return []

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        raise ConnectionError("store down")


class Hanging:
    async def opt_out_list_ids(self, organization_id: int) -> list[int]:
        return []

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        await asyncio.Event().wait()
        return {}


async def test_listed_numbers_are_blocked_with_their_lists() -> None:
    gate = gate_over(Listed())
    assert await gate.screen(1, ["+14155550100", "+14155550101"]) == {"+14155550100": [1, 2]}
    with pytest.raises(DncBlocked) as blocked:
        await gate.ensure_callable(1, "+14155550100")
    assert blocked.value.details == {"phone_number": "+14155550100", "list_ids": [1, 2]}
    await gate.ensure_callable(1, "+14155550101")


class OnLists:
    def __init__(self, lists: dict[str, list[int]], opt_outs: list[int]) -> None:
        self.lists, self.opt_outs = lists, opt_outs

    async def opt_out_list_ids(self, organization_id: int) -> list[int]:
        return self.opt_outs

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        return {n: self.lists[n] for n in numbers if n in self.lists}


async def test_the_sms_path_tells_an_opt_out_from_a_dnc_listing() -> None:
    gate = gate_over(OnLists({"+14155550100": [5], "+14155550101": [3, 5], "+14155550102": [3]}, [5]))
    with pytest.raises(RecipientOptedOut) as opted_out:
        await gate.ensure_sendable(1, "+14155550100")
    assert opted_out.value.code == "recipient_opted_out"
    for number in ("+14155550101", "+14155550102"):  # any ordinary list wins: dnc_blocked
        with pytest.raises(DncBlocked) as blocked:
            await gate.ensure_sendable(1, number)
        assert blocked.value.details == {"phone_number": number, "list_ids": [3, 5] if number.endswith("1") else [3]}
    await gate.ensure_sendable(1, "+14155550199")
    with pytest.raises(RecipientOptedOut) as call_refused:  # the opt-out blocks calls too, and says so
        await gate.ensure_callable(1, "+14155550100")
    assert call_refused.value.details == {"phone_number": "+14155550100", "list_ids": [5], "channel": "sms"}


async def test_the_sms_path_fails_closed_too() -> None:
    with pytest.raises(DncUnavailable):
        await gate_over(Broken()).ensure_sendable(1, "+14155550100")


async def test_a_store_error_fails_closed() -> None:
    with pytest.raises(DncUnavailable) as unavailable:
        await gate_over(Broken()).ensure_callable(1, "+14155550101")
    assert unavailable.value.code == "dnc_unavailable"


async def test_a_timeout_fails_closed() -> None:
    gate = gate_over(Hanging())
    gate.timeout_seconds = 0.01
    with pytest.raises(DncUnavailable):
        await gate.screen(1, ["+14155550101"])


def test_normalisation_reports_every_invalid_number() -> None:
    phones = LibPhoneNumberNormalizer()
    assert normalize_all(phones, ["+1 (415) 555-0100", "+14155550100", "004420 7946 0958"], "n") == [
        "+14155550100", "+442079460958"]
    with pytest.raises(ValidationFailed) as invalid:
        normalize_all(phones, ["12", "+14155550100", "abc"], "phone_numbers")
    assert invalid.value.details["invalid_phone_numbers"] == ["12", "abc"]
    assert phones.normalize("4155550100", "us") == "+14155550100"
    assert phones.normalize("+1555010006") == "+1555010006"  # a simulator test number
    assert phones.normalize("+15550100") is None  # a local-only length is not E.164


@pytest.mark.parametrize(("number", "reason"), [
    ("+19005550100", "premium_rate"),  # NANP 900
    ("+12129761234", "premium_rate"),  # a 976 exchange
    ("+449091234567", "premium_rate"),  # UK premium rate
    ("+448712345678", "premium_rate"),  # UK shared cost
    ("+445512345678", "premium_rate"),  # UK UAN
    ("+882345678901", "country"),  # an international network: no country
    ("+8613800138000", "country"),  # China
    ("+442079460958", "country"),  # a UK landline, outside US/CA
])
async def test_the_destination_policy_refuses_before_screening(number: str, reason: str) -> None:
    gate = gate_over(Broken())  # screening would fail closed: the policy answers first
    for check in (gate.ensure_callable, gate.ensure_sendable):
        with pytest.raises(DestinationNotAllowed) as refused:
            await check(1, number)
        assert refused.value.code == "destination_not_allowed"
        assert refused.value.details["reason"] == reason


async def test_the_policy_allows_us_canada_and_the_simulator_and_narrows_per_campaign() -> None:
    gate = gate_over(Listed())
    for number in ("+14155550101", "+16135550123", "+1555010001"):
        await gate.ensure_callable(1, number)
    with pytest.raises(DestinationNotAllowed) as refused:
        await gate.ensure_callable(1, "+16135550123", ("US",))  # a campaign narrowed to the US
    assert refused.value.details["allowed_countries"] == ["US"]
    wide = gate_over(Listed(), DialingPolicy(("US", "GB"), block_premium=False))
    await wide.ensure_callable(1, "+442079460951")
    await wide.ensure_callable(1, "+19005550101")  # premium allowed by this organization
    with pytest.raises(DestinationNotAllowed):  # a campaign never widens the organization's countries
        await wide.ensure_callable(1, "+8613800138001", ("CN",))
