"""CreateUser (``parley admin create-user``) stores what the PasswordHasher port made of the password, on every
backend."""

from __future__ import annotations

import uuid
from typing import Any

from application.accounts import CreateUser, CreateUserCommand
from application.ports.accounts import UserRepository
from application.ports.passwords import PasswordHasher
from application.ports.platform import UnitOfWork
from tests.support.apps import new_organization


async def test_the_stored_password_is_an_argon2_hash_that_verifies(container: Any) -> None:
    org = await new_organization(container)
    email = f"Ops-{uuid.uuid4().hex[:8]}@Example.com"
    async with container() as r:
        user_id = await (await r.get(CreateUser)).execute(CreateUserCommand(org, email, "correct horse"))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        found = await (await r.get(UserRepository)).find_by_email(email.lower())
        passwords = await r.get(PasswordHasher)
        assert found is not None and found[:2] == (user_id, org)
        assert found[2].startswith("$argon2id$") and not passwords.needs_rehash(found[2])
        assert await passwords.verify("correct horse", found[2])
        assert not await passwords.verify("wrong horse", found[2])
