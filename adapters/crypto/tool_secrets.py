"""ToolSecrets: one signing secret per organization for its agents' custom tools, derived (HKDF-SHA256, the
purpose ``custom-tools``) from PARLEY_SECRET_KEY, then HMAC-SHA256 over the organization id; 64 hex characters."""

from __future__ import annotations

import base64
import hashlib
import hmac

from adapters.crypto.fernet_box import derive_key

PURPOSE = "custom-tools"


class DerivedToolSecrets:
    def __init__(self, secret_key: str) -> None:
        self._key = base64.urlsafe_b64decode(derive_key(secret_key, PURPOSE))

    def for_organization(self, organization_id: int) -> str:
        return hmac.new(self._key, f"organization:{organization_id}".encode(), hashlib.sha256).hexdigest()
