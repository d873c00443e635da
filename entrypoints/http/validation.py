"""Edge validation helpers that need a library (phone numbers) or produce field errors."""

from __future__ import annotations

from typing import Any

import msgspec
import phonenumbers

from domain.errors import ValidationFailed


def e164(value: str, field: str) -> str:
    """Normalise a phone number to E.164; a number without a leading + is rejected."""
    try:
        parsed = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException:
        raise ValidationFailed.field(field, "must be an E.164 phone number such as +14155550100") from None
    if not phonenumbers.is_possible_number(parsed):
        raise ValidationFailed.field(field, "is not a possible phone number")
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def set_fields(struct: msgspec.Struct) -> dict[str, Any]:
    """The merge-patch document of a PATCH body (``domain.patching``): the fields it actually sent, at every
    depth (UNSET ones left out; a nested patch Struct becomes a dict of its own sent fields)."""
    sent: dict[str, Any] = {}
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if value is msgspec.UNSET:
            continue
        sent[name] = set_fields(value) if isinstance(value, msgspec.Struct) else value
    return sent


def require_non_blank(value: str, field: str) -> str:
    stripped = value.strip()
    if not stripped:
        raise ValidationFailed.field(field, "must not be blank")
    return stripped
