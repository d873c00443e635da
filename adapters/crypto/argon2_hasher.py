"""PasswordHasher over argon2id (``argon2-cffi``, its RFC 9106 low-memory defaults), run in a worker thread so a
hash (tens of milliseconds, 64 MiB) never blocks the event loop.

Hashes stored before argon2 were ``scrypt$<salt hex>$<digest hex>`` (scrypt n=2**14, r=8, p=1, 32 bytes): they
still verify, and ``needs_rehash`` reports them, so the first successful sign-in replaces them with argon2id.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac

from argon2 import PasswordHasher as _Argon2
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_LEGACY_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


def _verify_legacy_scrypt(password: str, stored: str) -> bool:
    try:
        scheme, salt_hex, digest_hex = stored.split("$")
        salt = bytes.fromhex(salt_hex)
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    derived = hashlib.scrypt(password.encode(), salt=salt, **_LEGACY_SCRYPT)
    return hmac.compare_digest(derived.hex(), digest_hex)


class Argon2PasswordHasher:
    """``time_cost``, ``memory_kib``, ``parallelism``: the cost of new hashes (argon2-cffi's defaults)."""

    def __init__(self, *, time_cost: int = 3, memory_kib: int = 65536, parallelism: int = 4) -> None:
        self._argon2 = _Argon2(time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism)

    async def hash(self, password: str) -> str:
        return await asyncio.to_thread(self._argon2.hash, password)

    async def verify(self, password: str, stored: str) -> bool:
        return await asyncio.to_thread(self._verify, password, stored)

    def _verify(self, password: str, stored: str) -> bool:
        if stored.startswith("scrypt$"):
            return _verify_legacy_scrypt(password, stored)
        try:
            return self._argon2.verify(stored, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def needs_rehash(self, stored: str) -> bool:
        if not stored.startswith("$argon2"):
            return True
        try:
            return self._argon2.check_needs_rehash(stored)
        except (InvalidHashError, ValueError):
            return True
