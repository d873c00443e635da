"""``/v2/reference``: a readable API reference rendered on the server from the served OpenAPI document
(``openapi.document``), with its one stylesheet served by Parley (``reference.css``): no script, no CDN, no
build step. Rendered once per process (the document is the same for every app of a process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

HERE = Path(__file__).parent
STYLESHEET = (HERE / "reference.css").read_bytes()
_ENVIRONMENT = Environment(loader=FileSystemLoader(HERE), autoescape=select_autoescape(["html"]),
                           trim_blocks=True, lstrip_blocks=True)
METHODS = ("get", "post", "put", "patch", "delete")
_cache: dict[bytes, bytes] = {}


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_of(schema: dict[str, Any] | None) -> str:
    """A schema in a few words: ``Agent``, ``array of Call``, ``string (date-time)``, ``integer 1..100``."""
    if not schema:
        return "any"
    if "$ref" in schema:
        return _ref_name(schema["$ref"])
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(type_of(s) for s in schema[key])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"array of {type_of(schema.get('items'))}"
    words = str(kind)
    if "format" in schema:
        words += f" ({schema['format']})"
    low, high = schema.get("minimum", schema.get("minLength")), schema.get("maximum", schema.get("maxLength"))
    if low is not None or high is not None:
        words += f" {'' if low is None else low}..{'' if high is None else high}"
    return words


def _fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(schema.get("required", []))
    return [{"name": name, "type": type_of(prop), "required": name in required,
             "description": prop.get("description", "")}
            for name, prop in (schema.get("properties") or {}).items()]


def _body_name(operation: dict[str, Any]) -> str | None:
    content = (operation.get("requestBody") or {}).get("content") or {}
    for media in content.values():
        return type_of(media.get("schema"))
    return None


def _operations(document: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    by_tag: dict[str, list[dict[str, Any]]] = {}
    for path, item in sorted((document.get("paths") or {}).items()):
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            security = operation.get("security")
            by_tag.setdefault((operation.get("tags") or ["Other"])[0], []).append({
                "id": operation.get("operationId", f"{method}-{path}"), "method": method.upper(), "path": path,
                "summary": operation.get("summary", ""), "description": operation.get("description", ""),
                "public": security == [],
                "security": sorted({name for alternative in (security or []) for name in alternative}),
                "parameters": [{"name": p.get("name"), "in": p.get("in"), "required": p.get("required", False),
                                "type": type_of(p.get("schema")), "description": p.get("description", "")}
                               for p in operation.get("parameters", []) if "name" in p],
                "body": _body_name(operation),
                "responses": [{"status": status, "description": response.get("description", "")}
                              for status, response in sorted((operation.get("responses") or {}).items())],
            })
    return sorted(by_tag.items())


def render(document_bytes: bytes, base: str) -> bytes:
    """The reference page of the document (its ``base``: where the stylesheet and the document are served)."""
    key = document_bytes + base.encode()
    if key not in _cache:
        document = json.loads(document_bytes)
        schemas = (document.get("components") or {}).get("schemas") or {}
        html = _ENVIRONMENT.get_template("reference.html").render(
            info=document.get("info", {}), servers=document.get("servers", []), groups=_operations(document),
            schemas=[{"name": name, "type": type_of(schema) if "properties" not in schema else "object",
                      "description": schema.get("description", ""), "fields": _fields(schema)}
                     for name, schema in sorted(schemas.items())],
            base=base)
        _cache.clear()
        _cache[key] = html.encode()
    return _cache[key]
