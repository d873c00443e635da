"""Cryptography adapters: secrets sealed at rest."""

from adapters.crypto.fernet_box import FernetSecretBox

__all__ = ["FernetSecretBox"]
