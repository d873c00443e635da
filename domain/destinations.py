"""The destination policy: which numbers an organization may call or text at all, before Do-Not-Call lists.

An organization's ``DialingPolicy`` names the countries it may reach (ISO 3166 alpha-2 codes, by default the
United States and Canada) and whether premium-rate numbers are blocked (by default they are). A campaign may
narrow the countries further with its own ``allowed_countries``. A number is refused with ``premium_rate`` when
the phone library types it premium-rate, shared-cost or UAN (a "universal access number", often charged at a
premium), or when it is a North American 900 number or a 976 exchange (pay-per-call lines); otherwise with
``country`` when its country is not allowed (a number of no country, such as +882 international networks, is
never allowed). The simulator's test numbers count as the United States.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from domain.errors import Unprocessable, ValidationFailed

DEFAULT_ALLOWED_COUNTRIES: tuple[str, ...] = ("US", "CA")
MAX_ALLOWED_COUNTRIES = 250
PREMIUM_NUMBER_TYPES = frozenset({"premium_rate", "shared_cost", "uan"})
"""The phone library's number types refused when ``block_premium`` holds."""
COUNTRY = "country"
PREMIUM_RATE = "premium_rate"
_COUNTRY_CODE = re.compile(r"[A-Z]{2}")
_NANP = re.compile(r"\+1(\d{3})(\d{3})\d{4}")


@dataclass(frozen=True, slots=True)
class NumberFacts:
    """What the phone library knows of an E.164 number: its country (None when it belongs to none, e.g. a
    satellite or international network) and its type in lower case (``mobile``, ``premium_rate``...)."""

    country: str | None
    kind: str


@dataclass(frozen=True, slots=True)
class DialingPolicy:
    allowed_countries: tuple[str, ...] = DEFAULT_ALLOWED_COUNTRIES
    block_premium: bool = True

    def narrowed(self, campaign_countries: Iterable[str] | None) -> DialingPolicy:
        """The policy a campaign dials under: only the countries both allow (a campaign never widens it)."""
        if campaign_countries is None:
            return self
        narrowed = set(campaign_countries)
        return DialingPolicy(tuple(c for c in self.allowed_countries if c in narrowed), self.block_premium)

    def refusal(self, number: str, facts: NumberFacts) -> str | None:
        """``premium_rate``, ``country`` or None (allowed) for the E.164 ``number``."""
        if self.block_premium and (facts.kind in PREMIUM_NUMBER_TYPES or is_nanp_premium(number)):
            return PREMIUM_RATE
        if facts.country is None or facts.country not in self.allowed_countries:
            return COUNTRY
        return None

    def view(self) -> dict[str, Any]:
        return {"allowed_countries": list(self.allowed_countries), "block_premium": self.block_premium}


DEFAULT_DIALING_POLICY = DialingPolicy()


def is_nanp_premium(number: str) -> bool:
    """A North American pay-per-call number: area code 900, or a 976 exchange in any area code."""
    match = _NANP.fullmatch(number)
    return match is not None and (match.group(1) == "900" or match.group(2) == "976")


class DestinationNotAllowed(Unprocessable):
    """The number is outside the organization's (or campaign's) dialing policy (422 destination_not_allowed,
    ``details.reason`` ``country`` or ``premium_rate``)."""

    code = "destination_not_allowed"


def refusal_message(number: str, reason: str, facts: NumberFacts, policy: DialingPolicy) -> str:
    if reason == PREMIUM_RATE:
        return f"{number} is a premium-rate number, which the dialing policy blocks"
    where = facts.country or "no country"
    allowed = ", ".join(policy.allowed_countries) or "none"
    return f"{number} is in {where}, outside the dialing policy's allowed countries ({allowed})"


def ensure_allowed(number: str, facts: NumberFacts, policy: DialingPolicy) -> None:
    """Raise ``DestinationNotAllowed`` when ``policy`` refuses ``number``."""
    reason = policy.refusal(number, facts)
    if reason is not None:
        raise DestinationNotAllowed(refusal_message(number, reason, facts, policy), details={
            "phone_number": number, "reason": reason, "country": facts.country,
            "allowed_countries": list(policy.allowed_countries)})


def parse_countries(values: Iterable[str], field: str, known: Iterable[str]) -> tuple[str, ...]:
    """ISO 3166 alpha-2 codes (any case; duplicates dropped, order kept), each one a country the phone library
    knows (``known``); a 400 naming ``field`` otherwise."""
    known_codes = set(known)
    out: dict[str, None] = {}
    for value in values:
        code = value.strip().upper() if isinstance(value, str) else ""
        if not _COUNTRY_CODE.fullmatch(code) or code not in known_codes:
            raise ValidationFailed.field(field, f"{value!r} is not an ISO 3166 alpha-2 country code such as \"US\"")
        out[code] = None
    if len(out) > MAX_ALLOWED_COUNTRIES:
        raise ValidationFailed.field(field, f"at most {MAX_ALLOWED_COUNTRIES} countries")
    if not out:  # a policy that allows no country would refuse every number: a mistake, not a setting
        raise ValidationFailed.field(field, "must name at least one country")
    return tuple(out)


def policy_from_json(data: Any) -> DialingPolicy:
    """The stored form (``view()``), None meaning the default policy."""
    if not data:
        return DEFAULT_DIALING_POLICY
    return DialingPolicy(tuple(data.get("allowed_countries", DEFAULT_ALLOWED_COUNTRIES)),
                         bool(data.get("block_premium", True)))
