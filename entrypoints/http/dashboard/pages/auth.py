"""Signing in and out of the dashboard, through the same session use cases as ``POST /auth/login``."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Redirect, Response, Template

from application import sessions as uc
from application.sessions import SessionInvalid
from domain.errors import ValidationFailed
from entrypoints.http.authentication import cookie
from entrypoints.http.dashboard.navigation import PREFIX
from entrypoints.http.dashboard.pages import SIGNED_IN, page
from entrypoints.http.dashboard.view import View
from entrypoints.http.routes.sessions import cleared_cookie, open_session, session_cookie
from entrypoints.http.routing import SESSION_COOKIE


def _next(value: str | None) -> str:
    """Where to go after signing in: a dashboard path only (never another site)."""
    if value and value.startswith(PREFIX) and not value.startswith("//") and "\\" not in value:
        return value
    return PREFIX


@page("GET", "/login", public=True)
async def login_form(request: Request[Any, Any, Any]) -> Template:
    notice = "Signed out." if request.query_params.get("signed_out") == "1" else ""
    return View.of(request).page("login.html", next=_next(request.query_params.get("next")), notice=notice)


@page("POST", "/login", public=True)
async def login(request: Request[Any, Any, Any], use_case: FromDishka[uc.Login]) -> Response[Any] | Template:
    view = View.of(request)
    form = await view.form()
    email, target = form.get("email", ""), _next(form.get("next"))
    try:
        opened = await open_session(request, use_case, email, form.get("password", ""), form.get("code") or None)
    except uc.MfaRequired:
        return view.page("login.html", status=401, next=target, form={"email": email}, ask_code=True,
                         error="Enter the code your authenticator app shows, with your password.")
    except uc.LoginThrottled as exc:
        return view.page("login.html", status=429, next=target, form={"email": email},
                         error=f"{exc.reason}. Try again in {exc.retry_after} s.")
    except (uc.LoginFailed, SessionInvalid):
        return view.page("login.html", status=401, next=target, form={"email": email},
                         error="Email or password is not correct.")
    except ValidationFailed as exc:  # empty or too long
        return view.page("login.html", status=400, next=target, form={"email": email}, error=exc.message)
    return Redirect(target, status_code=303, cookies=[session_cookie(request, opened.session_id)])


@page("POST", "/logout", operation="logout", section="", scopes=SIGNED_IN)
async def logout(request: Request[Any, Any, Any], use_case: FromDishka[uc.Logout]) -> Redirect:
    await use_case.execute(uc.LogoutCommand(cookie(request.scope, SESSION_COOKIE) or ""))
    return Redirect(f"{PREFIX}/login?signed_out=1", status_code=303, cookies=[cleared_cookie(request)])


HANDLERS = [login_form, login, logout]
