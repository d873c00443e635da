"""Users (owners and admins): the organization's users and their roles, invitations by email, changing a role,
removing a user and withdrawing an invitation; the signed-in user's own account (its sessions, each revocable); and
the pages a link in an email opens without a session: accepting an invitation, asking for and choosing a new
password. Removing a user, withdrawing an invitation and ending a session ask first: a ``GET`` page says what
happens and its form sends ``confirm``; a post without it shows that page again and changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Redirect, Response, Template

from application import mfa
from application import team as uc
from application.context import Actor
from application.ports.accounts import UserRepository
from domain.errors import Conflict, NotFound, ValidationFailed
from domain.users import LinkKind
from entrypoints.http.dashboard.navigation import PREFIX
from entrypoints.http.dashboard.pages import SIGNED_IN, PathId, PathText, bounded, page
from entrypoints.http.dashboard.view import View
from entrypoints.settings import Settings

MANAGE = ("organizations:write",)
"""Only owners and admins hold it (domain/roles.py)."""
ROLE_CHOICES = ("owner", "admin", "member", "viewer")


def link_base(request: Request[Any, Any, Any], settings: Settings) -> str:
    """Where the links in emails point: ``PARLEY_PUBLIC_BASE_URL`` when set (always set it in production: the
    request's Host header is the client's to choose), else this request's own base."""
    if settings.public_base_url:
        return settings.public_base_url.rstrip("/") + PREFIX
    return str(request.base_url).rstrip("/") + PREFIX


def _manager_id(view: View) -> int | None:
    return view.signed_in.user_id if view.signed_in else None


async def _team(view: View, listing: uc.ListTeam) -> dict[str, Any]:
    team = await view.run(listing, lambda actor: uc.ListTeamCommand(actor))
    return {"team": team, "roles": ROLE_CHOICES, "mfa_required": team.mfa_required}


@page("GET", "/users", section="users", scopes=MANAGE, own=True)
async def users_page(request: Request[Any, Any, Any], listing: FromDishka[uc.ListTeam]) -> Template:
    view = View.of(request)
    return view.page("users.html", **await _team(view, listing))


@page("POST", "/users/invite", operation="inviteUser", section="users", sudo=True, scopes=MANAGE, own=True)
async def invite(request: Request[Any, Any, Any], inviting: FromDishka[uc.InviteUser],
                 listing: FromDishka[uc.ListTeam], settings: FromDishka[Settings]) -> Response[Any] | Template:
    view = View.of(request)
    base = link_base(request, settings)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.InviteUserCommand:
        return uc.InviteUserCommand(actor, _manager_id(view), form.get("email", ""), form.get("role", ""), base)

    async def context() -> dict[str, Any]:
        return await _team(view, listing)

    return await view.submit(inviting, command, template="users.html", context=context,
                             done=lambda link: view.redirect("/users", f"Invitation sent to {link.email}"))


@page("POST", "/users/{user_id:int}/role",
      operation="changeUserRole", section="users", sudo=True, scopes=MANAGE, own=True)
async def change_role(request: Request[Any, Any, Any], user_id: PathId, changing: FromDishka[uc.ChangeRole],
                      listing: FromDishka[uc.ListTeam]) -> Response[Any] | Template:
    view = View.of(request)

    async def context() -> dict[str, Any]:
        return await _team(view, listing)

    return await view.submit(
        changing, lambda actor, form: uc.ChangeRoleCommand(actor, _manager_id(view), bounded(user_id),
                                                           form.get("role", "")),
        template="users.html", context=context,
        done=lambda user: view.redirect("/users", f"{user.email} is now {user.role}"))


async def _removal(view: View, listing: uc.ListTeam, user_id: int) -> Template:
    """The page that asks before removing a user of the organization (404 for anyone else)."""
    team = await view.run(listing, lambda actor: uc.ListTeamCommand(actor))
    user = next((u for u in team.users if u.id == bounded(user_id)), None)
    if user is None:
        raise NotFound("user", user_id)
    return view.page("user_remove.html", member=user)


@page("GET", "/users/{user_id:int}/remove", section="users", scopes=MANAGE, own=True)
async def confirm_remove(request: Request[Any, Any, Any], user_id: PathId,
                         listing: FromDishka[uc.ListTeam]) -> Template:
    return await _removal(View.of(request), listing, user_id)


@page("POST", "/users/{user_id:int}/remove",
      operation="removeUser", section="users", sudo=True, scopes=MANAGE, own=True)
async def remove(request: Request[Any, Any, Any], user_id: PathId, removing: FromDishka[uc.RemoveUser],
                 listing: FromDishka[uc.ListTeam]) -> Response[Any] | Template:
    view = View.of(request)
    if (await view.form()).get("confirm") != "remove":
        return await _removal(view, listing, user_id)

    async def context() -> dict[str, Any]:
        return await _team(view, listing)

    return await view.submit(
        removing, lambda actor, _: uc.RemoveUserCommand(actor, _manager_id(view), bounded(user_id)),
        template="users.html", context=context, done=lambda _: view.redirect("/users", "User removed"))


CONFIRM_FIELD = "confirm"
WITHDRAW = "withdraw"
"""The ``confirm`` field's value that withdraws an invitation (without it the post asks first)."""
END = "end"
"""The ``confirm`` field's value that ends a session (without it the post asks first)."""


async def _withdrawal(view: View, listing: uc.ListTeam, link_id: int) -> Template:
    """The page that asks before withdrawing a waiting invitation of the organization (404 for anyone else's)."""
    team = await view.run(listing, lambda actor: uc.ListTeamCommand(actor))
    link = next((each for each in team.invitations if each.id == bounded(link_id)), None)
    if link is None:
        raise NotFound("invitation", link_id)
    return view.page(
        "confirm.html", heading=f"Withdraw the invitation of {link.email}?", back="/users", back_label="Users",
        details=f"{link.email} was invited as {link.role}; the link works until {link.expires_at:%d %b %Y %H:%M} UTC.",
        warning="The link in their email stops working now.", note="Invite them again to give them a new one.",
        action=f"/users/invitations/{link.id}/revoke", confirm=WITHDRAW, button="Withdraw the invitation")


@page("GET", "/users/invitations/{link_id:int}/revoke", section="users", scopes=MANAGE, own=True)
async def confirm_revoke_invitation(request: Request[Any, Any, Any], link_id: PathId,
                                    listing: FromDishka[uc.ListTeam]) -> Template:
    return await _withdrawal(View.of(request), listing, link_id)


@page("POST", "/users/invitations/{link_id:int}/revoke",
      operation="revokeInvitation", section="users", sudo=True, scopes=MANAGE, own=True)
async def revoke_invitation(request: Request[Any, Any, Any], link_id: PathId,
                            revoking: FromDishka[uc.RevokeInvitation],
                            listing: FromDishka[uc.ListTeam]) -> Response[Any] | Template:
    view = View.of(request)
    if (await view.form()).get(CONFIRM_FIELD) != WITHDRAW:
        return await _withdrawal(view, listing, link_id)

    async def context() -> dict[str, Any]:
        return await _team(view, listing)

    return await view.submit(
        revoking, lambda actor, _: uc.RevokeInvitationCommand(actor, bounded(link_id)), template="users.html",
        context=context, done=lambda _: view.redirect("/users", "Invitation withdrawn"))


# --------------------------------------------------------------------------- the signed-in user's own account

async def _account(view: View, sessions: uc.ListSessions) -> dict[str, Any]:
    user_id = view.signed_in.user_id if view.signed_in else 0
    return {"sessions": await sessions.execute(uc.ListSessionsCommand(user_id)),
            "current": view.signed_in.session_hash if view.signed_in else ""}


@page("GET", "/account", scopes=SIGNED_IN, own=True)
async def account(request: Request[Any, Any, Any], sessions: FromDishka[uc.ListSessions]) -> Template:
    view = View.of(request)
    return view.page("account.html", **await _account(view, sessions))


async def _ending(view: View, sessions: uc.ListSessions, id_hash: str) -> Template:
    """The page that asks before ending one of the signed-in user's other sessions (404 for any other)."""
    user_id = view.signed_in.user_id if view.signed_in else 0
    current = view.signed_in.session_hash if view.signed_in else ""
    found = next((each for each in await sessions.execute(uc.ListSessionsCommand(user_id))
                  if each.id_hash == id_hash and each.id_hash != current), None)
    if found is None:
        raise NotFound("session", "this session")
    return view.page(
        "confirm.html", heading="End this session?", back="/account", back_label="Your account",
        details=f"Signed in {found.created_at:%d %b %Y %H:%M} UTC, last used {found.last_seen_at:%d %b %Y %H:%M} UTC.",
        warning="The browser using it is signed out now.", note="Sign in there again to use it again.",
        action="/account/sessions/revoke", fields={"session": found.id_hash}, confirm=END, button="End the session")


@page("GET", "/account/sessions/revoke", scopes=SIGNED_IN, own=True)
async def confirm_revoke_session(request: Request[Any, Any, Any], sessions: FromDishka[uc.ListSessions]) -> Template:
    return await _ending(View.of(request), sessions, request.query_params.get("session", ""))


@page("POST", "/account/sessions/revoke",
      operation="revokeSessions", scopes=SIGNED_IN, own=True)
async def revoke_session(request: Request[Any, Any, Any], revoking: FromDishka[uc.RevokeSession],
                         sessions: FromDishka[uc.ListSessions]) -> Response[Any] | Template:
    view = View.of(request)
    user_id = view.signed_in.user_id if view.signed_in else 0
    form = await view.form()
    if form.get(CONFIRM_FIELD) != END:
        return await _ending(view, sessions, form.get("session", ""))

    async def context() -> dict[str, Any]:
        return await _account(view, sessions)

    return await view.submit(revoking, lambda _, form: uc.RevokeSessionCommand(user_id, form.get("session", "")),
                             template="account.html", context=context,
                             done=lambda _: view.redirect("/account", "Session ended"))


@page("POST", "/users/mfa-required",
      operation="setMfaRequired", section="users", sudo=True, scopes=MANAGE, own=True)
async def mfa_required(request: Request[Any, Any, Any], setting: FromDishka[mfa.SetMfaRequired],
                       listing: FromDishka[uc.ListTeam]) -> Response[Any] | Template:
    view = View.of(request)

    async def context() -> dict[str, Any]:
        return await _team(view, listing)

    def command(actor: Actor, form: Mapping[str, str]) -> mfa.SetMfaRequiredCommand:
        return mfa.SetMfaRequiredCommand(actor, _manager_id(view), form.get("required") == "1")

    return await view.submit(setting, command, template="users.html", context=context,
                             done=lambda _: view.redirect("/users", "Two-factor sign-in setting saved"))


@page("GET", "/account/mfa", scopes=SIGNED_IN, own=True)
async def mfa_page(request: Request[Any, Any, Any], starting: FromDishka[mfa.StartMfaEnrolment]) -> Template:
    view = View.of(request)
    enrolment = await starting.execute(mfa.MfaUserCommand(view.signed_in.user_id if view.signed_in else 0))
    return view.page("mfa.html", enrolment=enrolment)


@page("POST", "/account/mfa", operation="enableMfa", scopes=SIGNED_IN, own=True)
async def mfa_confirm(request: Request[Any, Any, Any], confirming: FromDishka[mfa.ConfirmMfa],
                      starting: FromDishka[mfa.StartMfaEnrolment]) -> Response[Any] | Template:
    view = View.of(request)
    user_id = view.signed_in.user_id if view.signed_in else 0

    async def context() -> dict[str, Any]:
        return {"enrolment": await starting.execute(mfa.MfaUserCommand(user_id))}

    return await view.submit(confirming, lambda _, form: mfa.ConfirmMfaCommand(user_id, form.get("code", "")),
                             template="mfa.html", context=context,
                             done=lambda _: view.redirect("/account", "Two-factor sign-in is on"))


@page("POST", "/account/mfa/disable",
      operation="disableMfa", sudo=True, scopes=SIGNED_IN, own=True)
async def mfa_disable(request: Request[Any, Any, Any], disabling: FromDishka[mfa.DisableMfa],
                      starting: FromDishka[mfa.StartMfaEnrolment]) -> Response[Any] | Template:
    view = View.of(request)
    user_id = view.signed_in.user_id if view.signed_in else 0

    async def context() -> dict[str, Any]:
        return {"enrolment": await starting.execute(mfa.MfaUserCommand(user_id))}

    return await view.submit(disabling, lambda actor, _: mfa.DisableMfaCommand(user_id, actor.organization_id),
                             template="mfa.html", context=context,
                             done=lambda _: view.redirect("/account", "Two-factor sign-in is off"))


def _back(value: str | None) -> str:
    """A dashboard path only (never another site)."""
    if value and value.startswith(PREFIX) and not value.startswith("//") and "\\" not in value:
        return value
    return PREFIX


@page("GET", "/verify", scopes=SIGNED_IN, own=True)
async def verify_form(request: Request[Any, Any, Any], users: FromDishka[UserRepository]) -> Template:
    view = View.of(request)
    account = await users.account(view.signed_in.user_id) if view.signed_in else None
    return view.page("verify.html", next=_back(request.query_params.get("next")), mfa=bool(account and account.mfa))


@page("POST", "/verify", operation="verifySession", scopes=SIGNED_IN, own=True)
async def verify(request: Request[Any, Any, Any], proving: FromDishka[mfa.Reauthenticate],
                 users: FromDishka[UserRepository]) -> Response[Any] | Template:
    view = View.of(request)
    signed_in = view.signed_in
    user_id, session_hash = (signed_in.user_id, signed_in.session_hash) if signed_in else (0, "")
    form = await view.form()
    target = _back(form.get("next"))

    async def context() -> dict[str, Any]:
        account = await users.account(user_id)
        return {"next": target, "mfa": bool(account and account.mfa)}

    return await view.submit(
        proving, lambda _, f: mfa.ReauthenticateCommand(user_id, session_hash, f.get("password", ""),
                                                        f.get("code", "")),
        template="verify.html", context=context,
        done=lambda _: Redirect(target, status_code=303))


# --------------------------------------------------------------------------- links from emails (no session)

async def _public_form(view: View, use_case: Any, command: Any, template: str, done: str,
                       **values: Any) -> Template:
    try:
        await use_case.execute(command)
    except ValidationFailed as exc:
        return view.page(template, status=400, error=exc.message, **values)
    except Conflict as exc:
        return view.page(template, status=409, error=exc.message, **values)
    return view.page("link_done.html", message=done)


@page("GET", "/invitations/{token:str}", public=True)
async def invitation(request: Request[Any, Any, Any], token: PathText, reading: FromDishka[uc.ReadLink]) -> Template:
    link = await reading.execute(uc.ReadLinkCommand(token, LinkKind.INVITATION))
    return View.of(request).page("invitation.html", link=link, token=token)


@page("POST", "/invitations/{token:str}", public=True)
async def accept(request: Request[Any, Any, Any], token: PathText, reading: FromDishka[uc.ReadLink],
                 accepting: FromDishka[uc.AcceptInvitation]) -> Template:
    view = View.of(request)
    link = await reading.execute(uc.ReadLinkCommand(token, LinkKind.INVITATION))
    form = await view.form()
    if form.get("password", "") != form.get("password_again", ""):
        return view.page("invitation.html", status=400, link=link, token=token, error="The passwords differ.")
    return await _public_form(view, accepting, uc.AcceptInvitationCommand(token, form.get("password", "")),
                              "invitation.html", "Your account is ready: sign in with your email and password.",
                              link=link, token=token)


@page("GET", "/password-reset", public=True)
async def reset_request_form(request: Request[Any, Any, Any]) -> Template:
    return View.of(request).page("password_reset_request.html")


@page("POST", "/password-reset", public=True)
async def reset_request(request: Request[Any, Any, Any], requesting: FromDishka[uc.RequestPasswordReset],
                        settings: FromDishka[Settings]) -> Template:
    view = View.of(request)
    form = await view.form()
    return await _public_form(
        view, requesting, uc.RequestPasswordResetCommand(form.get("email", ""), link_base(request, settings)),
        "password_reset_request.html", "If this address has an account, an email with a link is on its way; the "
        "link works for an hour.", form=form)


@page("GET", "/password-reset/{token:str}", public=True)
async def reset_form(request: Request[Any, Any, Any], token: PathText, reading: FromDishka[uc.ReadLink]) -> Template:
    await reading.execute(uc.ReadLinkCommand(token, LinkKind.PASSWORD_RESET))
    return View.of(request).page("password_reset.html", token=token)


@page("POST", "/password-reset/{token:str}", public=True)
async def reset(request: Request[Any, Any, Any], token: PathText, resetting: FromDishka[uc.ResetPassword]) -> Template:
    view = View.of(request)
    form = await view.form()
    if form.get("password", "") != form.get("password_again", ""):
        return view.page("password_reset.html", status=400, token=token, error="The passwords differ.")
    return await _public_form(view, resetting, uc.ResetPasswordCommand(token, form.get("password", "")),
                              "password_reset.html", "Your password is changed, and every session of your account "
                              "ended: sign in with the new password.", token=token)


HANDLERS = [users_page, invite, change_role, confirm_remove, remove, confirm_revoke_invitation, revoke_invitation,
            mfa_required, account, confirm_revoke_session, revoke_session, mfa_page, mfa_confirm, mfa_disable,
            verify_form, verify, invitation, accept, reset_request_form, reset_request, reset_form, reset]
