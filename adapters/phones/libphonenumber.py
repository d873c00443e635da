"""E.164 normalisation with the ``phonenumbers`` package."""

from __future__ import annotations

import re

import phonenumbers
from phonenumbers import NumberParseException, ValidationResult

from domain.calls import is_simulator_test_number

_SEPARATORS = re.compile(r"[\s().\-/]")
MAX_INPUT = 64


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
