"""The run's hooks, behind ``make test`` and ``make test-fast``: the run's id, the ``--http-on-sqlite-only`` option,
the checks on the serial mark, the order files are handed out in and the collector's thresholds. The fixtures are
in tests/support/fixtures.py, a plugin loaded here in every process that runs tests; the controller of a
pytest-xdist run only hands files out, so it skips them and never imports the application (about 1.5 s before
the workers could start). What builds them lives in tests/support."""

from __future__ import annotations

import asyncio
import gc
import os
import uuid
from pathlib import Path

import pytest

import tests.properties  # noqa: F401  (registers the hypothesis profiles before the plugin loads one)
from tests.support.databases import asyncpg_dsn, pg_admin_url, pg_template_name

FIXTURES = "tests.support.fixtures"


def pytest_configure(config: pytest.Config) -> None:
    """One id for this run, shared by the pytest-xdist workers (they inherit the controller's environment):
    it names the migrated templates the workers clone. Then the fixtures, unless this process is the controller
    of a pytest-xdist run (its workers load them; it runs no test)."""
    os.environ.setdefault("PARLEY_TEST_RUN", uuid.uuid4().hex[:12])
    if not _xdist_controller(config):
        gc.set_threshold(*GC_THRESHOLDS)  # from here on: the imports and collection below walked the heap 480 times
        config.pluginmanager.import_plugin(FIXTURES)


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands tests out to pytest-xdist workers (``-n 2``) rather than running them: a
    worker has the ``workerinput`` its controller sent; ``-n 0`` runs the tests here."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--http-on-sqlite-only", action="store_true",
        help="the fast loop: HTTP-level tests (an app fixture) parametrized over both SQL databases run on SQLite "
             "only (the PostgreSQL adapters keep their contract suites; tests written for PostgreSQL alone still run)")


_APP_FIXTURES = frozenset({"api", "any_api", "make_api", "concurrent_api", "api_with", "open_api", "closed_api",
                           "test_api", "any_sched"})
"""Fixtures that run the whole app over HTTP (the shared ones here and a few modules' own): a test using one of
them is an HTTP-level test."""
_DATABASE_PARAMETERS = ("sql_url", "database_url", "module_db", "fresh_url")
"""The parameters that choose the database of a test (the shared fixtures' and a few modules' own)."""


def _postgres_variant_of_an_http_test(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return (not _APP_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
            and "postgres" in (params.get(name) for name in _DATABASE_PARAMETERS))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The serial pass of ``make test`` collects only the files that spell ``pytest.mark.serial`` (the Makefile
    greps for it, which saves collecting the whole suite twice): a test marked serial any other way would be run
    by neither pass, so it is refused here, and so is a serial test not marked slow (``make test-fast`` is the
    parallel pass alone). With
    ``--http-on-sqlite-only`` (``make test-fast``) the PostgreSQL variants of the HTTP tests are deselected."""
    for item in items:
        if item.get_closest_marker("serial") and "mark.serial" not in Path(item.path).read_text(encoding="utf-8"):
            raise pytest.UsageError(f"{item.nodeid} is marked serial without `pytest.mark.serial` in its file")
        if item.get_closest_marker("serial") and not item.get_closest_marker("slow"):
            raise pytest.UsageError(f"{item.nodeid} is marked serial but not slow: `make test-fast` runs no serial "
                                    "pass, so it would never run there unnoticed; mark it slow too")
    if config.getoption("--http-on-sqlite-only"):
        deselected = [item for item in items if _postgres_variant_of_an_http_test(item)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not _postgres_variant_of_an_http_test(item)]
    _longest_first(items)


GC_THRESHOLDS = (10_000, 50, 1_000)
"""The collector's thresholds in a test process (Python's defaults are 700, 10, 10): a worker builds Litestar apps
(40,000-50,000 objects each) and dishka containers by the hundred, and with the defaults it walked its whole heap
about twenty times a run, 7 to 14 s of CPU per worker. Garbage without cycles is freed at once either way; cycles
wait longer, so what holds a database connection is closed by the test that opened it, never left to the collector
(``Api.close_admin``; a run's PostgreSQL has 100 connections for both workers)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (the test modules, the imported application) lives for the whole run: moved to the
    collector's permanent generation, it is never walked again (the run's thresholds are set since
    ``pytest_configure``)."""
    gc.collect()
    gc.freeze()


SECONDS_PER_TEST = {"domain": 0.006, "application": 0.05, "contract": 0.045, "http": 0.11, "e2e": 0.08}
"""What a test of each layer takes on average in ``make test-fast`` (2026-11-29, two workers): how long a file
is expected to take, for the order below. An HTTP test runs the whole app; a domain test is a function call."""


def _longest_first(items: list[pytest.Item]) -> None:
    """Files in the order pytest-xdist hands them out (``--dist loadfile --no-loadscope-reorder``): the files
    with slow tests first, in collection order (the browser's, the end-to-end ones), then the others, the longest
    expected first (their tests times their layer's ``SECONDS_PER_TEST``). A worker that takes a long file late
    runs on alone after the other has finished: the last files handed out are the shortest."""
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(Path(item.path), []).append(item)
    tests = Path(__file__).parent

    def expected(group: list[pytest.Item]) -> float:
        layer = Path(group[0].path).relative_to(tests).parts[0]
        return len(group) * SECONDS_PER_TEST.get(layer, 0.05)

    def key(group: list[pytest.Item]) -> tuple[bool, float]:
        slow = any(item.get_closest_marker("slow") for item in group)
        return (not slow, 0 if slow else -expected(group))

    items[:] = [item for group in sorted(files.values(), key=key) for item in group]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller (or the only process) drops the run's PostgreSQL template at the end."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not os.environ.get("PARLEY_TEST_RUN"):
        return
    import asyncpg

    async def drop() -> None:
        try:
            conn = await asyncio.wait_for(asyncpg.connect(asyncpg_dsn(pg_admin_url())), timeout=5)
        except Exception:
            return  # PostgreSQL was never reachable: no template either
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{pg_template_name()}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())

