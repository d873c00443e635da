"""Dashboard sessions over the API: sign in (sets the ``parley_session`` cookie), describe, sign out."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from litestar import Request, Response
from litestar.datastructures import Cookie
from litestar.params import JSONBody

from application import mfa
from application import sessions as uc
from entrypoints.http.authentication import SessionAuthenticator, cookie
from entrypoints.http.envelope import Envelope, auth_error_body
from entrypoints.http.routing import SESSION_COOKIE, AuthMode, endpoint
from entrypoints.http.schemas.sessions import LoginIn, SessionOut, VerifyIn

TAGS = ["Dashboard session"]


def session_cookie(request: Request[Any, Any, Any], value: str) -> Cookie:
    """The session cookie: HttpOnly, SameSite=Lax, Path=/, Secure when the request came over https; no Max-Age
    (it ends with the browser; the server ends it after 30 idle minutes or 12 hours in any case)."""
    return Cookie(key=SESSION_COOKIE, value=value, path="/", httponly=True, samesite="lax",
                  secure=request.scope.get("scheme") == "https")


def cleared_cookie(request: Request[Any, Any, Any]) -> Cookie:
    return Cookie(key=SESSION_COOKIE, value="", path="/", httponly=True, samesite="lax", max_age=0,
                  secure=request.scope.get("scheme") == "https")


def throttled(exc: uc.LoginThrottled) -> Response[bytes]:
    return Response(auth_error_body("RATE_LIMIT_EXCEEDED", str(exc), exc.retry_after), status_code=429,
                    media_type="application/json", headers={"Retry-After": str(exc.retry_after)})


async def open_session(request: Request[Any, Any, Any], login: uc.Login, email: str, password: str,
                       totp: str | None = None) -> uc.OpenedSession:
    """Sign in, ending the session the browser presented, if any; raises ``LoginFailed`` / ``MfaRequired`` /
    ``LoginThrottled`` (the dashboard's sign-in form uses it too). The caller sets
    ``session_cookie(request, opened.session_id)``."""
    address = request.client.host if request.client else "unknown"
    return await login.execute(uc.LoginCommand(email, password, cookie(request.scope, SESSION_COOKIE), address,
                                               totp or None))


@endpoint("POST", "/auth/login", operation_id="login", tags=TAGS, auth=AuthMode.PUBLIC, status_code=200,
          secret=True, summary="Sign in to the dashboard: opens a session (cookie parley_session)",
          description=("Sets the parley_session cookie (HttpOnly, SameSite=Lax, Path=/, Secure over https) and "
                       "returns the session's csrf_token, to be sent as X-CSRF-Token with every unsafe method "
                       "made with the session. A new session id every time (any session the browser sent is "
                       "ended). The session ends after 30 idle minutes or 12 hours. A session authenticates the "
                       "dashboard, the billing and cloud-status endpoints and /auth/*, nothing else."),
          errors={401: "INVALID_CREDENTIALS: unknown email, wrong password or wrong totp code; MFA_REQUIRED: the "
                       "password is right and the account signs in with a code as well (send totp)",
                  429: "RATE_LIMIT_EXCEEDED: 5 failed sign-ins for this email, or 20 from this client address, "
                       "within 15 minutes (attempts being checked count until they succeed), or 2 sign-ins from "
                       "this address being checked at this moment; see Retry-After"})
async def login(data: JSONBody[LoginIn], request: Request[Any, Any, Any],
                use_case: FromDishka[uc.Login]) -> Response[Envelope[SessionOut]]:
    try:
        opened = await open_session(request, use_case, data.email, data.password, data.totp)
    except uc.LoginThrottled as exc:
        return throttled(exc)  # type: ignore[return-value]  # an error body, not the route's success envelope
    except (uc.LoginFailed, uc.MfaRequired) as exc:
        return Response(auth_error_body(exc.code, str(exc)), status_code=401,  # type: ignore[arg-type]  # as above
                        media_type="application/json")
    return Response(Envelope(SessionOut.of(opened.view())), status_code=200,
                    cookies=[session_cookie(request, opened.session_id)])


@endpoint("GET", "/auth/session", operation_id="getSession", tags=TAGS, auth=AuthMode.SESSION,
          summary="The signed-in user, organization and CSRF token of the session",
          description="Needs the parley_session cookie; a Bearer key is not accepted here.")
async def get_session(request: Request[Any, Any, Any], sessions: FromDishka[SessionAuthenticator],
                      describe: FromDishka[uc.DescribeSession]) -> Envelope[SessionOut]:
    active = await sessions.active(request.scope)
    view = await describe.execute(uc.DescribeSessionCommand(active.session, active.expires_at))
    return Envelope(SessionOut.of(view))


@endpoint("POST", "/auth/logout", operation_id="logout", tags=TAGS, auth=AuthMode.SESSION, status_code=204,
          idempotent=False, summary="Sign out: ends the session on the server and clears the cookie",
          description="Needs the parley_session cookie and X-CSRF-Token; the session's cookie opens nothing "
                      "afterwards.")
async def logout(request: Request[Any, Any, Any], use_case: FromDishka[uc.Logout]) -> None:
    session_id = cookie(request.scope, SESSION_COOKIE) or ""
    await use_case.execute(uc.LogoutCommand(session_id))
    # the annotation documents the 204 without a body; the response also clears the cookie
    return Response(None, status_code=204, cookies=[cleared_cookie(request)])  # type: ignore[return-value]  # the annotation documents the 204's (empty) body


@endpoint("POST", "/auth/verify", operation_id="verifySession", tags=TAGS, auth=AuthMode.SESSION, status_code=204,
          idempotent=False, summary="Prove the session's user again (password, or a totp code)",
          description="Minting an API key, changing billing and managing users with a session need its user to "
                      "have given the password (or a code of the authenticator app) within 5 minutes, at sign-in "
                      "or here; else they answer 403 reauthentication_required. At most 5 tries in 15 minutes.",
          errors={400: "bad_request: the password or the code is not correct", 429: "too_many_requests"})
async def verify(data: JSONBody[VerifyIn], request: Request[Any, Any, Any], sessions: FromDishka[SessionAuthenticator],
                 use_case: FromDishka[mfa.Reauthenticate]) -> None:
    active = await sessions.active(request.scope)
    await use_case.execute(mfa.ReauthenticateCommand(active.session.user_id, active.session.id_hash,
                                                     data.password or "", data.totp or ""))
    return Response(None, status_code=204)  # type: ignore[return-value]  # the annotation documents the 204's (empty) body


ROUTES = [login, get_session, logout, verify]
