"""Profile Parley's request pipeline in process: the ASGI app driven directly (no server, no sockets) by
concurrent clients, on a fresh database seeded as bench/run.py seeds it.

    .venv/bin/python bench/profile_pipeline.py --database sqlite --route get [--clients 8] [--requests 2000]
        [--profiler none|pyinstrument|cprofile] [--loop uvloop|asyncio] [--statements] [--app parley|peer]

Prints the requests served, the CPU per request of this process (and, on PostgreSQL, of the benchmark
database's backends) and, with a profiler, its report (pyinstrument's text tree, or cProfile's top
functions by cumulative and by own time). ``--statements`` counts what the requests send to the database
(SQLAlchemy's ``before_cursor_execute``, ``after_cursor_execute``, ``commit`` and ``rollback`` events):
statements, commits and rollbacks per request, each statement's text with its count, and on SQLite the hand-offs
to the driver's thread they make. The rate limits are raised so the limiter runs but never refuses.

``--app peer`` drives the FastAPI + SQLAlchemy ORM peer of ``bench/peers.py`` instead, on the same seeded
database (``GET /agents``, ``POST /calls/full``): the two apps' CPU per request without their HTTP servers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import run as bench  # noqa: E402


async def _lifespan(app: Any) -> tuple[asyncio.Task[None], asyncio.Queue[dict[str, Any]]]:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}},
                                   inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    message = await outbox.get()
    if message["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"startup failed: {message}")
    return task, inbox


def _scope(method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
            "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {}}


async def _call(app: Any, scope: dict[str, Any], body: bytes) -> tuple[int, bytes]:
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


class StatementCounter:
    """What the engines send, through SQLAlchemy's public events on every ``Engine``."""

    def __init__(self) -> None:
        self.statements: dict[str, int] = {}
        self.commits = self.rollbacks = self.with_rows = 0
        self.sqlite = False
        self.on = False

    def install(self) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine
        from sqlalchemy.pool import Pool

        def executed(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if self.on:
                text = " ".join(statement.split())
                self.statements[text] = self.statements.get(text, 0) + 1
                self.sqlite = conn.dialect.name == "sqlite"

        def answered(_conn: Any, cursor: Any, *_: Any) -> None:
            self.with_rows += self.on and cursor.description is not None

        def committed(_conn: Any) -> None:
            self.commits += self.on

        def rolled_back(_conn: Any) -> None:
            self.rollbacks += self.on

        def reset(_dbapi: Any, _record: Any, state: Any) -> None:
            # the pool rolls a connection back as it comes back, unless the connection's own rollback just did
            self.rollbacks += self.on and not (state.transaction_was_reset or state.terminate_only)

        event.listen(Engine, "before_cursor_execute", executed)
        event.listen(Engine, "after_cursor_execute", answered)
        event.listen(Engine, "commit", committed)
        event.listen(Engine, "rollback", rolled_back)
        event.listen(Pool, "reset", reset)

    def report(self, requests: int) -> None:
        total = sum(self.statements.values())
        print(f"per request: {total / requests:.2f} statements, {self.commits / requests:.2f} commits, "
              f"{self.rollbacks / requests:.2f} rollbacks")
        if self.sqlite:
            # SQLAlchemy's aiosqlite adapter hands each step to the driver's thread and waits for it: a statement
            # opens a cursor, runs, fetches its rows when it has any and closes the cursor; a commit or a rollback
            # is one more
            hand_offs = 3 * total + self.with_rows + self.commits + self.rollbacks
            print(f"  {hand_offs / requests:.1f} hand-offs to the SQLite driver's thread")
        for text, count in sorted(self.statements.items(), key=lambda item: -item[1]):
            print(f"  {count / requests:5.2f}  {text[:160]}")


PATHS = {"parley": ("/v2/agents", "/v2/calls"), "peer": ("/agents", "/calls/full")}


async def drive(app: Any, route: str, key: str, bot: str, clients: int, requests: int,
                profiler: str, database: str | None = None, counter_: StatementCounter | None = None,
                paths: tuple[str, str] = PATHS["parley"]) -> None:
    task, inbox = await _lifespan(app)
    auth = (b"authorization", f"Bearer {key}".encode())
    counter = 0
    list_path, call_path = paths

    def request() -> tuple[dict[str, Any], bytes]:
        nonlocal counter
        counter += 1
        if route == "get":
            return _scope("GET", list_path, b"limit=25", [(b"host", b"bench"), auth]), b""
        body = json.dumps({"bot_id": bot, "destination_phone": f"+1415555{counter % 10000:04d}",
                           "contact_name": "Ann", "custom_data": {"plan": "gold"}}).encode()
        return _scope("POST", call_path, b"", [
            (b"host", b"bench"), auth, (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"idempotency-key", uuid.uuid4().hex.encode())]), body

    if route == "post":  # an active agent to call from, as bench/run.py picks it
        status, page = await _call(app, _scope("GET", list_path, b"limit=25", [(b"host", b"bench"), auth]), b"")
        bot = str(next(a["id"] for a in json.loads(page)["data"] if a["status"] == "active"))
    for _ in range(50):  # warm-up (caches, compiled statements, pool)
        status, answer = await _call(app, *request())
        if status not in (200, 201):
            raise RuntimeError(f"{status}: {answer[:300]!r}")

    remaining = requests
    failures = 0

    async def client() -> None:
        nonlocal remaining, failures
        while remaining > 0:
            remaining -= 1
            status, _ = await _call(app, *request())
            failures += status not in (200, 201)

    prof: Any = None
    if profiler == "pyinstrument":
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0005, async_mode="disabled")
        prof.start()
    elif profiler == "cprofile":
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    if counter_ is not None:
        counter_.on = True
    before = bench._processes() if database else {}
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    backends = bench._cpu_used(before, bench._processes(), None, database)["database"] if database else 0.0
    if counter_ is not None:
        counter_.on = False
        counter_.report(requests)
    if profiler == "pyinstrument":
        prof.stop()
        print(prof.output_text(unicode=False, color=False, show_all=False))
    elif profiler == "cprofile":
        import pstats

        prof.disable()
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats(60)
        stats.sort_stats("tottime").print_stats(40)
    print(f"{route}: {requests} requests, {failures} failed, {requests / wall:.0f} req/s, "
          f"{cpu / requests * 1000:.3f} ms CPU/request (this process)"
          + (f" + {backends / requests * 1000:.3f} ms (PostgreSQL backends)" if database else ""))
    await inbox.put({"type": "lifespan.shutdown"})
    await task


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--route", choices=["get", "post"], default="get")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--profiler", choices=["none", "pyinstrument", "cprofile"], default="none")
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    parser.add_argument("--postgres-admin-url", default=bench.PG_ADMIN)
    parser.add_argument("--statements", action="store_true", help="count the statements sent per request")
    parser.add_argument("--app", choices=["parley", "peer"], default="parley",
                        help="peer: bench/peers.py's FastAPI + SQLAlchemy ORM app on the same database")
    args = parser.parse_args()
    with bench.fresh_database(args.database, args.postgres_admin_url) as db:
        seeded = bench.seed(db, bare=False)
        os.environ.update(bench._server_env(db))
        os.environ["PARLEY_PROCESSES"] = "1"
        if args.app == "peer":
            import peers

            os.environ[peers.URL_ENV], os.environ[peers.ORG_ENV] = db.url, str(seeded.organization_id)
            app = peers.make_fastapi()
        else:
            from entrypoints.asgi_app import make_app

            app = make_app()
        statements = StatementCounter() if args.statements else None
        if statements is not None:
            statements.install()
        coroutine = drive(app, args.route, seeded.key, "", args.clients, args.requests, args.profiler,
                          db.cleanup_name, statements, PATHS[args.app])
        if args.loop == "uvloop":
            import uvloop

            uvloop.run(coroutine)
        else:
            asyncio.run(coroutine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
