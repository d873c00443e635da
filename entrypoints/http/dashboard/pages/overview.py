"""Overview: usage of the current period against the plan's quotas, the cloud status, the latest calls."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Template

from application import calls as calls_uc
from application import cloud as cloud_uc
from application import usage as usage_uc
from application.ports.calls import CallFilter
from application.ports.platform import PageRequest
from entrypoints.http.dashboard.pages import SIGNED_IN, page
from entrypoints.http.dashboard.view import View

RECENT_CALLS = 8


@page("GET", "/", section="overview", scopes=SIGNED_IN)
async def overview(request: Request[Any, Any, Any], usage: FromDishka[usage_uc.GetUsage],
                   cloud: FromDishka[cloud_uc.GetCloudStatus], calls: FromDishka[calls_uc.ListCalls]) -> Template:
    view = View.of(request)
    report = await view.run(usage, lambda actor: usage_uc.GetUsageCommand(actor))
    status = await view.run(cloud, lambda actor: cloud_uc.GetCloudStatusCommand(actor))
    recent = await view.run(calls, lambda actor: calls_uc.ListCallsCommand(actor, CallFilter(),
                                                                           PageRequest(RECENT_CALLS, 0)))
    return view.page("overview.html", usage=report, cloud=status, calls=recent.items, total_calls=recent.total)


HANDLERS = [overview]
