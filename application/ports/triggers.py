"""Ports for triggers: their rules and runs, and the email sender their email actions go out through."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.triggers import Trigger, TriggerRun


class TriggerRepository(Protocol):
    async def add(self, trigger: Trigger) -> Trigger: ...

    async def get(self, organization_id: int, trigger_id: int) -> Trigger | None: ...

    async def list(self, organization_id: int, page: PageRequest) -> Page[Trigger]:
        """Oldest first."""
        ...

    async def update(self, trigger: Trigger) -> Trigger: ...

    async def delete(self, organization_id: int, trigger_id: int) -> bool:
        """Deletes the trigger and its runs; False when there was none."""
        ...

    async def for_event(self, organization_id: int, event: str) -> builtins.list[Trigger]:
        """The organization's enabled triggers on ``event``, by id (an index on (organization, event): never a
        scan of every trigger)."""
        ...

    async def disable(self, organization_id: int, trigger_id: int, reason: str, at: datetime) -> None:
        """Parley disables the trigger (``enabled`` false, ``disabled_reason``), whatever else changed meanwhile."""
        ...

    async def count_matched_runs(self, organization_id: int, trigger_id: int, since: datetime) -> int:
        """How many matched runs of the trigger are of events that happened at or after ``since`` (an index on
        (trigger_id, event_at): the run-rate breaker)."""
        ...

    async def add_runs(self, runs: Sequence[TriggerRun]) -> builtins.list[TriggerRun]:
        """Stores the runs that are new and returns those, with their ids, by id: a run of a (trigger, event) that
        is stored already is left out, whatever the concurrency (a unique key on (trigger_id, event_id)). SQL
        stores them all with one statement (the consumer's pass stores thousands)."""
        ...

    async def get_run(self, organization_id: int, run_id: int, *, lock: bool = False) -> TriggerRun | None:
        """``lock``: held until the transaction ends (two workers never record one action at once)."""
        ...

    async def update_run(self, run: TriggerRun) -> TriggerRun:
        """Writes the run's status, actions and finished_at."""
        ...

    async def list_runs(self, organization_id: int, trigger_id: int, status: str | None,
                        page: PageRequest) -> Page[TriggerRun]:
        """Newest first."""
        ...

    async def purge_runs(self, before: datetime) -> int:
        """Forget the runs that ended (anything but ``running``) before ``before``: by ``finished_at``, else
        ``created_at`` (housekeeping); how many."""
        ...


@dataclass(frozen=True, slots=True)
class EmailAttachment:
    filename: str
    content_type: str
    """``maintype/subtype``, parameters after ``;`` (e.g. ``text/calendar; method=REQUEST``)."""
    data: bytes


@dataclass(frozen=True, slots=True)
class EmailMessage:
    to: tuple[str, ...]
    subject: str
    body: str
    """Plain text."""
    attachments: tuple[EmailAttachment, ...] = ()
    message_id: str | None = None
    """``<...@...>``: the same on every attempt of one message (None: a new one per attempt)."""


class EmailFailed(Exception):
    """The message was not accepted (connection, refusal, timeout); ``str(exc)`` says why."""


class EmailSender(Protocol):
    async def send(self, message: EmailMessage) -> None:
        """Hand the message to the mail server; raises EmailFailed when it is not accepted."""
        ...
