"""What each pattern-constrained input expects, in words: validation errors print these instead of the
regular expression (tests/http/test_openapi.py checks every pattern the document lists has its words)."""

from __future__ import annotations

from domain.calls import CALL_ID_PATTERN
from domain.text import ONE_LINE_PATTERN, ONE_LINE_WORDS

ACTION_NAME = r"^[a-z][a-z0-9_.]*$"
"""An audit event's action, such as agent.updated."""
RESOURCE_TYPE = r"^[a-z][a-z0-9_]*$"
"""An audit event's resource type, such as agent or api_key."""

PATTERN_WORDS: dict[str, str] = {
    r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$": "must be a language tag such as en or en-US",
    r"^[A-Za-z]{2}$": "must be a two-letter country code such as US or DE",
    r"^([01]\d|2[0-3]):[0-5]\d$": 'must be a 24-hour wall time "HH:MM" such as 09:00 or 17:30',
    r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$": 'must be a 24-hour wall time "HH:MM" such as 17:30, or "24:00"',
    r"^\d{4}-\d{2}-\d{2}$": "must be a date YYYY-MM-DD such as 2026-12-24",
    r"^[A-Z]{2}$": "must be a two-letter ISO 3166 country code in capitals, such as US or DE",
    r"^[^@\s]+@[^@\s]+\.[^@\s]+$": "must be an email address such as ada@example.com",
    r"^[ -~]+$": "must be printable ASCII characters",
    r"^[0-9]+$": "must be digits only, such as 415",
    r"^[0-9A-Za-z*+]+$": "must be digits or letters (a * matches any one), such as 555 or *CAR*",
    r"^[A-Za-z][A-Za-z0-9_-]{0,63}$": "must be letters, digits, _ and -, starting with a letter, at most 64 characters",
    ONE_LINE_PATTERN: ONE_LINE_WORDS,
    ACTION_NAME: "must be lower-case letters, digits, _ and ., such as agent.updated",
    RESOURCE_TYPE: "must be lower-case letters, digits and _, such as agent or api_key",
    CALL_ID_PATTERN: "must be a call id: a UUID such as 3f2c9a4e-8b1d-4c6e-9f0a-2b7d5e8c1a43",
}
UNKNOWN_PATTERN = "is not in the expected format (see the API reference)"


def words_for(pattern: str) -> str:
    return PATTERN_WORDS.get(pattern, UNKNOWN_PATTERN)
