"""Text rules shared by every input: a one-line field (a name, a source, a subject, a label) holds no control
character (CR, LF, tab, the C0 and C1 controls, DEL, the Unicode line and paragraph separators); multi-line fields
(a prompt, a body, notes) keep their newlines. Templates that fill a one-line field fold those characters to a
space, so data from an event can never add a line (a mail header) to what is sent.

Standard library only.
"""

from __future__ import annotations

import re

from domain.errors import ValidationFailed

ONE_LINE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$(?!\n)"
"""The one-line rule as a regular expression, for the schemas (msgspec checks it with ``re.search``, where ``$`` also
matches before a final newline: the lookahead refuses that one too; JSON Schema readers take it as written)."""
ONE_LINE_WORDS = "must be one line: no line breaks, tabs or other control characters"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def is_one_line(text: str) -> bool:
    return _CONTROL.search(text) is None


def check_one_line(value: str, field: str) -> str:
    """``value`` when it is one line; ValidationFailed naming ``field`` otherwise (inputs that do not go through
    the schemas: CSV rows)."""
    if not is_one_line(value):
        raise ValidationFailed.field(field, ONE_LINE_WORDS)
    return value


def fold_line(text: str) -> str:
    """``text`` with every control character (CR, LF, tab...) replaced by a space: one line."""
    return _CONTROL.sub(" ", text)
