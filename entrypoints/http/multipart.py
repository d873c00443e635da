"""Multipart bodies (``multipart/form-data``), read one way for every route and page that takes one: document
uploads, the two CSV imports and the dashboard's forms (``JsonRequest.form``).

A part with a filename is a file (``UploadFile``); a part without one is text and must be UTF-8, else the
request is 400 naming the field. A body that is not well-formed multipart (a missing or truncated boundary,
a malformed or oversized part header, too many parts) is 400 too, in words; never a 500.

A route that reads files declares them with ``FileForm`` (``endpoint(..., form=...)``): the same declaration
checks what was sent (unknown fields, text where a file is expected, a single-file field sent twice) and
documents the request body in the OpenAPI document.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from litestar.datastructures import FormMultiDict, UploadFile
from multipart import MultipartSegment, ParserError, ParserLimitReached, PushMultipartParser

from domain.errors import ValidationFailed

MAX_PARTS = 1000  # parts per body
MAX_PART_HEADER = 4096  # bytes in one header line of a part
MAX_PART_HEADERS = 8  # header lines per part
_TEXT_CHARSETS = {"utf-8", "utf8", "us-ascii", "ascii"}
BODY = "body"  # the field a problem with the body as a whole is reported on

Value = str | UploadFile


def _malformed(reason: str) -> ValidationFailed:
    return ValidationFailed("Request body is not valid multipart/form-data", details={"validation_errors": {
        BODY: f"must be multipart/form-data: {reason}"}})


async def close_all(fields: dict[str, list[Value]]) -> None:
    for values in fields.values():
        for value in values:
            if isinstance(value, UploadFile):
                await value.close()


def _text(segment: MultipartSegment, data: bytearray) -> str:
    name = segment.name or ""
    charset = (segment.charset or "utf-8").strip().lower()
    if charset not in _TEXT_CHARSETS:
        raise ValidationFailed.field(name, "must be UTF-8 text (a file goes in a part with a filename)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationFailed.field(name, "must be UTF-8 text (a file goes in a part with a filename)") from None


async def parse_form(stream: AsyncIterator[bytes], content_type: dict[str, str]) -> dict[str, list[Value]]:
    """Every field of the body, in order, each name with all the values sent under it. ``content_type``: the
    parameters of the request's Content-Type (its ``boundary``)."""
    boundary = content_type.get("boundary")
    if not boundary:
        raise ValidationFailed.field("Content-Type", "multipart/form-data needs its boundary parameter")
    fields: defaultdict[str, list[Value]] = defaultdict(list)
    data: UploadFile | bytearray = bytearray()
    try:
        try:
            parser = PushMultipartParser(boundary.encode("latin-1"), max_header_size=MAX_PART_HEADER,
                                         max_header_count=MAX_PART_HEADERS, max_segment_count=MAX_PARTS)
        except (ValueError, UnicodeEncodeError):
            raise ValidationFailed.field("Content-Type", "the boundary is not a valid multipart boundary") from None
        with parser:
            segment: MultipartSegment | None = None
            chunks = aiter(stream)
            while not parser.closed:
                chunk = await anext(chunks, b"")
                for event in parser.parse(chunk):
                    if isinstance(event, MultipartSegment):
                        segment = event
                        data = (UploadFile(content_type=segment.content_type or "application/octet-stream",
                                           filename=segment.filename, headers=dict(segment.headerlist))
                                if segment.filename else bytearray())
                    elif event:
                        if isinstance(data, UploadFile):
                            await data.write(event)
                        else:
                            data.extend(event)
                    elif segment is not None:  # the end of a part
                        if isinstance(data, UploadFile):
                            await data.seek(0)
                            fields[segment.name or ""].append(data)
                        else:
                            fields[segment.name or ""].append(_text(segment, data))
                        data, segment = bytearray(), None
    except ParserLimitReached as exc:
        await _discard(data, fields)
        raise _malformed(f"{exc} (at most {MAX_PARTS} parts, {MAX_PART_HEADERS} header lines of "
                         f"{MAX_PART_HEADER} bytes each)") from None
    except ParserError as exc:
        await _discard(data, fields)
        raise _malformed(str(exc).rstrip(".") or "it does not parse") from None
    except BaseException:
        await _discard(data, fields)
        raise
    return dict(fields)


async def _discard(data: UploadFile | bytearray, fields: dict[str, list[Value]]) -> None:
    if isinstance(data, UploadFile):
        await data.close()
    await close_all(fields)


@dataclass(frozen=True, slots=True)
class FileField:
    """A form field that carries files: one (``many=False``) or one or more."""

    name: str
    description: str
    many: bool = False


@dataclass(frozen=True, slots=True)
class FileForm:
    """The multipart form a route reads: its file fields (no text fields), at least one of them ``required``
    (the names of which one must be sent). ``title`` names its schema in the OpenAPI document."""

    title: str
    fields: tuple[FileField, ...]
    required: tuple[str, ...] = ()
    description: str = ""

    def files(self, form: FormMultiDict) -> dict[str, list[UploadFile]]:
        """The files sent in each declared field (``form``: ``await request.form()``); 400 naming the field for
        anything else."""
        declared = {field.name: field for field in self.fields}
        for name in form:
            if name not in declared:
                raise ValidationFailed.field(name or "(unnamed part)", "is not an accepted field (accepted: "
                                             + ", ".join(declared) + ")")
        found: dict[str, list[UploadFile]] = {}
        for name in dict.fromkeys(form):
            field, values = declared[name], form.getall(name)
            if not all(isinstance(value, UploadFile) for value in values):
                raise ValidationFailed.field(name, "must be a file: a part with a filename, not text")
            if len(values) > 1 and not field.many:
                several = next((f.name for f in self.fields if f.many), None)
                raise ValidationFailed.field(name, "takes one file" + (f"; send several as `{several}`"
                                                                        if several else ""))
            found[name] = [value for value in values if isinstance(value, UploadFile)]
        if self.required and not found.keys() & set(self.required):
            names = " or ".join(f"`{name}`" for name in self.required)
            raise ValidationFailed.field(self.required[0], f"attach the file as the form field {names}")
        return found

    def schema(self) -> dict[str, Any]:
        """Its JSON schema (OpenAPI 3.1): an object of binary strings, nothing else."""
        properties: dict[str, Any] = {}
        for field in self.fields:
            binary = {"type": "string", "format": "binary"}
            properties[field.name] = ({"type": "array", "items": binary, "description": field.description}
                                      if field.many else {**binary, "description": field.description})
        schema: dict[str, Any] = {"title": self.title, "type": "object", "properties": properties,
                                  "additionalProperties": False}
        if len(self.required) == 1:
            schema["required"] = list(self.required)
        if self.description:
            schema["description"] = self.description
        return schema


CSV_UPLOAD = FileForm("CsvUpload", (FileField("file", "The CSV file (UTF-8, with a header row)"),), required=("file",),
                      description="A CSV file as multipart/form-data; the same CSV may instead be sent as the whole "
                                  "body with Content-Type: text/csv")
