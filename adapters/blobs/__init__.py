"""Blob storage adapters (recordings)."""
