"""SQLAlchemy Core persistence for SQLite (aiosqlite) and PostgreSQL (asyncpg)."""
