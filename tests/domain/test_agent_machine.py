from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.agents import STATUSES, Agent, render
from domain.errors import InvalidTransition

statuses = st.sampled_from(STATUSES)


def agent(status: str) -> Agent:
    return Agent(id=1, organization_id=1, name="a", status=status)


@given(statuses)
def test_publish_makes_any_non_archived_agent_active(status: str) -> None:
    if status == "archived":
        with pytest.raises(InvalidTransition):
            agent(status).publish()
    else:
        assert agent(status).publish().status == "active"


@given(statuses, statuses)
def test_patch_moves(current: str, target: str) -> None:
    allowed = {("active", "paused"), ("paused", "active"), ("draft", "archived"), ("active", "archived"),
               ("paused", "archived")}
    if current == target:
        assert agent(current).move_to(target).status == current
    elif (current, target) in allowed:
        assert agent(current).move_to(target).status == target
    else:
        with pytest.raises(InvalidTransition):
            agent(current).move_to(target)


def test_archived_is_terminal() -> None:
    for target in ("draft", "active", "paused"):
        with pytest.raises(InvalidTransition):
            agent("archived").move_to(target)


def test_render_reports_missing_placeholders() -> None:
    text, missing = render("Hi {{contact_name}}, about {{ topic }} and {{x}}", {"contact_name": "Ann", "topic": "T"})
    assert text.startswith("Hi Ann, about T and") and missing == {"x"}


@pytest.mark.parametrize(("value", "said"), [
    ("as is ", "as is "), (True, "true"), (False, "false"), (0, "0"), (-12, "-12"), (3.0, "3"), (2.5, "2.5"),
    (1e20, "100000000000000000000"), (0.1, "0.1"), ([1, "b", None, [2.0, 3]], "1, b, 2, 3"), ([], ""),
    ({"a": 1, "b": [True, None], "c": "é"}, '{"a":1,"b":[true,null],"c":"é"}'),
])
def test_placeholder_values_are_spoken_as_people_read_them(value: object, said: str) -> None:
    assert render("{{v}}", {"v": value}) == (said, set())


def test_a_null_placeholder_value_is_unresolved() -> None:
    assert render("Hi {{v}}", {"v": None}) == ("Hi {{v}}", {"v"})
