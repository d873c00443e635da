"""Helpers for the triggers tests: the consumer and the action jobs run as the worker runs them, on the app's
database and clock; a real SMTP server (aiosmtpd) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import email
import socket
from dataclasses import dataclass, field
from typing import Any

from aiosmtpd.controller import Controller
from dishka import AsyncContainer, Provider

from application.triggers import EvaluateTriggers, EvaluateTriggersCommand
from entrypoints.features.triggers import action_job, evaluate_job
from entrypoints.ioc import build_container
from entrypoints.units import ScopedUnits
from entrypoints.worker import make_runner
from tests.support.apps import Api, Tenant


async def evaluate(api: Api) -> int:
    """The consumer's passes until the outbox is read."""
    container = api.worker()
    read = 0
    while (step := await ScopedUnits(container).execute(EvaluateTriggers, EvaluateTriggersCommand())) > 0:
        read += step
    return read


async def run_jobs(api: Api, rounds: int = 1, overrides: tuple[Provider, ...] = ()) -> int:
    """The trigger job kinds run as the worker runs them (``run_due``: what is due by the app's clock), in the
    test's worker or, with ``overrides``, in a worker of their own."""
    if not overrides:
        return await _run_jobs(api.worker(), api, rounds)
    container = build_container(api.settings, *api.overrides, *overrides)
    try:
        return await _run_jobs(container, api, rounds)
    finally:
        await container.close()


async def _run_jobs(container: AsyncContainer, api: Api, rounds: int) -> int:
    runner = await make_runner(container, api.settings, kinds=[evaluate_job(container, api.settings),
                                                                action_job(container, api.settings)])
    await runner.start()
    ran = 0
    for _ in range(rounds):
        ran += await runner.run_due(woken=True)
    return ran


async def create(api: Api, t: Tenant, **body: Any) -> Any:
    return await api.client.post("/v2/triggers", json=body, headers=t.headers)


async def runs(api: Api, t: Tenant, trigger_id: int, **params: Any) -> list[dict[str, Any]]:
    r = await api.client.get(f"/v2/triggers/{trigger_id}/runs", params=params, headers=t.headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


@dataclass
class Mailbox:
    messages: list[email.message.Message] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[email.message.Message]:  # noqa: ASYNC109
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.messages) < count:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{len(self.messages)} of {count} messages arrived")
            await asyncio.sleep(0.02)
        return self.messages


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SmtpServer:
    """A real SMTP server (aiosmtpd) on 127.0.0.1, on a free port, collecting what it receives."""

    def __init__(self) -> None:
        self.mailbox = Mailbox()
        self.port = free_port()
        self.controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()
