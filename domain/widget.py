"""The embeddable widget: what a widget token grants, and the rules of its fields. Standard library only.

A widget token is minted by an API key (scope ``widget:write``) for one campaign and a short list of exact web
origins; a partner page sends it as ``Authorization: Widget <token>`` to the ``/widget/*`` routes only. It
grants nothing else: reading its campaign's public face and adding (and dialling) one contact at a time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from domain.calls import missing_values
from domain.errors import TooManyRequests, Unprocessable, ValidationFailed

AUDIENCE = "parley-widget"
"""The ``aud`` claim of every widget token: a token minted for anything else is no widget token."""
TTL_MIN_SECONDS = 60
TTL_MAX_SECONDS = 3600
TTL_DEFAULT_SECONDS = 900
MAX_ORIGINS = 10
ORIGIN_MAX_LENGTH = 300
REQUESTS_PER_MINUTE = 20
"""A token's own rate limit (its ``jti`` is the bucket); the minting key's limits never apply to it."""
CONTACTS_PER_ADDRESS_PER_HOUR = 5
"""Widget contacts one client address may submit to one organization per hour, whatever the token or campaign
(tokens are minted per page view); a campaign caps all its visitors together by its
``widget_max_contacts_per_hour``."""
INTAKE_WINDOW_SECONDS = 3600

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$")
_IPV6 = re.compile(r"^\[[0-9a-f:.]+\]$")
ORIGIN_RULE = "must be an origin: scheme (http or https), host and optional port, with no path, e.g. https://shop.example"


@dataclass(frozen=True, slots=True)
class WidgetGrant:
    """What one widget token grants (its claims, once the signature, audience and expiry are checked)."""

    token_id: str          # ``jti``: the token's own rate-limit bucket
    organization_id: int
    campaign_id: int
    origins: tuple[str, ...]
    expires_at: datetime
    key_id: int                # the API key that minted the token: the token works only while that key does
    key_organization_id: int   # that key's organization (a partner's key mints for a sub-organization)

    def allows_origin(self, origin: str | None) -> bool:
        """Whether a request sent from ``origin`` (its ``Origin`` header) may use the token: an exact match of one
        of the token's origins. A missing ``Origin`` is refused (a browser always sends one on these requests)."""
        if not origin:
            return False
        try:
            return normalize_origin(origin) in self.origins
        except ValueError:
            return False


def replay_scope(token_id: str) -> int:
    """The idempotency scope of a token's requests, in the place of an API key's lineage: negative (never a key's
    id) and its own per token, so no other token or key of the organization sees its stored responses."""
    return -(int.from_bytes(hashlib.sha256(token_id.encode()).digest()[:7], "big") + 1)


def normalize_origin(text: str) -> str:
    """``text`` as an origin the way a browser writes one in ``Origin``: lower-case scheme and host, the port
    only when it is not the scheme's default. Raises ValueError for anything else (a path, a query, user info,
    another scheme, ``null``)."""
    if len(text) > ORIGIN_MAX_LENGTH or text != text.strip():
        raise ValueError(ORIGIN_RULE)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError(ORIGIN_RULE) from None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if (scheme not in _DEFAULT_PORTS or not parts.netloc or parts.path or parts.query or parts.fragment
            or "?" in text or "#" in text or "@" in parts.netloc or not host):
        raise ValueError(ORIGIN_RULE)
    if ":" in host:  # an IPv6 literal (urlsplit drops its brackets)
        host = f"[{host}]"
        if not _IPV6.match(host):
            raise ValueError(ORIGIN_RULE)
    elif not _HOST.match(host):
        raise ValueError(ORIGIN_RULE)
    if port is not None and port == 0:
        raise ValueError(ORIGIN_RULE)
    shown_port = "" if port is None or port == _DEFAULT_PORTS[scheme] else f":{port}"
    return f"{scheme}://{host}{shown_port}"


def allowed_origins(values: Sequence[str]) -> tuple[str, ...]:
    """The token's origin list: 1 to MAX_ORIGINS valid origins, normalised, duplicates dropped (400 naming the
    first bad item otherwise)."""
    if not 1 <= len(values) <= MAX_ORIGINS:
        raise ValidationFailed.field("allowed_origins", f"must list 1 to {MAX_ORIGINS} origins")
    found: list[str] = []
    for index, value in enumerate(values):
        try:
            origin = normalize_origin(value)
        except ValueError as exc:
            raise ValidationFailed.field(f"allowed_origins[{index}]", str(exc)) from None
        if origin not in found:
            found.append(origin)
    return tuple(found)


def ttl_seconds(value: int) -> int:
    if not TTL_MIN_SECONDS <= value <= TTL_MAX_SECONDS:
        raise ValidationFailed.field("ttl_seconds", f"must be from {TTL_MIN_SECONDS} to {TTL_MAX_SECONDS}")
    return value


class WidgetIntakeLimited(TooManyRequests):
    """The campaign's ``widget_max_contacts_per_hour``, or the client address's
    ``CONTACTS_PER_ADDRESS_PER_HOUR``, is reached (429 widget_intake_limited, Retry-After)."""

    code = "widget_intake_limited"


class MissingPlaceholders(Unprocessable):
    """The campaign's agent needs values the visitor did not send, so the call could never be placed: the contact
    is refused at once instead of waiting in the queue to fail (422 missing_placeholders)."""

    code = "missing_placeholders"

    def __init__(self, names: Sequence[str]) -> None:
        listed = ", ".join(names)
        super().__init__(f"The campaign's agent needs values this form does not send: {listed}",
                         details={"missing_placeholders": list(names),
                                  "validation_errors": missing_values(list(names), "name")})
