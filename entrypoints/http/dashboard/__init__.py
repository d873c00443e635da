"""The back-office at ``/dashboard``: server-rendered HTML (Jinja, autoescaped) over the same use cases and the
same organization scoping as the API, for a signed-in dashboard user (a session, ``application/sessions.py``).

Its own router: its gate (``gate.py``: session, CSRF, the unit of work, security headers), its HTML error pages
(``errors.py``), one handler module per section in ``pages/`` and one template per page in ``templates/``; the
stylesheet is served from ``/dashboard/static``. ``view.View`` is the helper every page uses.
"""

from __future__ import annotations

from typing import Any

from dishka.integrations.litestar import DishkaRouter
from litestar import Router
from litestar.static_files import create_static_files_router

from entrypoints.http.dashboard.errors import EXCEPTION_HANDLERS
from entrypoints.http.dashboard.gate import DashboardGate
from entrypoints.http.dashboard.navigation import PREFIX
from entrypoints.http.dashboard.pages import (
    agent_editing,
    agents,
    api_keys,
    appointments,
    audit,
    auth,
    billing,
    calendars,
    calls,
    campaigns,
    clients,
    coming_soon,
    dnc,
    knowledge,
    leads,
    overview,
    phone_numbers,
    schedules,
    sms,
    triggers,
    users,
    webhooks,
)
from entrypoints.http.dashboard.templating import API_STATIC, STATIC

PAGE_MODULES = [auth, overview, agents, agent_editing, calls, appointments, calendars, schedules, campaigns, leads,
                knowledge, phone_numbers, sms, dnc, webhooks, triggers, api_keys, billing, users, clients, audit,
                coming_soon]


def page_handlers() -> list[Any]:
    return [handler for module in PAGE_MODULES for handler in module.HANDLERS]


def routers() -> list[Router]:
    pages = DishkaRouter(path=PREFIX, route_handlers=page_handlers(), middleware=[DashboardGate],
                         exception_handlers=EXCEPTION_HANDLERS)
    # the web-call client (webcall.js) is the API's own static file, served here too for the agent's page
    static = create_static_files_router(path=f"{PREFIX}/static", directories=[STATIC, API_STATIC],
                                        name="dashboard-static",
                                        include_in_schema=False)
    return [pages, static]
