"""The one rule for a phone number a client sends: whatever the ``PhoneNormalizer`` port accepts, in its E.164
form. Every use case and the HTTP edge call ``e164`` (lists of numbers: ``application.dnc.normalize_all``)."""

from __future__ import annotations

from application.ports.phones import PhoneNormalizer
from domain.errors import ValidationFailed

E164_RULE = "must be an E.164 phone number such as +14155550100"


def e164(phones: PhoneNormalizer, raw: str, field: str, region: str | None = None) -> str:
    """The E.164 form of ``raw``; a ``ValidationFailed`` on ``field`` when it is not a phone number."""
    number = phones.normalize(raw, region)
    if number is None:
        raise ValidationFailed.field(field, E164_RULE)
    return number
