"""The ceilings of the clients' own key-value objects: an agent's ``metadata`` and the ``custom_data`` of calls,
leads, campaign contacts and widget contacts (api.md, "Ceilings"). As Stripe's metadata: at most ``MAX_KEYS``
keys, each at most ``KEY_MAX_LENGTH`` characters, each value at most ``VALUE_MAX_LENGTH`` characters (a value
that is not a string is measured as its JSON text). Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from domain.errors import ValidationFailed

MAX_KEYS = 50
KEY_MAX_LENGTH = 40
VALUE_MAX_LENGTH = 500


def _length(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def metadata_problem(field: str, value: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first ceiling ``value`` (the object sent as ``field``) breaks, as (the field at fault, why), or None."""
    if len(value) > MAX_KEYS:
        return field, f"must have at most {MAX_KEYS} keys (it has {len(value)})"
    for key, member in value.items():
        if not str(key):
            return field, "keys must not be empty"
        if len(str(key)) > KEY_MAX_LENGTH:
            return field, f"keys must be at most {KEY_MAX_LENGTH} characters ({str(key)[:KEY_MAX_LENGTH]!r}...)"
        if _length(member) > VALUE_MAX_LENGTH:
            return f"{field}.{key}", f"must be at most {VALUE_MAX_LENGTH} characters"
    return None


def check_metadata(field: str, value: Mapping[str, Any] | None) -> None:
    """Raises ValidationFailed (400 naming the field, or ``field.key`` for a value too long) when ``value`` breaks a
    ceiling."""
    if value is None:
        return
    problem = metadata_problem(field, value)
    if problem is not None:
        raise ValidationFailed.field(*problem)
