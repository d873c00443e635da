"""The one helper every dashboard page uses: ``View``, made from the request.

A page handler reads like this (``pages/agents.py``)::

    @page("GET", "/agents/{agent_id:int}", section="agents")
    async def agent(request: Request, agent_id: int, use_case: FromDishka[uc.GetAgent]) -> Template:
        view = View.of(request)
        agent = await view.run(use_case, lambda actor: uc.GetAgentCommand(actor, agent_id))
        return view.page("agent.html", agent=agent)

    @page("POST", "/agents", section="agents")
    async def create(request: Request, use_case: FromDishka[uc.CreateAgent]) -> Response:
        view = View.of(request)
        return await view.submit(
            use_case, lambda actor, form: uc.CreateAgentCommand(actor, name=form.get("name", "")),
            template="agents.html", context=lambda: ...,           # the page to show again with the errors
            done=lambda agent: view.redirect(f"/agents/{agent.id}", "Agent created"))

- ``run``: the use case, for the session's organization (the ``Actor`` the gate made from the session: the same
  use cases, the same organization scoping as the API). A ``DomainError`` it raises becomes an HTML error page
  (``errors.py``): an id of another organization is a 404 page, as in the API.
- ``page``: renders a template over ``base.html`` (navigation, the signed-in user, the CSRF token, a flash).
- ``submit``: a form's use case; a ``ValidationFailed`` or another 4xx ``DomainError`` shows the same page again
  with the errors beside the fields (``errors`` in the template: field -> message, ``form`` the values sent),
  with the error's status (a ``NotFound`` naming a field, such as an unknown ``calendar_id``, is shown beside it;
  any other ``NotFound`` is the 404 page). CSRF was checked by the gate before the handler ran (``csrf_token`` field).
- ``redirect``: after a successful form, 303 to a page (Post/Redirect/Get), with an optional flash message.
- ``decode(form, Schema)``: the form's fields as the API's request struct (the same bounds and types as the JSON
  API), or ``ValidationFailed`` naming the field, which ``submit`` shows beside it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import msgspec
from litestar import Request
from litestar.response import Redirect, Template

from application.context import Actor
from domain.billing import ServiceHold
from domain.errors import DomainError, NotFound, ValidationFailed
from entrypoints.http.dashboard.navigation import PREFIX, SECTIONS
from entrypoints.http.envelope import in_words, status_for

C = TypeVar("C")
S = TypeVar("S")
R = TypeVar("R")
FLASH_PARAMETER = "flash"
FLASH_SIGNATURE = "flash_sig"
CSRF_FIELD = "csrf_token"


C_contra = TypeVar("C_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class UseCase(Protocol[C_contra, R_co]):
    async def execute(self, command: C_contra) -> R_co: ...


@dataclass(frozen=True, slots=True)
class SignedIn:
    """The dashboard session of the request (set by the gate)."""

    user_id: int
    email: str
    organization_id: int
    organization_name: str
    csrf_token: str
    billing_hold: ServiceHold | None = None
    """Why billing holds new calls, SMS and campaign starts (the banner on every page), None when it does not."""
    role: str = ""
    session_hash: str = ""
    """The SHA-256 of the session's id (the account page marks this session among the user's)."""
    partner: bool = False
    """The user's organization is a partner (it has clients: the Clients section)."""
    acting_id: int | None = None
    """The client the session works in (the "acting as" bar), None: the user's own organization."""
    acting_name: str = ""

    @property
    def working_name(self) -> str:
        """The organization the pages act in: the client switched into, else the user's own."""
        return self.acting_name or self.organization_name

    @property
    def manages(self) -> bool:
        """Whether the user manages users, keys and billing (owner or admin)."""
        return self.role in ("owner", "admin")


STATE_KEY = "dashboard"


@dataclass(frozen=True, slots=True)
class View:
    request: Request[Any, Any, Any]
    actor: Actor | None
    signed_in: SignedIn | None

    @classmethod
    def of(cls, request: Request[Any, Any, Any]) -> View:
        state = request.scope.get("state", {})
        return cls(request, state.get("actor"), state.get(STATE_KEY))

    @property
    def section(self) -> str:
        return str(self.request.route_handler.opt.get("section", ""))

    def context(self, **values: Any) -> dict[str, Any]:
        """What every template sees, plus ``values``."""
        return {
            "sections": SECTIONS,
            "section": self.section,
            "prefix": PREFIX,
            "user": self.signed_in,
            "csrf_token": self.signed_in.csrf_token if self.signed_in else "",
            "flash": self._flash(),
            "errors": {},
            "form": {},
            **values,
        }

    def _flash(self) -> str:
        """The flash message of the URL, when this session's own redirect put it there (a link made elsewhere
        cannot put words on the page)."""
        text = self.request.query_params.get(FLASH_PARAMETER, "")[:200]
        signature = self.request.query_params.get(FLASH_SIGNATURE, "")
        if not text or self.signed_in is None or not hmac.compare_digest(signature, _sign(self.signed_in, text)):
            return ""
        return text

    def page(self, template: str, *, status: int = 200, **values: Any) -> Template:
        return Template(template_name=template, context=self.context(**values), status_code=status)

    def require_actor(self) -> Actor:
        if self.actor is None:
            raise NotFound("page", self.request.url.path)
        return self.actor

    async def run(self, use_case: UseCase[C, R], command: Callable[[Actor], C]) -> R:
        """``use_case`` for the session's organization."""
        return await use_case.execute(command(self.require_actor()))

    async def form(self) -> dict[str, str]:
        """The submitted form's fields (the last value of each; the CSRF token left out)."""
        data = await self.request.form()
        return {k: str(v) for k, v in data.items() if k != CSRF_FIELD and isinstance(v, str)}

    async def submit(self, use_case: UseCase[C, R], command: Callable[[Actor, Mapping[str, str]], C], *,
                     template: str, done: Callable[[R], Any],
                     context: Callable[[], Awaitable[dict[str, Any]]] | None = None) -> Any:
        """Run a form's use case and answer ``done(result)``; on a 4xx domain error show ``template`` again with
        the errors (``context()``: what else the page needs)."""
        form = await self.form()
        try:
            result = await use_case.execute(command(self.require_actor(), form))
        except DomainError as exc:
            status = status_for(exc)
            if status >= 500 or (isinstance(exc, NotFound) and not (exc.details or {}).get("field")):
                raise  # a page that names nothing of the organization; a field naming nothing is shown beside it
            extra = await context() if context is not None else {}
            return self.page(template, status=status, form=form, errors=field_errors(exc), error=exc.message,
                             **extra)
        return done(result)

    def redirect(self, path: str, flash: str = "") -> Redirect:
        """303 to ``path`` (under /dashboard) with ``flash`` shown once on that page."""
        url = PREFIX + path
        if flash and self.signed_in is not None:
            flash = flash[:200]
            url += ("&" if "?" in url else "?") + (f"{FLASH_PARAMETER}={quote(flash)}"
                                                   f"&{FLASH_SIGNATURE}={_sign(self.signed_in, flash)}")
        return Redirect(url, status_code=303)


def _sign(signed_in: SignedIn, text: str) -> str:
    return hmac.new(signed_in.csrf_token.encode(), text.encode(), hashlib.sha256).hexdigest()[:32]


def field_errors(exc: DomainError) -> dict[str, str]:
    if isinstance(exc, NotFound) and (exc.details or {}).get("field"):
        return {str((exc.details or {})["field"]): "names nothing of this organization"}
    if isinstance(exc, ValidationFailed):
        found = (exc.details or {}).get("validation_errors")
        if isinstance(found, dict):
            return {str(k): str(v) for k, v in found.items()}
    return {}



def decode(form: Mapping[str, Any], schema: type[S]) -> S:
    """``form`` (text fields; empty ones left out) as ``schema``, numbers read from text."""
    return convert({k: v for k, v in form.items() if v != ""}, schema)


def convert(values: Mapping[str, Any], schema: type[S]) -> S:
    """``values`` (nested as the schema nests, numbers as text or numbers) as ``schema``, or ``ValidationFailed``
    naming the field: a nested one by its dotted path (``voice.speed``), a list by its name (``tools``)."""
    try:
        return msgspec.convert(dict(values), schema, strict=False)
    except msgspec.ValidationError as exc:
        text = str(exc)
        missing = _MISSING.match(text)
        if missing:
            raise ValidationFailed.field(missing.group(1), "is required") from None
        message, _, where = text.rpartition(" - at `$.")
        name = _INDEX.sub("", where.rstrip("`")) if message else "form"
        raise ValidationFailed.field(name, in_words(message or text)) from None


_INDEX = re.compile(r"\[.*$")
_MISSING = re.compile(r"^Object missing required field `(\w+)`")
