"""Parsing of ids in client text, shared by every layer (RFC 3339 instants: ``domain.rfc3339``).

It refuses what Python would quietly accept but the databases cannot hold or the contract does not
mean: non-ASCII digits (``int("١٢") == 12``, ``"²".isdigit()``) and ids beyond what a BIGINT column and a
JSON number hold exactly.
"""

from __future__ import annotations

import re

from domain.errors import ValidationFailed

MAX_ID = 2**53  # the largest id accepted anywhere: exact in JSON numbers, well inside BIGINT
ID_RULE = f"must be a whole number from 1 to {MAX_ID}, in ASCII digits"
_ASCII_DIGITS = re.compile(r"[0-9]{1,20}")


def parse_id(text: object, field: str) -> int:
    """A positive id written in ASCII digits (surrounding spaces allowed), at most MAX_ID."""
    if isinstance(text, bool):
        raise ValidationFailed.field(field, ID_RULE)
    if isinstance(text, int):
        value = text
    elif isinstance(text, str) and _ASCII_DIGITS.fullmatch(text.strip()):
        value = int(text.strip())
    else:
        raise ValidationFailed.field(field, ID_RULE)
    if not 1 <= value <= MAX_ID:
        raise ValidationFailed.field(field, ID_RULE)
    return value
