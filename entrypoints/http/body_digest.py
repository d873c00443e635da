"""What an ``Idempotency-Key`` fingerprint hashes of a request body.

A JSON (or any other) body is hashed as it is. A ``multipart/form-data`` body is hashed by its parts (each part's
name, filename, content type and bytes, in order), not by its raw bytes: a client retrying an upload picks a new
random boundary, which changes every raw byte around the parts but not the request. A multipart body that does not
parse is hashed raw (the handler refuses it anyway).
"""

from __future__ import annotations

import hashlib

from python_multipart import MultipartParser
from python_multipart.multipart import parse_options_header


class _Unparsable(Exception):
    pass


def _parts(body: bytes, boundary: bytes) -> list[tuple[bytes, bytes, bytes, str]]:
    """(name, filename, content type, SHA-256 of the bytes) of every part, in order."""
    parts: list[tuple[bytes, bytes, bytes, str]] = []
    headers: dict[bytes, bytes] = {}
    field: list[bytes] = []
    value: list[bytes] = []
    data = hashlib.sha256()

    def on_part_begin() -> None:
        nonlocal data
        headers.clear()
        data = hashlib.sha256()

    def on_header_field(chunk: bytes, start: int, end: int) -> None:
        field.append(chunk[start:end])

    def on_header_value(chunk: bytes, start: int, end: int) -> None:
        value.append(chunk[start:end])

    def on_header_end() -> None:
        headers[b"".join(field).strip().lower()] = b"".join(value).strip()
        field.clear()
        value.clear()

    def on_part_data(chunk: bytes, start: int, end: int) -> None:
        data.update(chunk[start:end])

    def on_part_end() -> None:
        _, options = parse_options_header(headers.get(b"content-disposition", b""))
        parts.append((options.get(b"name", b""), options.get(b"filename", b""),
                      headers.get(b"content-type", b""), data.hexdigest()))

    parser = MultipartParser(boundary, {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field, "on_header_value": on_header_value,
        "on_header_end": on_header_end, "on_part_data": on_part_data, "on_part_end": on_part_end})
    try:
        parser.write(body)
        parser.finalize()
    except Exception as exc:  # python-multipart raises its own errors (and ValueError) on a malformed body
        raise _Unparsable from exc
    return parts


def body_digest(content_type: str | None, body: bytes) -> str:
    """The SHA-256 (hex) an idempotency fingerprint takes of ``body`` sent as ``content_type``."""
    if content_type:
        media, options = parse_options_header(content_type)
        boundary = options.get(b"boundary")
        if media == b"multipart/form-data" and boundary:
            try:
                parts = _parts(body, boundary)
            except _Unparsable:
                return hashlib.sha256(body).hexdigest()
            canonical = hashlib.sha256(b"multipart/form-data")
            for name, filename, part_type, digest in parts:
                for item in (name, filename, part_type, digest.encode()):
                    canonical.update(len(item).to_bytes(8, "big") + item)
            return canonical.hexdigest()
    return hashlib.sha256(body).hexdigest()
