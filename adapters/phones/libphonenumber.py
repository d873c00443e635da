"""E.164 normalisation with the ``phonenumbers`` package."""

from __future__ import annotations

import re

import phonenumbers
from phonenumbers import NumberParseException, ValidationResult
from phonenumbers import timezone as number_zones

from domain.calls import is_simulator_test_number
from domain.destinations import NumberFacts

_SEPARATORS = re.compile(r"[\s().\-/]")
MAX_INPUT = 64
UNKNOWN_ZONE = "Etc/Unknown"
NON_GEOGRAPHIC_REGION = "001"
SIMULATOR_FACTS = NumberFacts("US", "test")
_TYPE_NAMES = {value: name.lower() for name, value in vars(phonenumbers.PhoneNumberType).items()
               if name.isupper() and isinstance(value, int)}
_COUNTRIES = frozenset(phonenumbers.SUPPORTED_REGIONS)


class LibPhoneNumberNormalizer:
    """Accepts every number libphonenumber deems possible (full length for its country), written with or
    without separators, plus the simulator's fictional test numbers (+15550100xx), which are too short to
    be real."""

    def normalize(self, raw: str, region: str | None = None) -> str | None:
        text = (raw or "").strip()
        if not text or len(text) > MAX_INPUT:
            return None
        compact = _SEPARATORS.sub("", text)
        if compact.startswith("00"):
            compact = "+" + compact[2:]
        if is_simulator_test_number(compact):
            return compact
        try:
            parsed = phonenumbers.parse(compact, region.upper() if region else None)
        except NumberParseException:
            return None
        if phonenumbers.is_possible_number_with_reason(parsed) != ValidationResult.IS_POSSIBLE:
            return None
        return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)

    def time_zones(self, e164: str) -> tuple[str, ...]:
        if is_simulator_test_number(e164):
            return ()
        try:
            parsed = phonenumbers.parse(e164, None)
        except NumberParseException:
            return ()
        return tuple(sorted(z for z in number_zones.time_zones_for_number(parsed) if z != UNKNOWN_ZONE))

    def describe(self, e164: str) -> NumberFacts:
        if is_simulator_test_number(e164):
            return SIMULATOR_FACTS
        try:
            parsed = phonenumbers.parse(e164, None)
        except NumberParseException:
            return NumberFacts(None, "unknown")
        # a possible number that is not a valid one has no region of its own: its calling code's main country
        code = parsed.country_code
        region = (phonenumbers.region_code_for_number(parsed)
                  or (phonenumbers.region_code_for_country_code(code) if code is not None else None))
        country = region if region and region != NON_GEOGRAPHIC_REGION else None
        return NumberFacts(country, _TYPE_NAMES.get(phonenumbers.number_type(parsed), "unknown"))

    def countries(self) -> frozenset[str]:
        return _COUNTRIES
