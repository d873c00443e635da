"""/v2/reference: a readable reference of every documented operation and schema, rendered on the server from the
served OpenAPI document, on both prefixes, with its stylesheet served by Parley (no external asset)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from tests.support.apps import Api


class Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self.scripts += 1
        for name in ("src", "href"):
            if tag in ("link", "script", "img") and found.get(name):
                self.urls.append(str(found[name]))


async def test_the_reference_lists_every_operation_and_schema_of_the_document(api: Api) -> None:
    document = (await api.client.get("/v2/openapi.json")).json()
    page = await api.client.get("/v2/reference")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    operations = [(method.upper(), path, op["operationId"]) for path, item in document["paths"].items()
                  for method, op in item.items() if method in ("get", "post", "put", "patch", "delete")]
    assert len(operations) > 100
    for method, path, operation_id in operations:
        assert f'id="{operation_id}"' in html, operation_id
        assert f'<span class="method {method.lower()}">{method}</span> <code class="path">{path}</code>' in html
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name}"' in html, name
    assert "/scheduling/appointments/{id}" in html and "reminder_minutes" in html
    assert html.count('class="operation"') == len(operations)


async def test_its_assets_are_served_by_parley_on_either_prefix(api: Api) -> None:
    for prefix in ("/v2", "/api/v2"):
        page = await api.client.get(f"{prefix}/reference")
        assert page.status_code == 200
        parser = Assets()
        parser.feed(page.text)
        assert parser.scripts == 0
        assert parser.urls == [f"{prefix}/reference/assets/reference.css"]
        css = await api.client.get(parser.urls[0])
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert "@media" in css.text
        assert not re.search(r"https?://", css.text)
