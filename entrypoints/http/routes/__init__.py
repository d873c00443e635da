"""Route handlers, one module per resource. Handlers call one use case each.

``ROUTES`` is the HTTP side of the features: each feature's handlers under its name (``core`` for the
platform's own), for every feature of the composition root's registry (``entrypoints.ioc.FEATURES``), so a
feature's modules never import Litestar.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from entrypoints.http import media
from entrypoints.http.routes import (
    accounts,
    agents,
    ai_providers,
    audit,
    billing,
    business_hours,
    calls,
    campaigns,
    carriers,
    cloud,
    dnc,
    knowledge,
    leads,
    meta,
    scheduling,
    sessions,
    sms,
    telephony,
    triggers,
    usage,
    webhooks,
    widget,
)

ROUTES: dict[str, list[Any]] = {
    "core": [*meta.ROUTES, *agents.ROUTES, *accounts.ROUTES, *audit.ROUTES],
    "billing": billing.ROUTES,
    "calls": [*calls.ROUTES, *dnc.ROUTES, *telephony.ROUTES],
    "campaigns": campaigns.ROUTES,
    "carriers": carriers.ROUTES,
    "cloud": cloud.ROUTES,
    "engines": ai_providers.ROUTES,
    "knowledge": knowledge.ROUTES,
    "leads": leads.ROUTES,
    "media": media.ROUTES,
    "scheduling": scheduling.ROUTES,
    "business_hours": business_hours.ROUTES,
    "sessions": sessions.ROUTES,
    "sms": sms.ROUTES,
    "triggers": triggers.ROUTES,
    "usage": usage.ROUTES,
    "webhooks": webhooks.ROUTES,
    "widget": widget.ROUTES,
}


def route_handlers(features: Iterable[str]) -> list[Any]:
    """The handlers of the core and of the named features, in that order."""
    return [handler for name in ("core", *features) for handler in ROUTES.get(name, ())]
