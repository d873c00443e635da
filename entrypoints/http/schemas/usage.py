from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

from msgspec import UNSET, Meta, Struct, UnsetType

from application.usage import ChildUsage, SeriesPoint, UsageBreakdown, UsageGroup, UsageReport


class Allowance(Struct, kw_only=True):
    used: int
    included: int
    remaining: int


class CallMinutes(Struct, kw_only=True):
    used: float
    """Billable seconds / 60, to two decimals (each call's seconds rounded up)."""
    used_seconds: int
    included: int
    remaining: float


class Limited(Struct):
    used: int
    limit: int


class UsageMetricsOut(Struct, kw_only=True):
    call_minutes: CallMinutes
    calls: int
    sms_segments: Allowance
    knowledge_bases: Limited
    phone_numbers: int


class MeteredOut(Struct, kw_only=True):
    call_minutes: CallMinutes
    calls: int
    sms_segments: Allowance


class ChildUsageOut(Struct, kw_only=True):
    organization_id: int
    name: str
    plan: str
    usage: MeteredOut

    @classmethod
    def of(cls, child: ChildUsage) -> ChildUsageOut:
        u = child.usage
        return cls(organization_id=child.organization_id, name=child.name, plan=child.plan, usage=MeteredOut(
            call_minutes=CallMinutes(**u["call_minutes"]), calls=u["calls"],
            sms_segments=Allowance(**u["sms_segments"])))


class UsageOut(Struct, kw_only=True):
    period: str
    period_start: datetime
    period_end: datetime
    plan: str
    metrics: UsageMetricsOut
    children: Annotated[list[ChildUsageOut], Meta(description=(
        "With rollup=children (partners): each sub-organization's plan and usage of the period"))] | UnsetType = UNSET

    @classmethod
    def of(cls, report: UsageReport) -> UsageOut:
        m = report.metrics
        return cls(period=report.period, period_start=report.period_start, period_end=report.period_end,
                   plan=report.plan, metrics=UsageMetricsOut(
                       call_minutes=CallMinutes(**m["call_minutes"]), calls=m["calls"],
                       sms_segments=Allowance(**m["sms_segments"]),
                       knowledge_bases=Limited(**m["knowledge_bases"]), phone_numbers=m["phone_numbers"]),
                   children=UNSET if report.children is None else [ChildUsageOut.of(c) for c in report.children])


class PointOut(Struct):
    date: date
    value: float
    hour: Annotated[datetime, Meta(description=(
        "With granularity hour: the hour's first instant (UTC)"))] | UnsetType = UNSET


def _points(points: list[SeriesPoint]) -> list[PointOut]:
    return [PointOut(p.date, p.value, UNSET if p.hour is None else p.hour) for p in points]


class GroupOut(Struct, kw_only=True):
    id: Annotated[int | None, Meta(description=(
        "The agent's, campaign's or sub-organization's id; null: usage with no agent or campaign (messages, and "
        "calls not placed by a campaign)"))]
    name: Annotated[str, Meta(description="With group_by child: the sub-organization's name")] | UnsetType = UNSET
    value: Annotated[float, Meta(description="The group's sum over the range")]
    series: list[PointOut]

    @classmethod
    def of(cls, group: UsageGroup) -> GroupOut:
        return cls(id=group.id, name=UNSET if group.name is None else group.name, value=group.total,
                   series=_points(group.series))


class SeriesOut(Struct, kw_only=True):
    metric: str
    granularity: str
    series: list[PointOut]
    group_by: Annotated[str, Meta(description="agent, campaign or child, as asked")] | UnsetType = UNSET
    groups: Annotated[list[GroupOut], Meta(description=(
        "With group_by: the series of each group that has usage in the range (series is their sum)"))] \
        | UnsetType = UNSET

    @classmethod
    def of(cls, metric: str, points: list[SeriesPoint], granularity: str = "day") -> SeriesOut:
        return cls(metric=metric, granularity=granularity, series=_points(points))

    @classmethod
    def of_breakdown(cls, metric: str, breakdown: UsageBreakdown, granularity: str, group_by: str) -> SeriesOut:
        return cls(metric=metric, granularity=granularity, series=_points(breakdown.series), group_by=group_by,
                   groups=[GroupOut.of(g) for g in breakdown.groups])
