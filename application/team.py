"""The team of an organization: its dashboard users and their roles (``domain/roles.py``), invitations by email
(a one-time link, 48 hours) and password resets by email (a one-time link, 1 hour), and each user's sessions.

Owners and admins manage users (the dashboard's users page declares ``organizations:write``, which only their
roles hold); only an owner makes or changes an owner, and an organization always keeps one owner. A link's token
is random (``Random.token``); only its SHA-256 is stored, and it opens once. Emails go out through ``EmailSender``
while the link's row is written, in the same use case: a mail server that does not take the message leaves
nothing behind (503 ``email_not_sent``, the transaction rolled back).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from application.context import Actor
from application.ports.accounts import OrganizationRepository, RateLimiter, UserLinkRepository, UserRepository
from application.ports.passwords import PasswordHasher
from application.ports.platform import Clock, Random
from application.ports.sessions import SessionStore
from application.ports.triggers import EmailFailed, EmailMessage, EmailSender
from domain.errors import Conflict, Forbidden, NotFound, Unavailable, ValidationFailed
from domain.identity import persisted
from domain.rate_limit import Window
from domain.roles import Role, may_assign, parse_role
from domain.sessions import Session
from domain.users import LIFETIMES, TOKEN_BYTES, LinkKind, OneTimeLink, UserAccount, token_digest

MIN_PASSWORD = 8
MAX_PASSWORD = 1024
MAX_EMAIL = 320
RESET_WINDOWS = (Window(3600, 3),)
"""Password-reset emails per address and hour: a public form must not become a way to flood an inbox."""


class EmailNotSent(Unavailable):
    """The mail server did not take the message (503): nothing was kept."""

    code = "email_not_sent"


def check_email(value: str, field_name: str = "email") -> str:
    email = value.strip().lower()
    if not email or len(email) > MAX_EMAIL or "@" not in email or any(c.isspace() for c in email):
        raise ValidationFailed.field(field_name, "must be an email address")
    return email


def check_password(password: str, field_name: str = "password") -> str:
    if len(password) < MIN_PASSWORD or len(password) > MAX_PASSWORD:
        raise ValidationFailed.field(field_name, f"must be {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    return password


async def _send(email: EmailSender, message: EmailMessage) -> None:
    try:
        await email.send(message)
    except EmailFailed as exc:
        raise EmailNotSent(f"the email could not be sent ({exc}); try again later") from exc


async def _manager(users: UserRepository, actor: Actor, user_id: int | None) -> UserAccount:
    """The signed-in user managing the team (owner or admin of the actor's organization)."""
    account = await users.account(user_id) if user_id is not None else None
    if account is None or account.organization_id != actor.organization_id:
        raise Forbidden("only a signed-in owner or admin manages users")
    return account


@dataclass(frozen=True, slots=True)
class Team:
    users: list[UserAccount]
    invitations: list[OneTimeLink]
    mfa_required: bool = False


@dataclass(frozen=True, slots=True)
class ListTeamCommand:
    actor: Actor


class ListTeam:
    def __init__(self, users: UserRepository, links: UserLinkRepository, orgs: OrganizationRepository,
                 clock: Clock) -> None:
        self.users, self.links, self.orgs, self.clock = users, links, orgs, clock

    async def execute(self, command: ListTeamCommand) -> Team:
        org = command.actor.organization_id
        organization = await self.orgs.get(org)
        return Team(await self.users.list_in(org), await self.links.pending_invitations(org, self.clock.now()),
                    bool(organization and organization.mfa_required))


@dataclass(frozen=True, slots=True)
class InviteUserCommand:
    actor: Actor
    inviter_id: int | None
    email: str
    role: str
    link_base: str
    """The dashboard's base URL; the link is ``{link_base}/invitations/<token>``."""


class InviteUser:
    def __init__(self, users: UserRepository, links: UserLinkRepository, orgs: OrganizationRepository,
                 email: EmailSender, clock: Clock, random: Random) -> None:
        self.users, self.links, self.orgs, self.email = users, links, orgs, email
        self.clock, self.random = clock, random

    async def execute(self, command: InviteUserCommand) -> OneTimeLink:
        inviter = await _manager(self.users, command.actor, command.inviter_id)
        email, role = check_email(command.email), parse_role(command.role)
        if not may_assign(inviter.role, role):
            raise Forbidden(f"an {inviter.role} cannot invite an {role}" if inviter.role == Role.ADMIN
                            else "only owners and admins invite users")
        if await self.users.find_by_email(email) is not None:
            raise Conflict("a user with this email exists", details={"field": "email"})
        organization = await self.orgs.get(command.actor.organization_id)
        now, token = self.clock.now(), self.random.token(TOKEN_BYTES)
        link = await self.links.add(OneTimeLink(
            None, command.actor.organization_id, LinkKind.INVITATION, token_digest(token), email, role, None,
            inviter.id, now, now + LIFETIMES[LinkKind.INVITATION]))
        name = organization.name if organization else "Parley"
        await _send(self.email, EmailMessage((email,), f"You are invited to {name} on Parley", (
            f"Hello,\n\n{inviter.email} invites you to join {name} on Parley as {role}.\n\n"
            f"Open this link within 48 hours to choose your password:\n{command.link_base}/invitations/{token}\n\n"
            "If you did not expect this invitation, ignore this email.\n")))
        return link


@dataclass(frozen=True, slots=True)
class LinkRef:
    token: str = field(repr=False)


async def _usable(links: UserLinkRepository, token: str, kind: LinkKind, now: datetime, *,
                  lock: bool = False) -> OneTimeLink:
    link = await links.find(token_digest(token), lock=lock) if 20 <= len(token) <= 128 else None
    if link is None or link.kind != kind or not link.usable(now):
        raise NotFound("link", "this link", field="token")
    return link


class ReadLink:
    """An invitation or reset link still usable (404 otherwise): what its page shows."""

    def __init__(self, links: UserLinkRepository, clock: Clock) -> None:
        self.links, self.clock = links, clock

    async def execute(self, command: ReadLinkCommand) -> OneTimeLink:
        return await _usable(self.links, command.token, command.kind, self.clock.now())


@dataclass(frozen=True, slots=True)
class ReadLinkCommand:
    token: str = field(repr=False)
    kind: LinkKind = LinkKind.INVITATION


@dataclass(frozen=True, slots=True)
class AcceptInvitationCommand:
    token: str = field(repr=False)
    password: str = field(repr=False)


class AcceptInvitation:
    """The invitee's account, with the invitation's role and the password chosen; the link opens once."""

    def __init__(self, users: UserRepository, links: UserLinkRepository, orgs: OrganizationRepository,
                 passwords: PasswordHasher, clock: Clock) -> None:
        self.users, self.links, self.orgs, self.passwords, self.clock = users, links, orgs, passwords, clock

    async def execute(self, command: AcceptInvitationCommand) -> UserAccount:
        password = check_password(command.password)
        password_hash = await self.passwords.hash(password)  # before the row lock: no lock held during the work
        now = self.clock.now()
        link = await _usable(self.links, command.token, LinkKind.INVITATION, now, lock=True)
        if await self.orgs.get(link.organization_id) is None:
            raise NotFound("link", "this link", field="token")
        if await self.users.find_by_email(link.email) is not None:
            raise Conflict("a user with this email exists; sign in instead")
        await self.links.mark_used(persisted(link.id), now)
        user_id = await self.users.add(link.organization_id, link.email, password_hash, now, str(link.role))
        return UserAccount(user_id, link.organization_id, link.email, link.role, now)


@dataclass(frozen=True, slots=True)
class RequestPasswordResetCommand:
    email: str
    link_base: str


class RequestPasswordReset:
    """A reset link by email when the address has an account (at most 3 an hour per address); the same answer
    either way, so the form tells nobody which addresses have accounts."""

    def __init__(self, users: UserRepository, links: UserLinkRepository, email: EmailSender, limiter: RateLimiter,
                 clock: Clock, random: Random) -> None:
        self.users, self.links, self.email, self.limiter = users, links, email, limiter
        self.clock, self.random = clock, random

    async def execute(self, command: RequestPasswordResetCommand) -> None:
        email = check_email(command.email)
        now = self.clock.now()
        bucket = "reset:" + hashlib.sha256(email.encode("utf-8")).hexdigest()
        if not (await self.limiter.hit(bucket, RESET_WINDOWS, now)).allowed:
            return
        found = await self.users.find_by_email(email)
        if found is None:
            return
        user_id, organization_id, _ = found
        token = self.random.token(TOKEN_BYTES)
        account = await self.users.account(user_id)
        await self.links.add(OneTimeLink(
            None, organization_id, LinkKind.PASSWORD_RESET, token_digest(token), email,
            account.role if account else Role.VIEWER, user_id, None, now, now + LIFETIMES[LinkKind.PASSWORD_RESET]))
        await _send(self.email, EmailMessage((email,), "Reset your Parley password", (
            "Hello,\n\nSomeone asked to reset the password of your Parley account.\n\n"
            f"Open this link within an hour to choose a new one:\n{command.link_base}/password-reset/{token}\n\n"
            "If it was not you, ignore this email: your password stays as it is.\n")))


@dataclass(frozen=True, slots=True)
class ResetPasswordCommand:
    token: str = field(repr=False)
    password: str = field(repr=False)


class ResetPassword:
    """The new password; the link opens once, and every session of the user ends."""

    def __init__(self, users: UserRepository, links: UserLinkRepository, sessions: SessionStore,
                 passwords: PasswordHasher, clock: Clock) -> None:
        self.users, self.links, self.sessions, self.passwords, self.clock = users, links, sessions, passwords, clock

    async def execute(self, command: ResetPasswordCommand) -> None:
        password_hash = await self.passwords.hash(check_password(command.password))
        now = self.clock.now()
        link = await _usable(self.links, command.token, LinkKind.PASSWORD_RESET, now, lock=True)
        if link.user_id is None or await self.users.account(link.user_id) is None:
            raise NotFound("link", "this link", field="token")
        await self.links.mark_used(persisted(link.id), now)
        await self.users.set_password_hash(link.user_id, password_hash)
        await self.sessions.delete_for_user(link.user_id)


async def _member(users: UserRepository, actor: Actor, user_id: int) -> UserAccount:
    account = await users.account(user_id)
    if account is None or account.organization_id != actor.organization_id:
        raise NotFound("user", user_id)
    return account


async def _keeps_an_owner(users: UserRepository, organization_id: int, leaving: UserAccount) -> None:
    if leaving.role == Role.OWNER and sum(
            1 for u in await users.list_in(organization_id) if u.role == Role.OWNER) <= 1:
        raise Conflict("an organization keeps at least one owner")


@dataclass(frozen=True, slots=True)
class ChangeRoleCommand:
    actor: Actor
    manager_id: int | None
    user_id: int
    role: str


class ChangeRole:
    def __init__(self, users: UserRepository) -> None:
        self.users = users

    async def execute(self, command: ChangeRoleCommand) -> UserAccount:
        manager = await _manager(self.users, command.actor, command.manager_id)
        role = parse_role(command.role)
        user = await _member(self.users, command.actor, command.user_id)
        if not may_assign(manager.role, role, user.role):
            raise Forbidden("only an owner makes or changes an owner")
        if role != Role.OWNER:
            await _keeps_an_owner(self.users, command.actor.organization_id, user)
        await self.users.set_role(user.id, str(role))
        return UserAccount(user.id, user.organization_id, user.email, role, user.created_at)


@dataclass(frozen=True, slots=True)
class RemoveUserCommand:
    actor: Actor
    manager_id: int | None
    user_id: int


class RemoveUser:
    """The user and every session of it: its cookie opens nothing afterwards."""

    def __init__(self, users: UserRepository, sessions: SessionStore) -> None:
        self.users, self.sessions = users, sessions

    async def execute(self, command: RemoveUserCommand) -> None:
        manager = await _manager(self.users, command.actor, command.manager_id)
        user = await _member(self.users, command.actor, command.user_id)
        if not may_assign(manager.role, user.role, user.role):
            raise Forbidden("only an owner removes an owner")
        await _keeps_an_owner(self.users, command.actor.organization_id, user)
        await self.sessions.delete_for_user(user.id)
        await self.users.delete(user.id)


@dataclass(frozen=True, slots=True)
class RevokeInvitationCommand:
    actor: Actor
    link_id: int


class RevokeInvitation:
    def __init__(self, links: UserLinkRepository, clock: Clock) -> None:
        self.links, self.clock = links, clock

    async def execute(self, command: RevokeInvitationCommand) -> None:
        if not await self.links.revoke(command.actor.organization_id, command.link_id, self.clock.now()):
            raise NotFound("invitation", command.link_id)


@dataclass(frozen=True, slots=True)
class ListSessionsCommand:
    user_id: int


class ListSessions:
    """The signed-in user's own sessions, newest first."""

    def __init__(self, sessions: SessionStore) -> None:
        self.sessions = sessions

    async def execute(self, command: ListSessionsCommand) -> list[Session]:
        return await self.sessions.list_for_user(command.user_id)


@dataclass(frozen=True, slots=True)
class RevokeSessionCommand:
    user_id: int
    id_hash: str
    """A session of this user (as listed); another user's is 404."""


class RevokeSession:
    def __init__(self, sessions: SessionStore) -> None:
        self.sessions = sessions

    async def execute(self, command: RevokeSessionCommand) -> None:
        found = await self.sessions.get(command.id_hash) if len(command.id_hash) == 64 else None
        if found is None or found.user_id != command.user_id:
            raise NotFound("session", "this session")
        await self.sessions.delete(command.id_hash)
