"""The dashboard's sections, in the order the navigation lists them. A section not built yet points at a page
that says so (``pages/coming_soon.py``); building one means: a handler module in ``pages/``, a template in
``templates/``, and ``built=True`` here (then ``coming_soon`` stops serving its path)."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "/dashboard"


@dataclass(frozen=True, slots=True)
class Section:
    key: str      # the template's ``section`` (highlights the navigation entry)
    title: str
    path: str     # under PREFIX
    built: bool
    managers: bool = False
    """Listed only for owners and admins (the others' role opens none of its pages)."""
    partners: bool = False
    """Listed only for a partner organization's users (its clients)."""

    @property
    def url(self) -> str:
        return PREFIX + self.path


SECTIONS: tuple[Section, ...] = (
    Section("overview", "Overview", "", True),
    Section("agents", "Agents", "/agents", True),
    Section("calls", "Calls", "/calls", True),
    Section("appointments", "Appointments", "/appointments", True),
    Section("calendars", "Calendars", "/calendars", True),
    Section("schedules", "Schedules", "/schedules", True),
    Section("campaigns", "Campaigns", "/campaigns", True),
    Section("leads", "Leads", "/leads", True),
    Section("knowledge_bases", "Knowledge bases", "/knowledge-bases", True),
    Section("phone_numbers", "Phone numbers", "/phone-numbers", True),
    Section("sms", "SMS", "/sms", True),
    Section("dnc", "Do-Not-Call", "/dnc", True),
    Section("webhooks", "Webhooks", "/webhooks", True),
    Section("triggers", "Triggers", "/triggers", True),
    Section("api_keys", "API keys", "/api-keys", True, managers=True),
    Section("billing", "Billing", "/billing", True),
    Section("users", "Users", "/users", True, managers=True),
    Section("audit", "Audit log", "/audit", True, managers=True),
    Section("sub_organizations", "Clients", "/sub-organizations", True, managers=True, partners=True),
)


def section(key: str) -> Section:
    return next(s for s in SECTIONS if s.key == key)
