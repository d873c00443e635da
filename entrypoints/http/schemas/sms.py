from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from domain.identity import persisted
from domain.parsing import MAX_ID
from domain.sms import BODY_MAX_LENGTH, SmsMessage

SmsStatus = Literal["queued", "sent", "delivered", "undelivered", "failed", "received"]
SmsDirection = Literal["outbound", "inbound"]
Phone = Annotated[str, Meta(min_length=1, max_length=40, description="E.164, e.g. +14155550100")]
Body = Annotated[str, Meta(min_length=1, max_length=BODY_MAX_LENGTH,
                           description="1 to 1600 characters; GSM-7 or UCS-2 is chosen from the text")]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class SmsCreate(Struct, forbid_unknown_fields=True):
    to: Phone
    body: Body
    from_phone_number_id: Annotated[int, Meta(ge=1, le=MAX_ID, description=(
        "One of the organization's active numbers with sms enabled; default: its first such number, else the "
        "simulator's +1555010099"))] | None = None


class InboundSmsCreate(Struct, forbid_unknown_fields=True, kw_only=True):
    from_: Phone = msgspec.field(name="from")
    to: Annotated[str, Meta(min_length=1, max_length=40, description="One of the organization's phone numbers")]
    body: Body


class StatusEventOut(Struct):
    status: SmsStatus
    at: datetime
    applied: bool
    """False: the report arrived out of order or after a final status, and changed nothing."""
    error_code: str | None


class SmsOut(Struct, kw_only=True):
    id: int
    direction: SmsDirection
    from_: str = msgspec.field(name="from")
    to: str
    body: str
    status: SmsStatus
    encoding: Literal["gsm7", "ucs2"]
    segments: int
    error_code: str | None
    from_phone_number_id: int | None
    created_at: datetime
    sent_at: datetime | None
    delivered_at: datetime | None
    status_events: list[StatusEventOut]

    @classmethod
    def of(cls, x: SmsMessage) -> SmsOut:
        return cls(
            id=persisted(x.id), direction=x.direction, from_=x.from_phone, to=x.to_phone,  # type: ignore[arg-type]  # the domain's type is wider
            body=x.body, status=x.status, encoding=x.encoding, segments=x.segments,  # type: ignore[arg-type]  # the domain's type is wider
            error_code=x.error_code, from_phone_number_id=x.from_phone_number_id,
            created_at=x.created_at,
            sent_at=x.sent_at, delivered_at=x.delivered_at,
            status_events=[StatusEventOut(e.status, e.at, e.applied, e.error_code)  # type: ignore[arg-type]  # the domain's type is wider
                           for e in x.status_events],
        )


class InboundSmsOut(SmsOut, kw_only=True):
    keyword: Literal["stop", "start"] | None
    """stop: the sender was put on the "SMS opt-outs" list; start: taken off it; null: no keyword."""

    @classmethod
    def received(cls, x: SmsMessage, keyword: str | None) -> InboundSmsOut:
        out = SmsOut.of(x)
        return cls(keyword=keyword,  # type: ignore[arg-type]  # the domain's type is wider
                   **{f: getattr(out, f) for f in SmsOut.__struct_fields__})
