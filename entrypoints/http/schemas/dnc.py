from __future__ import annotations

from datetime import datetime
from typing import Annotated

from msgspec import Meta, Struct

from domain.dnc import MAX_NUMBERS_PER_REQUEST, REASON_MAX_LENGTH, DncEntry, DncList
from domain.identity import persisted
from entrypoints.http.schemas import OneLine

PhoneList = Annotated[list[Annotated[str, Meta(min_length=1, max_length=64)]],
                      Meta(min_length=1, max_length=MAX_NUMBERS_PER_REQUEST)]
Region = Annotated[str, Meta(pattern=r"^[A-Za-z]{2}$", description=(
    "ISO 3166 country used for numbers written without their country code"))]


class DncListCreate(Struct, forbid_unknown_fields=True):
    name: Annotated[OneLine, Meta(min_length=1, max_length=200)]
    description: Annotated[str, Meta(max_length=2000)] | None = None


class DncListOut(Struct):
    id: int
    name: str
    description: str | None
    entry_count: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, x: DncList) -> DncListOut:
        return cls(persisted(x.id), x.name, x.description, x.entry_count, x.created_at, x.updated_at)


class DncEntriesAdd(Struct, forbid_unknown_fields=True):
    phone_numbers: PhoneList
    reason: Annotated[OneLine, Meta(max_length=REASON_MAX_LENGTH)] | None = None
    default_region: Region | None = None


class DncEntryOut(Struct):
    phone_number: str
    reason: str | None
    created_at: datetime

    @classmethod
    def of(cls, e: DncEntry) -> DncEntryOut:
        return cls(e.phone_number, e.reason, e.created_at)


class RowProblemOut(Struct):
    line: int
    value: str
    error: str


class DncEntriesAdded(Struct):
    list_id: int
    received: int
    added: int
    already_listed: int
    invalid: list[RowProblemOut]


class DncCheck(Struct, forbid_unknown_fields=True):
    phone_numbers: PhoneList


class DncCheckResult(Struct):
    phone_number: str
    blocked: bool
    list_ids: list[int]
