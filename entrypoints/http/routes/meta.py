"""Meta endpoints: no authentication."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from dishka import FromDishka
from litestar import Request, Response
from litestar.openapi.datastructures import ResponseSpec
from litestar.response import Redirect

from application.ports.platform import Clock
from entrypoints.http import openapi, reference
from entrypoints.http.envelope import Envelope
from entrypoints.http.routing import endpoint

TAGS = ["Meta"]
API_VERSION = "2.0.0"


class Health(msgspec.Struct):
    status: str
    version: str
    timestamp: datetime


@endpoint("GET", "/health", operation_id="getHealth", summary="Service health", tags=TAGS, auth="public")
async def health(clock: FromDishka[Clock]) -> Envelope[Health]:
    return Envelope(Health("ok", API_VERSION, clock.now()))


@endpoint("GET", "/openapi.json", operation_id="getOpenApi", summary="The OpenAPI 3.1 document", tags=TAGS,
          auth="public", media_type="application/json",
          responses={200: ResponseSpec(dict[str, Any], description="The OpenAPI 3.1 document",
                                       generate_examples=False)})
async def openapi_json(request: Request[Any, Any, Any]) -> Response[bytes]:
    return Response(openapi.document(request.app), media_type="application/json")


@endpoint("GET", "/docs", operation_id="getDocs", summary="Redirects to the OpenAPI document", tags=TAGS,
          auth="public", status_code=302, response_headers=None)
async def docs(request: Request[Any, Any, Any]) -> Redirect:
    original = request.scope.get("state", {}).get("original_path") or request.url.path
    prefix = original.rsplit("/docs", 1)[0]
    return Redirect(path=f"{prefix}/openapi.json", status_code=302)


def _prefix(request: Request[Any, Any, Any], tail: str) -> str:
    """The API prefix the request came in on (``/v2`` or ``/api/v2``)."""
    original = request.scope.get("state", {}).get("original_path") or request.url.path
    return str(original).rsplit(tail, 1)[0]


@endpoint("GET", "/reference", operation_id="getReference", summary="A readable API reference (HTML)", tags=TAGS,
          auth="public", media_type="text/html",
          description="Rendered on the server from the OpenAPI document; its stylesheet is served by Parley "
                      "(no script, no CDN).",
          responses={200: ResponseSpec(str, description="The API reference", media_type="text/html",
                                       generate_examples=False)})
async def api_reference(request: Request[Any, Any, Any]) -> Response[bytes]:
    body = reference.render(openapi.document(request.app), _prefix(request, "/reference"))
    return Response(body, media_type="text/html; charset=utf-8")


@endpoint("GET", "/reference/assets/reference.css", operation_id="getReferenceStylesheet",
          summary="The API reference's stylesheet", tags=TAGS, auth="public", media_type="text/css",
          responses={200: ResponseSpec(str, description="CSS", media_type="text/css", generate_examples=False)})
async def reference_stylesheet() -> Response[bytes]:
    return Response(reference.STYLESHEET, media_type="text/css; charset=utf-8",
                    headers={"Cache-Control": "public, max-age=3600"})


ROUTES = [health, openapi_json, docs, api_reference, reference_stylesheet]
