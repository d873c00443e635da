"""Schema management: every table module, and Alembic upgrades run from code."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from alembic import command
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
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str) -> None:
    """Bring the schema up to date (all heads). Synchronous: call it outside a running loop
    or through ``asyncio.to_thread``."""
    command.upgrade(alembic_config(url), "heads")
