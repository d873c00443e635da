"""The extraction worker: ``python -m adapters.documents.worker MEMORY_MB``.

Reads requests from stdin and answers on stdout, one at a time, each a frame (4-byte big-endian length,
then a pickle). A request is ``(extractor, method, args)``: a ``LocalTextExtractor`` with its limits,
``extract_file_now`` or ``extract_page_now``, the arguments. Its first frame, unasked, is ``READY``
(unpickled) once the parsers are imported. An answer is ``("ok", ExtractedText)`` or
``("failed", message, code)``. The address space is limited to MEMORY_MB (0: no limit). It exits when
stdin closes. Only the parent process writes to it, with data of its own making.
"""

from __future__ import annotations

import pickle
import struct
import sys
from typing import Any, BinaryIO

HEADER = struct.Struct(">I")  # the length of the pickle that follows
READY = b"ready"  # the first frame a worker writes, once its parsers are imported
ALLOWED = frozenset({"extract_file_now", "extract_page_now"})


def read_frame(stream: BinaryIO) -> bytes | None:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    return payload if len(payload) == size else None


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def _answer(request: bytes) -> tuple[Any, ...]:
    from application.ports.knowledge import ExtractionFailed

    extractor, method, args = pickle.loads(request)  # written by the parent process only
    if method not in ALLOWED:
        return ("failed", "unknown request", "unreadable_file")
    try:
        return ("ok", getattr(extractor, method)(*args))
    except ExtractionFailed as failure:
        return ("failed", failure.message, failure.code)
    except MemoryError:
        return ("failed", "the file needs more memory than a file may use to be read", "unreadable_file")
    except Exception as error:  # a parser's failure is the file's
        return ("failed", f"the file could not be read ({type(error).__name__})", "unreadable_file")


def main(argv: list[str]) -> int:
    import resource

    memory_mb = int(argv[1]) if len(argv) > 1 else 0
    if memory_mb:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import adapters.documents.extraction  # noqa: F401 - the parsers are imported once, before any request

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdout.write(frame(READY))  # a file's time starts now, not while the interpreter starts
    stdout.flush()
    while True:
        request = read_frame(stdin)
        if request is None:
            return 0
        stdout.write(frame(pickle.dumps(_answer(request))))
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
