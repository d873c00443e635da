"""ICS feeds: issuing and revoking a calendar's secret feed token, and rendering the feed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from application.ports.platform import Clock, Random
from application.ports.scheduling import AppointmentRepository, CalendarRepository, IcsRenderer
from application.scheduling.calendars import CalendarRef, load_calendar
from domain.errors import NotFound
from domain.identity import persisted
from domain.scheduling.feeds import FEED_LOOKBACK_DAYS, FEED_MAX_EVENTS, feed_token_digest, is_feed_token_shaped
from domain.scheduling.model import Calendar

FEED_TOKEN_BYTES = 24


class IssueFeedToken:
    """Create or rotate the calendar's secret feed token; the previous token stops working at once.
    Only its SHA-256 is stored: the token is shown once, in the result."""

    def __init__(self, calendars: CalendarRepository, random: Random) -> None:
        self.calendars, self.random = calendars, random

    async def execute(self, command: CalendarRef) -> str:
        actor, calendar_id = command.actor, command.calendar_id
        await load_calendar(self.calendars, actor, calendar_id, lock=True)
        token = self.random.token(FEED_TOKEN_BYTES)
        await self.calendars.set_feed_token(actor.organization_id, calendar_id, feed_token_digest(token))
        return token


class RevokeFeedToken:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: CalendarRef) -> None:
        actor, calendar_id = command.actor, command.calendar_id
        await load_calendar(self.calendars, actor, calendar_id, lock=True)
        await self.calendars.set_feed_token(actor.organization_id, calendar_id, None)


class _Feed:
    def __init__(self, calendars: CalendarRepository, appointments: AppointmentRepository, renderer: IcsRenderer,
                 clock: Clock) -> None:
        self.calendars, self.appointments, self.renderer, self.clock = calendars, appointments, renderer, clock

    async def _render(self, calendar: Calendar) -> bytes:
        since = self.clock.now() - timedelta(days=FEED_LOOKBACK_DAYS)
        items = await self.appointments.for_feed(calendar.organization_id, persisted(calendar.id), since,
                                                 FEED_MAX_EVENTS)
        return self.renderer.render(calendar, items)


class RenderCalendarFeed(_Feed):
    """The calendar's appointments (every status, ending in the last 90 days or later) as ICS."""

    async def execute(self, command: CalendarRef) -> bytes:
        return await self._render(await load_calendar(self.calendars, command.actor, command.calendar_id))


@dataclass(frozen=True, slots=True)
class RenderFeedByTokenCommand:
    token: str
    """The secret feed token from the feed URL (no actor: the token is the credential)."""


class RenderFeedByToken(_Feed):
    """The feed of the calendar whose secret token this is; NotFound for any other text."""

    async def execute(self, command: RenderFeedByTokenCommand) -> bytes:
        token = command.token
        calendar = await self.calendars.find_by_feed_token(feed_token_digest(token)) if is_feed_token_shaped(
            token) else None
        if calendar is None:
            raise NotFound("calendar feed", "for this token")
        return await self._render(calendar)
