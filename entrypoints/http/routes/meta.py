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
from entrypoints.http import openapi
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


ROUTES = [health, openapi_json, docs]
