"""`parley check`: configuration problems found before anything starts (each one line, none: exit 0)."""

from __future__ import annotations

from entrypoints.features.carriers import CarrierSettings, public_links
from entrypoints.settings import Backend, Settings

MIN_SECRET_KEY_LENGTH = 32
KNOWN_WEAK_KEYS = frozenset({"changeme", "change-me", "change_me", "secret", "secret-key", "secret_key", "parley",
                             "dev", "development", "test", "test-secret-key", "password", "default"})


def secret_key_problem(key: str) -> str | None:
    if key.strip().lower() in KNOWN_WEAK_KEYS:
        return "PARLEY_SECRET_KEY is a well-known default: set a random value (e.g. `openssl rand -base64 48`)"
    if len(key) < MIN_SECRET_KEY_LENGTH:
        return (f"PARLEY_SECRET_KEY is weak: {len(key)} characters, at least {MIN_SECRET_KEY_LENGTH} random ones "
                "expected (e.g. `openssl rand -base64 48`)")
    if len(set(key)) < 10:
        return "PARLEY_SECRET_KEY is weak: too few distinct characters for a random value"
    return None


def configuration_problems(settings: Settings, *, workers: int = 1, separate_worker: bool = False) -> list[str]:
    """What is wrong with ``settings`` for ``parley serve --workers <workers>`` (``--no-worker`` and a
    ``parley worker`` beside it: ``separate_worker``)."""
    problems: list[str] = []
    production = settings.environment == "production"
    if settings.secret_key:
        problem = secret_key_problem(settings.secret_key)
        if problem:
            problems.append(problem)
    elif production:
        problems.append("PARLEY_SECRET_KEY is unset in production: each host would generate its own under "
                        "var/ (signed URLs and sealed secrets would not open on the others); set one")
    if production and settings.allow_loopback_targets:
        problems.append("PARLEY_ALLOW_LOOPBACK_TARGETS is on in production: webhooks and scraping may reach "
                        "this host's own services; turn it off")
    problems.extend(carrier_problems(settings, production))
    processes = max(workers, settings.processes) + (1 if separate_worker else 0)
    if settings.backend is Backend.SQLITE and processes > 1:
        problems.append(f"SQLite with {processes} processes (--workers {workers}"
                        f"{', a separate worker' if separate_worker else ''}): use PostgreSQL "
                        "(PARLEY_DATABASE_URL=postgresql+asyncpg://...) or one process")
    if settings.backend is Backend.MEMORY and processes > 1:
        problems.append(f"the in-memory database with {processes} processes: each would hold its own data")
    return problems


def carrier_problems(settings: Settings, production: bool) -> list[str]:
    """Carriers (twilio, telnyx) call Parley back at PARLEY_PUBLIC_BASE_URL, over https: unset in production, or set
    to an address carriers cannot use, they cannot be used (409 public_url_required)."""
    section = settings.section(CarrierSettings)
    if production and section.insecure_public_url:
        return ["PARLEY_CARRIER_INSECURE_PUBLIC_URL is on in production: carrier callbacks need https; turn it off"]
    if not settings.public_base_url:
        if production:
            return ["PARLEY_PUBLIC_BASE_URL is unset in production: carrier providers (twilio, telnyx) cannot be used "
                    "(409 public_url_required) and links follow each request's Host header; set the https address "
                    "clients and carriers reach"]
        return []
    problem = public_links(settings, section).problem
    if problem is None:
        return []
    return [f"{problem}: carrier providers (twilio, telnyx) cannot be used (409 public_url_required)"]
