"""``OneTimePasswords`` with pyotp: RFC 6238 TOTP (SHA-1, 6 digits, 30-second steps, as authenticator apps
expect), a code of the step before or after accepted too (clocks drift)."""

from __future__ import annotations

from datetime import datetime

import pyotp


class PyotpOneTimePasswords:
    def new_secret(self) -> str:
        return pyotp.random_base32()

    def uri(self, secret: str, account: str, issuer: str) -> str:
        return pyotp.TOTP(secret).provisioning_uri(name=account, issuer_name=issuer)

    def verify(self, secret: str, code: str, at: datetime) -> bool:
        code = "".join(code.split())
        return len(code) == 6 and code.isdigit() and pyotp.TOTP(secret).verify(code, for_time=at, valid_window=1)
