"""Settings: PARLEY_* variables (and .env) read into the platform's section and each feature's section."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from entrypoints import cli
from entrypoints.features.calls import CallsSettings
from entrypoints.features.knowledge import KnowledgeSettings
from entrypoints.features.webhooks import WebhookSettings
from entrypoints.ioc import build_container, configuration
from entrypoints.settings import Backend, Settings, SettingsError


@pytest.mark.parametrize(("url", "backend"), [
    ("memory://", Backend.MEMORY),
    ("sqlite+aiosqlite:///./var/parley.db", Backend.SQLITE),
    ("postgresql+asyncpg://postgres@127.0.0.1/test", Backend.POSTGRESQL),
    ("postgres://db/test", Backend.POSTGRESQL),
])
def test_the_backend_is_derived_from_the_database_url(url: str, backend: Backend) -> None:
    assert Settings(database_url=url).backend is backend
    assert Settings(database_url=url).backend.sql is (backend is not Backend.MEMORY)


def test_a_database_url_of_no_known_backend_fails_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="PARLEY_DATABASE_URL"):
        Settings.from_env({"PARLEY_DATABASE_URL": "mysql://db/parley"}, dotenv=None)


def test_unset_and_empty_variables_keep_the_defaults() -> None:
    settings = Settings.from_env({"PARLEY_RATE_LIMIT_PER_MINUTE": "", "HOME": "/root"}, dotenv=None)
    assert settings.rate_limit_per_minute == 60
    assert settings.database_url == "sqlite+aiosqlite:///./var/parley.db"
    assert settings.section(CallsSettings) == CallsSettings(simulator_speed=1.0)
    assert settings.section(WebhookSettings) == WebhookSettings(retry_scale=1.0)


def test_every_documented_variable_reaches_its_section() -> None:
    settings = Settings.from_env({
        "PARLEY_DATABASE_URL": "postgresql+asyncpg://u@h/d", "PARLEY_ALLOW_LOOPBACK_TARGETS": "yes",
        "PARLEY_SECRET_KEY": "s", "PARLEY_SIMULATOR_SPEED": "2.5", "PARLEY_RATE_LIMIT_PER_MINUTE": "7",
        "PARLEY_RATE_LIMIT_PER_HOUR": "70", "PARLEY_AUTH_FAILURES_PER_MINUTE": "3",
        "PARLEY_RATE_LIMIT_BACKEND": "memory", "PARLEY_VAR_DIR": "/tmp/p", "PARLEY_PUBLIC_BASE_URL": "https://x",
        "PARLEY_LOG_LEVEL": "DEBUG", "PARLEY_EXTRACTION_TIMEOUT_SECONDS": "5", "PARLEY_EXTRACTION_MEMORY_MB": "256",
        "PARLEY_WEBHOOK_RETRY_SCALE": "0.001", "PARLEY_PROCESSES": "3", "PARLEY_DB_POOL_SIZE": "4",
    }, dotenv=None)
    assert (settings.database_url, settings.backend, settings.allow_loopback_targets, settings.secret_key) == (
        "postgresql+asyncpg://u@h/d", Backend.POSTGRESQL, True, "s")
    assert (settings.rate_limit_per_minute, settings.rate_limit_per_hour, settings.auth_failures_per_minute,
            settings.rate_limit_backend) == (7, 70, 3, "memory")
    assert (settings.var_dir, settings.public_base_url, settings.log_level, settings.processes,
            settings.db_pool_size) == (Path("/tmp/p"), "https://x", "DEBUG", 3, 4)
    assert settings.section(CallsSettings).simulator_speed == 2.5
    assert settings.section(KnowledgeSettings) == KnowledgeSettings(extraction_timeout_seconds=5.0,
                                                                    extraction_memory_mb=256)
    assert settings.section(WebhookSettings).retry_scale == 0.001


def test_previous_secret_keys_are_a_comma_separated_list() -> None:
    settings = Settings.from_env({"PARLEY_PREVIOUS_SECRET_KEYS": " old-one , ,older-one "}, dotenv=None)
    assert settings.previous_secret_keys == ("old-one", "older-one")
    assert Settings.from_env({}, dotenv=None).previous_secret_keys == ()


def test_the_environment_overrides_the_dotenv_file(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text('# local\nPARLEY_LOG_LEVEL="WARNING"\nPARLEY_SIMULATOR_SPEED=4\nPARLEY_DB_POOL_SIZE=2\n')
    settings = Settings.from_env({"PARLEY_DB_POOL_SIZE": "9"}, dotenv=dotenv)
    assert (settings.log_level, settings.db_pool_size) == ("WARNING", 9)
    assert settings.section(CallsSettings).simulator_speed == 4.0


@pytest.mark.parametrize(("variable", "value"), [
    ("PARLEY_RATE_LIMIT_PER_MINUTE", "sixty"),
    ("PARLEY_DB_POOL_SIZE", "2.5"),
    ("PARLEY_ALLOW_LOOPBACK_TARGETS", "maybe"),
    ("PARLEY_RATE_LIMIT_BACKEND", "redis"),
    ("PARLEY_GC_THRESHOLD", "0"),
    ("PARLEY_GC_THRESHOLD", "many"),
])
def test_a_bad_platform_value_fails_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env({variable: value}, dotenv=None)


def test_the_delivery_pump_reads_its_variables_like_every_other_setting(tmp_path: Path) -> None:
    """PARLEY_WEBHOOK_BATCH_SIZE, _CONCURRENCY, _LEASE_SECONDS and _POLL_SECONDS are fields of the webhooks section,
    so a .env file sets them too, under the process environment."""
    dotenv = tmp_path / ".env"
    dotenv.write_text("PARLEY_WEBHOOK_CONCURRENCY=7\nPARLEY_WEBHOOK_LEASE_SECONDS=45\n")
    settings = Settings.from_env({"PARLEY_WEBHOOK_BATCH_SIZE": "20", "PARLEY_WEBHOOK_POLL_SECONDS": "0.5",
                                  "PARLEY_WEBHOOK_LEASE_SECONDS": "30"}, dotenv=dotenv)
    policy = settings.section(WebhookSettings).delivery()
    assert (policy.batch_size, policy.concurrency, policy.lease_seconds, policy.poll_seconds) == (20, 7, 30.0, 0.5)
    defaults = Settings.from_env({}, dotenv=None).section(WebhookSettings).delivery()
    assert (defaults.batch_size, defaults.concurrency, defaults.lease_seconds, defaults.poll_seconds,
            defaults.dispatch_batch, defaults.shutdown_grace_seconds) == (100, 100, 60.0, 10.0, 500, 12.0)


@pytest.mark.parametrize(("variable", "value"), [
    ("PARLEY_SIMULATOR_SPEED", "fast"),
    ("PARLEY_WEBHOOK_RETRY_SCALE", "x"),
    ("PARLEY_WEBHOOK_CONCURRENCY", "many"),
    ("PARLEY_EXTRACTION_MEMORY_MB", "1GB"),
])
def test_a_bad_feature_value_fails_at_start_up_naming_the_variable(variable: str, value: str) -> None:
    settings = Settings.from_env({variable: value}, dotenv=None)
    with pytest.raises(SettingsError, match=variable):
        configuration(settings)


def test_the_cli_refuses_a_bad_value_with_the_variable_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARLEY_DATABASE_URL", "memory://")
    monkeypatch.setenv("PARLEY_WEBHOOK_RETRY_SCALE", "soon")
    assert cli.main(["migrate"]) == 2
    assert "PARLEY_WEBHOOK_RETRY_SCALE='soon'" in capsys.readouterr().err


async def test_the_container_provides_the_platform_settings_and_every_section(tmp_path: Path) -> None:
    given = WebhookSettings(retry_scale=0.0)
    settings = Settings.from_env({"PARLEY_DATABASE_URL": "memory://", "PARLEY_SECRET_KEY": "k",
                                  "PARLEY_VAR_DIR": str(tmp_path), "PARLEY_SIMULATOR_SPEED": "3"}, dotenv=None)
    container = build_container(replace(settings, sections=(given,)))
    try:
        assert (await container.get(Settings)).secret_key == "k"
        assert (await container.get(CallsSettings)).simulator_speed == 3.0
        assert await container.get(WebhookSettings) is given
        assert await container.get(KnowledgeSettings) == KnowledgeSettings()
    finally:
        await container.close()


@pytest.mark.slow  # a Python process that builds the app
def test_a_server_process_collects_garbage_at_the_configured_threshold(tmp_path: Path) -> None:
    """make_app (what `parley serve` runs in each server process) sets the young generation's threshold."""
    code = ("import gc; from entrypoints.asgi_app import make_app; before = gc.get_threshold(); make_app(); "
            "print(before[0], *gc.get_threshold())")
    env = {**os.environ, "PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'p.db'}",
           "PARLEY_VAR_DIR": str(tmp_path / "var"), "PARLEY_GC_THRESHOLD": "12345", "PARLEY_LOG_LEVEL": "WARNING"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=True)
    before, *after = done.stdout.split()
    assert before == "700"  # Python's own, until the app is made
    assert after == ["12345", "10", "10"]
