"""Two-factor sign-in (TOTP, RFC 6238) per dashboard user, required for everyone when the organization says so,
and asking a session's user again ("sudo mode") before the actions a stolen session must not make permanent:
minting API keys, changing billing, managing users.

A user enrols from the account page: a secret is made (``OneTimePasswords``) and kept sealed (``SecretBox``); the
page shows it as an ``otpauth://`` URI and as a key to type into an authenticator app, and two-factor sign-in is on
once a code of it is entered. From then on, signing in takes the password and a code. A session counts as freshly
proven for ``domain.sessions.SUDO`` (5 minutes) after sign-in or after its user gave the password (or a code) again
(``Reauthenticate``, at most 5 tries in 15 minutes per user).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from application.context import Actor
from application.ports.accounts import OrganizationRepository, RateLimiter, UserRepository
from application.ports.passwords import OneTimePasswords, PasswordHasher
from application.ports.platform import Clock
from application.ports.secrets import SecretBox
from application.ports.sessions import SessionStore
from domain.errors import Conflict, Forbidden, TooManyRequests, ValidationFailed
from domain.rate_limit import Window
from domain.roles import MANAGERS
from domain.users import UserAccount

ISSUER = "Parley"
REAUTH_WINDOWS = (Window(900, 5),)


@dataclass(frozen=True, slots=True)
class Enrolment:
    enabled: bool
    secret: str = field(default="", repr=False)
    uri: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class MfaUserCommand:
    user_id: int


async def _account(users: UserRepository, user_id: int) -> UserAccount:
    account = await users.account(user_id)
    if account is None:
        raise Forbidden("sign in again")
    return account


class StartMfaEnrolment:
    """The enrolment of the user's authenticator app: the secret being enrolled (the same until it is confirmed),
    or ``enabled`` when two-factor sign-in is on already."""

    def __init__(self, users: UserRepository, otp: OneTimePasswords, box: SecretBox) -> None:
        self.users, self.otp, self.box = users, otp, box

    async def execute(self, command: MfaUserCommand) -> Enrolment:
        account = await _account(self.users, command.user_id)
        if account.mfa:
            return Enrolment(True)
        sealed = await self.users.mfa_secret(account.id)
        secret = self.box.open(sealed) if sealed else self.otp.new_secret()
        if not sealed:
            await self.users.set_mfa(account.id, self.box.seal(secret), None)
        return Enrolment(False, secret, self.otp.uri(secret, account.email, ISSUER))


@dataclass(frozen=True, slots=True)
class ConfirmMfaCommand:
    user_id: int
    code: str = field(repr=False)


class ConfirmMfa:
    """Two-factor sign-in on, once a code of the secret being enrolled is right."""

    def __init__(self, users: UserRepository, otp: OneTimePasswords, box: SecretBox, clock: Clock) -> None:
        self.users, self.otp, self.box, self.clock = users, otp, box, clock

    async def execute(self, command: ConfirmMfaCommand) -> None:
        account = await _account(self.users, command.user_id)
        sealed = await self.users.mfa_secret(account.id)
        if account.mfa or not sealed:
            raise Conflict("two-factor sign-in is on already" if account.mfa else "start the enrolment first")
        now = self.clock.now()
        if not self.otp.verify(self.box.open(sealed), command.code, now):
            raise ValidationFailed.field("code", "is not the code your app shows now")
        await self.users.set_mfa(account.id, sealed, now)


@dataclass(frozen=True, slots=True)
class DisableMfaCommand:
    user_id: int
    organization_id: int


class DisableMfa:
    """Two-factor sign-in off (not while the organization requires it)."""

    def __init__(self, users: UserRepository, orgs: OrganizationRepository) -> None:
        self.users, self.orgs = users, orgs

    async def execute(self, command: DisableMfaCommand) -> None:
        organization = await self.orgs.get(command.organization_id)
        if organization is not None and organization.mfa_required:
            raise Conflict("your organization requires two-factor sign-in")
        await self.users.set_mfa(command.user_id, None, None)


@dataclass(frozen=True, slots=True)
class SetMfaRequiredCommand:
    actor: Actor
    manager_id: int | None
    required: bool


class SetMfaRequired:
    """Owners and admins require (or stop requiring) two-factor sign-in of every user of the organization; a user
    without it is sent to enrol at the next page."""

    def __init__(self, users: UserRepository, orgs: OrganizationRepository) -> None:
        self.users, self.orgs = users, orgs

    async def execute(self, command: SetMfaRequiredCommand) -> None:
        manager = await self.users.account(command.manager_id) if command.manager_id is not None else None
        if manager is None or manager.organization_id != command.actor.organization_id or \
                manager.role not in MANAGERS:
            raise Forbidden("only an owner or an admin changes this")
        await self.orgs.set_mfa_required(command.actor.organization_id, command.required)


@dataclass(frozen=True, slots=True)
class ReauthenticateCommand:
    user_id: int
    session_hash: str
    password: str = field(default="", repr=False)
    code: str = field(default="", repr=False)
    """A user with two-factor sign-in on may give a code instead of the password."""


class Reauthenticate:
    """The session's user proves itself again: the password (or, with two-factor sign-in on, a code); the session
    counts as freshly proven from now. At most 5 tries in 15 minutes per user (429 after)."""

    def __init__(self, users: UserRepository, sessions: SessionStore, passwords: PasswordHasher,
                 otp: OneTimePasswords, box: SecretBox, limiter: RateLimiter, clock: Clock) -> None:
        self.users, self.sessions, self.passwords, self.otp = users, sessions, passwords, otp
        self.box, self.limiter, self.clock = box, limiter, clock

    async def execute(self, command: ReauthenticateCommand) -> None:
        account = await _account(self.users, command.user_id)
        now = self.clock.now()
        bucket = f"reauth:user:{account.id}"
        decision = await self.limiter.hit(bucket, REAUTH_WINDOWS, now)
        if not decision.allowed:
            raise TooManyRequests("too many tries; try again later", retry_after_seconds=decision.retry_after or 60)
        if await self._proven(account, command):
            await self.limiter.release(bucket, REAUTH_WINDOWS, now)
            await self.sessions.verified(command.session_hash, now)
            return
        raise ValidationFailed.field("code" if command.code and not command.password else "password",
                                     "is not correct")

    async def _proven(self, account: UserAccount, command: ReauthenticateCommand) -> bool:
        if command.code and account.mfa:
            sealed = await self.users.mfa_secret(account.id)
            return bool(sealed) and self.otp.verify(self.box.open(sealed or ""), command.code, self.clock.now())
        found = await self.users.find_by_email(account.email)
        return found is not None and bool(command.password) and await self.passwords.verify(command.password,
                                                                                              found[2])
