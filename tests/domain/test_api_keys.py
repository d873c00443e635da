from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain import api_keys as k
from domain.errors import ValidationFailed

secrets = st.text(alphabet=k.BASE62, min_size=32, max_size=32)


@given(secrets)
def test_composed_keys_are_well_formed(secret: str) -> None:
    key = k.compose(secret)
    assert key.startswith("parley_sk_") and len(key) == k.KEY_LENGTH
    assert k.is_well_formed(key)


@given(secrets, st.integers(min_value=0, max_value=37), st.sampled_from(k.BASE62))
def test_a_changed_character_breaks_the_checksum(secret: str, position: int, replacement: str) -> None:
    key = k.compose(secret)
    index = len(k.PREFIX) + position
    if key[index] == replacement:
        return
    tampered = key[:index] + replacement + key[index + 1:]
    assert not k.is_well_formed(tampered)


def test_malformed_keys_are_rejected_without_storage() -> None:
    assert not k.is_well_formed("")
    assert not k.is_well_formed("parley_sk_short")
    assert not k.is_well_formed("other_sk_" + "a" * 38)


def _key(expires_at: datetime | None) -> k.ApiKey:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return k.ApiKey(1, 1, "n", "parley_sk_abcd", "wxyz", "h", ("*",), "active", now, expires_at, None, 1)


def test_expiry_notice_only_within_seven_days() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert _key(None).expiry_notice(now) is None
    assert _key(now + timedelta(days=30)).expiry_notice(now) is None
    at, days = _key(now + timedelta(days=5, hours=3)).expiry_notice(now)  # type: ignore[misc]
    assert days == 5 and at == now + timedelta(days=5, hours=3)


def test_usable_until_expiry_and_not_after_revocation() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    key = _key(now + timedelta(hours=1))
    assert key.is_usable(now)
    assert not key.is_usable(now + timedelta(hours=1))
    assert not key.revoked().is_usable(now)


@pytest.mark.parametrize("hours", [0, 169, -1])
def test_grace_period_bounds(hours: int) -> None:
    with pytest.raises(ValidationFailed):
        k.grace_period(hours)


def test_grace_period_default_is_24_hours() -> None:
    assert k.grace_period(None) == timedelta(hours=24)
