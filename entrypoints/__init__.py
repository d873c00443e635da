"""Composition root and entrypoints."""
