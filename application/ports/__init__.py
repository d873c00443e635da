"""Ports: the Protocols use cases depend on, one module per area."""
