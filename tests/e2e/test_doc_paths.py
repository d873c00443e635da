"""The documents name only files that exist: every repository path written in backquotes in docs/*.md and
README.md (`bench/run.py`, `tests/e2e/`, `adapters/memory/clock.ManualClock`) is on disk, so a moved or
deleted file cannot stay named in a document."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

# The record of past measurements names files as they were when each was taken.
HISTORICAL = {"performance-history.md"}
# Folders that are not the repository's, made at run time or by `make` (present on a machine that ran them).
NOT_IN_THE_REPOSITORY = (".venv/", "var/")

_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_EXTENSION = re.compile(r"\.[a-z0-9]{1,5}$")
_ATTRIBUTE = re.compile(r"^(?P<module>[\w/]+)\.(?P<name>[A-Za-z_]\w*)$")


def _top_level() -> set[str]:
    """The repository's top-level entries, less what a run makes there (``var/``, whether or not it exists yet)."""
    made = {name.rstrip("/") for name in NOT_IN_THE_REPOSITORY}
    return {path.name for path in ROOT.iterdir() if not path.name.startswith(".") and path.name not in made}


def repository_paths(text: str, top: set[str]) -> Iterator[str]:
    """Each word of a backquoted span that reads as a path under one of the repository's top-level entries:
    a file (an extension), a folder (a trailing slash) or a module's name (`path/module.Name`). URLs, API paths
    (`/v2/...`) and placeholders (`<id>`, `{id}`, `*.py`) start elsewhere or are left out."""
    for span in _SPAN.findall(text):
        for word in span.split():
            word = re.sub(r"(::\S*|:\d+)$", "", word.strip("()[],;'\""))
            if "/" not in word or any(mark in word for mark in "*<>{}$?=") or word.split("/")[0] not in top:
                continue
            if word.endswith("/") or _EXTENSION.search(word.rsplit("/", 1)[-1]) or _ATTRIBUTE.match(word):
                yield word


def exists(path: str) -> bool:
    if path.startswith(NOT_IN_THE_REPOSITORY) or (ROOT / path).exists():
        return True
    attribute = _ATTRIBUTE.match(path)
    if attribute is None:
        return False
    module = ROOT / attribute["module"]
    return module.with_suffix(".py").is_file() or (module / "__init__.py").is_file()


def test_every_path_a_document_names_exists() -> None:
    top = _top_level()
    missing = [f"{document.relative_to(ROOT)}: {path}"
               for document in DOCUMENTS if document.name not in HISTORICAL
               for path in sorted(set(repository_paths(document.read_text(encoding="utf-8"), top)))
               if not exists(path)]
    assert missing == []


def test_the_path_reader_finds_files_folders_and_names_and_leaves_the_rest() -> None:
    text = ("Run `.venv/bin/python bench/run.py --database both`; tests in `tests/e2e/`, the clock is "
            "`adapters/memory/clock.ManualClock`, see `docs/gone.md` and `tests/contract/test_x.py::test_y`. Not "
            "paths: `GET /v2/agents`, `https://example.com/a.js`, `/dashboard/app.js`, `var/parley.db`, "
            "`tests/*.py`, `adapters/sql/<name>.py`, `and/or`.")
    found = list(repository_paths(text, _top_level()))
    assert found == ["bench/run.py", "tests/e2e/", "adapters/memory/clock.ManualClock",
                     "docs/gone.md", "tests/contract/test_x.py"]
    assert [path for path in found if not exists(path)] == ["docs/gone.md", "tests/contract/test_x.py"]
