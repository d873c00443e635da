"""Dashboard sessions feature: signing in and out (``application/sessions.py``), sessions stored in the database
(``dashboard_sessions``, so every process shares them) and a recurring purge of expired ones.

Its HTTP side: ``/auth/login``, ``/auth/logout``, ``/auth/session`` (``entrypoints/http/routes/sessions.py``),
the session authenticator (``entrypoints/http/authentication.py``) and the back-office at ``/dashboard``
(``entrypoints/http/dashboard``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.accounts import InMemoryUserLinkRepository
from adapters.memory.sessions import InMemorySessionStore
from adapters.sql.accounts import SqlUserLinkRepository
from adapters.sql.sessions import SqlSessionStore
from application import mfa, team
from application import sessions as cases
from application.jobs import JobKind
from application.ports.accounts import UserLinkRepository
from application.ports.sessions import SessionStore
from domain.sessions import SessionPolicy
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

KIND = cases.PURGE_JOB


@dataclass(frozen=True)
class SessionSettings:
    """PARLEY_SESSION_*: how long a dashboard session lives and the sign-in throttle."""

    ENV_PREFIX = "SESSION_"

    idle_minutes: float = 30.0
    """A session not used for this long ends."""
    absolute_hours: float = 12.0
    """A session ends this long after sign-in, used or not."""
    login_failures: int = 5
    """Failed sign-ins allowed per email in the window; the next attempts get 429."""
    login_window_minutes: int = 15
    """The window of the sign-in throttle (fixed, aligned to the clock)."""
    login_failures_per_address: int = 20
    """Failed sign-ins allowed per client address in the window, whatever the emails; the next attempts get 429."""
    login_checks_per_address: int = 2
    """Sign-ins from one client address whose password is being checked at once, per server process; more get
    429 at once."""

    def policy(self) -> SessionPolicy:
        return SessionPolicy(idle=timedelta(minutes=self.idle_minutes), absolute=timedelta(hours=self.absolute_hours))

    def throttle(self) -> cases.LoginThrottle:
        return cases.LoginThrottle(self.login_failures, timedelta(minutes=self.login_window_minutes),
                                   self.login_failures_per_address)


class SessionsProvider(Provider):
    scope = Scope.REQUEST
    use_cases = provide_all(cases.Login, cases.ResumeSession, cases.DescribeSession, cases.Logout, cases.PurgeSessions,
                            cases.ActAs)
    team_cases = provide_all(team.ListTeam, team.InviteUser, team.ReadLink, team.AcceptInvitation,
                             team.RequestPasswordReset, team.ResetPassword, team.ChangeRole, team.RemoveUser,
                             team.RevokeInvitation, team.ListSessions, team.RevokeSession)
    mfa_cases = provide_all(mfa.StartMfaEnrolment, mfa.ConfirmMfa, mfa.DisableMfa, mfa.SetMfaRequired,
                            mfa.Reauthenticate)

    @provide(scope=Scope.APP)
    def policy(self, section: SessionSettings) -> SessionPolicy:
        return section.policy()

    @provide(scope=Scope.APP)
    def throttle(self, section: SessionSettings) -> cases.LoginThrottle:
        return section.throttle()

    @provide(scope=Scope.APP)
    def checks(self, section: SessionSettings) -> cases.PasswordChecks:
        return cases.PasswordChecks(section.login_checks_per_address)


class SqlSessionsProvider(Provider):
    scope = Scope.REQUEST
    store = provide(SqlSessionStore, provides=SessionStore)
    links = provide(SqlUserLinkRepository, provides=UserLinkRepository)


class MemorySessionsProvider(Provider):
    scope = Scope.REQUEST
    store = provide(InMemorySessionStore, provides=SessionStore)
    links = provide(InMemoryUserLinkRepository, provides=UserLinkRepository)


def purge_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return cases.purge_job(ScopedUnits(container))


FEATURE = Feature(
    name="sessions",
    providers=(SessionsProvider,),
    sql=SqlSessionsProvider,
    memory=MemorySessionsProvider,
    jobs=[purge_job],
    settings=SessionSettings,
)
