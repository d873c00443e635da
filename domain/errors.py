"""Domain errors. Each carries a stable machine code that the HTTP layer maps to a status."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every rule violation. ``code`` is what clients branch on."""

    code = "bad_request"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class ValidationFailed(DomainError):
    """Input that is well-formed but breaks a rule (400 bad_request)."""

    code = "bad_request"

    @classmethod
    def field(cls, name: str, message: str) -> ValidationFailed:
        return cls(f"{name}: {message}", details={"validation_errors": {name: message}})


class NotFound(DomainError):
    code = "not_found"

    def __init__(self, resource: str, identifier: object, *, field: str | None = None) -> None:
        """``field``: the request field that named the missing resource (message and details name it)."""
        message = f"{resource} {identifier} not found"
        if field is None:
            super().__init__(message)
        else:
            super().__init__(f"{field}: {message}", details={"field": field})
        self.resource = resource


class Conflict(DomainError):
    code = "conflict"


class InvalidTransition(Conflict):
    code = "invalid_transition"

    def __init__(self, entity: str, current: str, target: str, *, action: str | None = None,
                 allowed_from: tuple[str, ...] = (), reason: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        if action and allowed_from:  # what the client asked for, and when it is possible
            message = f"{entity} is {current}: {action} is only possible while it is {' or '.join(allowed_from)}"
        elif current == target:
            message = f"{entity} is already {current}"
        else:
            message = f"{entity} cannot move from {current} to {target}"
        if reason:
            message = f"{message}: {reason}"
        described: dict[str, Any] = {"current_status": current, "requested": target}
        if action:
            described["action"] = action
        super().__init__(message, details={**described, **(details or {})})
        self.current = current
        self.target = target


class InUse(Conflict):
    """The resource is still used by another one (a schedule by a running or paused campaign)."""

    code = "in_use"


class RangeTooLong(ValidationFailed):
    """A well-formed query window longer than the operation allows: an invalid parameter (400 bad_request),
    naming the field, with ``details.reason`` ``range_too_long``."""

    reason = "range_too_long"

    @classmethod
    def field(cls, name: str, message: str) -> RangeTooLong:
        return cls(f"{name}: {message}", details={"validation_errors": {name: message}, "reason": cls.reason})


class SlotUnavailable(Conflict):
    code = "slot_unavailable"


class DuplicateDocument(Conflict):
    code = "duplicate_document"


class PlanLimitReached(DomainError):
    code = "plan_limit_reached"


class QuotaExceeded(DomainError):
    """A plan without overage has no room left in the period for this call or message (403)."""

    code = "quota_exceeded"


class PlanRequired(DomainError):
    code = "plan_required"


class PaymentRequired(DomainError):
    """A payment is needed first (402): a change that needs a payment that could not be made (nothing was
    changed), or new work refused while the organization's billing is on hold (``ServiceOnHold``)."""

    code = "payment_required"


class ServiceOnHold(PaymentRequired):
    """New calls, SMS, campaign starts, leads and widget intake are refused: the subscription has been past_due
    for more than 7 days, or was canceled when its period ended (402 payment_required; ``details.reason``)."""

    code = "payment_required"


class PaymentMethodRequired(PaymentRequired):
    """The change is charged at once and the organization has no default payment method (402)."""

    code = "payment_method_required"


class CardDeclined(PaymentRequired):
    """The payment gateway declined the charge (402); ``details.decline_code`` says why."""

    code = "card_declined"


class ChildrenAbovePlan(Conflict):
    """A partner cannot move to a plan below one of its sub-organizations' plans (409)."""

    code = "children_above_plan"


class SubOrgForbidden(DomainError):
    code = "sub_org_forbidden"


class Unprocessable(DomainError):
    """A well-formed request the resource cannot act on in its present content (422), e.g. a campaign without
    contacts cannot start."""

    code = "unprocessable_entity"


class DncBlocked(DomainError):
    code = "dnc_blocked"


class BlockedAddress(DomainError):
    code = "blocked_address"

    def on(self, field: str) -> BlockedAddress:
        """The same refusal, naming the request field that held the URL (its message and ``details.field``): with
        several URLs in one request (an agent's tools, a trigger's actions) the client learns which one."""
        named = (self.details or {}).get("field")
        message = self.message.removeprefix(f"{named}: ") if named else self.message
        return BlockedAddress(f"{field}: {message}", details={"field": field})


class InsufficientScope(DomainError):
    """The calling key lacks a scope the operation needs (403), e.g. every scope of a key it manages."""

    code = "INSUFFICIENT_SCOPE"


class Forbidden(DomainError):
    """A credential of its own (a signed link, a token) that does not hold (403)."""

    code = "forbidden"


class KeyInGracePeriod(Forbidden):
    """A rotated key, still working during its grace period, asked to create, rotate or revoke a key (403)."""

    code = "key_in_grace_period"

    def __init__(self) -> None:
        super().__init__("This key was rotated and works only until its grace period ends: it cannot create, "
                         "rotate or revoke keys. Use its successor")


class Unavailable(DomainError):
    """A dependency needed to act safely cannot answer now; nothing was done (503, Retry-After)."""

    code = "service_unavailable"
    retry_after_seconds = 5


class TooManyRequests(DomainError):
    """A cap on how much a client may do in a window is reached (429, ``Retry-After``: ``retry_after_seconds``)."""

    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after_seconds: int, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details={**(details or {}), "retry_after": retry_after_seconds})
        self.retry_after_seconds = retry_after_seconds


class UpstreamFetchFailed(DomainError):
    code = "upstream_fetch_failed"
