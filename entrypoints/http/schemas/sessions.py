from __future__ import annotations

from datetime import datetime
from typing import Annotated

from msgspec import Meta, Struct

from application.sessions import MAX_EMAIL, MAX_PASSWORD, SessionView


class LoginIn(Struct, forbid_unknown_fields=True):
    email: Annotated[str, Meta(min_length=3, max_length=MAX_EMAIL)]
    password: Annotated[str, Meta(min_length=1, max_length=MAX_PASSWORD)]
    totp: Annotated[str, Meta(min_length=1, max_length=12, description=(
        "The code of the user's authenticator app, when two-factor sign-in is on"))] | None = None


class VerifyIn(Struct, forbid_unknown_fields=True):
    password: Annotated[str, Meta(min_length=1, max_length=MAX_PASSWORD)] | None = None
    totp: Annotated[str, Meta(min_length=1, max_length=12)] | None = None


class UserOut(Struct):
    id: int
    email: str


class SessionOut(Struct):
    user: UserOut
    organization_id: int
    csrf_token: Annotated[str, Meta(description="Send it as X-CSRF-Token with every unsafe method (POST, PATCH, "
                                                "PUT, DELETE) made with the session")]
    expires_at: Annotated[datetime, Meta(description="When the session ends unless used again (idle expiry, "
                                                     "capped by the absolute one)")]

    @classmethod
    def of(cls, view: SessionView) -> SessionOut:
        return cls(UserOut(view.user_id, view.email), view.organization_id, view.csrf_token, view.expires_at)
