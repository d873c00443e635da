"""Hypothesis profiles. ``make test`` runs every property with its full number of examples (the default
profile); ``make test-fast`` passes ``--hypothesis-profile=fast``, which runs a fifth of them (at least ten):
the fast loop still exercises every property, the full run keeps their strength. A property that sets its own
count writes it as ``examples(n)``, the count under the full profile."""

from __future__ import annotations

from hypothesis import settings

FULL = 100  # hypothesis' default max_examples, the full profile
settings.register_profile("fast", max_examples=FULL // 5)


def examples(full: int) -> int:
    """``full`` examples under the full profile, scaled down as the default is under the profile in use."""
    return max(10, full * settings.default.max_examples // FULL)
