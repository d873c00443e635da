"""Dashboard session use cases on the memory backend: a sign-in opens a session that lives 30 idle minutes and
12 hours at most, a new sign-in or a sign-out ends the old one, a wrong password and an unknown email fail
alike, five failures for an email (or twenty from one address) throttle it for the window, and housekeeping
forgets expired sessions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.accounts import CreateUser, CreateUserCommand
from application.sessions import (
    DescribeSession,
    DescribeSessionCommand,
    Login,
    LoginCommand,
    LoginFailed,
    LoginThrottled,
    Logout,
    LogoutCommand,
    OpenedSession,
    PurgeSessions,
    PurgeSessionsCommand,
    ResumeSession,
    ResumeSessionCommand,
    SessionInvalid,
)
from domain.errors import ValidationFailed
from tests.application.conftest import App

PASSWORD = "correct horse battery"


async def user(app: App, email: str = "ops@example.test") -> tuple[int, str]:
    organization_id = await app.organization()
    await app.run(CreateUser, CreateUserCommand(organization_id, email, PASSWORD))
    return organization_id, email


async def login(app: App, email: str, password: str = PASSWORD, **extra: str) -> OpenedSession:
    return await app.run(Login, LoginCommand(email, password, **extra))  # type: ignore[no-any-return]


async def resume(app: App, opened: OpenedSession) -> None:
    await app.run(ResumeSession, ResumeSessionCommand(opened.session_id))


async def test_a_session_opens_the_users_organization_and_describes_the_user(app: App) -> None:
    organization_id, email = await user(app)
    opened = await login(app, "  OPS@Example.test ")  # the email as typed
    active = await app.run(ResumeSession, ResumeSessionCommand(opened.session_id))
    # idle for 30 minutes after the stored last use, plus the minute a later use may not have been written in
    assert (active.organization.id, active.expires_at) == (organization_id, app.clock.now() + timedelta(minutes=31))
    view = await app.run(DescribeSession, DescribeSessionCommand(active.session, active.expires_at))
    assert (view.email, view.organization_id, view.csrf_token) == (email, organization_id, opened.session.csrf_token)
    assert opened.session_id != opened.session.id_hash  # only the digest is stored


async def test_idle_and_absolute_expiry(app: App) -> None:
    _, email = await user(app)
    opened = await login(app, email)
    for _ in range(4):  # used every 29 minutes, it stays open ...
        app.clock.advance(minutes=29)
        await resume(app, opened)
    app.clock.advance(minutes=31, seconds=1)  # ... until 30 idle minutes (never early: up to a minute late)
    with pytest.raises(SessionInvalid):
        await resume(app, opened)
    busy = await login(app, email)
    for _ in range(12 * 3 - 1):
        app.clock.advance(minutes=20)
        await resume(app, busy)
    app.clock.advance(minutes=20)
    with pytest.raises(SessionInvalid):  # 12 hours after sign-in, however busy
        await resume(app, busy)


async def test_a_new_sign_in_or_a_sign_out_ends_the_old_session(app: App) -> None:
    _, email = await user(app)
    first = await login(app, email)
    second = await login(app, email, replacing=first.session_id)
    assert second.session_id != first.session_id
    with pytest.raises(SessionInvalid):
        await resume(app, first)
    await resume(app, second)
    await app.run(Logout, LogoutCommand(second.session_id))
    with pytest.raises(SessionInvalid):
        await resume(app, second)
    for planted in ("", "x" * 129, "a-session-id-nobody-issued"):
        with pytest.raises(SessionInvalid):
            await app.run(ResumeSession, ResumeSessionCommand(planted))


async def test_a_wrong_password_and_an_unknown_email_fail_alike_and_bad_input_names_its_field(app: App) -> None:
    _, email = await user(app)
    with pytest.raises(LoginFailed) as wrong:
        await login(app, email, "wrong password")
    with pytest.raises(LoginFailed) as unknown:
        await login(app, "nobody@example.test")
    assert str(wrong.value) == str(unknown.value)
    for bad, field in ((("", PASSWORD), "email"), ((email, ""), "password"), ((email, "p" * 1025), "password")):
        with pytest.raises(ValidationFailed) as refused:
            await login(app, *bad)
        assert field in str(refused.value)


async def test_five_failures_for_an_email_throttle_it_for_the_window_only(app: App) -> None:
    _, email = await user(app)
    _, other = await user(app, "other@example.test")
    for _ in range(5):
        with pytest.raises(LoginFailed):
            await login(app, email, "wrong password")
    with pytest.raises(LoginThrottled) as throttled:  # then refused, the right password too, without looking at it
        await login(app, email)
    assert throttled.value.source == "email" and throttled.value.retry_after >= 1
    await login(app, other)  # another email is not affected
    app.clock.advance(minutes=15)
    await login(app, email)


async def test_failures_from_one_address_throttle_it_whatever_the_email(app: App) -> None:
    _, email = await user(app)
    for n in range(20):  # one failure per email: the per-email throttle never trips
        with pytest.raises(LoginFailed):
            await login(app, f"nobody-{n}@example.test", client_address="203.0.113.7")
    with pytest.raises(LoginThrottled) as throttled:
        await login(app, email, client_address="203.0.113.7")
    assert throttled.value.source == "address"
    await login(app, email, client_address="203.0.113.8")  # another address is not affected


async def test_housekeeping_forgets_only_expired_sessions(app: App) -> None:
    _, email = await user(app)
    await login(app, email)
    app.clock.advance(minutes=32)  # past 30 idle minutes and the minute of write precision
    fresh = await login(app, email)
    assert await app.run(PurgeSessions, PurgeSessionsCommand()) == 1
    await resume(app, fresh)
