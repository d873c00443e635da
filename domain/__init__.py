"""Parley's pure rules: no database, no HTTP, standard library only."""
