"""Dashboard sessions: signing in (with a throttle on failed attempts per email and per client address), resuming
a session from its cookie, describing it and signing out.

Only the SHA-256 of a session id is stored (``domain/sessions.py``); the id itself is returned once, at sign-in,
for the cookie. Every sign-in opens a new session id, and ends the one the browser presented, if any (no session
fixation). Time comes from the ``Clock`` port; password work from the async ``PasswordHasher`` port (off the event
loop).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from application.jobs import JobKind, clock_now
from application.ports.accounts import OrganizationRepository, RateLimiter, UserRepository
from application.ports.jobs import ClaimedJob
from application.ports.passwords import OneTimePasswords, PasswordHasher
from application.ports.platform import Clock, Random, UnitOfWork, Units
from application.ports.secrets import SecretBox
from application.ports.sessions import SessionStore
from application.principals import AuthenticationFailed
from domain import sessions as rules
from domain.errors import NotFound, SubOrgForbidden, ValidationFailed
from domain.organizations import Organization
from domain.rate_limit import Window
from domain.roles import Role
from domain.sessions import Session, SessionPolicy

log = logging.getLogger("parley.sessions")

MAX_EMAIL = 320
MAX_PASSWORD = 1024  # argon2 hashes any length; an unbounded one is a cheap way to make the server work
MAX_SESSION_ID = 128


class LoginFailed(AuthenticationFailed):
    """Unknown email or wrong password (one answer for both)."""

    code = "INVALID_CREDENTIALS"


class LoginThrottled(Exception):
    """Too many failed sign-ins for this email, or from this client address, in the window, or too many sign-ins
    from this address being checked at this moment: refused without looking at the password. ``source``:
    ``email``, ``address`` or ``concurrency``."""

    _REASONS = {"email": "Too many failed sign-ins for this email",
                "address": "Too many failed sign-ins from this address",
                "concurrency": "Too many sign-ins from this address at once"}

    def __init__(self, retry_after: int, source: str = "email") -> None:
        self.reason = self._REASONS[source]
        super().__init__(f"{self.reason}; try again later")
        self.retry_after, self.source = retry_after, source


class PasswordChecks:
    """How many password verifications run at once per client address, in this process: an argon2 check costs
    tens of milliseconds of CPU, so one address must not make the server run many at a time. Held by the process
    (one per process); the event loop runs ``enter`` and ``leave`` without interleaving, so the count is exact."""

    def __init__(self, per_address: int = 2) -> None:
        self.per_address = per_address
        self._running: dict[str, int] = {}

    def enter(self, address: str) -> bool:
        """Take a place for ``address``; False when it already has ``per_address`` checks running."""
        running = self._running.get(address, 0)
        if running >= self.per_address:
            return False
        self._running[address] = running + 1
        return True

    def leave(self, address: str) -> None:
        running = self._running.get(address, 0) - 1
        if running > 0:
            self._running[address] = running
        else:
            self._running.pop(address, None)


class MfaRequired(AuthenticationFailed):
    """The password is right, and the account signs in with a code from its authenticator app as well: send
    ``totp`` with it."""

    code = "MFA_REQUIRED"


class SessionInvalid(AuthenticationFailed):
    """No such session, or it expired or was signed out."""

    code = "INVALID_SESSION"


@dataclass(frozen=True, slots=True)
class LoginThrottle:
    """Failed sign-ins allowed per email (bucket ``login:<sha256 of the email>``) and per client address (bucket
    ``login-address:<address>``: one address trying many emails), each in the same fixed window."""

    failures: int = 5
    window: timedelta = timedelta(minutes=15)
    failures_per_address: int = 20

    @property
    def windows(self) -> tuple[Window, ...]:
        return (Window(int(self.window.total_seconds()), self.failures),)

    @property
    def address_windows(self) -> tuple[Window, ...]:
        return (Window(int(self.window.total_seconds()), self.failures_per_address),)


@dataclass(frozen=True, slots=True)
class SessionView:
    user_id: int
    email: str
    organization_id: int
    csrf_token: str = field(repr=False)
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class OpenedSession:
    session_id: str = field(repr=False)  # for the cookie: shown once, never stored
    session: Session
    email: str
    expires_at: datetime

    def view(self) -> SessionView:
        session = self.session
        return SessionView(session.user_id, self.email, session.organization_id, session.csrf_token,
                           self.expires_at)


@dataclass(frozen=True, slots=True)
class LoginCommand:
    email: str
    password: str = field(repr=False)
    replacing: str | None = field(default=None, repr=False)  # the session id the browser sent, if any
    client_address: str = ""  # where the attempt came from (its own throttle); empty: no address throttle
    totp: str | None = field(default=None, repr=False)  # the authenticator app's code (two-factor sign-in)


class Login:
    _decoy: str | None = None  # a hash to verify against when the email is unknown (same work either way)

    def __init__(self, users: UserRepository, orgs: OrganizationRepository, sessions: SessionStore,
                 passwords: PasswordHasher, limiter: RateLimiter, clock: Clock, random: Random,
                 policy: SessionPolicy, throttle: LoginThrottle, checks: PasswordChecks, uow: UnitOfWork,
                 otp: OneTimePasswords, box: SecretBox) -> None:
        self.users, self.orgs, self.sessions, self.passwords = users, orgs, sessions, passwords
        self.limiter, self.clock, self.random, self.policy, self.throttle = limiter, clock, random, policy, throttle
        self.checks, self.uow, self.otp, self.box = checks, uow, otp, box

    async def execute(self, command: LoginCommand) -> OpenedSession:
        """Every attempt takes a failed-attempt slot of its email and of its address before the password is
        looked at (the limiter counts atomically, in its own transaction, shared by every process), and gives
        them back when it succeeds: however many attempts run at once, no more than the budget are checked."""
        email = command.email.strip().lower()
        if not email or len(email) > MAX_EMAIL:
            raise ValidationFailed.field("email", f"must be an email address of at most {MAX_EMAIL} characters")
        if not command.password or len(command.password) > MAX_PASSWORD:
            raise ValidationFailed.field("password", f"must be 1 to {MAX_PASSWORD} characters")
        address = command.client_address
        if address and not self.checks.enter(address):
            raise LoginThrottled(1, "concurrency")
        try:
            return await self._attempt(command, email)
        finally:
            if address:
                self.checks.leave(address)

    async def _attempt(self, command: LoginCommand, email: str) -> OpenedSession:
        now = self.clock.now()
        throttles = [("address", "login-address:" + command.client_address, self.throttle.address_windows)
                     ] if command.client_address else []
        throttles.append(("email", "login:" + hashlib.sha256(email.encode("utf-8")).hexdigest(),
                          self.throttle.windows))
        found = await self.users.find_by_email(email)
        # the slots are taken after the read, and the read's transaction ends before the password is checked: no
        # transaction stays open during the check (on SQLite it would hold the write lock)
        taken: list[tuple[str, tuple[Window, ...]]] = []
        for source, bucket, windows in throttles:
            decision = await self.limiter.hit(bucket, windows, now)
            if not decision.allowed:
                for held, held_windows in taken:  # refused without a check: it is no failed attempt
                    await self.limiter.release(held, held_windows, now)
                raise LoginThrottled(decision.retry_after or 1, source)
            taken.append((bucket, windows))
        await self.uow.commit()  # the slots taken, kept whatever the check finds
        stored = found[2] if found is not None else await self._decoy_hash()
        matches = await self.passwords.verify(command.password, stored)
        organization = await self.orgs.get(found[1]) if found is not None and matches else None
        if found is None or not matches or organization is None:
            raise LoginFailed("Email or password is not correct")  # the slots stay taken: failed attempts
        sealed = await self.users.mfa_secret(found[0])
        account = await self.users.account(found[0])
        if account is not None and account.mfa and sealed:
            if not command.totp:
                for bucket, windows in taken:  # the password was right: no failed attempt
                    await self.limiter.release(bucket, windows, now)
                raise MfaRequired("Enter the code your authenticator app shows (totp)")
            if not self.otp.verify(self.box.open(sealed), command.totp, now):
                raise LoginFailed("The code is not correct")  # a failed attempt: the slots stay taken
        for bucket, windows in taken:
            await self.limiter.release(bucket, windows, now)
        if command.replacing:
            await self.sessions.delete(rules.digest(command.replacing))
        user_id, organization_id, _ = found
        if self.passwords.needs_rehash(stored):
            await self.users.set_password_hash(user_id, await self.passwords.hash(command.password))
        session_id = self.random.token(rules.ID_BYTES)
        session = Session(rules.digest(session_id), user_id, organization_id, self.random.token(rules.CSRF_BYTES),
                          now, now)
        await self.sessions.add(session)
        return OpenedSession(session_id, session, email, session.expires_at(self.policy))

    async def _decoy_hash(self) -> str:
        if Login._decoy is None:
            Login._decoy = await self.passwords.hash(self.random.token(16))
        return Login._decoy


@dataclass(frozen=True, slots=True)
class ActiveSession:
    session: Session
    organization: Organization
    expires_at: datetime
    role: Role
    """The user's role now (read with the session: a changed role holds from the next request)."""
    mfa_missing: bool = False
    """The organization requires two-factor sign-in and the user has not turned it on yet: it enrols before
    anything else."""
    acting: Organization | None = None
    """The client the session works in (``Session.acting_organization_id``), when it is still a live
    sub-organization of the user's partner organization; None: the user's own organization."""

    @property
    def working_in(self) -> Organization:
        """The organization the session's pages act in."""
        return self.acting or self.organization


@dataclass(frozen=True, slots=True)
class ResumeSessionCommand:
    session_id: str = field(repr=False)
    touch: bool = True
    """Record the use (a page, a request). A live view's stream checks its session without using it: an open page
    does not keep its session alive."""


class ResumeSession:
    """A session id from a cookie -> the live session and its organization; its last use is recorded (at most
    once a minute). Raises ``SessionInvalid``."""

    def __init__(self, sessions: SessionStore, orgs: OrganizationRepository, users: UserRepository, clock: Clock,
                 policy: SessionPolicy) -> None:
        self.sessions, self.orgs, self.users, self.clock, self.policy = sessions, orgs, users, clock, policy

    async def execute(self, command: ResumeSessionCommand) -> ActiveSession:
        if not command.session_id or len(command.session_id) > MAX_SESSION_ID:
            raise SessionInvalid("The session is not valid")
        session = await self.sessions.get(rules.digest(command.session_id))
        if session is None:
            raise SessionInvalid("The session is not valid")
        now = self.clock.now()
        if not session.is_live(now, self.policy):
            raise SessionInvalid("The session expired; sign in again")
        organization = await self.orgs.get(session.organization_id)
        account = await self.users.account(session.user_id)
        if organization is None or account is None or account.organization_id != session.organization_id:
            raise SessionInvalid("The session is not valid")
        if command.touch and session.needs_touch(now):
            await self.sessions.touch(session.id_hash, now)
            session = session.seen(now)
        return ActiveSession(session, organization, session.expires_at(self.policy), account.role,
                             organization.mfa_required and not account.mfa, await self._acting(session, organization))

    async def _acting(self, session: Session, organization: Organization) -> Organization | None:
        """The client the session switched into, while it is still the partner's live child (else its own)."""
        if session.acting_organization_id is None or not organization.is_partner:
            return None
        child = await self.orgs.get(session.acting_organization_id)
        return child if child is not None and child.parent_id == organization.id else None


@dataclass(frozen=True, slots=True)
class DescribeSessionCommand:
    session: Session
    expires_at: datetime


class DescribeSession:
    """Who is signed in: the user's email, the organization and the session's CSRF token."""

    def __init__(self, users: UserRepository) -> None:
        self.users = users

    async def execute(self, command: DescribeSessionCommand) -> SessionView:
        session = command.session
        user = await self.users.get(session.user_id)
        if user is None:
            raise SessionInvalid("The session's user no longer exists")
        return SessionView(session.user_id, user[2], session.organization_id, session.csrf_token,
                           command.expires_at)


@dataclass(frozen=True, slots=True)
class LogoutCommand:
    session_id: str = field(repr=False)


class Logout:
    """Ends the session on the server: its cookie opens nothing afterwards."""

    def __init__(self, sessions: SessionStore) -> None:
        self.sessions = sessions

    async def execute(self, command: LogoutCommand) -> None:
        await self.sessions.delete(rules.digest(command.session_id))


@dataclass(frozen=True, slots=True)
class PurgeSessionsCommand:
    pass


class PurgeSessions:
    """Forgets sessions past their idle or absolute expiry (housekeeping)."""

    def __init__(self, sessions: SessionStore, clock: Clock, policy: SessionPolicy) -> None:
        self.sessions, self.clock, self.policy = sessions, clock, policy

    async def execute(self, command: PurgeSessionsCommand) -> int:
        now = self.clock.now()
        return await self.sessions.purge(now - self.policy.idle - rules.TOUCH_PRECISION, now - self.policy.absolute)


PURGE_JOB = "sessions.purge"
PURGE_INTERVAL = timedelta(minutes=30)


def purge_job(units: Units) -> JobKind:
    """``sessions.purge``: forgets expired sessions in a unit of work, then due again after ``PURGE_INTERVAL``."""

    async def purge(job: ClaimedJob) -> datetime:
        purged = await units.execute(PurgeSessions, PurgeSessionsCommand())
        if purged:
            log.info("purged %d expired dashboard sessions", purged)
        return await clock_now(units) + PURGE_INTERVAL

    return JobKind(PURGE_JOB, purge, recurring=True)
@dataclass(frozen=True, slots=True)
class ActAsCommand:
    session_hash: str
    organization_id: int
    """The session's own organization (a partner)."""
    client_id: int | None
    """The sub-organization to work in; None: back to the partner's own."""


class ActAs:
    """A partner's dashboard session switches into one of its clients (its sub-organizations), as an API key sends
    ``X-Sub-Org-Id``: from the next page on, its pages act in the client, with the user's role; or back to the
    partner's own organization. Only a partner has clients (403 ``sub_org_forbidden``); an organization that is not
    one of its live children is 404."""

    def __init__(self, sessions: SessionStore, orgs: OrganizationRepository) -> None:
        self.sessions, self.orgs = sessions, orgs

    async def execute(self, command: ActAsCommand) -> Organization:
        own = await self.orgs.get(command.organization_id)
        if own is None:
            raise NotFound("organization", command.organization_id)
        if command.client_id is None:
            await self.sessions.act_as(command.session_hash, None)
            return own
        if not own.is_partner:
            raise SubOrgForbidden("only a partner organization has clients to work in")
        client = await self.orgs.get(command.client_id)
        if client is None or client.parent_id != own.id:
            raise NotFound("organization", command.client_id)
        await self.sessions.act_as(command.session_hash, command.client_id)
        return client
