"""Signed recording URLs: a short-lived credential carried in the URL itself (like a presigned object URL).

signature = hex HMAC-SHA256(key = secret, msg = "METHOD\\nPATH\\nEXPIRES\\nORGANIZATION_ID")

``PATH`` is the canonical path ``/v2/recordings/{call_log_id}.wav`` whichever host prefix served the
request, ``EXPIRES`` the expiry in Unix seconds. Changing any of them, or the organization the recording
belongs to, invalidates the signature.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime

from domain.errors import Forbidden

LINK_TTL_SECONDS = 15 * 60
METHOD = "GET"


class RecordingLinkInvalid(Forbidden):
    """A recording URL whose signature does not match or whose expiry has passed (403 forbidden)."""

    code = "forbidden"


def recording_key(organization_id: int, call_id: str) -> str:
    """Where a call's recording is stored (the blob key), whoever recorded it (the simulator, a media session)."""
    return f"recordings/{organization_id}/{call_id}.wav"


def recording_file(call_log_id: int) -> str:
    """The recording's path below the API prefix (``/v2`` or ``/api/v2``)."""
    return f"/recordings/{call_log_id}.wav"


def recording_path(call_log_id: int) -> str:
    """The canonical path that is signed, whichever prefix the link uses."""
    return f"/v2{recording_file(call_log_id)}"


def sign(secret: str, method: str, path: str, expires: int, organization_id: int) -> str:
    message = f"{method.upper()}\n{path}\n{expires}\n{organization_id}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(secret: str, method: str, path: str, expires: int | None, organization_id: int, signature: str | None,
           now: datetime) -> None:
    """Raise RecordingLinkInvalid unless the signature matches and the link has not expired."""
    if expires is None or not signature:
        raise RecordingLinkInvalid("This recording link is missing its signature")
    expected = sign(secret, method, path, expires, organization_id)
    if not hmac.compare_digest(expected, signature.lower()):
        raise RecordingLinkInvalid("This recording link is not valid")
    if now.timestamp() >= expires:
        raise RecordingLinkInvalid("This recording link has expired")
