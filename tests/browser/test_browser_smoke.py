"""The browser harness itself: a real chromium renders a page served by a real `parley serve`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import Server, sqlite_env

pytestmark = pytest.mark.slow


async def test_chromium_renders_a_page_parley_serves(page, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = Server(sqlite_env(tmp_path), tmp_path)
    try:
        await server.ready()
        response = await page.goto(f"{server.base}/v2/health")
        assert response is not None and response.status == 200
        assert '"success":true' in (await page.content()).replace(" ", "")
    finally:
        server.stop()
