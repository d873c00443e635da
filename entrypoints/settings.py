"""Settings from PARLEY_* environment variables (and an optional .env file)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./var/parley.db"


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


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    allow_loopback_targets: bool = False
    secret_key: str = ""
    simulator_speed: float = 1.0
    rate_limit_per_minute: int = 60
    rate_limit_per_hour: int = 1000
    rate_limit_backend: str = "auto"  # auto | memory | database
    auth_failures_per_minute: int = 30  # failed authentications per client address and minute, then 429
    processes: int = 1
    var_dir: Path = field(default_factory=lambda: Path("./var"))
    webhook_retry_scale: float = 1.0
    log_level: str = "INFO"
    db_pool_size: int = 10
    public_base_url: str = ""
    """The base of links Parley hands out; empty: the base URL of the request that asked for the link."""
    extraction_timeout_seconds: float = 30.0
    extraction_memory_mb: int = 1024
    outbox_retention_days: float = 7.0
    """How long an outbox event every consumer has processed is kept before housekeeping purges it."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, *, dotenv: Path | None = Path(".env")) -> Settings:
        env = dict(_read_dotenv(dotenv)) if dotenv else {}
        env.update(environ if environ is not None else os.environ)

        def get(name: str) -> str | None:
            return env.get(f"PARLEY_{name}")

        base = cls()
        return replace(
            base,
            database_url=get("DATABASE_URL") or base.database_url,
            allow_loopback_targets=_bool(get("ALLOW_LOOPBACK_TARGETS"), False),
            secret_key=get("SECRET_KEY") or "",
            simulator_speed=float(get("SIMULATOR_SPEED") or base.simulator_speed),
            rate_limit_per_minute=int(get("RATE_LIMIT_PER_MINUTE") or base.rate_limit_per_minute),
            rate_limit_per_hour=int(get("RATE_LIMIT_PER_HOUR") or base.rate_limit_per_hour),
            rate_limit_backend=get("RATE_LIMIT_BACKEND") or base.rate_limit_backend,
            auth_failures_per_minute=int(get("AUTH_FAILURES_PER_MINUTE") or base.auth_failures_per_minute),
            var_dir=Path(get("VAR_DIR") or base.var_dir),
            webhook_retry_scale=float(get("WEBHOOK_RETRY_SCALE") or base.webhook_retry_scale),
            log_level=get("LOG_LEVEL") or base.log_level,
            db_pool_size=int(get("DB_POOL_SIZE") or base.db_pool_size),
            public_base_url=get("PUBLIC_BASE_URL") or base.public_base_url,
            extraction_timeout_seconds=float(get("EXTRACTION_TIMEOUT_SECONDS") or base.extraction_timeout_seconds),
            extraction_memory_mb=int(get("EXTRACTION_MEMORY_MB") or base.extraction_memory_mb),
            outbox_retention_days=float(get("OUTBOX_RETENTION_DAYS") or base.outbox_retention_days),
        )

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
            return self.database_url.startswith("postgresql") or self.processes > 1
        return self.rate_limit_backend == "database"
