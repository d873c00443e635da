from __future__ import annotations

from typing import Annotated, Literal

from dishka import FromDishka
from litestar.params import QueryParameter

from application import usage as uc
from application.context import Actor
from entrypoints.http.envelope import Envelope
from entrypoints.http.routing import endpoint
from entrypoints.http.schemas.usage import SeriesOut, UsageOut

TAGS = ["Usage"]
Metric = Annotated[Literal["call_minutes", "calls", "sms_segments"], QueryParameter()]
Granularity = Annotated[Literal["day", "hour"], QueryParameter(description=(
    "day (at most 366 days) or hour (UTC hours, at most 31 days)"))]
GroupBy = Annotated[Literal["agent", "campaign", "child"] | None, QueryParameter(description=(
    "agent or campaign: split the series by the agent or campaign of each call measured (messages and calls "
    "without a campaign under id null); child (partners): by sub-organization"))]
Day = Annotated[str, QueryParameter(max_length=64, description="A date YYYY-MM-DD or an RFC 3339 instant "
                                                                "(its UTC date); both days are included")]


@endpoint("GET", "/usage", operation_id="getUsage", summary="Usage of a billing period against the plan",
          tags=TAGS, scopes=("usage:read",),
          description=("period: current (default), previous or YYYY-MM (a UTC calendar month). Read from the "
                       "period's counters, kept in the transaction of each call or message they measure. "
                       "call_minutes.used is billable seconds / 60 (each call's seconds rounded up)."),
          errors={400: "bad_request: period is not current, previous or YYYY-MM; rollup=children from an "
                       "organization that is not a partner"})
async def get_usage(actor: FromDishka[Actor], use_case: FromDishka[uc.GetUsage],
                    period: Annotated[str | None, QueryParameter(
                        max_length=16, description="current, previous or YYYY-MM")] = None,
                    rollup: Annotated[Literal["children"] | None, QueryParameter(description=(
                        "children (partners): add each sub-organization's plan and usage of the period"))] = None
                    ) -> Envelope[UsageOut]:
    return Envelope(UsageOut.of(await use_case.execute(uc.GetUsageCommand(actor, period, rollup))))


@endpoint("GET", "/usage/metrics", operation_id="getUsageMetrics", summary="A usage metric per UTC day",
          tags=TAGS, scopes=("usage:read",),
          description=("metric: call_minutes, calls or sms_segments; start and end: dates (YYYY-MM-DD) or RFC 3339 "
                       "instants, both days included; granularity: day (per-day counters, at most 366 days) or "
                       "hour (every UTC hour of those days, at most 31 days; each point also has hour). Periods "
                       "without usage are 0. group_by: agent, campaign or child adds groups, each group's series "
                       "(read from the ledger's rows of the range)."),
          errors={400: "bad_request naming the invalid parameter; a range over 366 days has "
                       "details.reason range_too_long; group_by=child from an organization that is not a partner"})
async def get_usage_metrics(actor: FromDishka[Actor], use_case: FromDishka[uc.GetUsageMetrics],
                            breakdown: FromDishka[uc.GetUsageBreakdown],
                            metric: Metric, start: Day, end: Day,
                            granularity: Granularity = "day", group_by: GroupBy = None) -> Envelope[SeriesOut]:
    if group_by is not None:
        split = await breakdown.execute(uc.GetUsageBreakdownCommand(actor, metric, start, end, granularity, group_by))
        return Envelope(SeriesOut.of_breakdown(metric, split, granularity, group_by))
    points = await use_case.execute(uc.GetUsageMetricsCommand(actor, metric, start, end, granularity))
    return Envelope(SeriesOut.of(metric, points, granularity))


ROUTES = [get_usage, get_usage_metrics]
