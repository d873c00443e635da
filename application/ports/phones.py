"""Port for phone number normalisation (E.164)."""

from __future__ import annotations

from typing import Protocol

from domain.destinations import NumberFacts


class PhoneNormalizer(Protocol):
    def normalize(self, raw: str, region: str | None = None) -> str | None:
        """The E.164 form of ``raw``, or None when it is not a possible phone number. Without ``region`` the
        number must carry its country code (+...)."""
        ...

    def time_zones(self, e164: str) -> tuple[str, ...]:
        """The IANA zones a normalised number may ring in (several for a number that spans zones, such as a
        toll-free or a mobile number of a large country); empty when unknown (the simulator's test numbers)."""
        ...

    def describe(self, e164: str) -> NumberFacts:
        """The country and type of a normalised number, for the destination policy (the simulator's test
        numbers: the United States)."""
        ...

    def countries(self) -> frozenset[str]:
        """The ISO 3166 alpha-2 codes of every country the library knows numbers of."""
        ...
