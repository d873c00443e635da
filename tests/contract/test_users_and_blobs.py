"""UserRepository behaves the same on memory, SQLite and PostgreSQL; BlobStorage the same in memory
and on the filesystem."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.blobs.filesystem import FilesystemBlobStorage
from adapters.memory.blobs import InMemoryBlobStorage
from application.ports.accounts import UserRepository
from application.ports.blobs import BlobStorage
from application.ports.platform import UnitOfWork
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


def _email() -> str:
    return f"user-{uuid.uuid4().hex[:10]}@example.com"  # the users table is shared by the tests of a run


async def test_users_are_found_by_their_exact_email(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    ann, bob = _email(), _email()
    async with container() as r:
        users = await r.get(UserRepository)
        first = await users.add(org, ann, "hash-a", NOW)
        second = await users.add(other, bob, "hash-b", NOW)
        await (await r.get(UnitOfWork)).commit()
    assert 0 < first < second
    async with container() as r:
        users = await r.get(UserRepository)
        assert await users.find_by_email(ann) == (first, org, "hash-a")
        assert await users.find_by_email(bob) == (second, other, "hash-b")
        assert await users.find_by_email(_email()) is None


async def test_an_email_has_one_user(container: Any) -> None:
    org = await new_organization(container)
    email = _email()
    async with container() as r:
        user_id = await (await r.get(UserRepository)).add(org, email, "first", NOW)
        await (await r.get(UnitOfWork)).commit()
    with pytest.raises(Exception):  # noqa: B017 - each backend refuses in its own words; use cases check first
        async with container() as r:
            await (await r.get(UserRepository)).add(org, email, "second", NOW)
            await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        assert await (await r.get(UserRepository)).find_by_email(email) == (user_id, org, "first")


async def test_a_user_added_in_a_rolled_back_unit_of_work_does_not_exist(container: Any) -> None:
    org = await new_organization(container)
    email = _email()
    async with container() as r:
        await (await r.get(UserRepository)).add(org, email, "hash", NOW)
        await (await r.get(UnitOfWork)).rollback()
    async with container() as r:
        assert await (await r.get(UserRepository)).find_by_email(email) is None


# --- blobs ----------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "filesystem"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStorage:
    if request.param == "memory":
        return InMemoryBlobStorage()
    return FilesystemBlobStorage(tmp_path / "blobs")


async def test_blobs_are_stored_replaced_and_deleted(blobs: BlobStorage) -> None:
    assert await blobs.get("recordings/1.wav") is None
    await blobs.put("recordings/1.wav", b"RIFF-one", "audio/wav")
    await blobs.put("recordings/2.wav", b"RIFF-two", "audio/wav")
    assert await blobs.get("recordings/1.wav") == b"RIFF-one"
    await blobs.put("recordings/1.wav", b"RIFF-new", "audio/wav")
    assert await blobs.get("recordings/1.wav") == b"RIFF-new"
    await blobs.delete("recordings/1.wav")
    await blobs.delete("recordings/1.wav")  # deleting what is not there is harmless
    assert await blobs.get("recordings/1.wav") is None
    assert await blobs.get("recordings/2.wav") == b"RIFF-two"


async def test_a_stored_blob_is_a_copy_of_the_bytes_given(blobs: BlobStorage) -> None:
    data = bytearray(b"\x00\x01binary\xff" * 1000)
    await blobs.put("a/b/c.bin", data, "application/octet-stream")
    data[:] = b"changed"
    assert await blobs.get("a/b/c.bin") == b"\x00\x01binary\xff" * 1000


@pytest.mark.parametrize("key", ["../escape", "a/../../etc/passwd", "/absolute", "a//b", "", ".hidden",
                                 "a/ b", "a\\b"])
async def test_keys_outside_plain_relative_segments_are_refused(blobs: BlobStorage, key: str) -> None:
    for attempt in (blobs.put(key, b"x", "text/plain"), blobs.get(key), blobs.delete(key)):
        with pytest.raises(ValueError):
            await attempt
