"""ICS feeds of a calendar: secret feed tokens, what a feed holds and how appointments appear in it."""

from __future__ import annotations

import hashlib
import re

FEED_LOOKBACK_DAYS = 90
FEED_MAX_EVENTS = 5000
# RFC 5545 STATUS of a VEVENT by appointment status
ICS_STATUS = {
    "pending": "TENTATIVE",
    "confirmed": "CONFIRMED",
    "completed": "CONFIRMED",
    "no_show": "CONFIRMED",
    "cancelled": "CANCELLED",
}
_FEED_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{20,128}")


def feed_token_digest(token: str) -> str:
    """What is stored for an ICS feed token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def is_feed_token_shaped(token: str) -> bool:
    return bool(_FEED_TOKEN_RE.fullmatch(token))


def ics_uid(appointment_id: int) -> str:
    """The stable VEVENT UID of an appointment (a reschedule's new row has a new id, hence a new UID)."""
    return f"appointment-{appointment_id}@parley"
