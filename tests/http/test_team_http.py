"""The team through the dashboard, on SQLite and PostgreSQL, with a real SMTP server (aiosmtpd on 127.0.0.1): an
owner invites a colleague by email, the colleague joins through the one-time link (48 hours, once) with the role
given; roles change and users leave (never the last owner; an admin never touches an owner); a password reset by
email (1 hour, once) ends every session; a user lists and ends its own sessions; withdrawing an invitation and
ending a session ask first."""

from __future__ import annotations

import email.message
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from entrypoints.features.triggers import TriggerSettings
from tests.http.dashboard_support import PASSWORD, User, add_user, cookie, login, new_user
from tests.http.scheduling_support import UNLIMITED
from tests.http.triggers_support import SmtpServer
from tests.support.apps import Api, ApiFactory

START = datetime(2026, 3, 2, 12, tzinfo=UTC)
LINK = re.compile(r"https?://\S+/dashboard/(invitations|password-reset)/(\S+)")


@pytest.fixture
def smtp() -> Any:
    with SmtpServer() as server:
        yield server


@pytest.fixture
async def api(make_api: ApiFactory, sql_url: str, smtp: SmtpServer) -> AsyncIterator[Api]:
    yield await make_api(sql_url, clock=ManualClock(START), sections=(TriggerSettings(url=smtp.url),),
                         public_base_url="https://app.example.test", **UNLIMITED)


def text(message: email.message.Message) -> str:
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode()


def link_in(message: email.message.Message) -> str:
    found = LINK.search(text(message))
    assert found, text(message)
    assert found.group(0).startswith("https://app.example.test/dashboard/")  # PARLEY_PUBLIC_BASE_URL, not Host
    return "/dashboard/" + found.group(1) + "/" + found.group(2)


async def signed_in(api: Api, user: User) -> tuple[dict[str, str], str]:
    session, csrf = await login(api, user)
    return cookie(session), csrf


async def post(api: Api, path: str, headers: dict[str, str], csrf: str, **form: str) -> Any:
    return await api.client.post(path, headers=headers, data={"csrf_token": csrf, **form}, follow_redirects=False)


async def test_an_owner_invites_a_member_who_joins_with_the_link_once(api: Api, smtp: SmtpServer) -> None:
    owner = await new_user(api)
    headers, csrf = await signed_in(api, owner)
    page = await api.client.get("/dashboard/users", headers=headers)
    assert page.status_code == 200 and owner.email in page.text
    sent = await post(api, "/dashboard/users/invite", headers, csrf, email="Colleague@Example.com", role="member")
    assert sent.status_code == 303, sent.text
    [invitation] = await smtp.mailbox.wait_for(1)
    assert invitation["To"] == "colleague@example.com"
    path = link_in(invitation)
    listed = await api.client.get("/dashboard/users", headers=headers)
    assert "colleague@example.com" in listed.text and "Invitations waiting" in listed.text

    opened = await api.client.get(path)
    assert opened.status_code == 200 and "member" in opened.text
    differ = await api.client.post(path, data={"password": "a long password", "password_again": "another"})
    assert differ.status_code == 400
    joined = await api.client.post(path, data={"password": "a long password", "password_again": "a long password"})
    assert joined.status_code == 200 and "Your account is ready" in joined.text
    again = await api.client.post(path, data={"password": "a long password", "password_again": "a long password"})
    assert again.status_code == 404  # once
    colleague = User(owner.tenant, "colleague@example.com", "a long password")
    member_headers, _ = await signed_in(api, colleague)
    assert (await api.client.get("/dashboard/agents", headers=member_headers)).status_code == 200
    assert (await api.client.get("/dashboard/users", headers=member_headers)).status_code == 403
    assert (await api.client.get("/dashboard/api-keys", headers=member_headers)).status_code == 403


async def test_an_invitation_expires_after_48_hours(api: Api, smtp: SmtpServer) -> None:
    owner = await new_user(api)
    headers, csrf = await signed_in(api, owner)
    await post(api, "/dashboard/users/invite", headers, csrf, email="late@example.com", role="viewer")
    [invitation] = await smtp.mailbox.wait_for(1)
    api.clock.advance(hours=48, seconds=1)
    assert (await api.client.get(link_in(invitation))).status_code == 404


async def test_an_invitation_the_mail_server_refuses_leaves_nothing(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START), sections=(TriggerSettings(url="smtp://127.0.0.1:9"),),
                         **UNLIMITED)
    owner = await new_user(api)
    headers, csrf = await signed_in(api, owner)
    sent = await post(api, "/dashboard/users/invite", headers, csrf, email="nobody@example.com", role="member")
    assert sent.status_code == 503
    assert "nobody@example.com" not in (await api.client.get("/dashboard/users", headers=headers)).text


async def test_roles_change_and_users_leave_but_the_last_owner_stays(api: Api) -> None:
    owner = await new_user(api)
    admin = await add_user(api, owner.tenant, role="admin")
    member = await add_user(api, owner.tenant, role="member")
    headers, csrf = await signed_in(api, owner)
    page = (await api.client.get("/dashboard/users", headers=headers)).text
    ids = {m: int(re.search(rf'id="user-(\d+)">\s*<td data-label="Email">{re.escape(m)}', page).group(1))
           for m in (owner.email, admin.email, member.email)}
    demote = await post(api, f"/dashboard/users/{ids[owner.email]}/role", headers, csrf, role="admin")
    assert demote.status_code == 409 and "at least one owner" in demote.text
    admin_headers, admin_csrf = await signed_in(api, admin)
    touch_owner = await post(api, f"/dashboard/users/{ids[owner.email]}/role", admin_headers, admin_csrf,
                             role="viewer")
    assert touch_owner.status_code == 403
    make_owner = await post(api, f"/dashboard/users/{ids[member.email]}/role", admin_headers, admin_csrf,
                            role="owner")
    assert make_owner.status_code == 403
    promoted = await post(api, f"/dashboard/users/{ids[member.email]}/role", admin_headers, admin_csrf,
                          role="viewer")
    assert promoted.status_code == 303
    member_headers, member_csrf = await signed_in(api, member)
    assert (await post(api, "/dashboard/agents", member_headers, member_csrf, name="x", prompt="y")
            ).status_code == 403  # a viewer now, from the next request

    confirm = await post(api, f"/dashboard/users/{ids[member.email]}/remove", headers, csrf)
    assert confirm.status_code == 200 and "Remove the user" in confirm.text  # asks first
    removed = await post(api, f"/dashboard/users/{ids[member.email]}/remove", headers, csrf, confirm="remove")
    assert removed.status_code == 303
    assert (await api.client.get("/dashboard/agents", headers=member_headers,
                                 follow_redirects=False)).status_code == 303  # its session ended: to sign in
    other = await new_user(api)
    other_headers, other_csrf = await signed_in(api, other)
    assert (await post(api, f"/dashboard/users/{ids[admin.email]}/remove", other_headers, other_csrf,
                       confirm="remove")).status_code == 404  # another organization's user


async def test_a_password_reset_by_email_ends_every_session(api: Api, smtp: SmtpServer) -> None:
    user = await new_user(api)
    headers, _ = await signed_in(api, user)
    asked = await api.client.post("/dashboard/password-reset", data={"email": user.email})
    unknown = await api.client.post("/dashboard/password-reset", data={"email": "nobody@example.com"})
    assert asked.status_code == unknown.status_code == 200
    assert asked.text.replace(user.email, "") == unknown.text.replace("nobody@example.com", "")  # one answer
    [message] = await smtp.mailbox.wait_for(1)
    assert message["To"] == user.email
    path = link_in(message)
    done = await api.client.post(path, data={"password": "a brand new one", "password_again": "a brand new one"})
    assert done.status_code == 200
    assert (await api.client.get("/dashboard", headers=headers, follow_redirects=False)).status_code == 303
    assert (await api.client.post(path, data={"password": "x" * 9, "password_again": "x" * 9})).status_code == 404
    old = await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD})
    assert old.status_code == 401
    new = await api.client.post("/v2/auth/login", json={"email": user.email, "password": "a brand new one"})
    assert new.status_code == 200


async def test_a_reset_link_expires_after_an_hour(api: Api, smtp: SmtpServer) -> None:
    user = await new_user(api)
    await api.client.post("/dashboard/password-reset", data={"email": user.email})
    [message] = await smtp.mailbox.wait_for(1)
    api.clock.advance(hours=1, seconds=1)
    assert (await api.client.get(link_in(message))).status_code == 404


async def test_a_user_lists_and_ends_its_own_sessions_only_once_confirmed(api: Api) -> None:
    user = await new_user(api)
    first, _ = await signed_in(api, user)
    second, csrf = await signed_in(api, user)
    page = await api.client.get("/dashboard/account", headers=second)
    assert page.status_code == 200 and "this session" in page.text
    hashes = re.findall(r'data-session="([0-9a-f]{64})"', page.text)
    assert len(hashes) == 1  # the other session (the current one has no End button)
    asking = await api.client.get(f"/dashboard/account/sessions/revoke?session={hashes[0]}", headers=second)
    assert asking.status_code == 200 and "End this session?" in asking.text
    assert 'name="confirm" value="end"' in asking.text and hashes[0] in asking.text
    # without the confirmation the post asks again and ends nothing
    unconfirmed = await post(api, "/dashboard/account/sessions/revoke", second, csrf, session=hashes[0])
    assert unconfirmed.status_code == 200 and "End this session?" in unconfirmed.text
    assert (await api.client.get("/dashboard", headers=first, follow_redirects=False)).status_code == 200
    stranger = await new_user(api)
    stranger_headers, stranger_csrf = await signed_in(api, stranger)
    assert (await api.client.get(f"/dashboard/account/sessions/revoke?session={hashes[0]}",
                                 headers=stranger_headers)).status_code == 404
    assert (await post(api, "/dashboard/account/sessions/revoke", stranger_headers, stranger_csrf,
                       session=hashes[0], confirm="end")).status_code == 404
    ended = await post(api, "/dashboard/account/sessions/revoke", second, csrf, session=hashes[0], confirm="end")
    assert ended.status_code == 303
    assert (await api.client.get("/dashboard", headers=first, follow_redirects=False)).status_code == 303
    assert (await api.client.get("/dashboard", headers=second)).status_code == 200


async def test_an_invitation_is_withdrawn_only_once_confirmed(api: Api, smtp: SmtpServer) -> None:
    owner = await new_user(api)
    headers, csrf = await signed_in(api, owner)
    assert (await post(api, "/dashboard/users/invite", headers, csrf, email="late@example.com",
                       role="viewer")).status_code == 303
    [invitation] = await smtp.mailbox.wait_for(1)
    listed = await api.client.get("/dashboard/users", headers=headers)
    [link_id] = re.findall(r'href="/dashboard/users/invitations/(\d+)/revoke"', listed.text)
    path = f"/dashboard/users/invitations/{link_id}/revoke"
    asking = await api.client.get(path, headers=headers)
    assert asking.status_code == 200 and "Withdraw the invitation of late@example.com?" in asking.text
    assert 'name="confirm" value="withdraw"' in asking.text
    unconfirmed = await post(api, path, headers, csrf)
    assert unconfirmed.status_code == 200 and "Withdraw the invitation" in unconfirmed.text
    assert (await api.client.get(link_in(invitation))).status_code == 200  # the link still works
    stranger_headers, stranger_csrf = await signed_in(api, await new_user(api))
    assert (await api.client.get(path, headers=stranger_headers)).status_code == 404
    assert (await post(api, path, stranger_headers, stranger_csrf, confirm="withdraw")).status_code == 404
    withdrawn = await post(api, path, headers, csrf, confirm="withdraw")
    assert withdrawn.status_code == 303
    assert (await api.client.get(link_in(invitation))).status_code == 404
    assert "late@example.com" not in (await api.client.get("/dashboard/users", headers=headers)).text
    assert (await api.client.get(path, headers=headers)).status_code == 404
