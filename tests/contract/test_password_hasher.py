"""The PasswordHasher port: argon2id hashes that verify, never raise on bad input, and are not made on the event
loop; hashes of the earlier scrypt scheme keep verifying and are reported for rehashing."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from argon2 import PasswordHasher as Argon2

from adapters.crypto import Argon2PasswordHasher
from application.ports.passwords import PasswordHasher
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.support.apps import CHEAP_HASHING

# made by the pre-argon2 code: f"scrypt${salt.hex()}${hashlib.scrypt(pw, salt=salt, n=2**14, r=8, p=1, dklen=32)}"
_SALT = bytes(range(16))
LEGACY = "scrypt${}${}".format(
    _SALT.hex(), hashlib.scrypt(b"correct horse", salt=_SALT, n=2**14, r=8, p=1, dklen=32).hex())


def hasher() -> PasswordHasher:
    return Argon2PasswordHasher()


@pytest.mark.slow
async def test_a_hash_verifies_its_password_only() -> None:
    h = hasher()
    stored = await h.hash("correct horse")
    assert stored.startswith("$argon2id$") and "correct horse" not in stored
    assert await h.verify("correct horse", stored)
    assert not await h.verify("correct horse!", stored)
    assert await h.hash("correct horse") != stored  # salted
    assert not h.needs_rehash(stored)


async def test_unreadable_hashes_are_a_mismatch_not_an_error() -> None:
    h = hasher()
    for stored in ["", "plain", "$argon2id$garbage", "scrypt$zz$00", "scrypt$only-two"]:
        assert not await h.verify("pw", stored), stored
        assert h.needs_rehash(stored), stored


async def test_earlier_scrypt_hashes_keep_verifying_and_ask_for_a_rehash() -> None:
    h = hasher()
    assert await h.verify("correct horse", LEGACY)
    assert not await h.verify("wrong horse", LEGACY)
    assert h.needs_rehash(LEGACY)


async def test_weaker_argon2_parameters_ask_for_a_rehash() -> None:
    weak = Argon2(time_cost=1, memory_cost=8 * 1024, parallelism=1).hash("pw")
    h = hasher()
    assert await h.verify("pw", weak)
    assert h.needs_rehash(weak)


async def test_hashing_and_verifying_run_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    real_hash, real_verify = Argon2.hash, Argon2.verify

    def hash_spy(self: Argon2, password: str | bytes, *, salt: bytes | None = None) -> str:
        threads.append(threading.get_ident())
        return real_hash(self, password, salt=salt)

    def verify_spy(self: Argon2, stored: str | bytes, password: str | bytes) -> bool:
        threads.append(threading.get_ident())
        return real_verify(self, stored, password)

    monkeypatch.setattr(Argon2, "hash", hash_spy)
    monkeypatch.setattr(Argon2, "verify", verify_spy)
    h = hasher()
    assert await h.verify("pw", await h.hash("pw"))
    assert len(threads) == 2 and threading.get_ident() not in threads


async def test_the_platform_hashes_at_the_production_cost_unless_its_settings_lower_it(tmp_path: Path) -> None:
    """The settings' defaults are argon2-cffi's (RFC 9106's low-memory profile); the tests lower the cost."""
    at_default_cost = Argon2().hash("pw")
    for extra, rehash in (({}, False), (CHEAP_HASHING, True)):
        container = build_container(Settings(database_url="memory://", var_dir=tmp_path, secret_key="k", **extra))
        passwords = await container.get(PasswordHasher)
        assert await passwords.verify("pw", at_default_cost)
        assert passwords.needs_rehash(at_default_cost) is rehash
        await container.close()
