"""Schema management: every table module, and Alembic upgrades run from code."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
# modules that define tables on the shared MetaData (each feature adds its own)
_TABLE_MODULE_SUFFIX = "_tables"


def load_all_tables() -> None:
    """Import every ``adapters.sql.*_tables`` module so the MetaData knows all tables."""
    import adapters.sql.tables

    for info in pkgutil.iter_modules(adapters.sql.__path__):
        if info.name.endswith(_TABLE_MODULE_SUFFIX):
            importlib.import_module(f"adapters.sql.{info.name}")


def alembic_config(url: str) -> Config:
    # Alembic is imported when a migration runs, not when the app starts (about 0.2 s of every process's start)
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str) -> None:
    """Bring the schema up to date (all heads). Synchronous: call it outside a running loop
    or through ``asyncio.to_thread``."""
    from alembic import command

    command.upgrade(alembic_config(url), "heads")


def _safe(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "PARLEY_DATABASE_URL"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def schema_problem(url: str) -> str | None:
    """Why the database at ``url`` cannot be served as it is (unreachable, or its schema behind the migrations'
    heads), in one line; None when it can."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from adapters.sql.engine import create_engine

    script = ScriptDirectory.from_config(alembic_config(url))
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            current = tuple(await connection.run_sync(lambda c: MigrationContext.configure(c).get_current_heads()))
    except Exception as exc:
        return f"the database at {_safe(url)} is unreachable ({_first_line(exc)})"
    finally:
        await engine.dispose()
    if not current:
        return f"the database at {_safe(url)} has no schema: run `parley migrate` first"
    try:  # the revisions no stored head reaches (a head that another revision depends on is not stored)
        applied = {r.revision for r in script.iterate_revisions(current, "base")}
        pending = sorted({r.revision for r in script.walk_revisions()} - applied)
    except Exception as exc:
        return (f"the database schema at {_safe(url)} is at {', '.join(sorted(current))}, which this version "
                f"does not know ({_first_line(exc)})")
    if not pending:
        return None
    return (f"the database schema at {_safe(url)} is behind (at {', '.join(sorted(current))}; "
            f"{len(pending)} migration(s) to apply: {', '.join(pending)}): run `parley migrate` first")


def upgrade_problem(url: str) -> str | None:
    """``upgrade``, or why it could not run, in one line (the database unreachable, a migration failing)."""
    try:
        upgrade(url)
    except Exception as exc:
        return f"migrating the database at {_safe(url)} failed ({_first_line(exc)})"
    return None
