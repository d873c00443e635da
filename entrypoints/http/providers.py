"""Request-derived values for the container: the transaction mode and the acting principal."""

from __future__ import annotations

from dishka import Provider, Scope, provide
from litestar import Request

from application.context import Actor
from entrypoints.runtime import TransactionMode


class HttpProvider(Provider):
    @provide(scope=Scope.REQUEST)
    def mode(self, request: Request) -> TransactionMode:  # type: ignore[type-arg]
        return TransactionMode(write=request.method not in ("GET", "HEAD", "OPTIONS"))

    @provide(scope=Scope.REQUEST)
    def actor(self, request: Request) -> Actor:  # type: ignore[type-arg]
        actor = request.scope.get("state", {}).get("actor")
        if actor is None:
            raise LookupError("no authenticated actor on this request")
        return actor  # type: ignore[no-any-return]
