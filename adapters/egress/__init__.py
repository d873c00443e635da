"""Outbound HTTP: the single SSRF-safe way Parley reaches URLs outside itself."""

from adapters.egress.httpx_egress import HttpxSafeHttp, SystemResolver

__all__ = ["HttpxSafeHttp", "SystemResolver"]
