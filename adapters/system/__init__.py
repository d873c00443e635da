"""Real clock and randomness."""
