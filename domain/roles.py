"""Dashboard users' roles and what each may do, as scopes: a signed-in user acts with the scopes of its role, so
the one scope check every route and page declares (``Access.scopes``, a page's ``scopes``) enforces roles too.

- ``owner`` and ``admin``: everything (users, API keys, billing, the audit log); only an owner makes or changes an
  owner, and an organization keeps at least one owner.
- ``member``: the day-to-day work (agents, knowledge, numbers, campaigns, calls, triggers, schedules, calendars,
  leads, SMS, DNC) and reading the rest, but not users, API keys, billing changes or the audit log.
- ``viewer``: reads, as ``member`` does, and changes nothing.
"""

from __future__ import annotations

from enum import StrEnum

from domain.errors import ValidationFailed
from domain.scopes import ALL_SCOPES, SUPER_SCOPE, ScopeSet


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


ROLES = tuple(Role)
MANAGERS = frozenset({Role.OWNER, Role.ADMIN})
"""Who manages users (and mints API keys, changes billing, reads the audit log)."""

MEMBER_FAMILIES = frozenset({"agents", "kb", "calls", "campaigns", "telephony", "schedules", "scheduling", "triggers",
                             "leads", "sms", "dnc", "webhooks", "widget"})


def _reads() -> frozenset[str]:
    return frozenset(s for s in ALL_SCOPES if s.endswith(":read")
                     and s.split(":", 1)[0] not in ("organizations", "api-keys"))


ROLE_SCOPES: dict[Role, frozenset[str]] = {
    Role.OWNER: frozenset({SUPER_SCOPE}),
    Role.ADMIN: frozenset({SUPER_SCOPE}),
    Role.MEMBER: _reads() | frozenset(f"{family}:*" for family in MEMBER_FAMILIES),
    Role.VIEWER: _reads(),
}


def scopes_of(role: Role | str) -> ScopeSet:
    return ScopeSet.of(ROLE_SCOPES[Role(role)])


def parse_role(value: object, field: str = "role") -> Role:
    try:
        return Role(str(value))
    except ValueError:
        raise ValidationFailed.field(field, "must be owner, admin, member or viewer") from None


def may_assign(actor: Role, role: Role, current: Role | None = None) -> bool:
    """Whether a user of role ``actor`` may give ``role`` (to a user now ``current``, or to an invitee): owners and
    admins manage users; only an owner makes an owner or changes one."""
    if actor not in MANAGERS:
        return False
    if actor == Role.OWNER:
        return True
    return role != Role.OWNER and current != Role.OWNER
