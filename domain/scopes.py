"""Scope algebra: ``family:action`` scopes, ``family:*`` wildcards and the super-scope ``*``.

Read and write are independent: holding ``kb:write`` says nothing about ``kb:read``.
A wildcard implies every scope of its family; ``*`` implies every scope.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SUPER_SCOPE = "*"
_SCOPE_RE = re.compile(r"^(?:\*|[a-z][a-z-]*:(?:\*|[a-z][a-z-]*))$")

# family -> {action: description}
CATALOGUE: dict[str, dict[str, str]] = {
    "agents": {
        "read": "List and read agents and their versions",
        "write": "Create, update, publish and duplicate agents",
        "delete": "Delete agents",
    },
    "kb": {
        "read": "List and read knowledge bases, documents and search results",
        "write": "Create, update and delete knowledge bases; upload and scrape documents",
    },
    "calls": {
        "schedule": "Place outbound calls",
        "read": "Read calls, call logs and transcripts",
        "cancel": "Cancel queued or ringing calls",
        "recordings": "Obtain signed recording URLs",
    },
    "campaigns": {
        "read": "List and read campaigns and contacts",
        "write": "Create and update campaigns and import contacts",
        "delete": "Delete campaigns",
        "execute": "Start, pause and dial campaigns",
    },
    "telephony": {
        "read": "Read providers, phone numbers and call statistics",
        "write": "Create and update providers and phone numbers",
        "delete": "Delete providers and phone numbers",
        "manage": "Manage provider credentials and number assignment",
    },
    "schedules": {
        "read": "Read business-hours schedules",
        "write": "Create and update business-hours schedules and exceptions",
        "delete": "Delete business-hours schedules",
    },
    "scheduling": {
        "read": "Read calendars, availability, appointments and ICS feeds",
        "write": "Manage calendars and book, reschedule and approve appointments",
        "delete": "Cancel appointments and delete calendars",
    },
    "webhooks": {
        "read": "List subscriptions and delivery logs",
        "write": "Create and update subscriptions and send test events",
        "delete": "Delete subscriptions",
        "manage": "Rotate secrets and redeliver events",
    },
    "dnc": {
        "read": "Read Do-Not-Call lists and check numbers",
        "write": "Manage Do-Not-Call lists and entries",
    },
    "sms": {"read": "Read message history", "write": "Send SMS messages"},
    "usage": {"read": "Read usage, quotas and billing-period metrics"},
    "api-keys": {
        "read": "List and read API keys",
        "write": "Create and rotate API keys",
        "delete": "Revoke API keys",
        "manage": "Rotate API keys",
    },
    "leads": {"read": "Read leads and their status", "write": "Ingest leads that queue outbound calls"},
    "triggers": {
        "read": "Read automation triggers",
        "write": "Create and update automation triggers",
        "delete": "Delete automation triggers",
    },
    "organizations": {
        "read": "Read partner sub-organizations",
        "write": "Create, update and delete partner sub-organizations",
    },
    "billing": {"read": "Read subscription, payment methods and invoices", "write": "Change billing"},
    "cloud": {"read": "Read cloud-connectivity status"},
    "widget": {"write": "Mint widget tokens"},
}

ALL_SCOPES: frozenset[str] = frozenset(
    f"{family}:{action}" for family, actions in CATALOGUE.items() for action in actions
)


def _presets() -> dict[str, tuple[str, ...]]:
    read_only = tuple(sorted(s for s in ALL_SCOPES if s.endswith(":read")))
    return {
        "read_only": read_only,
        "full_access": (SUPER_SCOPE,),
        "calls_only": ("calls:schedule", "calls:read", "calls:cancel", "calls:recordings", "agents:read"),
        "scheduling_only": ("scheduling:read", "scheduling:write", "scheduling:delete"),
    }


PRESETS: dict[str, tuple[str, ...]] = _presets()


def is_valid_scope(scope: str) -> bool:
    """A scope is ``*``, ``family:*`` of a known family, or a catalogued ``family:action``."""
    if not _SCOPE_RE.match(scope):
        return False
    if scope == SUPER_SCOPE:
        return True
    family, action = scope.split(":", 1)
    if family not in CATALOGUE:
        return False
    return action == "*" or action in CATALOGUE[family]


def implies(held: str, wanted: str) -> bool:
    """Whether holding ``held`` grants ``wanted`` (reflexive, transitive, wildcard-aware)."""
    if held in (wanted, SUPER_SCOPE):
        return True
    if wanted == SUPER_SCOPE:
        return False
    held_family, held_action = held.split(":", 1)
    wanted_family = wanted.split(":", 1)[0]
    if held_family != wanted_family:
        return False
    return held_action == "*"


@dataclass(frozen=True, slots=True)
class ScopeSet:
    """The scopes a key holds."""

    scopes: frozenset[str]

    @classmethod
    def of(cls, scopes: Iterable[str]) -> ScopeSet:
        return cls(frozenset(scopes))

    def grants(self, wanted: str) -> bool:
        if wanted in self.scopes or SUPER_SCOPE in self.scopes:
            return True
        family = wanted.split(":", 1)[0]
        return f"{family}:*" in self.scopes

    def grants_any(self, alternatives: Iterable[str]) -> bool:
        """An operation lists alternatives; holding any one authorizes it."""
        return any(self.grants(s) for s in alternatives)

    def covers(self, other: Iterable[str]) -> bool:
        """Whether every scope of ``other`` is implied by this set (no privilege escalation)."""
        return all(any(implies(h, w) for h in self.scopes) for w in other)


def normalise(scopes: Iterable[str]) -> tuple[str, ...]:
    """Sorted, de-duplicated scopes; raises ValueError naming the unknown ones."""
    unique = sorted(set(scopes))
    unknown = [s for s in unique if not is_valid_scope(s)]
    if unknown:
        raise ValueError(f"unknown scopes: {', '.join(unknown)}")
    return tuple(unique)


def alternatives_for(required: str) -> tuple[str, ...]:
    """The scopes that grant a route needing ``required``: itself, its family wildcard, ``*``."""
    family = required.split(":", 1)[0]
    return (required, f"{family}:*", SUPER_SCOPE)
