"""What a newcomer reads and runs first is true: the README lists every document of docs/, `make run` prints
the dashboard's address and a create-user command that works as printed, and `parley` is where the README
says it is."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from entrypoints import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_lists_every_document_with_one_line() -> None:
    section = README.split("## Documentation", 1)[1]
    listed = re.findall(r"^- docs/([\w.-]+\.md): \S", section, flags=re.MULTILINE)
    on_disk = sorted(path.name for path in (ROOT / "docs").glob("*.md"))
    assert sorted(listed) == on_disk
    assert len(listed) == len(set(listed))


def test_parley_is_where_the_readme_says() -> None:
    """The README tells to run `.venv/bin/parley` (or to activate the virtualenv); `make run` installs the
    project there, whose console script is `parley`."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["parley"] == "entrypoints.cli:main"
    assert "`.venv/bin/parley ...`" in README and ". .venv/bin/activate" in README
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "VENV := .venv" in makefile and "BIN := $(VENV)/bin" in makefile
    assert "pip install --quiet --no-compile -e \".[dev]\"" in makefile
    run = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/parley admin demo-key --welcome --host '$(HOST)' --port '$(PORT)' --cli '$(BIN)/parley'" in run


@pytest.mark.slow  # migrates a fresh database, as `make run` does
def test_make_run_prints_the_dashboard_and_a_create_user_command_that_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PARLEY_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}")
    monkeypatch.setenv("PARLEY_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("PARLEY_ARGON2_TIME_COST", "1")
    monkeypatch.setenv("PARLEY_ARGON2_MEMORY_KIB", "8")
    monkeypatch.setenv("PARLEY_ARGON2_PARALLELISM", "1")
    # what the Makefile's run target runs, on another interface and port
    assert cli.main(["admin", "demo-key", "--welcome", "--host", "0.0.0.0", "--port", "9000",
                     "--cli", ".venv/bin/parley"]) == 0
    printed = capsys.readouterr().out
    demo = json.loads((tmp_path / "var" / "demo.json").read_text())
    assert demo["key"] in printed
    assert f'curl -H "Authorization: Bearer {demo["key"]}" http://127.0.0.1:9000/v2/agents' in printed
    assert "Dashboard: http://127.0.0.1:9000/dashboard" in printed
    command = next(line.strip() for line in printed.splitlines() if "create-user" in line)
    words = shlex.split(command)
    assert words[:4] == [".venv/bin/parley", "admin", "create-user", "--org"] and words[4] == str(
        demo["organization_id"])
    # the printed command, as printed (its first word is the `parley` this test is)
    assert cli.main(words[1:]) == 0
    user = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (user["organization_id"], user["email"]) == (demo["organization_id"], "you@example.com")
