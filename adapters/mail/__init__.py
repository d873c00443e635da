"""Outbound email."""
