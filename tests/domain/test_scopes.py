"""Scope algebra laws."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from domain.scopes import ALL_SCOPES, CATALOGUE, PRESETS, ScopeSet, alternatives_for, implies, is_valid_scope, normalise

concrete = st.sampled_from(sorted(ALL_SCOPES))
wildcards = st.sampled_from([f"{f}:*" for f in CATALOGUE] + ["*"])
any_scope = st.one_of(concrete, wildcards)


@given(any_scope)
def test_implies_is_reflexive(scope: str) -> None:
    assert implies(scope, scope)


@given(any_scope, any_scope, any_scope)
def test_implies_is_transitive(a: str, b: str, c: str) -> None:
    if implies(a, b) and implies(b, c):
        assert implies(a, c)


@given(concrete)
def test_super_scope_grants_everything(scope: str) -> None:
    assert ScopeSet.of(["*"]).grants(scope)


@given(concrete)
def test_family_wildcard_grants_exactly_its_family(scope: str) -> None:
    family = scope.split(":")[0]
    assert ScopeSet.of([f"{family}:*"]).grants(scope)
    for other in CATALOGUE:
        if other != family:
            assert not ScopeSet.of([f"{other}:*"]).grants(scope)


@given(concrete, concrete)
def test_concrete_scopes_are_independent(held: str, wanted: str) -> None:
    """Read and write are independent: a concrete scope grants only itself."""
    assert ScopeSet.of([held]).grants(wanted) == (held == wanted)


def test_kb_write_does_not_imply_kb_read() -> None:
    assert not ScopeSet.of(["kb:write"]).grants("kb:read")
    assert ScopeSet.of(["kb:*"]).grants("kb:read")


@given(st.lists(any_scope, max_size=6), concrete)
def test_grants_agrees_with_implies(held: list[str], wanted: str) -> None:
    assert ScopeSet.of(held).grants(wanted) == any(implies(h, wanted) for h in held)


@given(st.lists(any_scope, max_size=6), st.lists(any_scope, max_size=6))
def test_covers_is_monotonic(held: list[str], extra: list[str]) -> None:
    small = ScopeSet.of(held)
    if small.covers(extra):
        assert ScopeSet.of([*held, "agents:read"]).covers(extra)


@given(concrete)
def test_every_alternative_authorizes(scope: str) -> None:
    for alternative in alternatives_for(scope):
        assert ScopeSet.of([alternative]).grants_any([scope])


def test_catalogue_has_the_spec_families_and_presets_are_valid() -> None:
    for scope in ["agents:read", "agents:write", "agents:delete", "kb:read", "kb:write", "calls:schedule",
                  "calls:read", "calls:cancel", "calls:recordings", "campaigns:execute", "telephony:manage",
                  "schedules:delete", "scheduling:write", "webhooks:manage", "dnc:write", "sms:read", "usage:read",
                  "api-keys:manage", "leads:write", "triggers:delete", "organizations:write", "billing:read",
                  "cloud:read", "widget:write"]:
        assert scope in ALL_SCOPES
    for scopes in PRESETS.values():
        assert normalise(scopes)


def test_unknown_scopes_are_rejected() -> None:
    assert not is_valid_scope("agents:fly")
    assert not is_valid_scope("nope:*")
    assert not is_valid_scope("agents")
    try:
        normalise(["agents:read", "bogus:read"])
    except ValueError as exc:
        assert "bogus:read" in str(exc)
    else:
        raise AssertionError("expected ValueError")
