"""Use cases and the ports they need. No framework, driver or HTTP import."""
