"""Ports for SMS: the messages' store and the carrier network (or its simulator).

A carrier adapter sends a message and later reports what became of it as :class:`CarrierReceipt` values (sent,
delivered, undelivered, failed), in whatever order its network produces them; the SMS use cases apply them with
the forward-only status machine of ``domain/sms.py``. The adapter's own per-message state is opaque JSON kept
on the message row (``Submission.state``), so any worker process can continue what another one sent.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from application.ports.platform import Page, PageRequest
from domain.sms import SmsMessage


@dataclass(frozen=True, slots=True)
class SmsFilter:
    to: str | None = None
    """E.164."""
    status: str | None = None
    direction: str | None = None
    created_after: datetime | None = None
    """At or after."""
    created_before: datetime | None = None
    """Strictly before."""


@dataclass(frozen=True, slots=True)
class MessageRef:
    organization_id: int
    message_id: int


class SmsRepository(Protocol):
    async def add(self, message: SmsMessage) -> SmsMessage: ...

    async def get(self, organization_id: int, message_id: int, *, for_update: bool = False) -> SmsMessage | None:
        """``for_update``: lock the row until the transaction ends (receipts of one message apply one at a
        time)."""
        ...

    async def find_by_carrier_id(self, carrier_id: str) -> SmsMessage | None:
        """The message the carrier knows as ``carrier_id``, locked until the transaction ends."""
        ...

    async def list(self, organization_id: int, filters: SmsFilter, page: PageRequest) -> Page[SmsMessage]:
        """Newest first."""
        ...

    async def update(self, message: SmsMessage) -> SmsMessage:
        """Writes what changes after creation: status, error_code, sent_at, delivered_at, status_events, the
        carrier's id and state, next_check_at and updated_at."""
        ...

    async def due(self, now: datetime, limit: int) -> builtins.list[MessageRef]:
        """Messages whose carrier has news by ``now`` (next_check_at at or before it), earliest first."""
        ...

    async def next_due(self) -> datetime | None:
        """The earliest next_check_at of any message."""
        ...

    async def last_texted_by(self, sender: str, recipient: str) -> int | None:
        """The organization that last sent an outbound message to ``recipient`` from the number ``sender`` (any
        organization: a shared sender's replies belong to whoever texted last), or None."""
        ...

    async def opt_out_list_ids(self, organization_id: int, name: str) -> builtins.list[int]:
        """The ids of the organization's Do-Not-Call lists called ``name`` (its SMS opt-out list), oldest first."""
        ...

    async def ensure_opt_out_list(self, organization_id: int, name: str, description: str, at: datetime) -> int:
        """The id of the organization's one SMS opt-out list (``domain.sms.OPT_OUT_PURPOSE``), made as ``name``
        when it has none. Callers making it at the same time all get the one list (a unique index on the purpose
        in SQL: the second insert waits for the first and then finds its list)."""
        ...


@dataclass(frozen=True, slots=True)
class OutboundSms:
    organization_id: int
    message_id: int
    from_phone: str
    to_phone: str
    body: str
    encoding: str
    segments: int


@dataclass(frozen=True, slots=True)
class CarrierReceipt:
    """What the carrier reported about a message: ``status`` (sent, delivered, undelivered, failed) at ``at``."""

    carrier_id: str
    status: str
    at: datetime
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class Submission:
    carrier_id: str
    state: dict[str, Any] = field(default_factory=dict)
    next_check_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class CarrierNews:
    receipts: list[CarrierReceipt]
    state: dict[str, Any]
    next_check_at: datetime | None


class SmsCarrier(Protocol):
    async def send(self, message: OutboundSms, now: datetime) -> Submission:
        """Hand the message to the network; it is queued there when this returns."""
        ...

    async def poll(self, carrier_id: str, state: dict[str, Any], now: datetime) -> CarrierNews:
        """The receipts the network produced for the message up to ``now`` since the last poll."""
        ...
