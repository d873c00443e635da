"""Edge validation helpers that produce field errors. Phone numbers are not checked here: the handlers pass
them through ``application.phones.e164``, the ``PhoneNormalizer`` port's one rule."""

from __future__ import annotations

from typing import Any

import msgspec

from domain.errors import ValidationFailed


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
