"""Cryptography adapters: secrets sealed at rest, password hashes."""

from adapters.crypto.argon2_hasher import Argon2PasswordHasher
from adapters.crypto.fernet_box import FernetSecretBox
from adapters.crypto.totp import PyotpOneTimePasswords

__all__ = ["Argon2PasswordHasher", "FernetSecretBox", "PyotpOneTimePasswords"]
