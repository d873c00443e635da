"""The rules that name the client's field in an error, at the domain level: which field fills a missing
placeholder, a created window, a placeholder too long to fill, a blocked URL's field, a call id's form."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from domain.agents import Agent, Voicemail, check_placeholders
from domain.calls import CALL_ID_PATTERN, canonical_call_id, missing_values, unresolved_placeholders_error
from domain.errors import BlockedAddress, ValidationFailed
from domain.rfc3339 import check_created_window, parse_instant


def test_the_contact_name_is_its_own_field_and_the_rest_custom_data() -> None:
    assert missing_values(["plan"], "name") == {"custom_data": "missing values for: plan"}
    assert set(missing_values(["contact_name", "plan", "city"], "name")) == {"name", "custom_data"}
    assert missing_values(["contact_name", "plan", "city"], "name")["custom_data"] == "missing values for: plan, city"
    error = unresolved_placeholders_error(["contact_name", "plan"])
    assert error.message == ("Unresolved placeholders: contact_name, plan; send contact_name; "
                             "send the others in custom_data")
    assert error.details == {"missing_placeholders": ["contact_name", "plan"],
                             "validation_errors": missing_values(["contact_name", "plan"], "contact_name")}
    assert unresolved_placeholders_error(["plan"]).message.endswith("; send them in custom_data")


def test_a_created_window_must_not_end_before_it_starts() -> None:
    early, late = parse_instant("2026-01-01T00:00:00Z", "x"), parse_instant("2027-01-01T00:00:00Z", "x")
    check_created_window(early, late)
    check_created_window(early, early)  # equal bounds: an empty page, as ever
    check_created_window(None, early)
    check_created_window(late, None)
    with pytest.raises(ValidationFailed) as refused:
        check_created_window(late, early)
    assert refused.value.details == {"validation_errors": {"created_before": "must not be before created_after"}}


def _agent(**fields: object) -> Agent:
    at = parse_instant("2026-01-01T00:00:00Z", "x")
    return replace(Agent(id=1, organization_id=1, name="A", created_at=at, updated_at=at), **fields)


def test_a_placeholder_longer_than_a_custom_data_key_is_refused_naming_its_text() -> None:
    check_placeholders(_agent(prompt="Hi {{" + "k" * 40 + "}}"))
    too_long = "{{" + "k" * 41 + "}}"
    cases = [({"prompt": too_long}, "prompt"), ({"first_message": too_long}, "first_message"),
             ({"voicemail": Voicemail(action="leave_message", message="{{" + "k" * 41 + "}}")}, "voicemail.message")]
    for fields, field in cases:
        with pytest.raises(ValidationFailed) as refused:
            check_placeholders(_agent(**fields))
        assert list(refused.value.details["validation_errors"]) == [field]
    # a PATCH is checked on the texts it sent only
    check_placeholders(_agent(prompt="{{" + "k" * 41 + "}}"), frozenset({"name"}))


def test_a_blocked_address_names_the_field_once() -> None:
    named = BlockedAddress("the address is not public").on("tools[1].url")
    assert (named.message, named.details) == ("tools[1].url: the address is not public", {"field": "tools[1].url"})
    assert named.on("tools[1].url").message == named.message


@pytest.mark.parametrize(("written", "is_id"), [
    ("3f2c9a4e-8b1d-4c6e-9f0a-2b7d5e8c1a43", True), ("3F2C9A4E-8B1D-4C6E-9F0A-2B7D5E8C1A43", True),
    ("3f2c9a4e8b1d4c6e9f0a2b7d5e8c1a43", False), ("{3f2c9a4e-8b1d-4c6e-9f0a-2b7d5e8c1a43}", False),
    ("3f2c9a4e-8b1d-4c6e-9f0a-2b7d5e8c1a4g", False), ("not-a-uuid", False),
    ("\uff13f2c9a4e-8b1d-4c6e-9f0a-2b7d5e8c1a43", False),  # a fullwidth digit
])
def test_a_call_id_is_a_hyphenated_uuid_in_either_case(written: str, is_id: bool) -> None:
    assert (re.fullmatch(CALL_ID_PATTERN.strip("^$"), written) is not None) is is_id
    if is_id:
        assert canonical_call_id(written) == written.lower()
