"""A text extractor that misbehaves on request, for the isolation tests: the worker process unpickles it
(so it lives in an importable module) and runs its ``extract_file_now``."""

from __future__ import annotations

import os

from adapters.documents import LocalTextExtractor
from application.ports.knowledge import ExtractedText


class HostileExtractor(LocalTextExtractor):
    """``LOOP...`` never finishes, ``HOG...`` allocates 8 GiB, ``DIE...`` kills its process; the rest is read
    as usual."""

    def extract_file_now(self, file_name: str, data: bytes) -> ExtractedText:
        if data.startswith(b"LOOP"):
            while True:
                pass
        if data.startswith(b"HOG"):
            hog = bytearray(8 * 1024**3)
            return ExtractedText("txt", str(len(hog)))
        if data.startswith(b"DIE"):
            os._exit(3)
        return super().extract_file_now(file_name, data)
