"""The screening gate fails closed: an error or a slow store means "do not dial"."""

from __future__ import annotations

import asyncio

import pytest

from adapters.phones.libphonenumber import LibPhoneNumberNormalizer
from application.dnc import DncGate, normalize_all
from domain.dnc import DncUnavailable
from domain.errors import DncBlocked, ValidationFailed
from domain.sms import RecipientOptedOut


class Listed:
    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        return {n: [2, 1, 2] for n in numbers if n.endswith("0")}


class Broken:
    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        raise ConnectionError("store down")


class Hanging:
    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        await asyncio.Event().wait()
        return {}


async def test_listed_numbers_are_blocked_with_their_lists() -> None:
    gate = DncGate(Listed())
    assert await gate.screen(1, ["+14155550100", "+14155550101"]) == {"+14155550100": [1, 2]}
    with pytest.raises(DncBlocked) as blocked:
        await gate.ensure_callable(1, "+14155550100")
    assert blocked.value.details == {"phone_number": "+14155550100", "list_ids": [1, 2]}
    await gate.ensure_callable(1, "+14155550101")


class OnLists:
    def __init__(self, lists: dict[str, list[int]]) -> None:
        self.lists = lists

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        return {n: self.lists[n] for n in numbers if n in self.lists}


async def test_the_sms_path_tells_an_opt_out_from_a_dnc_listing() -> None:
    gate = DncGate(OnLists({"+14155550100": [5], "+14155550101": [3, 5], "+14155550102": [3]}))
    with pytest.raises(RecipientOptedOut) as opted_out:
        await gate.ensure_sendable(1, "+14155550100", {5})
    assert opted_out.value.code == "recipient_opted_out"
    for number in ("+14155550101", "+14155550102"):  # any ordinary list wins: dnc_blocked
        with pytest.raises(DncBlocked) as blocked:
            await gate.ensure_sendable(1, number, {5})
        assert blocked.value.details == {"phone_number": number, "list_ids": [3, 5] if number.endswith("1") else [3]}
    await gate.ensure_sendable(1, "+14155550199", {5})
    with pytest.raises(DncBlocked):  # the opt-out list is a DNC list: it blocks calls too
        await gate.ensure_callable(1, "+14155550100")


async def test_the_sms_path_fails_closed_too() -> None:
    with pytest.raises(DncUnavailable):
        await DncGate(Broken()).ensure_sendable(1, "+14155550100", set())


async def test_a_store_error_fails_closed() -> None:
    with pytest.raises(DncUnavailable) as unavailable:
        await DncGate(Broken()).ensure_callable(1, "+14155550101")
    assert unavailable.value.code == "dnc_unavailable"


async def test_a_timeout_fails_closed() -> None:
    gate = DncGate(Hanging())
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
