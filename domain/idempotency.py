"""Idempotency policy: what to do with a request that carries an Idempotency-Key.

Pure: given the stored record (if any), the request's fingerprint and the time, decide.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.errors import ValidationFailed

MAX_KEY_LENGTH = 255
REPLAY_WINDOW = timedelta(hours=24)
STALE_CLAIM = timedelta(seconds=60)
# the largest request body a key covers: it is read whole and fingerprinted before the handler runs
MAX_BODY_BYTES = 1024 * 1024
# statuses a handler may produce that are stored and replayed (besides every 2xx)
REPLAYABLE_CLIENT_ERRORS = frozenset({404, 409, 422})


class Decision(enum.Enum):
    PROCEED = "proceed"        # no record: claim it and run
    TAKE_OVER = "take_over"    # expired or stale claim: claim it again and run
    REPLAY = "replay"          # completed, same request: return the stored response
    IN_FLIGHT = "in_flight"    # another request holds the claim: 409
    MISMATCH = "mismatch"      # same key, different request: 422


@dataclass(frozen=True, slots=True)
class StoredResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    sealed: bool = False  # body is the encrypted form of the response's body (it carries a secret)


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """Scoped to (organization, API-key lineage, key): another key of the organization never sees it,
    a rotated successor of the key that stored it does."""

    organization_id: int
    lineage_id: int
    key: str
    fingerprint: str
    created_at: datetime
    locked_at: datetime | None  # set while in flight
    token: str                  # identifies the claim holder
    response: StoredResponse | None


def parse_key(raw: str) -> str:
    """Validate an Idempotency-Key header. A quoted sf-string equals its content."""
    value = raw
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    if not value or len(value) > MAX_KEY_LENGTH:
        raise ValidationFailed.field("Idempotency-Key", f"must be 1-{MAX_KEY_LENGTH} printable ASCII characters")
    if any(not (0x20 <= ord(ch) <= 0x7E) for ch in value):
        raise ValidationFailed.field("Idempotency-Key", "must be printable ASCII")
    return value


def fingerprint(method: str, path: str, body: bytes) -> str:
    return digest_fingerprint(method, path, hashlib.sha256(body).hexdigest())


def digest_fingerprint(method: str, path: str, body_sha256: str) -> str:
    """The fingerprint of a request whose body the edge hashed itself (a multipart body by its parts)."""
    return f"{method.upper()} {path} {body_sha256}"


def decide(record: IdempotencyRecord | None, request_fingerprint: str, now: datetime) -> Decision:
    if record is None:
        return Decision.PROCEED
    if now - record.created_at >= REPLAY_WINDOW:
        return Decision.TAKE_OVER
    if record.fingerprint != request_fingerprint:
        return Decision.MISMATCH
    if record.response is not None:
        return Decision.REPLAY
    if record.locked_at is not None and now - record.locked_at >= STALE_CLAIM:
        return Decision.TAKE_OVER
    return Decision.IN_FLIGHT


def is_replayable(status: int) -> bool:
    """Whether a handler's response is stored for replay (2xx and domain 404/409/422)."""
    return 200 <= status < 300 or status in REPLAYABLE_CLIENT_ERRORS
