"""Edge validation helpers that produce field errors. Phone numbers are not checked here: the handlers pass
them through ``application.phones.e164``, the ``PhoneNormalizer`` port's one rule."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from domain.errors import ValidationFailed


def timezone(value: str, field: str = "timezone") -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationFailed.field(field, "must be an IANA time zone such as Europe/Berlin") from None
    return value


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
