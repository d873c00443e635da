"""Signed recording URLs: HMAC over method, path, expiry and organization."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.recordings import RecordingLinkInvalid, recording_path, sign, verify

NOW = datetime(2026, 1, 5, 9, tzinfo=UTC)
EXPIRES = int(NOW.timestamp()) + 900


def test_a_fresh_link_verifies() -> None:
    signature = sign("secret", "GET", recording_path(7), EXPIRES, 3)
    verify("secret", "GET", "/v2/recordings/7.wav", EXPIRES, 3, signature, NOW)
    verify("secret", "get", "/v2/recordings/7.wav", EXPIRES, 3, signature.upper(), NOW)


@pytest.mark.parametrize("change", ["secret", "method", "path", "expires", "organization"])
def test_any_change_breaks_the_signature(change: str) -> None:
    signature = sign("secret", "GET", recording_path(7), EXPIRES, 3)
    args = {"secret": "secret", "method": "GET", "path": recording_path(7), "expires": EXPIRES, "org": 3}
    args[{"organization": "org"}.get(change, change)] = {
        "secret": "other", "method": "HEAD", "path": recording_path(8), "expires": EXPIRES + 1, "organization": 4,
    }[change]
    with pytest.raises(RecordingLinkInvalid):
        verify(args["secret"], args["method"], args["path"], args["expires"], args["org"], signature, NOW)


def test_an_expired_or_unsigned_link_is_refused() -> None:
    signature = sign("secret", "GET", recording_path(7), EXPIRES, 3)
    with pytest.raises(RecordingLinkInvalid, match="expired"):
        verify("secret", "GET", recording_path(7), EXPIRES, 3, signature, datetime.fromtimestamp(EXPIRES, UTC))
    with pytest.raises(RecordingLinkInvalid):
        verify("secret", "GET", recording_path(7), None, 3, signature, NOW)
    with pytest.raises(RecordingLinkInvalid):
        verify("secret", "GET", recording_path(7), EXPIRES, 3, None, NOW)


@given(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
def test_a_guessed_signature_fails(guess: str) -> None:
    if guess == sign("secret", "GET", recording_path(7), EXPIRES, 3):
        return
    with pytest.raises(RecordingLinkInvalid):
        verify("secret", "GET", recording_path(7), EXPIRES, 3, guess, NOW)
