"""The per-process cache of calendars' schedules that ``SqlScheduleReader`` serves availability from.

An entry is filed under the calendar's ``revision``, a value database triggers replace in every transaction
that changes the calendar's appointments, rules or blackouts (migration ``0006``); the
reader uses an entry only while the revision its transaction reads is the one the entry was loaded under.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from domain.scheduling.model import AvailabilityRule, Blackout, HeldIntervals, Schedule


@dataclass(frozen=True, slots=True)
class CachedSchedule:
    revision: int
    low: datetime
    high: datetime
    """Blackouts and held slots overlapping ``[low, high)`` are all here."""
    rules: tuple[AvailabilityRule, ...]
    blackouts: tuple[Blackout, ...]
    held: HeldIntervals

    def covers(self, revision: int, start: datetime, end: datetime) -> bool:
        return revision == self.revision and self.low <= start and end <= self.high

    def window(self, start: datetime, end: datetime) -> Schedule:
        blackouts = [b for b in self.blackouts if b.start < end and b.end > start]
        return Schedule(self.rules, blackouts, self.held.overlapping(start, end))


class ScheduleCache:
    """Per process: the schedule of recently read calendars, each under the calendar's revision.

    ``calendars.revision`` is set to a new, never reused value by database triggers in every transaction
    that inserts, updates or deletes an appointment, rule or blackout of the calendar; an entry is used
    only while the revision the current transaction reads is the one it was loaded under. So a change
    made by any process (or by hand in SQL) is seen by the next read, and a rolled-back change leaves no
    entry anyone can match. Held slots are kept as 64-bit integer arrays (24 bytes each); the least
    recently used calendars are dropped beyond ``max_calendars`` or ``max_held`` held slots in all."""

    def __init__(self, max_calendars: int = 1024, max_held: int = 1_000_000) -> None:
        self.max_calendars, self.max_held = max_calendars, max_held
        self._entries: OrderedDict[tuple[int, int], CachedSchedule] = OrderedDict()
        self._held = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[int, int], revision: int, start: datetime, end: datetime) -> Schedule | None:
        entry = self._entries.get(key)
        if entry is None or not entry.covers(revision, start, end):
            return None
        self._entries.move_to_end(key)
        return entry.window(start, end)

    def put(self, key: tuple[int, int], entry: CachedSchedule) -> None:
        previous = self._entries.pop(key, None)
        if previous is not None:
            self._held -= len(previous.held)
        if len(entry.held) > self.max_held:
            return
        self._entries[key] = entry
        self._held += len(entry.held)
        while len(self._entries) > self.max_calendars or self._held > self.max_held:
            self._held -= len(self._entries.popitem(last=False)[1].held)

    def clear(self) -> None:
        self._entries.clear()
        self._held = 0
