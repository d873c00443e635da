"""WidgetTokens as JWTs (PyJWT): HS256 under a key derived (HKDF) from PARLEY_SECRET_KEY for this one purpose.

Verification names its one algorithm (``algorithms=["HS256"]``: ``alg: none``, another HMAC or any asymmetric
algorithm is refused), requires ``exp``, ``aud`` and ``jti``, checks the audience and the signature, and checks
expiry at the time it is given (the Clock's): PyJWT reads the wall clock itself, so its ``leeway`` carries the
difference between the two, and the expiry is compared once more with the given time exactly.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime
from typing import Any

import jwt

from adapters.crypto.fernet_box import derive_key
from application.ports.widget import WidgetTokenInvalid
from domain.widget import AUDIENCE, MAX_ORIGINS, WidgetGrant

ALGORITHM = "HS256"
PURPOSE = "parley/widget-token/v1"
_REQUIRED = ["exp", "aud", "jti"]


class JwtWidgetTokens:
    def __init__(self, secret_key: str) -> None:
        self._key = base64.urlsafe_b64decode(derive_key(secret_key, PURPOSE))

    def issue(self, grant: WidgetGrant) -> str:
        claims = {"aud": AUDIENCE, "exp": int(grant.expires_at.timestamp()), "jti": grant.token_id,
                  "organization": grant.organization_id, "campaign": grant.campaign_id,
                  "origins": list(grant.origins), "key": grant.key_id, "key_organization": grant.key_organization_id}
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def verify(self, token: str, now: datetime) -> WidgetGrant:
        at = now.timestamp()
        try:
            claims: dict[str, Any] = jwt.decode(
                token, self._key, algorithms=[ALGORITHM], audience=AUDIENCE,
                options={"require": _REQUIRED, "verify_signature": True, "verify_exp": True, "verify_aud": True},
                leeway=time.time() - at)  # PyJWT's now (the wall clock) minus leeway = the given time
        except jwt.ExpiredSignatureError:
            raise WidgetTokenInvalid("expired") from None
        except jwt.InvalidAudienceError:
            raise WidgetTokenInvalid("not meant for the widget") from None
        except jwt.InvalidTokenError:
            raise WidgetTokenInvalid("malformed or not signed by Parley") from None
        if claims["exp"] <= at:
            raise WidgetTokenInvalid("expired")
        return _grant(claims)


def _grant(claims: dict[str, Any]) -> WidgetGrant:
    jti, origins, exp = (claims.get(k) for k in ("jti", "origins", "exp"))
    org, campaign, key, key_org = (_positive_int(claims.get(k)) for k in (
        "organization", "campaign", "key", "key_organization"))
    if (not isinstance(jti, str) or not jti or org is None or campaign is None
            or not isinstance(origins, list) or not 1 <= len(origins) <= MAX_ORIGINS
            or not all(isinstance(o, str) for o in origins) or not isinstance(exp, int)
            or key is None or key_org is None):
        raise WidgetTokenInvalid("missing or malformed claims")
    return WidgetGrant(jti, org, campaign, tuple(origins), datetime.fromtimestamp(exp, UTC), key, key_org)


def _positive_int(value: object) -> int | None:
    """The value when it is a positive integer (not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
