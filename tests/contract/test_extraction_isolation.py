"""IsolatedTextExtractor: a parse that never ends, eats memory or crashes costs its own worker process,
is refused as unreadable, and the next file is read by a fresh worker."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from dishka import Provider, Scope, provide

from adapters.documents import IsolatedTextExtractor
from adapters.documents.isolated import MSG_CRASHED, MSG_TIMEOUT
from application.ports.knowledge import ExtractionFailed, TextExtractor
from tests.contract.hostile_extractor import HostileExtractor
from tests.knowledge_samples import running_app
from tests.support.apps import AppPool

GOOD = ("notes.txt", b"Opening hours are nine to five.")

# a worker process starts inside the 0.5 s deadline: run these where no other test process competes (serial);
# crash tests, they are left to `make test` (slow)
pytestmark = [pytest.mark.serial, pytest.mark.slow]


@pytest.fixture
def extractor() -> IsolatedTextExtractor:
    return IsolatedTextExtractor(HostileExtractor(), timeout_seconds=0.5, memory_mb=1024, workers=1)


@pytest.mark.parametrize(("data", "message"), [
    (b"LOOP forever", MSG_TIMEOUT),
    (b"HOG memory", "the file needs more memory than a file may use to be read"),
    (b"DIE now", MSG_CRASHED),
])
async def test_a_hostile_file_costs_only_its_worker(extractor: IsolatedTextExtractor, data: bytes,
                                                    message: str) -> None:
    assert (await extractor.extract_file(*GOOD)).text == "Opening hours are nine to five."
    with pytest.raises(ExtractionFailed) as failure:
        await asyncio.wait_for(extractor.extract_file("bad.txt", data), 20)
    assert (failure.value.code, failure.value.message) == ("unreadable_file", message)
    assert (await extractor.extract_file(*GOOD)).file_type == "txt"  # a fresh worker reads the next file


async def test_files_are_read_at_once_up_to_the_worker_count() -> None:
    extractor = IsolatedTextExtractor(HostileExtractor(), timeout_seconds=0.5, workers=2)
    looping, good = await asyncio.gather(extractor.extract_file("a.txt", b"LOOP"), extractor.extract_file(*GOOD),
                                         return_exceptions=True)
    assert isinstance(looping, ExtractionFailed) and looping.message == MSG_TIMEOUT
    assert not isinstance(good, BaseException) and good.text.startswith("Opening hours")


class _Hostile(Provider):
    @provide(scope=Scope.APP)
    def extractor(self) -> TextExtractor:
        return IsolatedTextExtractor(HostileExtractor(), timeout_seconds=0.5)


async def test_an_upload_with_a_file_that_never_finishes(sqlite_url: str, tmp_root: Path, app_pool: AppPool) -> None:
    async with running_app(app_pool, sqlite_url, tmp_root / "var", _Hostile()) as api:
        t = await api.tenant()
        agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]["id"]
        kb = (await api.client.post("/v2/knowledge-bases", json={"name": "Docs", "agent_id": agent},
                                    headers=t.headers)).json()
        files: list[Any] = [("files", (name, data, "application/octet-stream"))
                            for name, data in (("stuck.pdf", b"LOOP"), GOOD)]
        response = await api.client.post(f"/v2/knowledge-bases/{kb['data']['id']}/documents", headers=t.headers,
                                         files=files)
        assert response.status_code == 201, response.text
        outcome = {d["file_name"]: (d["success"], d["error_code"], d["error"]) for d in
                   response.json()["data"]["documents"]}
        assert outcome == {"stuck.pdf": (False, "unreadable_file", MSG_TIMEOUT), "notes.txt": (True, None, None)}


async def test_a_files_time_starts_once_its_worker_is_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that takes longer to start than a file may take to read (a busy machine, slow imports) still
    reads the file: the deadline covers the reading, starting has its own bound."""
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(1.0)\n")  # every new worker starts slowly
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    extractor = IsolatedTextExtractor(HostileExtractor(), timeout_seconds=0.5, memory_mb=1000, workers=1)
    assert (await extractor.extract_file(*GOOD)).text == "Opening hours are nine to five."
