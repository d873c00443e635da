"""The `parley` command: serve, worker, migrate and operator (admin) commands printing JSON."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any

from application.accounts import (
    CreateOrganization,
    CreateOrganizationCommand,
    CreateUser,
    CreateUserCommand,
    IssueApiKey,
    IssueApiKeyCommand,
)
from domain.errors import DomainError
from domain.rfc3339 import format_utc_or_none
from entrypoints.checks import configuration_problems
from entrypoints.ioc import build_container, configuration, schema_problem, upgrade, upgrade_problem
from entrypoints.observability import MULTIPROC_ENV
from entrypoints.runtime import configure_logging, tune_gc
from entrypoints.settings import Settings, SettingsError
from entrypoints.units import ScopedUnits
from entrypoints.worker import EVERY_JOB, JobSelection, JobSelectionError


def _settings() -> Settings:
    """The settings from PARLEY_* variables and .env, every feature's section checked before anything starts."""
    settings = Settings.from_env()
    configuration(settings)
    return settings


def migrate(settings: Settings) -> None:
    if settings.backend.sql:
        upgrade(settings.database_url)


class StartupRefused(Exception):
    """The database cannot be served: unreachable, or its schema behind (one line, for the operator)."""


def ready_database(settings: Settings, *, migrate_first: bool) -> None:
    """Migrate (``migrate_first``) or only verify that the schema is at the migrations' heads; raises
    ``StartupRefused`` with a one-line reason when the database is unreachable or behind."""
    if not settings.backend.sql:
        return
    problem = upgrade_problem(settings.database_url) if migrate_first \
        else asyncio.run(schema_problem(settings.database_url))
    if problem:
        raise StartupRefused(problem)


async def _in_transaction(settings: Settings, work: Any) -> Any:
    """One operator command: one unit of work (``Units``, as the worker's jobs open theirs), committed."""
    container = build_container(settings)
    try:
        return await ScopedUnits(container).run(work)
    finally:
        await container.close()


def _print(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, default=str))


async def create_org(settings: Settings, name: str, plan: str, org_type: str, parent: int | None) -> dict[str, Any]:
    async def work(r: Any) -> dict[str, Any]:
        org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand(name, plan, org_type, parent))
        return {"id": org.id, "name": org.name, "plan": org.plan, "org_type": org.org_type, "parent_id": org.parent_id}

    return await _in_transaction(settings, work)


async def create_key(settings: Settings, org: int, scopes: list[str], name: str,
                     expires_in_days: int | None) -> dict[str, Any]:
    expires = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def work(r: Any) -> dict[str, Any]:
        issued = await (await r.get(IssueApiKey)).execute(IssueApiKeyCommand(org, name, tuple(scopes), expires))
        rec = issued.record
        return {"id": rec.id, "key": issued.secret, "organization_id": rec.organization_id, "name": rec.name,
                "scopes": list(rec.scopes), "expires_at": format_utc_or_none(rec.expires_at)}

    return await _in_transaction(settings, work)


async def create_user(settings: Settings, org: int, email: str, password: str,
                      role: str = "owner") -> dict[str, Any]:
    async def work(r: Any) -> dict[str, Any]:
        user_id = await (await r.get(CreateUser)).execute(CreateUserCommand(org, email, password, role))
        return {"id": user_id, "organization_id": org, "email": email.lower(), "role": role}

    return await _in_transaction(settings, work)


async def demo_key(settings: Settings) -> dict[str, Any]:
    """The demo organization and key `make run` prints; created once, kept under var/."""
    path = settings.var_dir / "demo.json"
    if path.is_file():
        return json.loads(path.read_text())
    org = await create_org(settings, "Demo Agency", "enterprise", "partner", None)
    key = await create_key(settings, org["id"], ["*"], "demo", None)
    demo = {"organization_id": org["id"], "key_id": key["id"], "key": key["key"]}
    settings.var_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(demo))
    path.chmod(0o600)
    return demo


def welcome(demo: dict[str, Any], host: str, port: int, cli: str = "parley") -> str:
    """What `make run` prints before serving: the demo key, a first request, the dashboard's address and the
    command that creates a dashboard user of the demo organization (``cli``: how this shell reaches `parley`)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # where a browser on this machine finds it
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    return (f"\nDemo API key (organization {demo['organization_id']}, all scopes):\n\n    {demo['key']}\n\n"
            f"Try: curl -H \"Authorization: Bearer {demo['key']}\" {base}/v2/agents\n\n"
            f"Dashboard: {base}/dashboard\n"
            f"Create a dashboard user to sign in with (in another terminal, in this directory):\n"
            f"    {cli} admin create-user --org {demo['organization_id']} --email you@example.com "
            f"--password 'choose-a-password'\n")


def ensure_address_free(host: str, port: int) -> None:
    """Refuse to start on an address another server listens on. The ASGI servers bind with ``SO_REUSEPORT`` (their
    own worker processes share the socket), so a second ``parley serve`` on the same host and port would start too
    and silently take half of the connections. A socket bound without it fails while anyone listens there."""
    try:
        candidates = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupRefused(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    for family, kind, proto, _, address in candidates[:1]:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed server's TIME_WAIT is no owner
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise StartupRefused(f"{host}:{port} is already in use (another `parley serve`, or another "
                                         "program, listens there): stop it or choose another --port") from None
                raise StartupRefused(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def serve(settings: Settings, host: str, port: int, workers: int, run_worker: bool, server: str,
          migrate_first: bool = True, loop: str = "auto") -> int:
    ensure_address_free(host, port)
    ready_database(settings, migrate_first=migrate_first)
    env = dict(os.environ)
    env["PARLEY_SECRET_KEY"] = settings.with_secret_key().secret_key
    env["PARLEY_PROCESSES"] = str(workers)
    worker_process = None
    if run_worker and workers == 1:
        env["PARLEY_IN_PROCESS_WORKER"] = "1"
    metrics_dir = None
    if workers > 1 and not env.get(MULTIPROC_ENV):
        # several processes: prometheus-client's multiprocess mode, in a fresh directory for this run
        metrics_dir = env[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="parley-metrics-")
    if run_worker and workers > 1:
        worker_process = subprocess.Popen([sys.executable, "-m", "entrypoints.cli", "worker", "--no-migrate"],
                                          env=env)
    os.environ.update(env)
    try:
        if server == "granian":
            from granian import Granian
            from granian.constants import Interfaces, Loops

            Granian("entrypoints.asgi_app:make_app", address=host, port=port, workers=workers,
                    interface=Interfaces.ASGI, factory=True, loop=Loops(loop)).serve()
        else:
            import uvicorn

            uvicorn.run("entrypoints.asgi_app:make_app", factory=True, host=host, port=port, workers=workers,
                        log_level=settings.log_level.lower(), access_log=False, lifespan="on", loop=loop)
    finally:
        if worker_process is not None:
            worker_process.terminate()
            worker_process.wait(timeout=20)
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def job_selection(only: str | None, exclude: str | None) -> JobSelection:
    """``--jobs`` and ``--exclude-jobs``: comma-separated names of job kinds and resident work (checked against
    the known names when the worker starts)."""
    def names(text: str | None) -> frozenset[str]:
        return frozenset(name.strip() for name in (text or "").split(",") if name.strip())

    return JobSelection(names(only) if only is not None else None, names(exclude))


def worker(settings: Settings, migrate_first: bool = True, selection: JobSelection | None = None) -> int:
    from entrypoints.worker import run_worker

    settings = settings.with_secret_key()
    ready_database(settings, migrate_first=migrate_first)
    configure_logging(settings.log_level, settings.log_format)
    tune_gc(settings.gc_threshold)
    try:
        asyncio.run(run_worker(settings, build_container, selection or EVERY_JOB))
    except JobSelectionError as exc:
        raise StartupRefused(str(exc)) from None
    return 0


def check(settings: Settings, workers: int, separate_worker: bool) -> int:
    problems = configuration_problems(settings, workers=workers, separate_worker=separate_worker)
    for problem in problems:
        print(f"parley check: {problem}")
    if not problems:
        print("parley check: no configuration problems")
    return 1 if problems else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parley", description="Parley partner API")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="migrate, then serve the API (with the background worker)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--no-worker", action="store_true")
    s.add_argument("--server", choices=["uvicorn", "granian"], default=os.environ.get("PARLEY_SERVER", "granian"))
    s.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default=os.environ.get("PARLEY_LOOP", "auto"),
                   help="the event loop: auto = uvloop when installed (pip install uvloop), else asyncio")
    s.add_argument("--no-migrate", action="store_true",
                   help="do not migrate: refuse to start unless the schema is up to date (`parley migrate` ran)")
    w = sub.add_parser("worker", help="run only the background worker")
    w.add_argument("--no-migrate", action="store_true",
                   help="do not migrate: refuse to start unless the schema is up to date (`parley migrate` ran)")
    w.add_argument("--jobs", default=None, metavar="KINDS",
                   help="run only these job kinds and resident work (comma-separated names, e.g. campaigns.dial or "
                        "webhooks.deliver); default: all of it")
    w.add_argument("--exclude-jobs", default=None, metavar="KINDS",
                   help="run all but these job kinds and resident work (comma-separated, e.g. campaigns.dial)")
    c = sub.add_parser("check", help="print configuration problems (exit 1 if any)")
    c.add_argument("--workers", type=int, default=1, help="the --workers of the `parley serve` to check for")
    c.add_argument("--no-worker", action="store_true",
                   help="the background worker runs as a separate `parley worker` process")
    sub.add_parser("migrate", help="bring the database schema up to date")
    admin = sub.add_parser("admin", help="operator commands (print JSON)").add_subparsers(dest="admin", required=True)
    o = admin.add_parser("create-org")
    o.add_argument("--name", required=True)
    o.add_argument("--plan", choices=["starter", "business", "enterprise"], default="business")
    o.add_argument("--type", dest="org_type", choices=["standard", "partner"], default="standard")
    o.add_argument("--parent", type=int, default=None)
    k = admin.add_parser("create-key")
    k.add_argument("--org", type=int, required=True)
    k.add_argument("--scopes", required=True, help='comma-separated, e.g. "agents:read,calls:*"')
    k.add_argument("--name", default="cli")
    k.add_argument("--expires-in-days", type=int, default=None)
    u = admin.add_parser("create-user")
    u.add_argument("--org", type=int, required=True)
    u.add_argument("--email", required=True)
    u.add_argument("--password", required=True)
    u.add_argument("--role", choices=["owner", "admin", "member", "viewer"], default="owner")
    d = admin.add_parser("demo-key", help="create (once) and print the demo organization's key")
    d.add_argument("--welcome", action="store_true",
                   help="print, instead of JSON, what `make run` shows: the key, a first request, the dashboard's "
                        "address and how to create a dashboard user")
    d.add_argument("--host", default="127.0.0.1", help="with --welcome: the host `parley serve` listens on")
    d.add_argument("--port", type=int, default=8000, help="with --welcome: the port `parley serve` listens on")
    d.add_argument("--cli", default="parley", help="with --welcome: how the printed command reaches `parley`")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = _settings()
    except SettingsError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        return check(settings, args.workers, args.no_worker)
    try:
        if args.command == "serve":
            return serve(settings, args.host, args.port, args.workers, not args.no_worker, args.server,
                         not args.no_migrate, args.loop)
        if args.command == "worker":
            return worker(settings, not args.no_migrate, job_selection(args.jobs, args.exclude_jobs))
    except StartupRefused as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 1
    if args.command == "migrate":
        try:
            ready_database(settings, migrate_first=True)
        except StartupRefused as exc:
            print(f"parley: {exc}", file=sys.stderr)
            return 1
        print(json.dumps({"migrated": True}))
        return 0
    migrate(settings)
    try:
        if args.admin == "create-org":
            _print(asyncio.run(create_org(settings, args.name, args.plan, args.org_type, args.parent)))
        elif args.admin == "create-key":
            scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
            _print(asyncio.run(create_key(settings, args.org, scopes, args.name, args.expires_in_days)))
        elif args.admin == "create-user":
            _print(asyncio.run(create_user(settings, args.org, args.email, args.password, args.role)))
        elif args.admin == "demo-key":
            demo = asyncio.run(demo_key(settings))
            if args.welcome:
                print(welcome(demo, args.host, args.port, args.cli), flush=True)
            else:
                _print(demo)
    except DomainError as exc:
        print(json.dumps({"error": {"code": exc.code, "message": exc.message, "details": exc.details}}),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
