"""A real browser for the end-to-end tests of the pages Parley serves.

Debian's `chromium` is driven by Playwright for Python (its own browser download is not used). Without the
browser the tests are skipped with the reason shown, except when CI is set: there they fail. A failing test
leaves a screenshot of its page in var/screenshots/.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "var" / "screenshots"
IN_CI = bool(os.environ.get("CI"))
LAPTOP = {"width": 1280, "height": 800}
"""The laptop's viewport every page opens at (screenshots are kept at it and at ``PHONE``)."""
PHONE = {"width": 390, "height": 844}


def chromium_executable() -> str | None:
    for candidate in (os.environ.get("PARLEY_TEST_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"the browser tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[object]:
    executable = chromium_executable()
    if executable is None:
        _unavailable("chromium is not installed (apt-get install chromium)")
    try:
        from playwright.async_api import async_playwright
    except ImportError:  # pragma: no cover - a dev dependency
        _unavailable("playwright is not installed (pip install -e .[dev])")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, headless=True,
                                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield launched
        finally:
            await launched.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
async def page(browser, request: pytest.FixtureRequest) -> AsyncIterator[object]:  # type: ignore[no-untyped-def]
    """A fresh browser context (its own cookies) at a laptop's size; a screenshot is kept when the test fails."""
    context = await browser.new_context(viewport=LAPTOP)
    context.set_default_timeout(15_000)
    opened = await context.new_page()
    try:
        yield opened
    finally:
        if request.node.stash.get(_FAILED, False):
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)[-120:]
            for number, each in enumerate(context.pages):
                await each.screenshot(path=str(SCREENSHOTS / f"{name}-{number}.png"), full_page=True)
        await context.close()
