"""Widget rules: origins as browsers write them, the token's origin list and lifetime, and the signed token's
checks (at a given time, never the wall clock's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jwt
import pytest

from adapters.crypto.jwt_widget_tokens import JwtWidgetTokens
from application.ports.widget import WidgetTokenInvalid
from domain.errors import ValidationFailed
from domain.widget import WidgetGrant, allowed_origins, normalize_origin, replay_scope, ttl_seconds

LONG_AGO = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)


@pytest.mark.parametrize(("given", "origin"), [
    ("https://shop.example", "https://shop.example"),
    ("HTTPS://Shop.Example:443", "https://shop.example"),
    ("http://shop.example:80", "http://shop.example"),
    ("http://localhost:8080", "http://localhost:8080"),
    ("http://127.0.0.1:5173", "http://127.0.0.1:5173"),
    ("https://[::1]:8443", "https://[::1]:8443"),
])
def test_an_origin_is_written_as_a_browser_writes_it(given: str, origin: str) -> None:
    assert normalize_origin(given) == origin


@pytest.mark.parametrize("given", [
    "", "null", "shop.example", "//shop.example", "ftp://shop.example", "https://", "https://shop.example/",
    "https://shop.example/cart", "https://shop.example?a=1", "https://shop.example#x", "https://u:p@shop.example",
    "https://shop.example:0", "https://shop.example:99999", "https://shop_example.com", "https://bücher.example",
    " https://shop.example", "https://[::1", "javascript:alert(1)",
])
def test_anything_but_an_origin_is_refused(given: str) -> None:
    with pytest.raises(ValueError):
        normalize_origin(given)


def test_the_origin_list_and_lifetime_have_bounds() -> None:
    assert allowed_origins(["https://a.example", "HTTPS://A.EXAMPLE", "https://b.example"]) == (
        "https://a.example", "https://b.example")
    for bad in ([], [f"https://{i}.example" for i in range(11)], ["https://a.example", "https://a.example/x"]):
        with pytest.raises(ValidationFailed):
            allowed_origins(bad)
    assert ttl_seconds(60) == 60 and ttl_seconds(3600) == 3600
    for bad_ttl in (59, 3601):
        with pytest.raises(ValidationFailed):
            ttl_seconds(bad_ttl)


def test_a_grant_allows_only_its_exact_origins() -> None:
    grant = WidgetGrant("j", 1, 2, ("https://shop.example",), LONG_AGO, 3, 1)
    assert grant.allows_origin("https://shop.example") and grant.allows_origin("https://shop.example:443")
    for other in (None, "", "null", "http://shop.example", "https://shop.example.evil", "https://x.shop.example"):
        assert not grant.allows_origin(other)
    assert replay_scope("a") < 0 and replay_scope("a") != replay_scope("b")


def test_a_token_is_checked_at_the_time_given_not_the_wall_clocks() -> None:
    tokens = JwtWidgetTokens("a-secret-key")
    grant = WidgetGrant("jti-1", 7, 9, ("https://shop.example",), LONG_AGO + timedelta(seconds=900), 11, 7)
    token = tokens.issue(grant)
    assert tokens.verify(token, LONG_AGO) == grant  # 2001: valid, although the wall clock is long past it
    assert tokens.verify(token, LONG_AGO + timedelta(seconds=899)) == grant
    with pytest.raises(WidgetTokenInvalid, match="expired"):
        tokens.verify(token, LONG_AGO + timedelta(seconds=900))
    with pytest.raises(WidgetTokenInvalid):
        JwtWidgetTokens("another-secret-key").verify(token, LONG_AGO)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert set(claims) == {"aud", "exp", "jti", "organization", "campaign", "origins", "key", "key_organization"}
    with pytest.raises(WidgetTokenInvalid):
        tokens.verify(jwt.encode({**claims, "campaign": "9"}, tokens._key, algorithm="HS256"), LONG_AGO)
