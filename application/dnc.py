"""Do-Not-Call use cases and the one gate of every dial and text path: the destination policy, then the
fail-closed Do-Not-Call screening."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

from application.context import Actor
from application.ports.accounts import OrganizationRepository
from application.ports.dnc import DncRepository, DncScreener
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest
from domain.destinations import DEFAULT_DIALING_POLICY, DialingPolicy, ensure_allowed, parse_countries
from domain.dnc import (
    MAX_NUMBERS_PER_REQUEST,
    SCREEN_TIMEOUT_SECONDS,
    CsvProblem,
    DncEntry,
    DncList,
    DncUnavailable,
    parse_csv,
)
from domain.errors import DncBlocked, NotFound, ValidationFailed
from domain.sms import RecipientOptedOut


class DncGate:
    """The gate every dial and text passes before anything is queued: the destination policy
    (``domain.destinations``: the organization's dialing policy, narrowed by a campaign's countries; 422
    destination_not_allowed), then Do-Not-Call screening as every dial path must do it: any failure or a slow
    answer means "do not dial".

    Calls (``PlaceCall``: POST /calls, leads, campaign attempts, the widget, trigger ``call`` actions) call
    :meth:`ensure_callable`, SMS :meth:`ensure_sendable`, campaign intake :meth:`policy` once and
    :meth:`refusal` per row; :meth:`screen` is the screening alone. The numbers must already be E.164.
    """

    timeout_seconds: float = SCREEN_TIMEOUT_SECONDS

    def __init__(self, screener: DncScreener, organizations: OrganizationRepository, phones: PhoneNormalizer) -> None:
        self.screener, self.organizations, self.phones = screener, organizations, phones

    async def policy(self, organization_id: int, campaign_countries: Collection[str] | None = None) -> DialingPolicy:
        """The dialing policy numbers of this organization (and campaign, when it narrows it) are checked under."""
        organization = await self.organizations.get(organization_id)
        policy = organization.dialing_policy if organization is not None else DEFAULT_DIALING_POLICY
        return policy.narrowed(campaign_countries)

    def refusal(self, policy: DialingPolicy, number: str) -> str | None:
        """``country``, ``premium_rate`` or None: what ``policy`` says of ``number``."""
        return policy.refusal(number, self.phones.describe(number))

    def check(self, policy: DialingPolicy, number: str) -> None:
        """422 destination_not_allowed when ``policy`` refuses ``number``."""
        ensure_allowed(number, self.phones.describe(number), policy)

    async def ensure_destination(self, organization_id: int, number: str,
                                 campaign_countries: Collection[str] | None = None) -> None:
        self.check(await self.policy(organization_id, campaign_countries), number)

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        try:
            async with asyncio.timeout(self.timeout_seconds):
                found = await self.screener.screen(organization_id, numbers)
        except Exception as exc:  # fail closed, whatever went wrong (store error, timeout, bug)
            raise DncUnavailable(
                "Do-Not-Call screening could not be completed, so nothing was dialled; try again later",
                details={"reason": type(exc).__name__},
            ) from exc
        return {n: sorted(set(ids)) for n, ids in found.items() if ids}

    async def ensure_callable(self, organization_id: int, number: str,
                              campaign_countries: Collection[str] | None = None) -> None:
        """A call: the destination policy, then screening. A number only on the SMS opt-out list is refused as
        ``recipient_opted_out`` (``details.channel: "sms"``), so the caller learns why."""
        await self.ensure_destination(organization_id, number, campaign_countries)
        await self._ensure_not_listed(organization_id, number)

    async def ensure_sendable(self, organization_id: int, number: str) -> None:
        """A text: the same policy and screening, telling a number on an ordinary list (``DncBlocked``) from one
        that is only on the organization's SMS opt-out lists (``RecipientOptedOut``)."""
        await self.ensure_destination(organization_id, number)
        await self._ensure_not_listed(organization_id, number)

    async def _ensure_not_listed(self, organization_id: int, number: str) -> None:
        listed = (await self.screen(organization_id, [number])).get(number)
        if not listed:
            return
        try:
            opt_outs = set(await self.screener.opt_out_list_ids(organization_id))
        except Exception:  # the number is listed: without the lists' purpose it is still blocked
            opt_outs = set()
        if any(list_id not in opt_outs for list_id in listed):
            raise DncBlocked(f"{number} is on a Do-Not-Call list",
                             details={"phone_number": number, "list_ids": listed})
        raise RecipientOptedOut(f"{number} replied STOP by SMS: it opted out of this organization's calls and "
                                "text messages", details={"phone_number": number, "list_ids": listed,
                                                          "channel": "sms"})


def normalize_all(phones: PhoneNormalizer, raw: list[str], field: str,
                  region: str | None = None) -> list[str]:
    """E.164 forms of ``raw`` (order kept, duplicates dropped); every invalid one is reported at once."""
    out: dict[str, None] = {}
    invalid: list[str] = []
    for value in raw:
        number = phones.normalize(value, region)
        if number is None:
            invalid.append(value)
        else:
            out[number] = None
    if invalid:
        shown = ", ".join(repr(v) for v in invalid[:10]) + (" ..." if len(invalid) > 10 else "")
        raise ValidationFailed(
            f"{len(invalid)} value(s) are not phone numbers in E.164 form: {shown}",
            details={"validation_errors": {field: "must be E.164 phone numbers such as +14155550100"},
                     "invalid_phone_numbers": invalid[:100]},
        )
    return list(out)


async def _load_list(dnc: DncRepository, actor: Actor, list_id: int) -> DncList:
    found = await dnc.get_list(actor.organization_id, list_id)
    if found is None:
        raise NotFound("dnc list", list_id)
    return found


@dataclass(frozen=True, slots=True)
class CreateDncListCommand:
    actor: Actor
    name: str
    description: str | None = None


class CreateDncList:
    def __init__(self, dnc: DncRepository, clock: Clock) -> None:
        self.dnc, self.clock = dnc, clock

    async def execute(self, command: CreateDncListCommand) -> DncList:
        now = self.clock.now()
        return await self.dnc.add_list(DncList(None, command.actor.organization_id, command.name,
                                               command.description, now, now))


@dataclass(frozen=True, slots=True)
class ListDncListsCommand:
    actor: Actor
    page: PageRequest


class ListDncLists:
    def __init__(self, dnc: DncRepository) -> None:
        self.dnc = dnc

    async def execute(self, command: ListDncListsCommand) -> Page[DncList]:
        return await self.dnc.lists(command.actor.organization_id, command.page)


@dataclass(frozen=True, slots=True)
class GetDncListCommand:
    actor: Actor
    list_id: int


class GetDncList:
    def __init__(self, dnc: DncRepository) -> None:
        self.dnc = dnc

    async def execute(self, command: GetDncListCommand) -> DncList:
        return await _load_list(self.dnc, command.actor, command.list_id)


@dataclass(frozen=True, slots=True)
class DeleteDncListCommand:
    actor: Actor
    list_id: int


class DeleteDncList:
    def __init__(self, dnc: DncRepository) -> None:
        self.dnc = dnc

    async def execute(self, command: DeleteDncListCommand) -> None:
        await _load_list(self.dnc, command.actor, command.list_id)
        await self.dnc.delete_list(command.actor.organization_id, command.list_id)


@dataclass(frozen=True, slots=True)
class AddedEntries:
    list_id: int
    received: int
    added: int
    already_listed: int
    invalid: list[CsvProblem]


def default_region(phones: PhoneNormalizer, region: str | None) -> str | None:
    """The country of numbers written without their country code, as a client names it in ``default_region``: one
    the phone library knows (a 400 naming the field otherwise, not a refusal of every number it was meant for)."""
    return None if region is None else parse_countries([region], "default_region", phones.countries())[0]


@dataclass(frozen=True, slots=True)
class AddDncEntriesCommand:
    actor: Actor
    list_id: int
    phone_numbers: tuple[str, ...]
    reason: str | None = None
    region: str | None = None  # the region of numbers sent without a country code


class AddDncEntries:
    """Bulk add: every number must be valid (400 listing the invalid ones, nothing added)."""

    def __init__(self, dnc: DncRepository, phones: PhoneNormalizer, clock: Clock) -> None:
        self.dnc, self.phones, self.clock = dnc, phones, clock

    async def execute(self, command: AddDncEntriesCommand) -> AddedEntries:
        actor, list_id, phone_numbers, reason = command.actor, command.list_id, command.phone_numbers, command.reason
        await _load_list(self.dnc, actor, list_id)
        numbers = normalize_all(self.phones, list(phone_numbers), "phone_numbers",
                                default_region(self.phones, command.region))
        now = self.clock.now()
        added = await self.dnc.add_entries(actor.organization_id, list_id, [(n, reason) for n in numbers], now)
        if added:
            await self.dnc.touch_list(actor.organization_id, list_id, now)
        # a number sent twice is already listed the second time: received = added + already_listed (+ invalid)
        return AddedEntries(list_id, len(phone_numbers), added, len(phone_numbers) - added, [])


@dataclass(frozen=True, slots=True)
class ImportDncCsvCommand:
    actor: Actor
    list_id: int
    text: str  # the CSV file, decoded
    region: str | None = None  # the region of numbers sent without a country code


class ImportDncCsv:
    """CSV import: valid rows are added, invalid rows are reported (by line) and skipped."""

    def __init__(self, dnc: DncRepository, phones: PhoneNormalizer, clock: Clock) -> None:
        self.dnc, self.phones, self.clock = dnc, phones, clock

    async def execute(self, command: ImportDncCsvCommand) -> AddedEntries:
        actor, list_id = command.actor, command.list_id
        await _load_list(self.dnc, actor, list_id)
        region = default_region(self.phones, command.region)
        rows, problems = parse_csv(command.text)
        received = len(rows) + len(problems)
        entries: dict[str, str | None] = {}
        for row in rows:
            number = self.phones.normalize(row.phone_number, region)
            if number is None:
                problems.append(CsvProblem(row.line, row.phone_number[:64], "not a phone number in E.164 form"))
            elif number not in entries:
                entries[number] = row.reason
        if not entries:
            raise ValidationFailed(
                "The CSV file holds no valid phone number",
                details={"validation_errors": {"file": "no valid phone number"},
                         "rows": [{"line": p.line, "value": p.value, "error": p.error} for p in problems[:100]]},
            )
        now = self.clock.now()
        added = await self.dnc.add_entries(actor.organization_id, list_id, list(entries.items()), now)
        if added:
            await self.dnc.touch_list(actor.organization_id, list_id, now)
        problems.sort(key=lambda p: p.line)
        # a number on two rows is already listed the second time: received = added + already_listed + invalid
        return AddedEntries(list_id, received, added, received - len(problems) - added, problems)


@dataclass(frozen=True, slots=True)
class ListDncEntriesCommand:
    actor: Actor
    list_id: int
    page: PageRequest


class ListDncEntries:
    def __init__(self, dnc: DncRepository) -> None:
        self.dnc = dnc

    async def execute(self, command: ListDncEntriesCommand) -> Page[DncEntry]:
        await _load_list(self.dnc, command.actor, command.list_id)
        return await self.dnc.entries(command.actor.organization_id, command.list_id, command.page)


@dataclass(frozen=True, slots=True)
class RemoveDncEntryCommand:
    actor: Actor
    list_id: int
    phone_number: str  # as sent (any form the normalizer reads)


class RemoveDncEntry:
    def __init__(self, dnc: DncRepository, phones: PhoneNormalizer, clock: Clock) -> None:
        self.dnc, self.phones, self.clock = dnc, phones, clock

    async def execute(self, command: RemoveDncEntryCommand) -> None:
        actor, list_id, phone_number = command.actor, command.list_id, command.phone_number
        await _load_list(self.dnc, actor, list_id)
        number = self.phones.normalize(phone_number)
        if number is None or not await self.dnc.remove_entry(actor.organization_id, list_id, number):
            raise NotFound("dnc entry", phone_number)
        await self.dnc.touch_list(actor.organization_id, list_id, self.clock.now())


@dataclass(frozen=True, slots=True)
class CheckedNumber:
    phone_number: str
    blocked: bool
    list_ids: list[int]


@dataclass(frozen=True, slots=True)
class CheckNumbersCommand:
    actor: Actor
    phone_numbers: tuple[str, ...]


class CheckNumbers:
    """POST /dnc/check: the same fail-closed screening the dial paths use."""

    def __init__(self, gate: DncGate, phones: PhoneNormalizer) -> None:
        self.gate, self.phones = gate, phones

    async def execute(self, command: CheckNumbersCommand) -> list[CheckedNumber]:
        phone_numbers = command.phone_numbers
        if len(phone_numbers) > MAX_NUMBERS_PER_REQUEST:
            raise ValidationFailed.field("phone_numbers", f"at most {MAX_NUMBERS_PER_REQUEST} numbers per request")
        numbers = normalize_all(self.phones, list(phone_numbers), "phone_numbers")
        found = await self.gate.screen(command.actor.organization_id, numbers)
        return [CheckedNumber(n, bool(found.get(n)), found.get(n, [])) for n in numbers]


__all__ = ["AddDncEntries", "AddDncEntriesCommand", "AddedEntries", "CheckNumbers", "CheckNumbersCommand",
           "CheckedNumber", "CreateDncList", "CreateDncListCommand", "DeleteDncList", "DeleteDncListCommand",
           "DncGate", "GetDncList", "GetDncListCommand", "ImportDncCsv", "ImportDncCsvCommand", "ListDncEntries",
           "ListDncEntriesCommand", "ListDncLists", "ListDncListsCommand", "RemoveDncEntry", "RemoveDncEntryCommand",
           "normalize_all"]
