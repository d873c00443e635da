"""Talking to an agent from the browser: Debian's chromium with a fake microphone playing a caller's words
(synthesized offline with eSpeak NG into the test's directory, tests/browser/microphone.py), against a real
`parley serve` on the offline engines. The dashboard's "Talk to this agent" opens a web call. The agent hears the
question and answers from its knowledge base (the call log's transcript shows the answer); a caller who asks for
"tomorrow at ten" is booked (the appointment exists afterwards); a caller who says nothing is told goodbye when the
silence timeout passes; a custom http tool is called with what the caller said (the tool's server receives the
signed request) and its result is spoken; the published version speaks, not the draft; and a caller speaking over
the agent's long answer cuts it (the transcript keeps what was heard)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.microphone import caller_wav, launch_arguments, script_wav
from tests.processes import PARLEY, Server, parley_json, sqlite_env, until

# serial: the caller's words travel in real time (chromium's fake microphone, its audio thread, the page's
# capture, the websocket); next to another test process competing for the two cores, a call once lost words on
# the way and the recognizer heard "i reserve parking" for "where is the parking"
pytestmark = [pytest.mark.slow, pytest.mark.serial]

EMAIL = "talk@example.com"
PASSWORD = "browser-web-call-password"
GREETING = "Hello, this is the clinic."
ANSWER = "The parking is behind the building."
DOCUMENT = f"Visiting the clinic. {ANSWER} Visits last half an hour."
# the offline recognizer listens for the words of the agent's texts: callers ask where the parking is, or for a
# time to visit ("is parking free" proved unreliable: "free" is heard as "three", a time)
PROMPT = "You answer questions about the clinic, such as where is the parking, and book visits."


@dataclass
class Clinic:
    server: Server
    api: httpx.AsyncClient
    agent_id: int
    calendar_id: int


async def _json(client: httpx.AsyncClient, method: str, path: str, expected: int, **kwargs: Any) -> Any:
    response = await client.request(method, path, **kwargs)
    assert response.status_code == expected, response.text
    return response.json()["data"]


async def publish_agent(api: httpx.AsyncClient, *, document: str | None = None, **fields: Any) -> int:
    """A published agent (``fields`` over the clinic's prompt and greeting), with a knowledge base holding
    ``document`` (processed) when one is given."""
    agent = await _json(api, "POST", "/agents", 201, json={
        "name": "Clinic desk", "prompt": PROMPT, "first_message": GREETING, "timezone": "UTC", **fields})
    if document is not None:
        kb = await _json(api, "POST", "/knowledge-bases", 201, json={"name": "Clinic", "agent_id": agent["id"]})
        await _json(api, "POST", f"/knowledge-bases/{kb['id']}/documents", 201, files={
            "files": ("visitors.txt", document.encode(), "text/plain")})

        async def processed() -> bool:
            docs = await _json(api, "GET", f"/knowledge-bases/{kb['id']}/documents", 200)
            items = docs["documents"] if isinstance(docs, dict) else docs
            return bool(items) and all(d["status"] in ("ready", "processed", "completed") for d in items)

        await until(processed, 60, "the document to be processed")
    await _json(api, "POST", f"/agents/{agent['id']}/publish", 200)
    return int(agent["id"])


@contextlib.asynccontextmanager
async def served_clinic(tmp_path: Path, *, document: str = DOCUMENT, **settings: str) -> AsyncIterator[Clinic]:
    """A served organization (PARLEY_* ``settings`` over the defaults) with a user, an agent on the offline engines,
    a knowledge base whose ``document`` holds the answer, and a calendar open every day."""
    # the test asks the API every 0.2 s while the call goes on: budgets that polling cannot spend (a 429 inside
    # the wait would end the conversation early and read as "nothing booked")
    env = sqlite_env(tmp_path, PARLEY_SECRET_KEY="browser-secret", PARLEY_ALLOW_LOOPBACK_TARGETS="true",
                     PARLEY_RATE_LIMIT_PER_MINUTE="10000", PARLEY_RATE_LIMIT_PER_HOUR="100000",
                     PARLEY_ORG_RATE_LIMIT_PER_MINUTE="10000", PARLEY_ORG_RATE_LIMIT_PER_HOUR="100000", **settings)
    await asyncio.to_thread(subprocess.run, [*PARLEY, "migrate"], env=env, cwd=tmp_path, check=True,
                            capture_output=True, timeout=180)
    # the server starts while the operator's commands run (each is a process start of some 2.5 s; the user and the
    # key need only the organization)
    server = Server(env, tmp_path, log=tmp_path / "server.log")
    try:
        org = await asyncio.to_thread(parley_json, ["admin", "create-org", "--name", "Clinic", "--plan",
                                                    "enterprise"], env, tmp_path)
        _, key = await asyncio.gather(
            asyncio.to_thread(parley_json, ["admin", "create-user", "--org", str(org["id"]), "--email", EMAIL,
                                            "--password", PASSWORD], env, tmp_path),
            asyncio.to_thread(parley_json, ["admin", "create-key", "--org", str(org["id"]), "--scopes", "*"],
                              env, tmp_path))
        await server.ready(120)
        headers = {"Authorization": f"Bearer {key['key']}"}
        async with httpx.AsyncClient(base_url=f"{server.base}/v2", headers=headers, timeout=30) as api:
            calendar = await _json(api, "POST", "/scheduling/calendars", 201, json={"name": "Desk", "timezone": "UTC"})
            for weekday in range(7):
                await _json(api, "POST", f"/scheduling/calendars/{calendar['id']}/rules", 201,
                            json={"weekday": weekday, "start_time": "08:00", "end_time": "18:00"})
            agent_id = await publish_agent(api, document=document, calendar_id=calendar["id"])
            yield Clinic(server, api, agent_id, int(calendar["id"]))
    finally:
        server.stop()


@pytest.fixture(scope="module")
async def clinic(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Clinic]:
    """One clinic for the module's tests that need no settings of their own: a server and its operator's commands
    take some 8 s to start, and each test finds its own call (``_talk`` leaves out the calls made before it)."""
    async with served_clinic(tmp_path_factory.mktemp("clinic")) as served:
        yield served


async def _never() -> bool:
    return False  # nothing to see mid-call: the transcript is written when the call ends


async def _talk(clinic: Clinic, wav: Path, *, seconds: float, until_done: Callable[[], Awaitable[Any]] = _never,
                agent_id: int | None = None, hang_up: bool = True, name: str = "web-call") -> dict[str, Any]:
    """Sign in with a microphone playing ``wav``, press "Talk to this agent" on the page of ``agent_id`` (the
    clinic's agent by default), wait for ``until_done()`` (or ``seconds``) and hang up; with ``hang_up=False``,
    wait instead for Parley to end the call (within ``seconds``). The call once it is finished."""
    from playwright.async_api import async_playwright

    agent_id = agent_id or clinic.agent_id
    base = f"{clinic.server.base}/dashboard"
    before = {call["id"] for call in await _json(clinic.api, "GET", f"/calls?agent_id={agent_id}", 200)}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**launch_arguments(wav))  # type: ignore[arg-type]
        context = await browser.new_context()
        context.set_default_timeout(30_000)
        page = await context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        try:
            await page.goto(f"{base}/login")
            await page.fill("input[name=email]", EMAIL)
            await page.fill("input[name=password]", PASSWORD)
            await page.click("button[type=submit]")
            await page.wait_for_url(f"{base}**")
            await page.goto(f"{base}/agents/{agent_id}")
            await page.click("#talk-to-agent")
            await page.wait_for_selector("#talk-to-agent[data-state=live]")
            if hang_up:
                with contextlib.suppress(AssertionError):  # the call log below says what was heard
                    await until(until_done, seconds, "the conversation")
            else:
                await page.wait_for_selector("#talk-to-agent[data-state=ended]", timeout=seconds * 1000)
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
            if hang_up:
                await page.click("#talk-to-agent")
                await page.wait_for_selector("#talk-to-agent[data-state=ended]")
            assert not [p for p in problems if "Content Security Policy" in p], problems
        finally:
            await context.close()
            await browser.close()
    return await finished_web_call(clinic.api, agent_id, before)


async def finished_web_call(api: httpx.AsyncClient, agent_id: int, before: set[int]) -> dict[str, Any]:
    """The agent's web call (none of the calls ``before``), once it is finished (its call log written)."""
    async def finished() -> dict[str, Any] | None:
        calls = await _json(api, "GET", f"/calls?agent_id={agent_id}", 200)
        done = [c for c in calls if c["direction"] == "web" and c["call_log_id"] and c["id"] not in before]
        return done[0] if done else None

    return dict(await until(finished, 30, "the web call to be finished"))


async def _log(clinic: Clinic, call: dict[str, Any]) -> dict[str, Any]:
    return dict(await _json(clinic.api, "GET", f"/call-logs/{call['call_log_id']}", 200))


async def _transcript(clinic: Clinic, call: dict[str, Any]) -> list[dict[str, Any]]:
    return list((await _log(clinic, call))["transcript"])


def _said(transcript: list[dict[str, Any]], role: str) -> list[str]:
    return [line["text"] for line in transcript if line["role"] == role]


async def test_the_agent_answers_a_spoken_question_from_its_knowledge_base(clinic: Clinic, tmp_path: Path) -> None:
    wav = caller_wav(tmp_path / "question.wav", "where is the parking")
    call = await _talk(clinic, wav, seconds=25)
    transcript = await _transcript(clinic, call)
    assert call["status"] == "completed", call
    assert transcript[0] == {**transcript[0], "role": "agent", "text": GREETING}
    assert any("parking" in text for text in _said(transcript, "user")), transcript
    assert any(ANSWER in text for text in _said(transcript, "agent")), transcript


async def test_a_caller_books_tomorrow_at_ten_by_voice(clinic: Clinic, tmp_path: Path) -> None:
    wav = caller_wav(tmp_path / "booking.wav", "tomorrow at ten please", words_per_minute=140)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date()
    ten = datetime(tomorrow.year, tomorrow.month, tomorrow.day, 10, tzinfo=UTC)

    async def booked() -> list[dict[str, Any]]:
        found = await _json(clinic.api, "GET", f"/scheduling/appointments?calendar_id={clinic.calendar_id}", 200)
        items = found["appointments"] if isinstance(found, dict) else found
        return [a for a in items if a["status"] != "cancelled"]

    call = await _talk(clinic, wav, until_done=booked, seconds=60)
    appointments = await booked()
    transcript = await _transcript(clinic, call)
    assert appointments, transcript
    assert datetime.fromisoformat(appointments[0]["slot_start"].replace("Z", "+00:00")) == ten, (appointments,
                                                                                                 transcript)
    assert appointments[0]["call_id"] == call["id"]
    assert any("booked" in text for text in _said(transcript, "agent")), transcript


SILENCE_SECONDS = 3


async def test_a_silent_caller_is_told_goodbye_and_the_call_ends_by_itself(tmp_path: Path) -> None:
    wav = script_wav(tmp_path / "silence.wav", 30.0)
    async with served_clinic(tmp_path, PARLEY_CONVERSATION_SILENCE_TIMEOUT_SECONDS=str(SILENCE_SECONDS)) as clinic:
        call = await _talk(clinic, wav, seconds=SILENCE_SECONDS + 25, hang_up=False, name="web-call-silence")
        transcript = await _transcript(clinic, call)
    assert (call["status"], call["end_reason"]) == ("completed", "silence_timeout"), call
    assert _said(transcript, "user") == [], transcript
    assert _said(transcript, "agent")[0] == GREETING
    assert "haven't heard from you" in _said(transcript, "agent")[-1], transcript


class ToolServer:
    """A local HTTP server for an agent's custom tool: ``/weather`` answers a forecast; every request's path, JSON
    body and headers are kept."""

    def __init__(self) -> None:
        seen: list[tuple[str, Any, dict[str, str]]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append((self.path, json.loads(body or b"null"), {k.lower(): v for k, v in self.headers.items()}))
                payload = json.dumps({"forecast": "sunny"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_a_custom_tool_is_called_with_what_the_caller_said_and_its_result_is_spoken(
        clinic: Clinic, tmp_path: Path) -> None:
    tools = ToolServer()
    try:
        agent_id = await publish_agent(
            clinic.api, prompt="You tell callers the weather in london or paris. Callers ask what is the weather in "
                               "london.",
            tools=[{"type": "http", "name": "weather", "description": "The weather forecast of a city",
                    "url": f"{tools.url}/weather", "timeout_ms": 3000, "parameters": {
                        "type": "object", "required": ["city"],
                        "properties": {"city": {"type": "string", "enum": ["london", "paris"]}}}}])
        wav = caller_wav(tmp_path / "weather.wav", "what is the weather in london")
        call = await _talk(clinic, wav, agent_id=agent_id, seconds=22, name="web-call-tool")
    finally:
        tools.close()
    transcript = await _transcript(clinic, call)
    assert [(path, body) for path, body, _ in tools.seen] == [("/weather", {"city": "london"})], transcript
    (_, _, headers), = tools.seen
    assert "x-webhook-signature" in headers, headers  # signed like a webhook
    assert any("sunny" in text for text in _said(transcript, "agent")), transcript


async def test_the_published_version_speaks_not_the_draft(clinic: Clinic, tmp_path: Path) -> None:
    await _json(clinic.api, "PATCH", f"/agents/{clinic.agent_id}", 200,
                json={"first_message": "This draft greeting is never heard."})
    wav = script_wav(tmp_path / "quiet.wav", 30.0)
    call = await _talk(clinic, wav, seconds=6, name="web-call-published")
    log = await _log(clinic, call)
    assert _said(log["transcript"], "agent") == [GREETING], log["transcript"]
    assert log["agent_version"] == 1, log


LONG_ANSWER = ("The parking is behind the building, past the garden and the bicycle shed, and it is open every day "
               "of the week from eight in the morning until six in the evening, with twenty spaces for visitors and "
               "two for ambulances near the back door.")


async def test_a_caller_speaking_over_the_agents_long_answer_cuts_it(tmp_path: Path) -> None:
    # the question at 6 s, answered from about 8 s for some 15 s; "thank you" over it at 12.5 s
    wav = script_wav(tmp_path / "interrupt.wav", 6.0, "where is the parking", 4.0, "thank you", 25.0)
    async with served_clinic(tmp_path, document=f"Visiting the clinic. {LONG_ANSWER}") as clinic:
        call = await _talk(clinic, wav, seconds=22, name="web-call-interrupted")
        transcript = await _transcript(clinic, call)
    answers = [(index, line["text"]) for index, line in enumerate(transcript)
               if line["role"] == "agent" and line["text"].startswith("The parking")]
    assert answers, transcript
    index, heard = answers[0]
    assert LONG_ANSWER.startswith(heard.rstrip(".")) and len(heard) < len(LONG_ANSWER) * 0.8, transcript  # cut
    assert transcript[index + 1]["role"] == "user", transcript  # by the caller, who spoke next
