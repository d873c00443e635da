"""Settings from PARLEY_* environment variables (and an optional .env file), in sections.

``Settings`` is the platform's section (database, secret key, limits shared by every feature); each feature
declares its own section (a frozen dataclass, ``Feature.settings``) next to its providers. One loader reads
every section: field ``name`` of a section with prefix ``P`` comes from ``PARLEY_<P><NAME>``; an unset or
empty variable keeps the default; a value that does not parse fails at start-up with a ``SettingsError``
naming the variable. The composition root provides ``Settings`` and every section through dishka.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from domain.patching import Dataclass

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./var/parley.db"
ENV_PREFIX = "PARLEY_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

S = TypeVar("S", bound=Dataclass)


class SettingsError(ValueError):
    """A PARLEY_* variable holds a value its setting cannot take."""


class Backend(StrEnum):
    """Where Parley keeps its data, derived once from PARLEY_DATABASE_URL."""

    MEMORY = "memory"
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"

    @classmethod
    def of(cls, database_url: str) -> Backend:
        scheme = database_url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in database_url else ""
        found = {"memory": cls.MEMORY, "sqlite": cls.SQLITE, "postgresql": cls.POSTGRESQL,
                 "postgres": cls.POSTGRESQL}.get(scheme)
        if found is None:
            raise SettingsError(f"{ENV_PREFIX}DATABASE_URL={database_url!r}: expected memory://, "
                                "sqlite+aiosqlite://... or postgresql+asyncpg://...")
        return found

    @property
    def sql(self) -> bool:
        return self is not Backend.MEMORY


def _read_dotenv(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        values[name.strip()] = value.strip().strip('"').strip("'")
    return values


def _parse(variable: str, kind: Any, raw: str) -> Any:
    text = raw.strip()
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise SettingsError(f"{variable}={raw!r}: expected true or false (1/0, yes/no, on/off)")
    if kind is Path:
        return Path(text)
    if kind == tuple[str, ...]:  # a comma-separated list
        return tuple(item.strip() for item in text.split(",") if item.strip())
    try:
        return msgspec.convert(text, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(f"{variable}={raw!r}: {exc}") from None


def load_section(section: type[S], environ: Mapping[str, str]) -> S:
    """A section from ``PARLEY_<PREFIX><FIELD>`` variables; fields not marked ``env=False`` in their
    metadata are read, the others keep their defaults."""
    prefix = ENV_PREFIX + getattr(section, "ENV_PREFIX", "")
    hints = typing.get_type_hints(section)
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(section):
        if not spec.init or not spec.metadata.get("env", True):
            continue
        variable = prefix + spec.name.upper()
        raw = environ.get(variable)
        if raw is not None and raw.strip():
            values[spec.name] = _parse(variable, hints[spec.name], raw)
    return section(**values)


def read_environ(environ: Mapping[str, str] | None = None, *, dotenv: Path | None = Path(".env")) -> dict[str, str]:
    """The PARLEY_* variables: the .env file's, overridden by the process environment's."""
    env = dict(_read_dotenv(dotenv)) if dotenv else {}
    env.update(environ if environ is not None else os.environ)
    return {name: value for name, value in env.items() if name.startswith(ENV_PREFIX)}


@dataclass(frozen=True)
class Settings:
    """The platform's section; ``backend`` is derived from ``database_url`` once."""

    database_url: str = DEFAULT_DATABASE_URL
    allow_loopback_targets: bool = False
    """Outbound URLs (webhooks, scraping) may target loopback addresses (development)."""
    secret_key: str = ""
    previous_secret_keys: tuple[str, ...] = field(default=(), repr=False)
    """Retired secret keys, comma-separated: what was sealed under them still opens (nothing new is sealed with
    them), so PARLEY_SECRET_KEY can be rotated without losing stored secrets."""
    rate_limit_per_minute: int = 60
    rate_limit_per_hour: int = 1000
    org_rate_limit_per_minute: int = 300
    """All the keys of one organization together, besides each key's own limits."""
    org_rate_limit_per_hour: int = 5000
    rate_limit_backend: Literal["auto", "memory", "database"] = "auto"
    auth_failures_per_minute: int = 30  # failed authentications per client address and minute, then 429
    processes: int = 1
    var_dir: Path = field(default_factory=lambda: Path("./var"))
    log_level: str = "INFO"
    environment: Literal["development", "production"] = "development"
    """production: `parley check` also refuses loopback targets and an unset secret key."""
    log_format: Literal["json", "console"] = "json"
    """json: one JSON object per line (request and job lines carry their fields); console: a readable line."""
    metrics_token: str = ""
    """GET /metrics answers only ``Authorization: Bearer <this>``; empty: /metrics is not served (404)."""
    db_pool_size: int = 0
    """The most database connections a process holds (PARLEY_DB_POOL_SIZE): each opened when the load first needs
    it and kept; a request that finds them all in use waits for one. 0: the database's default (20 on PostgreSQL,
    10 on SQLite, where more connections only add threads: one writer at a time)."""
    gc_threshold: int = 10_000
    """Allocations between two young-generation passes of Python's garbage collector in a server or worker process
    (Python's own default is 700, a pass every few dozen objects a request makes; docs/performance.md)."""
    job_lease_seconds: float = 0.0
    """When above 0, no job kind's lease is longer than this: a killed worker's jobs are taken over sooner (a pass
    that outlives its lease may then overlap the next one, which every job kind allows). 0: each kind's own."""
    argon2_time_cost: int = 3
    argon2_memory_kib: int = 65536
    argon2_parallelism: int = 4
    """The cost of new dashboard password hashes (argon2id; RFC 9106's low-memory profile, argon2-cffi's defaults).
    A hash made at another cost still verifies and is replaced at its next sign-in. The tests use a low cost."""
    public_base_url: str = ""
    """The base of links Parley hands out; empty: the base URL of the request that asked for the link."""
    sections: tuple[Any, ...] = field(default=(), metadata={"env": False})
    """Feature sections given explicitly (tests); the others are read from ``environ``."""
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False, metadata={"env": False})
    """The PARLEY_* variables the feature sections are read from."""
    backend: Backend = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "backend", Backend.of(self.database_url))
        if self.gc_threshold < 1:
            raise SettingsError(f"{ENV_PREFIX}GC_THRESHOLD={self.gc_threshold}: must be at least 1")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, dotenv: Path | None = Path(".env")) -> Settings:
        env = read_environ(environ, dotenv=dotenv)
        return replace(load_section(cls, env), environ=env)

    def section(self, section: type[S]) -> S:
        """A feature's section: the one given in ``sections``, else read from ``environ``."""
        for given in self.sections:
            if type(given) is section:
                return given
        return load_section(section, self.environ)

    def with_secret_key(self) -> Settings:
        """Use PARLEY_SECRET_KEY, or generate one once and keep it under var_dir."""
        if self.secret_key:
            return self
        path = self.var_dir / "secret_key"
        if path.is_file():
            return replace(self, secret_key=path.read_text().strip())
        self.var_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(48)
        path.write_text(key)
        path.chmod(0o600)
        return replace(self, secret_key=key)

    @property
    def shared_rate_limits(self) -> bool:
        """Whether rate-limit counters live in the database (shared by every process on it).

        ``auto``: always on PostgreSQL (API processes started separately share one database, and
        nothing tells one of them about the others); on SQLite only when one ``serve`` starts
        several processes. ``memory`` and ``database`` force the choice."""
        if self.rate_limit_backend == "auto":
            return self.backend is Backend.POSTGRESQL or self.processes > 1
        return self.rate_limit_backend == "database"
