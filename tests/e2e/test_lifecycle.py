"""Start-up through the CLI: `serve --no-migrate` and `worker --no-migrate` refuse, in one line and with a
non-zero exit, a database that is unreachable or whose schema is behind; `parley check` lists configuration
problems (exit 1) or none (exit 0)."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from adapters.sql.schema import alembic_config
from entrypoints import cli
from entrypoints.worker import run_worker as REAL_RUN_WORKER

STRONG_KEY = "Zq8vN2kLp4Rt6Yw1Xc3Vb5Nm7As9Df0Gh2Jk4Lq6We8Rt"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.chdir(tmp_path)  # no .env of the developer's, var/ in the test's directory
    for name in ("PARLEY_SECRET_KEY", "PARLEY_ENVIRONMENT", "PARLEY_ALLOW_LOOPBACK_TARGETS", "PARLEY_PROCESSES"):
        monkeypatch.delenv(name, raising=False)
    root = logging.getLogger()
    saved = root.handlers[:], root.level

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server or worker started: the start-up check let it through")

    monkeypatch.setattr("uvicorn.run", started)
    monkeypatch.setattr("granian.Granian", started)
    monkeypatch.setattr("entrypoints.worker.run_worker", started)
    yield monkeypatch
    root.handlers[:], level = saved
    root.setLevel(level)


def _template(tmp_root: Path) -> Path:
    return next(tmp_root.parent.glob("**/parley-template.db"))


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("parley: "), err
    return err


@pytest.mark.parametrize("command", [["serve", "--no-migrate"], ["worker", "--no-migrate"]])
def test_an_unreachable_database_stops_the_start_in_one_line(env: pytest.MonkeyPatch, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             command: list[str]) -> None:
    env.setenv("PARLEY_DATABASE_URL", "postgresql+asyncpg://parley:hunter2-pw@127.0.0.1:1/parley")
    err = _refused(command, capsys)
    assert "unreachable" in err and "127.0.0.1:1" in err and "hunter2-pw" not in err


def test_a_migrating_start_on_an_unreachable_database_stops_in_one_line(
        env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env.setenv("PARLEY_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:1/parley")
    err = _refused(["worker"], capsys)
    assert "migrating the database at postgresql+asyncpg://postgres@127.0.0.1:1/parley failed" in err


@pytest.mark.parametrize("command", [["serve", "--no-migrate"], ["worker", "--no-migrate"]])
def test_a_schema_behind_its_heads_stops_the_start(env: pytest.MonkeyPatch, tmp_path: Path, sqlite_url: str,
                                                   capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    env.setenv("PARLEY_DATABASE_URL", f"sqlite+aiosqlite:///{empty}")
    assert "no schema" in _refused(command, capsys) and "parley migrate" in _refused(command, capsys)

    behind = tmp_path / "behind.db"
    shutil.copyfile(sqlite_url.split(":///", 1)[1], behind)
    with sqlite3.connect(behind) as db:
        [head] = db.execute("SELECT version_num FROM alembic_version ORDER BY version_num DESC LIMIT 1").fetchone()
        # as before the newest migration: its branch at the revision before it, or not there at all
        down = ScriptDirectory.from_config(alembic_config(sqlite_url)).get_revision(head).down_revision
        if down in (None, "0001"):
            db.execute("DELETE FROM alembic_version WHERE version_num = ?", (head,))
        else:
            db.execute("UPDATE alembic_version SET version_num = ? WHERE version_num = ?", (down, head))
    env.setenv("PARLEY_DATABASE_URL", f"sqlite+aiosqlite:///{behind}")
    err = _refused(command, capsys)
    assert "is behind" in err and f"1 migration(s) to apply: {head}" in err and "parley migrate" in err


@pytest.mark.parametrize(("options", "said"), [
    (["--jobs", "campaigns.dial,calls.dial"],
     "unknown job kind calls.dial (the job kinds: attendees.notify, attendees.plan, billing.close, "),
    (["--jobs", "campaigns.dial", "--exclude-jobs", "campaigns.dial"], "no job kind left to run"),
])
def test_a_worker_given_job_kinds_it_cannot_run_stops_in_one_line(env: pytest.MonkeyPatch, tmp_path: Path,
                                                                  sqlite_url: str, capsys: pytest.CaptureFixture[str],
                                                                  options: list[str], said: str) -> None:
    env.setattr("entrypoints.worker.run_worker", REAL_RUN_WORKER)
    database = tmp_path / "parley.db"
    shutil.copyfile(sqlite_url.split(":///", 1)[1], database)
    env.setenv("PARLEY_DATABASE_URL", f"sqlite+aiosqlite:///{database}")
    assert said in _refused(["worker", "--no-migrate", *options], capsys)


async def test_an_up_to_date_schema_passes(sqlite_url: str) -> None:
    from adapters.sql.schema import schema_problem

    assert await schema_problem(sqlite_url) is None


def test_check_is_clean_for_a_sound_configuration(env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env.setenv("PARLEY_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    env.setenv("PARLEY_SECRET_KEY", STRONG_KEY)
    env.setenv("PARLEY_ENVIRONMENT", "production")
    env.setenv("PARLEY_PUBLIC_BASE_URL", "https://api.example.com")
    assert cli.main(["check", "--workers", "4", "--no-worker"]) == 0
    assert capsys.readouterr().out.strip() == "parley check: no configuration problems"


def test_check_lists_every_problem_and_exits_non_zero(env: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    env.setenv("PARLEY_DATABASE_URL", "sqlite+aiosqlite:///./var/parley.db")
    env.setenv("PARLEY_SECRET_KEY", "changeme")
    env.setenv("PARLEY_ENVIRONMENT", "production")
    env.setenv("PARLEY_ALLOW_LOOPBACK_TARGETS", "true")
    assert cli.main(["check", "--workers", "2"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("parley check: ") for line in lines)
    assert "PARLEY_SECRET_KEY is a well-known default" in lines[0]
    assert "PARLEY_ALLOW_LOOPBACK_TARGETS" in lines[1] and "SQLite with 2 processes" in lines[3]
    assert "PARLEY_PUBLIC_BASE_URL is unset in production" in lines[2] and "public_url_required" in lines[2]


@pytest.mark.parametrize(("base", "insecure", "said"), [
    ("http://api.example.com", "", "must be an https URL"),
    ("http://127.0.0.1:8000", "", "must be an https URL"),
    ("http://127.0.0.1:8000", "true", None),
    ("https://api.example.com", "", None),
])
def test_check_says_when_carriers_cannot_call_back(env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                   base: str, insecure: str, said: str | None) -> None:
    env.setenv("PARLEY_DATABASE_URL", "sqlite+aiosqlite:///./var/parley.db")
    env.setenv("PARLEY_SECRET_KEY", STRONG_KEY)
    env.setenv("PARLEY_PUBLIC_BASE_URL", base)
    env.setenv("PARLEY_CARRIER_INSECURE_PUBLIC_URL", insecure)
    code = cli.main(["check"])
    out = capsys.readouterr().out
    if said is None:
        assert code == 0, out
    else:
        assert code == 1 and said in out and "public_url_required" in out


@pytest.mark.parametrize(("settings", "argv", "expected"), [
    ({"PARLEY_SECRET_KEY": "short-key-1234"}, [], "PARLEY_SECRET_KEY is weak: 14 characters"),
    ({"PARLEY_SECRET_KEY": "a" * 40}, [], "too few distinct characters"),
    ({"PARLEY_ENVIRONMENT": "production"}, [], "PARLEY_SECRET_KEY is unset in production"),
    ({}, ["--no-worker"], "SQLite with 2 processes (--workers 1, a separate worker)"),
])
def test_check_names_each_problem(env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                  settings: dict[str, str], argv: list[str], expected: str) -> None:
    env.setenv("PARLEY_DATABASE_URL", "sqlite+aiosqlite:///./var/parley.db")
    for name, value in settings.items():
        env.setenv(name, value)
    assert cli.main(["check", *argv]) == 1
    assert expected in capsys.readouterr().out


def test_check_without_problems_in_development(env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env.setenv("PARLEY_DATABASE_URL", "sqlite+aiosqlite:///./var/parley.db")
    env.setenv("PARLEY_ALLOW_LOOPBACK_TARGETS", "true")  # development: local receivers are the point
    assert cli.main(["check"]) == 0


def test_migrate_on_an_unreachable_database_fails_in_one_line(env: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    env.setenv("PARLEY_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:1/parley")
    assert "migrating the database" in _refused(["migrate"], capsys)
