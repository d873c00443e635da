"""Talking to an agent from the browser: Debian's chromium with a fake microphone playing a caller's question
(synthesized offline with eSpeak NG into the test's directory), against a real `parley serve` on the offline
engines. The dashboard's "Talk to this agent" opens a web call; the agent hears the question and answers from its
knowledge base (the call log's transcript shows the answer), and a caller who asks for "tomorrow at ten" is booked
(the appointment exists afterwards)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import subprocess
import wave
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import SCREENSHOTS, _unavailable, chromium_executable
from tests.processes import PARLEY, Server, parley_json, sqlite_env, until

pytestmark = pytest.mark.slow

EMAIL = "talk@example.com"
PASSWORD = "browser-web-call-password"
ANSWER = "The parking is behind the building."


def caller_wav(path: Path, text: str, *, lead_seconds: float = 6.0, tail_seconds: float = 12.0,
               words_per_minute: int = 140) -> Path:
    """The caller's microphone: silence while the agent greets, the question, then silence (chromium loops it)."""
    if shutil.which("espeak-ng") is None:
        _unavailable("espeak-ng is not installed (apt-get install espeak-ng)")
    spoken = subprocess.run(["espeak-ng", "-v", "en-us", "-s", str(words_per_minute), "--stdout", text],
                            capture_output=True, check=True, timeout=30).stdout
    with wave.open(io.BytesIO(spoken)) as source:
        rate, width, channels = source.getframerate(), source.getsampwidth(), source.getnchannels()
        frames = source.readframes(source.getnframes())
    silence = b"\0" * width * channels
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(width)
        out.setframerate(rate)
        out.writeframes(silence * int(rate * lead_seconds) + frames + silence * int(rate * tail_seconds))
    return path


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


@pytest.fixture
async def clinic(tmp_path: Path) -> AsyncIterator[Clinic]:
    """A served organization with a user, an agent on the offline engines, a knowledge base whose document holds
    the answer, and a calendar open every day."""
    # the test asks the API every 0.2 s while the call goes on: budgets that polling cannot spend (a 429 inside
    # the wait would end the conversation early and read as "nothing booked")
    env = sqlite_env(tmp_path, PARLEY_SECRET_KEY="browser-secret", PARLEY_ALLOW_LOOPBACK_TARGETS="true",
                     PARLEY_RATE_LIMIT_PER_MINUTE="10000", PARLEY_RATE_LIMIT_PER_HOUR="100000",
                     PARLEY_ORG_RATE_LIMIT_PER_MINUTE="10000", PARLEY_ORG_RATE_LIMIT_PER_HOUR="100000")
    await asyncio.to_thread(subprocess.run, [*PARLEY, "migrate"], env=env, cwd=tmp_path, check=True,
                            capture_output=True, timeout=180)
    org = await asyncio.to_thread(parley_json, ["admin", "create-org", "--name", "Clinic", "--plan", "enterprise"],
                                  env, tmp_path)
    await asyncio.to_thread(parley_json, ["admin", "create-user", "--org", str(org["id"]), "--email", EMAIL,
                                          "--password", PASSWORD], env, tmp_path)
    key = await asyncio.to_thread(parley_json, ["admin", "create-key", "--org", str(org["id"]), "--scopes", "*"],
                                  env, tmp_path)
    server = Server(env, tmp_path, log=tmp_path / "server.log")
    try:
        await server.ready(120)
        headers = {"Authorization": f"Bearer {key['key']}"}
        async with httpx.AsyncClient(base_url=f"{server.base}/v2", headers=headers, timeout=30) as api:
            calendar = await _json(api, "POST", "/scheduling/calendars", 201, json={"name": "Desk", "timezone": "UTC"})
            for weekday in range(7):
                await _json(api, "POST", f"/scheduling/calendars/{calendar['id']}/rules", 201,
                            json={"weekday": weekday, "start_time": "08:00", "end_time": "18:00"})
            agent = await _json(api, "POST", "/agents", 201, json={
                "name": "Clinic desk",
                # the offline recognizer listens for the words of the agent's texts: callers ask where the parking is,
                # or for a time to visit ("is parking free" proved unreliable: "free" is heard as "three", a time)
                "prompt": "You answer questions about the clinic, such as where is the parking, and book visits.",
                "first_message": "Hello, this is the clinic.", "calendar_id": calendar["id"], "timezone": "UTC"})
            kb = await _json(api, "POST", "/knowledge-bases", 201, json={"name": "Clinic", "agent_id": agent["id"]})
            await _json(api, "POST", f"/knowledge-bases/{kb['id']}/documents", 201, files={
                "files": ("visitors.txt", f"Visiting the clinic. {ANSWER} Visits last half an hour.".encode(),
                          "text/plain")})

            async def processed() -> bool:
                docs = await _json(api, "GET", f"/knowledge-bases/{kb['id']}/documents", 200)
                items = docs["documents"] if isinstance(docs, dict) else docs
                return bool(items) and all(d["status"] in ("ready", "processed", "completed") for d in items)

            await until(processed, 60, "the document to be processed")
            await _json(api, "POST", f"/agents/{agent['id']}/publish", 200)
            yield Clinic(server, api, int(agent["id"]), int(calendar["id"]))
    finally:
        server.stop()


async def _talk(clinic: Clinic, wav: Path, tmp_path: Path, *, until_done: Any, seconds: float) -> dict[str, Any]:
    """Sign in with a microphone playing ``wav``, press "Talk to this agent", wait for ``until_done()`` (or
    ``seconds``), hang up; the call once it is finished."""
    executable = chromium_executable()
    if executable is None:
        _unavailable("chromium is not installed (apt-get install chromium)")
    from playwright.async_api import async_playwright

    base = f"{clinic.server.base}/dashboard"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True, args=[
            "--no-sandbox", "--disable-dev-shm-usage", "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={wav}",
            "--autoplay-policy=no-user-gesture-required"])
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
            await page.goto(f"{base}/agents/{clinic.agent_id}")
            await page.click("#talk-to-agent")
            await page.wait_for_selector("#talk-to-agent[data-state=live]")
            with contextlib.suppress(AssertionError):  # the call log below says what was heard
                await until(until_done, seconds, "the conversation")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOTS / "web-call.png"))
            await page.click("#talk-to-agent")  # hang up
            await page.wait_for_selector("#talk-to-agent[data-state=ended]")
            assert not [p for p in problems if "Content Security Policy" in p], problems
        finally:
            await context.close()
            await browser.close()
    api = clinic.api

    async def finished() -> dict[str, Any] | None:
        calls = await _json(api, "GET", f"/calls?agent_id={clinic.agent_id}", 200)
        done = [c for c in calls if c["direction"] == "web" and c["call_log_id"]]
        return done[0] if done else None

    call = await until(finished, 30, "the web call to be finished")
    return dict(call)


async def _transcript(clinic: Clinic, call: dict[str, Any]) -> list[dict[str, Any]]:
    log = await _json(clinic.api, "GET", f"/call-logs/{call['call_log_id']}", 200)
    return list(log["transcript"])


async def test_the_agent_answers_a_spoken_question_from_its_knowledge_base(clinic: Clinic, tmp_path: Path) -> None:
    wav = caller_wav(tmp_path / "question.wav", "where is the parking")
    heard: list[Any] = []

    async def answered() -> bool:
        return bool(heard)  # nothing to see mid-call: the transcript is written when the call ends

    call = await _talk(clinic, wav, tmp_path, until_done=answered, seconds=25)
    transcript = await _transcript(clinic, call)
    assert call["status"] == "completed", call
    assert transcript[0] == {**transcript[0], "role": "agent", "text": "Hello, this is the clinic."}
    callers = [line["text"] for line in transcript if line["role"] == "user"]
    assert any("parking" in text for text in callers), transcript
    assert any(line["role"] == "agent" and ANSWER in line["text"] for line in transcript), transcript


async def test_a_caller_books_tomorrow_at_ten_by_voice(clinic: Clinic, tmp_path: Path) -> None:
    wav = caller_wav(tmp_path / "booking.wav", "tomorrow at ten please", words_per_minute=140)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date()
    ten = datetime(tomorrow.year, tomorrow.month, tomorrow.day, 10, tzinfo=UTC)

    async def booked() -> list[dict[str, Any]]:
        found = await _json(clinic.api, "GET", f"/scheduling/appointments?calendar_id={clinic.calendar_id}", 200)
        items = found["appointments"] if isinstance(found, dict) else found
        return [a for a in items if a["status"] != "cancelled"]

    call = await _talk(clinic, wav, tmp_path, until_done=booked, seconds=60)
    appointments = await booked()
    transcript = await _transcript(clinic, call)
    assert appointments, transcript
    assert datetime.fromisoformat(appointments[0]["slot_start"].replace("Z", "+00:00")) == ten, (appointments,
                                                                                                 transcript)
    assert appointments[0]["call_id"] == call["id"]
    assert any(line["role"] == "agent" and "booked" in line["text"] for line in transcript), transcript
