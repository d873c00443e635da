"""API keys: the list, creating one, rotating and revoking; a new secret is shown once, on the page that answers
the form (never stored in a URL or a flash). Rotating and revoking ask first: the list's buttons open a page
(``GET .../rotate`` or ``.../revoke``) that says what will happen, whose form sends ``confirm``; a post without it
shows that page again and changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import accounts as uc
from application.context import Actor
from application.ports.platform import Clock, PageRequest
from domain.api_keys import DEFAULT_GRACE_HOURS
from domain.errors import PlanRequired, ValidationFailed
from domain.scopes import PRESETS
from entrypoints.http.dashboard.pages import PathId, bounded, page
from entrypoints.http.dashboard.view import View, decode
from entrypoints.http.schemas.accounts import ApiKeyCreate
from entrypoints.http.validation import require_non_blank

LIST_SIZE = 100


async def _listing(view: View, keys: uc.ListApiKeys, clock: Clock) -> dict[str, Any]:
    try:
        found = await view.run(keys, lambda actor: uc.ListApiKeysCommand(actor, PageRequest(LIST_SIZE)))
    except PlanRequired as exc:
        return {"keys": [], "plan_message": exc.message, "presets": PRESETS, "now": clock.now()}
    return {"keys": found.items, "plan_message": None, "presets": PRESETS, "now": clock.now()}


@page("GET", "/api-keys", section="api_keys", scopes=("api-keys:read",))
async def keys_page(request: Request[Any, Any, Any], keys: FromDishka[uc.ListApiKeys],
                    clock: FromDishka[Clock]) -> Template:
    view = View.of(request)
    return view.page("api_keys.html", **await _listing(view, keys, clock))


@page("POST", "/api-keys", operation="createApiKey", section="api_keys", sudo=True, scopes=("api-keys:write",))
async def create_key(request: Request[Any, Any, Any], issue: FromDishka[uc.IssueApiKey],
                     keys: FromDishka[uc.ListApiKeys], clock: FromDishka[Clock]) -> Response[Any] | Template:
    view = View.of(request)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.IssueApiKeyCommand:
        preset = form.get("preset", "")
        if preset not in PRESETS:
            raise ValidationFailed.field("preset", f"must be one of {', '.join(PRESETS)}")
        data = decode({"name": form.get("name", ""), "scopes": list(PRESETS[preset])}, ApiKeyCreate)
        return uc.IssueApiKeyCommand(actor.organization_id, require_non_blank(data.name, "name"), tuple(data.scopes),
                                     granted_by=actor.scopes, issuer=actor)

    async def listing() -> dict[str, Any]:
        return await _listing(view, keys, clock)

    async def shown(issued: uc.IssuedKey) -> Template:
        return view.page("api_keys.html", status=201, secret=issued.secret, secret_for=issued.record.name,
                         **await listing())

    result = await view.submit(issue, command, template="api_keys.html", context=listing, done=lambda r: r)
    return await shown(result) if isinstance(result, uc.IssuedKey) else result


CONFIRM_FIELD = "confirm"


async def _confirmation(view: View, getting: uc.GetApiKey, key_id: int, action: str) -> Template:
    """The page that asks before ``action`` (rotate or revoke) on a key of the organization (404 for another's)."""
    key = await view.run(getting, lambda actor: uc.GetApiKeyCommand(actor, bounded(key_id)))
    return view.page("api_key_confirm.html", key=key, action=action, grace_hours=DEFAULT_GRACE_HOURS)


async def _confirmed(view: View, action: str) -> bool:
    return (await view.form()).get(CONFIRM_FIELD) == action


@page("GET", "/api-keys/{key_id:int}/rotate", section="api_keys", scopes=("api-keys:write",))
async def confirm_rotate(request: Request[Any, Any, Any], key_id: PathId,
                         getting: FromDishka[uc.GetApiKey]) -> Template:
    return await _confirmation(View.of(request), getting, key_id, "rotate")


@page("POST", "/api-keys/{key_id:int}/rotate",
      operation="rotateApiKey", section="api_keys", sudo=True, scopes=("api-keys:write",))
async def rotate_key(request: Request[Any, Any, Any], key_id: PathId, rotate: FromDishka[uc.RotateApiKey],
                     getting: FromDishka[uc.GetApiKey], keys: FromDishka[uc.ListApiKeys],
                     clock: FromDishka[Clock]) -> Response[Any] | Template:
    view = View.of(request)
    if not await _confirmed(view, "rotate"):
        return await _confirmation(view, getting, key_id, "rotate")

    async def listing() -> dict[str, Any]:
        return await _listing(view, keys, clock)

    result = await view.submit(rotate, lambda actor, _: uc.RotateApiKeyCommand(actor, bounded(key_id)),
                               template="api_keys.html", context=listing, done=lambda r: r)
    if not isinstance(result, uc.Rotation):
        return result
    return view.page("api_keys.html", secret=result.issued.secret, secret_for=result.issued.record.name,
                     rotated_until=result.previous_key_expires_at, **await listing())


@page("GET", "/api-keys/{key_id:int}/revoke", section="api_keys", scopes=("api-keys:delete",))
async def confirm_revoke(request: Request[Any, Any, Any], key_id: PathId,
                         getting: FromDishka[uc.GetApiKey]) -> Template:
    return await _confirmation(View.of(request), getting, key_id, "revoke")


@page("POST", "/api-keys/{key_id:int}/revoke",
      operation="revokeApiKey", section="api_keys", sudo=True, scopes=("api-keys:delete",))
async def revoke_key(request: Request[Any, Any, Any], key_id: PathId, revoke: FromDishka[uc.RevokeApiKey],
                     getting: FromDishka[uc.GetApiKey], keys: FromDishka[uc.ListApiKeys],
                     clock: FromDishka[Clock]) -> Response[Any] | Template:
    view = View.of(request)
    if not await _confirmed(view, "revoke"):
        return await _confirmation(view, getting, key_id, "revoke")

    async def listing() -> dict[str, Any]:
        return await _listing(view, keys, clock)

    return await view.submit(revoke, lambda actor, _: uc.RevokeApiKeyCommand(actor, bounded(key_id)),
                             template="api_keys.html", context=listing,
                             done=lambda _: view.redirect("/api-keys", "Key revoked"))


HANDLERS = [keys_page, create_key, confirm_rotate, rotate_key, confirm_revoke, revoke_key]
