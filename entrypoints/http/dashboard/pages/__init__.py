"""Dashboard pages: one module per section, each with ``HANDLERS``; ``page`` declares a handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from litestar import get, post
from litestar.params import PathParameter

from domain.audit import action_of
from domain.parsing import MAX_ID
from entrypoints.http.dashboard.gate import ACTION, LIVE, OWN, PUBLIC, SCOPES, STREAM, SUDO, UPLOAD

PathId = Annotated[int, PathParameter(description="An id in the path")]
PathText = Annotated[str, PathParameter(description="A text id in the path")]


def bounded(value: int) -> int:
    """An id beyond what any row holds names nothing (a 404 page, never a database error)."""
    return value if 1 <= value <= MAX_ID else 0


_DECORATORS = {"GET": get, "POST": post}
SIGNED_IN: tuple[str, ...] = ()
"""A page's ``scopes`` when any signed-in user may open it, whatever the role (the overview, signing out)."""


def page(method: str, path: str, *, section: str = "", public: bool = False, live: bool = False,
         scopes: tuple[str, ...] | None = None, sudo: bool = False, stream: bool = False, upload: int = 0,
         own: bool = False, operation: str | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """A dashboard page at ``/dashboard{path}``: ``section`` highlights its navigation entry; ``public`` pages
    (signing in) need no session; a ``live`` page (a GET fragment an open page fetches again by itself, cheap to
    answer) spends the user's live budget rather than the request budget; a ``stream`` (a live view's
    Server-Sent Events, ``live.py``) spends one live request for the whole connection and runs outside the
    request's unit of work. ``scopes``: who may open it, as an API route declares it (any one of them; the
    signed-in user holds its role's scopes, ``domain/roles.py``), or ``SIGNED_IN``; the gate checks it before the
    handler runs (a 403 page). Every page but a public one declares it. A ``sudo`` page (minting keys, changing
    billing, managing users) asks for the password again when the user last gave it (or a code) more than 5
    minutes ago. ``operation``: what a signed-in form does, named as the API's operation id is (``createAgent``;
    the API's own when it does the same), from which its audit events' action is derived (``agent.created``);
    every form but a public one declares it. An ``upload`` page's form sends a file (multipart/form-data, its CSRF
    token a field of it) of up to that many bytes. An ``own`` page acts in the user's own organization even while
    the session works in a client (a partner's session switched into a sub-organization). Pages stay out of the
    OpenAPI document (it describes the JSON API)."""
    if (live or stream) and method != "GET":
        raise ValueError("only a GET page can be live")
    if scopes is None and not public:
        raise ValueError(f"{method} {path}: a dashboard page declares its scopes (or SIGNED_IN)")
    if method != "GET" and not public and operation is None:
        raise ValueError(f"{method} {path}: a signed-in form declares its operation (its audit action)")
    if upload:
        kwargs["request_max_body_size"] = upload
    return _DECORATORS[method](path, opt={"section": section, PUBLIC: public, LIVE: live or stream, STREAM: stream,
                                          SCOPES: scopes or (), SUDO: sudo, UPLOAD: upload, OWN: own,
                                          ACTION: action_of(operation) if operation else None},
                               include_in_schema=False, **kwargs)
