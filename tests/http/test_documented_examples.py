"""The curl examples of README.md and docs/ run as written: the README's are sent to a test app with the same
method, headers and body; every documented curl that sends a JSON body says so (Content-Type), since the API
answers 415 to a body of another media type (curl's `-d` alone sends application/x-www-form-urlencoded)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.http.route_table import served_operations
from tests.support.apps import Api

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_DATA_FLAGS = {"-d", "--data", "--data-raw", "--data-binary", "--json"}


@dataclass
class Curl:
    """One documented curl command, as curl would read it."""

    source: str
    method: str = "GET"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    form: bool = False


def _commands(text: str) -> list[str]:
    """Every curl command of the document's code blocks, continuation lines and multi-line quoted bodies joined."""
    found = []
    for block in _FENCE.findall(text):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].lstrip().startswith("curl "):
                i += 1
                continue
            command = lines[i]
            while True:
                try:
                    shlex.split(command, comments=True)
                    complete = not command.rstrip().endswith("\\")
                except ValueError:  # an open quote: the body goes on on the next line
                    complete = False
                if complete or i + 1 >= len(lines):
                    break
                i += 1
                command = command + "\n" + lines[i]
            found.append(command)
            i += 1
    return found


def _parse(source: str) -> Curl:
    curl = Curl(source)
    words = shlex.split(source.replace("\\\n", " "), comments=True)[1:]
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-X", "--request"):
            curl.method, i = words[i + 1], i + 1
        elif word in ("-H", "--header"):
            name, _, value = words[i + 1].partition(":")
            curl.headers[name.strip().lower()] = value.strip()
            i += 1
        elif word in _DATA_FLAGS:
            curl.body, i = words[i + 1], i + 1
            if word == "--json":
                curl.headers.setdefault("content-type", "application/json")
        elif word in ("-F", "--form"):
            curl.form, i = True, i + 1
        elif word in ("-b", "-c", "--cookie", "--cookie-jar", "-o", "--output", "-u", "--user"):
            i += 1
        elif not word.startswith("-"):
            curl.url = word
        i += 1
    if curl.method == "GET" and (curl.body is not None or curl.form):
        curl.method = "POST"  # as curl does
    return curl


def _documented() -> list[tuple[str, Curl]]:
    return [(path.relative_to(ROOT).as_posix(), _parse(command))
            for path in DOCUMENTS for command in _commands(path.read_text(encoding="utf-8"))]


def test_the_examples_are_found() -> None:
    documented = _documented()
    assert len([c for name, c in documented if name == "README.md"]) >= 2
    assert len(documented) >= 40  # every document's examples are read, not only the README's


@pytest.mark.parametrize(("document", "curl"), _documented(), ids=lambda value: getattr(value, "url", value))
def test_every_documented_body_says_its_media_type(document: str, curl: Curl) -> None:
    if curl.body is None:
        return
    media_type = curl.headers.get("content-type", "").split(";")[0].strip()
    assert media_type == "application/json", (
        f"{document}: this curl sends a body without -H \"Content-Type: application/json\" "
        f"(the API answers 415):\n{curl.source}")


def _api_path(url: str) -> str | None:
    """The path under /v2 that a documented URL names (``$API`` stands for the base URL with /v2)."""
    url = url.replace("$API", "http://127.0.0.1:8000/v2")
    path = urlsplit(url).path if "://" in url else url.split("?", 1)[0]
    return path.split("/v2", 1)[1] if "/v2/" in path else None


async def test_every_documented_request_names_a_served_operation(api: Api) -> None:
    """A documented curl goes to a method and path the API serves (no example drifts off a renamed route)."""
    operations = [(op.method, re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(op.documented_path)) + "$"))
                  for op in served_operations(api.client.app)]
    for document, curl in _documented():
        path = _api_path(curl.url)
        assert path is not None, f"{document}: no /v2 path in {curl.url!r}"
        assert any(method == curl.method and pattern.match(path) for method, pattern in operations), (
            f"{document}: {curl.method} {path} is not an operation of the API:\n{curl.source}")


async def test_the_readme_examples_run_as_written(api: Api) -> None:
    """The README's quick start, sent as curl sends it: the key of `make run` in $KEY, the same method, headers
    and body, to the same path; each one succeeds."""
    t = await api.tenant()
    examples = [curl for name, curl in _documented() if name == "README.md"]
    for curl in examples:
        headers = {name: value.replace("$KEY", t.key) for name, value in curl.headers.items()}
        if curl.body is not None:
            headers.setdefault("content-type", "application/x-www-form-urlencoded")  # what curl -d adds
        url = urlsplit(curl.url)
        assert url.netloc == "127.0.0.1:8000", curl.source  # where `make run` serves
        response = await api.client.request(curl.method, url.path, headers=headers,
                                            content=curl.body.encode() if curl.body is not None else None)
        assert response.status_code < 300, (curl.source, response.status_code, response.text)
    assert any(curl.method == "POST" for curl in examples)


async def test_a_body_of_another_media_type_is_told_which_one_to_send(api: Api) -> None:
    t = await api.tenant()
    for headers in ({"Content-Type": "application/x-www-form-urlencoded"}, {"Content-Type": "text/plain"}):
        response = await api.client.post("/v2/agents", content=b'{"name": "Desk"}', headers={**t.headers, **headers})
        assert response.status_code == 415, response.text
        error = response.json()["error"]
        assert error["code"] == "unsupported_media_type"
        assert "send Content-Type: application/json" in error["message"], error
