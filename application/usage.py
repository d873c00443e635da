"""Usage use cases: the one write path into the ledger (``LedgerUsageRecorder``), the one quota gate every dial
and send passes (``QuotaGate``), and the reports (``GetUsage``, ``GetUsageMetrics``) read from counters.

Quota rule (plans without overage, today starter): a call reserves its agent's ``max_call_duration_seconds``
of the period's ``call_seconds`` when it is placed, atomically (a conditional UPDATE of the counter:
``used + reserved + n <= included``); when the call ends, its billable seconds are recorded and the reservation
is released in the same transaction. So calls in progress can never take the period past its included minutes,
however many are placed at once. An SMS reserves and records its segments in the transaction that sends it.
Plans with overage are never refused and reserve nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from application.billing import PARTNER_HOLD, standing_hold
from application.context import Actor
from application.ports.accounts import OrganizationRepository
from application.ports.billing import BillingRepository
from application.ports.knowledge import KnowledgeBaseRepository
from application.ports.platform import Clock, PageRequest, UnitOfWork
from application.ports.telephony import PhoneNumberRepository
from application.ports.usage import ChildrenUsage, UsageLedger
from domain.errors import NotFound, QuotaExceeded, RangeTooLong, ServiceOnHold, SubOrgForbidden, ValidationFailed
from domain.events import EventType
from domain.identity import persisted
from domain.organizations import Organization
from domain.rfc3339 import format_utc, parse_day_or_instant
from domain.telephony import PhoneNumberStatus
from domain.usage import (
    CALL_SECONDS,
    CALLS,
    HARD_STOP_PLANS,
    MAX_SERIES_DAYS,
    PUBLIC_METRIC,
    SERIES_METRICS,
    SMS_SEGMENTS,
    LedgerEntry,
    billable_seconds,
    check_usage_day,
    crossed_thresholds,
    included,
    period_bounds,
    period_of,
    resolve_period,
)


def _split(reference: str) -> tuple[str, str]:
    source_type, _, source_id = reference.partition(":")
    return (source_type, source_id) if source_id else ("other", reference)


def _minutes(seconds: float) -> float:
    return round(seconds / 60, 2)


class LedgerUsageRecorder:
    """``UsageRecorder`` over the ledger: append once per (source, metric), bump the counters, release what the
    source reserved, and emit ``usage.threshold`` the first time a period crosses 80 % or 100 %."""

    def __init__(self, uow: UnitOfWork, ledger: UsageLedger, organizations: OrganizationRepository) -> None:
        self.uow, self.ledger, self.organizations = uow, ledger, organizations

    async def record(self, organization_id: int, kind: str, quantity: float, at: datetime, reference: str, *,
                     agent_id: int | None = None, campaign_id: int | None = None) -> None:
        source_type, source_id = _split(reference)
        amount = billable_seconds(quantity) if kind == CALL_SECONDS else int(quantity)
        if amount > 0:
            period = period_of(at)
            entry = LedgerEntry(organization_id, kind, amount, period, source_type, source_id, at.astimezone(UTC),
                                agent_id, campaign_id)
            moved = await self.ledger.append(entry)
            if moved is not None:
                await self._thresholds(organization_id, kind, period, *moved)
        await self.ledger.release(source_type, source_id, kind)

    async def total(self, organization_id: int, kind: str, start: datetime, end: datetime) -> float:
        """The day counters of ``kind`` over the days in [start, end) (whole UTC days)."""
        days = await self.ledger.daily(organization_id, kind, start.astimezone(UTC).date(),
                                       (end.astimezone(UTC) - timedelta(microseconds=1)).date() + timedelta(days=1))
        return float(sum(days.values()))

    async def _thresholds(self, organization_id: int, metric: str, period: str, before: int, after: int) -> None:
        org = await self.organizations.get(organization_id)
        allowance = included(org.plan, metric) if org is not None else None
        for percent in crossed_thresholds(before, after, allowance):
            if await self.ledger.mark_threshold(organization_id, period, metric, percent):
                assert allowance is not None and org is not None
                start, end = period_bounds(period)
                public = PUBLIC_METRIC[metric]
                scale = _minutes if metric == CALL_SECONDS else (lambda v: v)
                self.uow.record(EventType.USAGE_THRESHOLD(organization_id, {
                    "metric": public, "threshold_percent": percent, "period": period,
                    "period_start": format_utc(start), "period_end": format_utc(end),
                    "used": scale(after), "included": scale(allowance), "plan": org.plan,
                    "hard_stop": org.plan in HARD_STOP_PLANS,
                }))


class LedgerQuotaGate:
    """``QuotaGate``: first the billing standing (``domain.billing.service_hold``: 402 payment_required while the
    subscription has been past_due for more than 7 days or is canceled), then, over the ledger's counters, on a
    plan without overage, reserve the amount against the period's included allowance atomically, or refuse with
    403 quota_exceeded naming the metric."""

    def __init__(self, ledger: UsageLedger, organizations: OrganizationRepository,
                 billing: BillingRepository) -> None:
        self.ledger, self.organizations, self.billing = ledger, organizations, billing

    async def ensure_standing(self, organization_id: int, at: datetime) -> None:
        """The organization's own standing; a sub-organization billed on its partner's invoice (billing mode
        ``partner``) also stands with its partner: it is held while the partner is."""
        standing = await standing_hold(self.billing, self.organizations, organization_id, at)
        if standing is None:
            return
        hold, payer = standing.hold, standing.payer
        message = hold.message if payer == organization_id else PARTNER_HOLD.format(reason=hold.reason)
        details: dict[str, object] = {"reason": hold.reason, "since": format_utc(hold.since) if hold.since else None,
                                      "unpaid_invoice_ids": await self.billing.unpaid_invoice_ids(organization_id)}
        if payer != organization_id:
            details["billed_through_partner"] = payer
        raise ServiceOnHold(f"payment_required: {message}", details=details)

    async def admit(self, organization_id: int, metric: str, reference: str, quantity: int, at: datetime) -> None:
        await self.ensure_standing(organization_id, at)
        org = await self.organizations.get(organization_id)
        if org is None or org.plan not in HARD_STOP_PLANS:
            return
        allowance = included(org.plan, metric)
        if allowance is None:
            return
        source_type, source_id = _split(reference)
        period = period_of(at)
        if not await self.ledger.reserve(organization_id, period, metric, source_type, source_id, quantity, allowance):
            public = PUBLIC_METRIC[metric]
            amount = f"{allowance // 60} call minutes" if metric == CALL_SECONDS else f"{allowance} SMS segments"
            raise QuotaExceeded(
                f"quota_exceeded: the {org.plan} plan includes {amount} per month and has no overage; "
                f"the {period} allowance of {public} is used up" + (
                    " or held by calls in progress (a call holds its agent's maximum duration until it ends)"
                    if metric == CALL_SECONDS else ""),
                details={"metric": public, "plan": org.plan, "period": period,
                         "included": allowance // 60 if metric == CALL_SECONDS else allowance})


# ---------------------------------------------------------------------------------------------- reports


@dataclass(frozen=True, slots=True)
class GetUsageCommand:
    actor: Actor
    period: str | None = None
    rollup: str | None = None
    """``children``: a partner's report adds each sub-organization's plan and usage."""


@dataclass(frozen=True, slots=True)
class UsageReport:
    period: str
    period_start: datetime
    period_end: datetime
    plan: str
    metrics: dict[str, Any]
    children: list[ChildUsage] | None = None


@dataclass(frozen=True, slots=True)
class ChildUsage:
    organization_id: int
    name: str
    plan: str
    usage: dict[str, Any]


def _metered(plan: str, used: dict[str, int]) -> dict[str, Any]:
    """The metered part of a report: call minutes, calls and SMS segments against the plan's included amounts."""
    seconds = used.get(CALL_SECONDS, 0)
    minutes_included = (included(plan, CALL_SECONDS) or 0) // 60
    segments_included = included(plan, SMS_SEGMENTS) or 0
    segments = used.get(SMS_SEGMENTS, 0)
    return {
        "call_minutes": {"used": _minutes(seconds), "used_seconds": seconds, "included": minutes_included,
                         "remaining": max(0.0, round(minutes_included - seconds / 60, 2))},
        "calls": used.get(CALLS, 0),
        "sms_segments": {"used": segments, "included": segments_included,
                         "remaining": max(0, segments_included - segments)},
    }


async def _all_children(organizations: OrganizationRepository, partner_id: int) -> list[Organization]:
    children: list[Organization] = []
    offset = 0
    while True:
        page = await organizations.list_children(partner_id, PageRequest(500, offset))
        children += [c for c in page.items if c.id is not None]
        offset += len(page.items)
        if not page.items or offset >= page.total:
            break
    return children


class GetUsage:
    """GET /usage: one period's counters against the plan's included amounts (never a sum over the ledger)."""

    def __init__(self, ledger: UsageLedger, organizations: OrganizationRepository,
                 knowledge_bases: KnowledgeBaseRepository, numbers: PhoneNumberRepository, clock: Clock,
                 children: ChildrenUsage) -> None:
        self.ledger, self.organizations, self.knowledge_bases = ledger, organizations, knowledge_bases
        self.numbers, self.clock, self.children = numbers, clock, children

    async def execute(self, command: GetUsageCommand) -> UsageReport:
        period = resolve_period(command.period, self.clock.now())
        org_id = command.actor.organization_id
        org = await self.organizations.get(org_id)
        if org is None:
            raise NotFound("organization", org_id)
        if command.rollup not in (None, "children"):
            raise ValidationFailed.field("rollup", "must be children")
        if command.rollup is not None and not org.is_partner:
            raise ValidationFailed.field("rollup", "only a partner organization has sub-organizations to roll up")
        used = await self.ledger.used(org_id, period)
        numbers = await self.numbers.list(org_id)
        start, end = period_bounds(period)
        children = await self._children(org_id, period) if command.rollup else None
        return UsageReport(period, start, end, org.plan, {
            **_metered(org.plan, used),
            # a report takes no lock (count_for_update would hold the organization's row, as a creator does)
            "knowledge_bases": {"used": (await self.knowledge_bases.list(org_id, PageRequest(1, 0))).total,
                                "limit": org.limit("max_knowledge_bases")},
            "phone_numbers": len([n for n in numbers if n.status == PhoneNumberStatus.ACTIVE]),
        }, children)

    async def _children(self, partner_id: int, period: str) -> list[ChildUsage]:
        """Each sub-organization's plan and metered usage: the children and their counters in one read."""
        return [ChildUsage(c.organization_id, c.name, c.plan, _metered(c.plan, c.used))
                for c in await self.children.of_children(partner_id, period)]


@dataclass(frozen=True, slots=True)
class ListClientsCommand:
    actor: Actor


@dataclass(frozen=True, slots=True)
class Client:
    organization_id: int
    name: str
    plan: str
    billing_mode: str
    """``partner``: on the partner's invoice; ``direct``: the client pays its own."""
    usage: dict[str, Any]
    """The period's metered usage, as ``GET /usage`` reports it."""


@dataclass(frozen=True, slots=True)
class Clients:
    period: str
    clients: list[Client]


class ListClients:
    """A partner's clients (its sub-organizations) with their plan, billing mode and this period's usage (the
    dashboard's Clients section): the children and their counters in one read, their billing modes in another."""

    def __init__(self, children: ChildrenUsage, organizations: OrganizationRepository, billing: BillingRepository,
                 clock: Clock) -> None:
        self.children, self.organizations, self.billing, self.clock = children, organizations, billing, clock

    async def execute(self, command: ListClientsCommand) -> Clients:
        org_id = command.actor.organization_id
        org = await self.organizations.get(org_id)
        if org is None:
            raise NotFound("organization", org_id)
        if not org.is_partner:
            raise SubOrgForbidden("only partner organizations have clients (sub-organizations)")
        period = period_of(self.clock.now())
        found = await self.children.of_children(org_id, period)
        modes = await self.billing.billing_modes([c.organization_id for c in found])
        return Clients(period, [Client(c.organization_id, c.name, c.plan, modes.get(c.organization_id, "partner"),
                                       _metered(c.plan, c.used)) for c in found])


@dataclass(frozen=True, slots=True)
class GetUsageMetricsCommand:
    actor: Actor
    metric: str | None
    start: str | None
    end: str | None
    granularity: str | None = "day"


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    date: date
    value: float
    hour: datetime | None = None
    """The hour's first instant (UTC) with granularity ``hour``."""


MAX_HOURLY_DAYS = 31
"""An hourly series covers at most 31 days (744 points)."""


def _day(value: str | None, name: str) -> date:
    if not value:
        raise ValidationFailed.field(name, "is required (a date YYYY-MM-DD or an RFC 3339 instant)")
    parsed = parse_day_or_instant(value, name)
    return check_usage_day(parsed.astimezone(UTC).date() if isinstance(parsed, datetime) else parsed, name)


def _series_range(command: GetUsageMetricsCommand) -> tuple[str, str, date, date]:
    """The metric (ledger name), granularity and days [start, end] of a series request, validated."""
    metric = SERIES_METRICS.get(command.metric or "")
    if metric is None:
        raise ValidationFailed.field("metric", f"must be one of {', '.join(SERIES_METRICS)}")
    granularity = command.granularity or "day"
    if granularity not in ("day", "hour"):
        raise ValidationFailed.field("granularity", "must be day or hour")
    start, end = _day(command.start, "start"), _day(command.end, "end")
    if end < start:
        raise ValidationFailed.field("end", "must not be before start")
    longest = MAX_HOURLY_DAYS if granularity == "hour" else MAX_SERIES_DAYS
    if (end - start).days + 1 > longest:
        raise RangeTooLong.field("end", f"the range is at most {longest} days with granularity {granularity}")
    return metric, granularity, start, end


class GetUsageMetrics:
    """GET /usage/metrics: one metric per UTC day over [start, end] (both dates included), read from the
    per-day counters kept with the ledger; days without usage are 0. With granularity ``hour``, per UTC hour over
    at most 31 days, from the ledger's rows of the range (its index on organization, metric and instant)."""

    def __init__(self, ledger: UsageLedger) -> None:
        self.ledger = ledger

    async def execute(self, command: GetUsageMetricsCommand) -> list[SeriesPoint]:
        metric, granularity, start, end = _series_range(command)
        if granularity == "hour":
            return await self._hourly(command.actor.organization_id, metric, start, end)
        days = await self.ledger.daily(command.actor.organization_id, metric, start, end + timedelta(days=1))
        scale = _minutes if metric == CALL_SECONDS else float
        return [SeriesPoint(start + timedelta(days=i), scale(days.get(start + timedelta(days=i), 0)))
                for i in range((end - start).days + 1)]

    async def _hourly(self, organization_id: int, metric: str, start: date, end: date) -> list[SeriesPoint]:
        """Every UTC hour of the days [start, end], from the ledger (an hour is where its entries occurred: a call
        when it ended, a message when it was sent); hours without usage are 0."""
        first = datetime(start.year, start.month, start.day, tzinfo=UTC)
        after = datetime(end.year, end.month, end.day, tzinfo=UTC) + timedelta(days=1)
        hours = await self.ledger.hourly(organization_id, metric, first, after)
        scale = _minutes if metric == CALL_SECONDS else float
        points = []
        at = first
        while at < after:
            points.append(SeriesPoint(at.date(), scale(hours.get(at, 0)), at))
            at += timedelta(hours=1)
        return points


GROUP_BY = ("agent", "campaign", "child")


@dataclass(frozen=True, slots=True)
class GetUsageBreakdownCommand:
    actor: Actor
    metric: str | None
    start: str | None
    end: str | None
    granularity: str | None
    group_by: str | None


@dataclass(frozen=True, slots=True)
class UsageGroup:
    id: int | None
    """The agent's, campaign's or sub-organization's id; None: usage with no agent or campaign (messages)."""
    name: str | None
    """With group_by child: the sub-organization's name."""
    total: float
    series: list[SeriesPoint]


@dataclass(frozen=True, slots=True)
class UsageBreakdown:
    series: list[SeriesPoint]
    """The sum of the groups per point."""
    groups: list[UsageGroup]


class GetUsageBreakdown:
    """GET /usage/metrics?group_by=agent|campaign|child: the metric's series split by the agent or campaign of each
    ledger entry (its call's), or, for a partner, by sub-organization; read from the ledger's rows of the range
    (bucketed by UTC hour, then day). Only groups with usage in the range are listed, by id (None last)."""

    def __init__(self, ledger: UsageLedger, organizations: OrganizationRepository) -> None:
        self.ledger, self.organizations = ledger, organizations

    async def execute(self, command: GetUsageBreakdownCommand) -> UsageBreakdown:
        metric, granularity, start, end = _series_range(GetUsageMetricsCommand(
            command.actor, command.metric, command.start, command.end, command.granularity))
        if command.group_by not in GROUP_BY:
            raise ValidationFailed.field("group_by", f"must be one of {', '.join(GROUP_BY)}")
        org_id = command.actor.organization_id
        names: dict[int, str] = {}
        if command.group_by == "child":
            org = await self.organizations.get(org_id)
            if org is None or not org.is_partner:
                raise ValidationFailed.field("group_by", "child is for a partner organization's sub-organizations")
            children = await _all_children(self.organizations, org_id)
            names = {persisted(c.id): c.name for c in children}
            ids, by = list(names), "organization"
        else:
            ids, by = [org_id], command.group_by
        first = datetime(start.year, start.month, start.day, tzinfo=UTC)
        after = datetime(end.year, end.month, end.day, tzinfo=UTC) + timedelta(days=1)
        found = await self.ledger.breakdown(ids, metric, first, after, by)
        buckets: list[datetime] = []
        at, step = first, timedelta(hours=1) if granularity == "hour" else timedelta(days=1)
        while at < after:
            buckets.append(at)
            at += step
        scale = _minutes if metric == CALL_SECONDS else float
        by_group: dict[int | None, dict[datetime, int]] = {}
        for (group, hour), quantity in found.items():
            bucket = hour if granularity == "hour" else hour.replace(hour=0)
            values = by_group.setdefault(group, {})
            values[bucket] = values.get(bucket, 0) + quantity

        def series(values: dict[datetime, int]) -> list[SeriesPoint]:
            return [SeriesPoint(b.date(), scale(values.get(b, 0)), b if granularity == "hour" else None)
                    for b in buckets]

        totals: dict[datetime, int] = {}
        for values in by_group.values():
            for bucket, quantity in values.items():
                totals[bucket] = totals.get(bucket, 0) + quantity
        order = sorted(by_group, key=lambda g: (g is None, g or 0))
        groups = [UsageGroup(g, names.get(g) if g is not None else None, scale(sum(by_group[g].values())),
                             series(by_group[g])) for g in order]
        return UsageBreakdown(series(totals), groups)
