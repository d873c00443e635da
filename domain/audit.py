"""The audit log: who changed what, from where and when.

An ``AuditEvent`` is one state-changing request (POST, PUT, PATCH, DELETE) made with an API key or by a signed-in
dashboard user, whether it was carried out or refused after the credential was accepted. It names the actor (the
key or the user, with a label kept as it was then: the key's name and visible prefix, the user's email), the action
(``agent.updated``), the resource it concerns (type and id), the request id, the client's address, the answer's
status and when it happened. Request bodies are never kept; of a PATCH (or PUT) that was carried out, only the
names of the top-level fields it sent.

An action is derived from the operation the route performs (its OpenAPI ``operationId``, or the name a dashboard
form declares in the same form): ``updateAgent`` → ``agent.updated``, ``addCampaignContacts`` →
``campaign_contacts.added``. The resource type is the action's noun (``agent``).

Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

RETENTION = timedelta(days=365)
"""How long an audit event is kept (housekeeping purges older ones)."""

AUDITED_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_FIELDS = 50
MAX_LABEL = 200
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
ACTION_PATTERN = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z_]*$")

_PAST = {"set": "set", "pay": "paid", "cancel": "canceled", "dial": "dialed", "send": "sent", "stop": "stopped",
         "log": "logged"}
_OPERATIONS = {
    "logout": "session.ended",
    "setDefaultPaymentMethod": "payment_method.made_default",
}
"""Operations whose action the general rule would not name well."""


class ActorType(StrEnum):
    API_KEY = "api_key"
    USER = "user"


def past_tense(verb: str) -> str:
    """``create`` → ``created``, ``verify`` → ``verified``, ``pay`` → ``paid`` (a few irregular ones by name)."""
    if verb in _PAST:
        return _PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def action_of(operation_id: str) -> str:
    """The action an operation performs: its first word the verb (in the past tense), the rest the resource in
    snake case: ``updateAgent`` → ``agent.updated``, ``rotateApiKey`` → ``api_key.rotated``. Raises ValueError for
    an operation id that names no resource."""
    if operation_id in _OPERATIONS:
        return _OPERATIONS[operation_id]
    words = [w.lower() for w in _WORD.findall(operation_id)]
    if len(words) < 2 or "".join(words) != operation_id.lower():
        raise ValueError(f"operation {operation_id!r} does not read as verb + resource (e.g. updateAgent)")
    return f"{'_'.join(words[1:])}.{past_tense(words[0])}"


def resource_type_of(action: str) -> str:
    return action.split(".", 1)[0]


def field_names(keys: object) -> tuple[str, ...]:
    """The names worth keeping of a request's top-level fields: identifiers only (never a value), at most
    ``MAX_FIELDS``, sorted."""
    if not isinstance(keys, (list, tuple, set, frozenset, dict)):
        return ()
    return tuple(sorted(k for k in keys if isinstance(k, str) and _FIELD.match(k)))[:MAX_FIELDS]


@dataclass(frozen=True, slots=True)
class AuditActor:
    type: ActorType
    id: int
    label: str = ""
    """As it was when the event was recorded: ``<key name> (<prefix>…<last four>)``, or the user's email."""


@dataclass(frozen=True, slots=True)
class AuditEvent:
    id: int | None
    organization_id: int
    actor: AuditActor
    action: str
    resource_type: str
    resource_id: str | None
    method: str
    path: str
    status: int
    """The answer's HTTP status: below 400 when the change was carried out, 4xx when it was refused."""
    ip: str
    request_id: str
    created_at: datetime
    fields: tuple[str, ...] = field(default=())
    """A PATCH's (or PUT's) top-level field names, when it was carried out; never values."""

    @property
    def succeeded(self) -> bool:
        return self.status < 400


def label_of_key(name: str, prefix: str, last_four: str) -> str:
    return f"{name} ({prefix}…{last_four})"[:MAX_LABEL]
