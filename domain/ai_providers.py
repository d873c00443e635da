"""AI providers: where an organization's agents get their language model, speech recognition and synthesis.

``openai_compatible`` names a server speaking OpenAI's wire format by its base URL (and a key, sealed at rest and
never returned); ``offline`` is built in: every organization has one, named ``Parley offline``, that cannot be
deleted. An agent whose settings name no provider uses the built-in one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain.addresses import check_url, ensure_public, is_loopback_address
from domain.errors import BlockedAddress, Conflict, ValidationFailed

AI_PROVIDER_TYPES = ("openai_compatible", "offline")
BUILTIN_OFFLINE = "offline"
BUILTIN_NAME = "Parley offline"
NAME_MAX_LENGTH = 200
API_KEY_MAX_LENGTH = 4000


@dataclass(frozen=True, slots=True)
class AiProvider:
    id: int | None
    organization_id: int
    name: str
    type: str
    base_url: str | None = None
    api_key_sealed: str | None = None
    """The encrypted key; never leaves the server."""
    builtin: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def has_api_key(self) -> bool:
        return self.api_key_sealed is not None

    def ensure_deletable(self) -> None:
        if self.builtin:
            raise Conflict("The built-in offline provider cannot be deleted", details={"provider_id": self.id})

    def check(self) -> None:
        """The rules between the fields: an ``openai_compatible`` provider has a base URL; ``offline`` has
        neither a base URL nor a key."""
        if self.type == "openai_compatible" and not self.base_url:
            raise ValidationFailed.field("base_url", "is required for an openai_compatible provider")
        if self.type == "offline" and self.base_url:
            raise ValidationFailed.field("base_url", "an offline provider has no base URL")
        if self.type == "offline" and self.api_key_sealed:
            raise ValidationFailed.field("api_key", "an offline provider has no key")


def check_base_url(url: str, *, allow_loopback: bool) -> str:
    """A provider's base URL in canonical form (no trailing slash): https, or http to a loopback address when
    loopback targets are allowed (development and tests). A literal non-public address is refused now; a host
    name is resolved, and its addresses checked, by the egress at every request.

    Raises ``ValidationFailed`` and ``BlockedAddress``, both naming the field ``base_url``."""
    try:
        return _checked_base_url(url, allow_loopback=allow_loopback)
    except BlockedAddress as exc:
        raise exc.on("base_url") from None


def _checked_base_url(url: str, *, allow_loopback: bool) -> str:
    try:
        target = check_url(url, allow_loopback=allow_loopback)
    except ValidationFailed as exc:
        raise ValidationFailed.field("base_url", exc.message.removeprefix("url: ")) from None
    loopback = (target.ip is not None and is_loopback_address(target.ip)) or target.host == "localhost"
    if target.scheme != "https" and not (loopback and allow_loopback):
        raise ValidationFailed.field("base_url", "must be an https URL")
    if target.ip is not None:
        ensure_public(target.ip, allow_loopback=allow_loopback)
    elif target.host.endswith(".localhost") and not allow_loopback:
        raise BlockedAddress("loopback addresses are not allowed")
    if "?" in target.url or "#" in url:
        raise ValidationFailed.field("base_url", "must not have a query or a fragment")
    return target.url.rstrip("/")
