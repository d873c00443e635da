"""The HTTP entrypoint (Litestar)."""
