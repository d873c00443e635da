"""Blobs in process memory (for the database-free run and tests)."""

from __future__ import annotations

import re

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _check(key: str) -> str:
    if not all(_SEGMENT.match(s) for s in key.split("/")):
        raise ValueError(f"invalid blob key {key!r}")
    return key


class InMemoryBlobStorage:
    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        self._blobs[_check(key)] = bytes(data)

    async def get(self, key: str) -> bytes | None:
        return self._blobs.get(_check(key))

    async def delete(self, key: str) -> None:
        self._blobs.pop(_check(key), None)
