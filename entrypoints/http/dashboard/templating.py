"""The dashboard's Jinja environment (autoescaped) and its filters, shared by Litestar's template engine and the
error pages the gate renders itself."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
API_STATIC = Path(__file__).parent.parent / "static"
"""The API's static files (widget.js, webcall.js), served under /dashboard/static too."""


def when(value: datetime | None) -> str:
    """A timestamp as people read it, in UTC."""
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


def seconds(value: float | int | None) -> str:
    if value is None:
        return "—"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def number(value: float | int | None) -> str:
    """1234567 -> 1,234,567; 12.5 -> 12.5 (at most two decimals)."""
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{int(value):,}"


def dollars(cents: int | None) -> str:
    """Integer cents as dollars (``1234`` -> ``$12.34``), without a float on the way."""
    if cents is None:
        return "—"
    whole, rest = divmod(abs(int(cents)), 100)
    return f"{'-' if cents < 0 else ''}${whole:,}.{rest:02d}"


def day_before(value: datetime) -> datetime:
    """The last day of a period whose ``end`` is exclusive (a period 1 Nov to 1 Dec is read 1 Nov to 30 Nov)."""
    return value - timedelta(days=1)


def percent(used: float, included: float | None) -> int:
    if not included:
        return 0
    return max(0, min(100, round(100 * used / included)))


ENVIRONMENT = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True),
                          trim_blocks=True, lstrip_blocks=True)
ENVIRONMENT.filters.update(when=when, seconds=seconds, number=number, dollars=dollars, day_before=day_before)
ENVIRONMENT.globals.update(percent=percent)


def template_config() -> TemplateConfig[Any]:
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(ENVIRONMENT))
