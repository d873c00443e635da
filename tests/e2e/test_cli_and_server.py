"""The operator's commands and a real server process, as a newcomer would use them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port

pytestmark = pytest.mark.slow
PARLEY = [sys.executable, "-m", "entrypoints.cli"]


def _run(args: list[str], env: dict[str, str], cwd: Path) -> dict:
    out = subprocess.run([*PARLEY, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])



@pytest.fixture
def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    env = {**os.environ, "PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}",
           "PARLEY_VAR_DIR": str(tmp_path / "var"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return tmp_path, env


def test_admin_commands_print_json(workdir: tuple[Path, dict[str, str]]) -> None:
    cwd, env = workdir
    assert _run(["migrate"], env, cwd) == {"migrated": True}
    org = _run(["admin", "create-org", "--name", "Agency", "--plan", "enterprise", "--type", "partner"], env, cwd)
    child = _run(["admin", "create-org", "--name", "Client", "--parent", str(org["id"])], env, cwd)
    assert child["parent_id"] == org["id"] and child["plan"] == "business"
    key = _run(["admin", "create-key", "--org", str(org["id"]), "--scopes", "agents:read,calls:*",
                "--expires-in-days", "3"], env, cwd)
    assert key["key"].startswith("parley_sk_") and key["scopes"] == ["agents:read", "calls:*"]
    user = _run(["admin", "create-user", "--org", str(org["id"]), "--email", "Ops@Example.com",
                 "--password", "correct horse"], env, cwd)
    assert user["email"] == "ops@example.com"
    bad = subprocess.run([*PARLEY, "admin", "create-key", "--org", str(org["id"]), "--scopes", "nope"], env=env,
                         cwd=cwd, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and json.loads(bad.stderr)["error"]["code"] == "bad_request"


def test_serve_answers_with_the_demo_key(workdir: tuple[Path, dict[str, str]]) -> None:
    cwd, env = workdir
    demo = _run(["admin", "demo-key"], env, cwd)
    assert _run(["admin", "demo-key"], env, cwd) == demo  # created once
    port = free_port()
    server = subprocess.Popen([*PARLEY, "serve", "--port", str(port)], env=env, cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/v2/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        headers = {"Authorization": f"Bearer {demo['key']}"}
        created = httpx.post(f"{base}/v2/agents", json={"name": "Desk"}, headers=headers, timeout=5)
        assert created.status_code == 201
        listed = httpx.get(f"{base}/api/v2/agents", headers=headers, timeout=5).json()
        assert listed["meta"]["total"] == 1
        assert httpx.get(f"{base}/v2/agents", timeout=5).json()["error"]["code"] == "MISSING_AUTH"
    finally:
        server.terminate()
        server.wait(timeout=20)


def _wait_healthy(base: str, process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/v2/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert process.poll() is None, "server exited"
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.2)


@pytest.mark.parametrize("server_kind", ["granian", "uvicorn"])
def test_a_normal_shutdown_prints_no_pool_or_traceback_lines(workdir: tuple[Path, dict[str, str]],
                                                             server_kind: str) -> None:
    """`parley serve` (API + in-process worker, both with their engine) and `parley worker` stop on a
    signal without SQLAlchemy's pool lines ("Pool disposed ... Current Overflow: -10") or tracebacks."""
    import signal

    cwd, env = workdir
    demo = _run(["admin", "demo-key"], env, cwd)
    port = free_port()
    server = subprocess.Popen([*PARLEY, "serve", "--port", str(port), "--server", server_kind], env=env, cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    worker = subprocess.Popen([*PARLEY, "worker"], env=env, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(base, server)
        listed = httpx.get(f"{base}/v2/agents", headers={"Authorization": f"Bearer {demo['key']}"}, timeout=5)
        assert listed.status_code == 200  # the API's engine has connected
        time.sleep(1)  # the worker processes have polled the database
        server.send_signal(signal.SIGINT)
        worker.send_signal(signal.SIGTERM)
        served, _ = server.communicate(timeout=30)
        worked, _ = worker.communicate(timeout=30)
    finally:
        for process in (server, worker):
            if process.poll() is None:
                process.kill()
                process.wait(10)
    for name, output in (("serve", served), ("worker", worked)):
        assert "Pool disposed" not in output and "Pool recreating" not in output, (name, output)
        assert "Traceback" not in output and " ERROR " not in output, (name, output)
    assert worker.returncode == 0, worked


def test_make_run_serves_on_the_port_asked_for_and_says_so(workdir: tuple[Path, dict[str, str]]) -> None:
    """`make run PORT=...` serves there, and the printed curl hint and dashboard address name that host and port."""
    import re
    import signal
    import threading

    _, env = workdir
    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".venv" / ".installed").is_file():
        pytest.skip("make run needs the project's .venv (make venv)")
    port = free_port()
    run = subprocess.Popen(["make", "--no-print-directory", "run", f"PORT={port}"], cwd=repo, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(run.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not any("Try: curl" in line for line in lines):
            assert run.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        [hint] = [line for line in lines if "Try: curl" in line]
        found = re.search(r'Bearer (\S+)" (http://\S+)', hint)
        assert found is not None, hint
        key, url = found.groups()
        assert url == f"http://127.0.0.1:{port}/v2/agents"
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=2)
                break
            except httpx.TransportError:
                assert run.poll() is None and time.monotonic() < deadline, "".join(lines)
                time.sleep(0.2)
        assert answer.status_code == 200
        # the dashboard's address and the command that creates a user of the demo organization are printed too
        [dashboard] = [line.split("Dashboard: ", 1)[1].strip() for line in lines if line.startswith("Dashboard: ")]
        assert dashboard == f"http://127.0.0.1:{port}/dashboard"
        assert httpx.get(dashboard, timeout=5).status_code == 303  # to the sign-in form
        assert any(".venv/bin/parley admin create-user --org " in line for line in lines), "".join(lines)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
            try:
                run.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait(10)
        reader.join(5)


@pytest.mark.postgres
def test_two_api_processes_on_one_postgresql_share_the_rate_limit(tmp_path: Path, postgres_url: str) -> None:
    """The README's deployment: `parley migrate`, then two `parley serve --no-worker` started separately on
    one PostgreSQL database, default settings. A key's per-minute quota is one quota across both."""
    env = {**os.environ, "PARLEY_DATABASE_URL": postgres_url, "PARLEY_VAR_DIR": str(tmp_path / "var"),
           "PARLEY_RATE_LIMIT_PER_MINUTE": "6", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("PARLEY_RATE_LIMIT_BACKEND", None)
    assert _run(["migrate"], env, tmp_path) == {"migrated": True}
    demo = _run(["admin", "demo-key"], env, tmp_path)
    ports = [free_port(), free_port()]
    servers = []
    try:
        for port in ports:
            servers.append(subprocess.Popen([*PARLEY, "serve", "--no-worker", "--port", str(port)], env=env,
                                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            _wait_healthy(f"http://127.0.0.1:{port}", servers[-1])
        if time.time() % 60 > 45:  # the counters are per clock minute: start the requests in a fresh one
            time.sleep(61 - time.time() % 60)
        headers = {"Authorization": f"Bearer {demo['key']}"}
        statuses = [httpx.get(f"http://127.0.0.1:{ports[i % 2]}/v2/agents", headers=headers, timeout=5).status_code
                    for i in range(10)]
        assert statuses == [200] * 6 + [429] * 4
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)


def test_a_second_serve_on_the_same_port_refuses_to_start(workdir: tuple[Path, dict[str, str]]) -> None:
    """The ASGI server binds with SO_REUSEPORT: without a check, a second `parley serve` on the same host and port
    started too and took half of the connections. It now stops at once with a clear message and exit status 1."""
    cwd, env = workdir
    port = free_port()
    first = subprocess.Popen([*PARLEY, "serve", "--port", str(port)], env=env, cwd=cwd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert first.poll() is None, "the first server exited"
            try:
                if httpx.get(f"{base}/v2/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the first server did not start"
            time.sleep(0.1)
        second = subprocess.run([*PARLEY, "serve", "--port", str(port)], env=env, cwd=cwd, capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 1, second.stderr
        assert f"127.0.0.1:{port} is already in use" in second.stderr
        assert first.poll() is None and httpx.get(f"{base}/v2/health", timeout=5).status_code == 200
    finally:
        first.terminate()
        first.wait(timeout=20)
