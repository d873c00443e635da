"""Blobs as files under one root directory (``<var_dir>/blobs``)."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from pathlib import Path

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def blob_path(root: Path, key: str) -> Path:
    """The file of ``key``; refuses anything that is not plain relative segments (no traversal)."""
    segments = key.split("/")
    if not segments or any(not _SEGMENT.match(s) or s in (".", "..") for s in segments):
        raise ValueError(f"invalid blob key {key!r}")
    return root.joinpath(*segments)


class FilesystemBlobStorage:
    def __init__(self, root: Path) -> None:
        self.root = root

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        await asyncio.to_thread(self._write, blob_path(self.root, key), data)

    async def get(self, key: str) -> bytes | None:
        path = blob_path(self.root, key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def delete(self, key: str) -> None:
        path = blob_path(self.root, key)
        await asyncio.to_thread(lambda: path.unlink(missing_ok=True))

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        """Write to a temporary file and rename it into place, so a reader never sees half a file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)
