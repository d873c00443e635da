"""The sections not built yet (``navigation.SECTIONS`` with ``built=False``): a page that says so, so the
navigation is whole from the start. Building a section replaces its entry here with its own module."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.response import Template

from entrypoints.http.dashboard.navigation import SECTIONS, Section
from entrypoints.http.dashboard.pages import SIGNED_IN, page
from entrypoints.http.dashboard.view import View


def _stub(section: Section) -> Any:
    async def coming_soon(request: Request[Any, Any, Any]) -> Template:
        return View.of(request).page("coming_soon.html", title=section.title)

    coming_soon.__name__ = f"coming_soon_{section.key}"
    return page("GET", section.path, section=section.key, name=f"dashboard:{section.key}",
                scopes=SIGNED_IN)(coming_soon)


HANDLERS = [_stub(s) for s in SECTIONS if not s.built]
