"""Port for binary objects (recordings): a filesystem today, an object store later."""

from __future__ import annotations

from typing import Protocol


class BlobStorage(Protocol):
    async def put(self, key: str, data: bytes, content_type: str) -> None:
        """Store ``data`` under ``key`` (a relative path of [A-Za-z0-9._-] segments), replacing it."""
        ...

    async def get(self, key: str) -> bytes | None: ...

    async def delete(self, key: str) -> None: ...
