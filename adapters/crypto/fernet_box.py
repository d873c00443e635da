"""SecretBox over Fernet (AES-128-CBC + HMAC-SHA256), keyed by HKDF from PARLEY_SECRET_KEY.

Sealing uses the current key; opening tries it, then each retired key (PARLEY_PREVIOUS_SECRET_KEYS) in turn
(MultiFernet), so the secret key can be rotated without losing what was sealed under the old one.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from application.ports.secrets import SecretUnreadable

DEFAULT_PURPOSE = "parley/secret-box/v1"


def derive_key(secret_key: str, purpose: str) -> bytes:
    """A Fernet key for one purpose, derived from the service's secret key (HKDF-SHA256), so the
    same PARLEY_SECRET_KEY can serve several uses without their keys being related."""
    if not secret_key:
        raise ValueError("a secret key is required to seal secrets (set PARLEY_SECRET_KEY)")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"parley", info=purpose.encode())
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


class FernetSecretBox:
    def __init__(self, secret_key: str, *, purpose: str = DEFAULT_PURPOSE, previous_keys: tuple[str, ...] = ()) -> None:
        keys = [secret_key, *(key for key in previous_keys if key and key != secret_key)]
        self._fernet = MultiFernet([Fernet(derive_key(key, purpose)) for key in keys])

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode("ascii")

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode()
        except (InvalidToken, UnicodeError, ValueError) as exc:
            raise SecretUnreadable("the sealed value cannot be opened with this key") from exc
