"""Organizations, plans and the partner hierarchy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain.destinations import DEFAULT_DIALING_POLICY, DialingPolicy
from domain.errors import PlanRequired, SubOrgForbidden

PLANS = ("starter", "business", "enterprise")
ORG_TYPES = ("standard", "partner")

PLAN_LIMITS: dict[str, dict[str, int]] = {
    "starter": {"max_knowledge_bases": 1, "max_concurrent_calls": 2},
    "business": {"max_knowledge_bases": 10, "max_concurrent_calls": 10},
    "enterprise": {"max_knowledge_bases": 100, "max_concurrent_calls": 50},
}


@dataclass(frozen=True, slots=True)
class Organization:
    id: int | None
    name: str
    plan: str
    org_type: str
    parent_id: int | None
    created_at: datetime
    updated_at: datetime
    dialing_policy: DialingPolicy = DEFAULT_DIALING_POLICY
    """Which numbers its calls and messages may reach (``domain.destinations``)."""
    mfa_required: bool = False
    """Its dashboard users sign in with a code from an authenticator app as well (TOTP, ``domain/roles.py``)."""

    @property
    def is_partner(self) -> bool:
        return self.org_type == "partner"

    def limit(self, name: str) -> int:
        return PLAN_LIMITS[self.plan][name]

    def require_plan(self, *plans: str, feature: str) -> None:
        if self.plan not in plans:
            raise PlanRequired(
                f"{feature} needs the {' or '.join(plans)} plan",
                details={"required_plans": list(plans), "current_plan": self.plan},
            )


def plan_rank(plan: str) -> int:
    """The plan's position in ``PLANS`` (starter < business < enterprise)."""
    return PLANS.index(plan)


def require_plan_within_parent(plan: str, parent: Organization) -> None:
    """A sub-organization's plan never exceeds its parent's (403 plan_required)."""
    if plan in PLANS and plan_rank(plan) > plan_rank(parent.plan):
        allowed = list(PLANS[: plan_rank(parent.plan) + 1])
        raise PlanRequired(
            f"plan: a sub-organization's plan cannot exceed its parent's ({parent.plan}); "
            f"{plan} needs a parent on the {plan} plan",
            details={"field": "plan", "requested_plan": plan, "parent_plan": parent.plan, "allowed_plans": allowed},
        )


def check_sub_org_access(acting: Organization, target: Organization | None, target_id: int) -> Organization:
    """A partner may act on its direct children only; anything else is sub_org_forbidden."""
    if not acting.is_partner:
        raise SubOrgForbidden("X-Sub-Org-Id needs a key of a partner organization")
    if target is None or target.parent_id != acting.id:
        raise SubOrgForbidden(f"organization {target_id} is not a sub-organization of this account")
    return target
