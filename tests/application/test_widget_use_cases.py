"""Widget use cases on the memory backend: only an API key mints a token, for a campaign of its organization; a
token opens its organization until it expires or its minting key stops being usable; a visitor is dialled at once
while the campaign can call, else waits in the queue; a number the gate refuses, a contact the agent could
never call and one past the hourly intake caps are refused with nothing kept."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from application.accounts import IssueApiKey, IssueApiKeyCommand, RevokeApiKey, RevokeApiKeyCommand
from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand
from application.campaigns import (
    AddContacts,
    AddContactsCommand,
    ListContacts,
    ListContactsCommand,
    StartCampaign,
    StartCampaignCommand,
)
from application.context import Actor
from application.dnc import AddDncEntries, AddDncEntriesCommand, CreateDncList, CreateDncListCommand
from application.ports.campaigns import ContactFilter
from application.ports.platform import PageRequest
from application.widget import (
    AuthenticateWidgetToken,
    AuthenticateWidgetTokenCommand,
    GetWidgetCampaign,
    GetWidgetCampaignCommand,
    MintWidgetToken,
    MintWidgetTokenCommand,
    SubmitWidgetContact,
    SubmitWidgetContactCommand,
    WidgetAuthenticationFailed,
)
from domain.campaigns import ContactDraft
from domain.errors import DncBlocked, Forbidden, NotFound, ValidationFailed
from domain.widget import MissingPlaceholders, WidgetIntakeLimited
from tests.application.conftest import App
from tests.application.test_campaigns_use_cases import campaign

SHOP = "https://shop.example"


async def key_actor(app: App, **key: object) -> Actor:
    """An actor acting through an API key of a fresh organization (only a key mints widget tokens)."""
    actor = await app.actor()
    issued = await app.run(IssueApiKey, IssueApiKeyCommand(actor.organization_id, "widget", ("*",),
                                                           key.get("expires_at")))
    return replace(actor, key_id=issued.record.id)


async def running(app: App, actor: Actor, **fields: object) -> int:
    """A running campaign (it starts with one contact; the widget adds more)."""
    created = await campaign(app, actor, timezone_mode="campaign", **fields)
    await app.run(AddContacts, AddContactsCommand(actor, created.id, (ContactDraft(0, "+1555010002"),)))
    await app.run(StartCampaign, StartCampaignCommand(actor, created.id))
    return int(created.id)


async def submit(app: App, actor: Actor, campaign_id: int, phone: str, **fields: object):  # type: ignore[no-untyped-def]
    return await app.run(SubmitWidgetContact, SubmitWidgetContactCommand(actor, campaign_id, phone, **fields))


async def contact_phones(app: App, actor: Actor, campaign_id: int) -> set[str]:
    listed = await app.run(ListContacts, ListContactsCommand(actor, campaign_id, ContactFilter(), PageRequest()))
    return {c.phone for c in listed.items}


async def test_only_a_key_mints_and_only_for_a_campaign_of_its_organization(app: App) -> None:
    actor = await key_actor(app)
    campaign_id = await running(app, actor)
    minted = await app.run(MintWidgetToken, MintWidgetTokenCommand(actor, campaign_id, (SHOP,), 900))
    assert (minted.grant.campaign_id, minted.grant.origins, minted.grant.expires_at) == (
        campaign_id, (SHOP,), app.clock.now() + timedelta(seconds=900))
    principal = await app.run(AuthenticateWidgetToken, AuthenticateWidgetTokenCommand(minted.token))
    assert principal.organization.id == actor.organization_id
    with pytest.raises(Forbidden):  # a session or the system acts for no key
        await app.run(MintWidgetToken, MintWidgetTokenCommand(replace(actor, key_id=None), campaign_id, (SHOP,)))
    with pytest.raises(NotFound):
        await app.run(MintWidgetToken, MintWidgetTokenCommand(await key_actor(app), campaign_id, (SHOP,)))
    for origins, ttl in (((), 900), (("not an origin",), 900), ((SHOP,), 1)):
        with pytest.raises(ValidationFailed):
            await app.run(MintWidgetToken, MintWidgetTokenCommand(actor, campaign_id, origins, ttl))


async def test_a_token_works_until_it_expires_or_its_key_is_revoked_or_expires(app: App) -> None:
    actor = await key_actor(app)
    campaign_id = await running(app, actor)

    async def authenticate(token: str) -> None:
        await app.run(AuthenticateWidgetToken, AuthenticateWidgetTokenCommand(token))

    token = (await app.run(MintWidgetToken, MintWidgetTokenCommand(actor, campaign_id, (SHOP,), 900))).token
    app.clock.advance(seconds=899)
    await authenticate(token)
    app.clock.advance(seconds=1)
    with pytest.raises(WidgetAuthenticationFailed, match="expired"):
        await authenticate(token)
    revoked = (await app.run(MintWidgetToken, MintWidgetTokenCommand(actor, campaign_id, (SHOP,)))).token
    await app.run(RevokeApiKey, RevokeApiKeyCommand(actor, actor.key_id or 0))
    with pytest.raises(WidgetAuthenticationFailed, match="revoked"):
        await authenticate(revoked)
    short = await key_actor(app, expires_at=app.clock.now() + timedelta(minutes=5))
    lived = (await app.run(MintWidgetToken, MintWidgetTokenCommand(short, await running(app, short), (SHOP,)))).token
    await authenticate(lived)
    app.clock.advance(minutes=5)
    with pytest.raises(WidgetAuthenticationFailed):
        await authenticate(lived)
    for forged in ("", "not.a.token", token[:-2] + ("AA" if not token.endswith("AA") else "BB")):
        with pytest.raises(WidgetAuthenticationFailed):
            await authenticate(forged)


async def test_a_visitor_is_dialled_at_once_while_the_campaign_can_call_and_waits_otherwise(app: App) -> None:
    actor = await app.actor()
    campaign_id = await running(app, actor, max_concurrent_calls=1)
    face = await app.run(GetWidgetCampaign, GetWidgetCampaignCommand(actor, campaign_id))
    assert (face.status, face.open_now, face.next_open_at) == ("running", True, None)
    first = await submit(app, actor, campaign_id, "+1555010004", name="Ada")
    assert first.status == "dialing" and first.call_id is not None
    again = await submit(app, actor, campaign_id, "+1555010004")  # the same number gives back its contact
    assert (again.contact_id, again.call_id) == (first.contact_id, None)
    capped = await submit(app, actor, campaign_id, "+1555010005")  # the cap of one call is reached
    assert (capped.status, capped.call_id) == ("pending", None)
    draft = await campaign(app, actor, timezone_mode="campaign")
    waiting = await submit(app, actor, draft.id, "+1555010006")  # not running
    assert (waiting.status, waiting.call_id) == ("pending", None)


async def test_outside_calling_hours_the_visitor_waits_and_the_face_says_when_calls_go_out(app: App) -> None:
    actor = await app.actor()
    campaign_id = await running(app, actor)
    app.clock.advance(hours=15)  # 03:00 UTC, the campaign's zone
    face = await app.run(GetWidgetCampaign, GetWidgetCampaignCommand(actor, campaign_id))
    assert face.open_now is False and face.next_open_at == app.clock.now().replace(hour=8)
    waiting = await submit(app, actor, campaign_id, "+1555010004")
    assert (waiting.status, waiting.call_id) == ("pending", None)


async def test_refused_visitors_are_not_kept(app: App) -> None:
    actor = await app.actor()
    campaign_id = await running(app, actor)
    dnc = await app.run(CreateDncList, CreateDncListCommand(actor, "Opt-outs"))
    await app.run(AddDncEntries, AddDncEntriesCommand(actor, dnc.id, ("+14155550100",)))
    with pytest.raises(DncBlocked):
        await submit(app, actor, campaign_id, "+14155550100")
    with pytest.raises(ValidationFailed) as bad:
        await submit(app, actor, campaign_id, "call me maybe")
    assert "phone" in str(bad.value)
    assert await contact_phones(app, actor, campaign_id) == {"+1555010002"}


async def test_a_contact_the_published_agent_could_never_call_is_refused_at_once(app: App) -> None:
    actor = await app.actor()
    agent = await app.run(CreateAgent, CreateAgentCommand(
        actor, name="Riley", prompt="Call {{contact_name}} about {{plan}} and {{renewal_date}}."))
    await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    created = await campaign(app, actor, agent_id=agent.id, timezone_mode="campaign")
    with pytest.raises(MissingPlaceholders) as refused:
        await submit(app, actor, created.id, "+1555010004", custom_data={"plan": "Gold"})
    assert refused.value.details["missing_placeholders"] == ["contact_name", "renewal_date"]
    assert await contact_phones(app, actor, created.id) == set()
    taken = await submit(app, actor, created.id, "+1555010004", name="Ada",
                         custom_data={"plan": "Gold", "renewal_date": "June"})
    assert taken.contact_id


async def test_the_hourly_intake_caps_per_campaign_and_per_address(app: App) -> None:
    actor = await app.actor()
    capped = await running(app, actor, widget_max_contacts_per_hour=3)
    for n in range(3):
        await submit(app, actor, capped, f"+141555501{n:02d}")
    app.clock.advance(minutes=10)
    with pytest.raises(WidgetIntakeLimited) as refused:
        await submit(app, actor, capped, "+14155550199")
    assert refused.value.details == {"limit": 3, "scope": "campaign", "retry_after": 3000}  # the hour's end
    assert "+14155550199" not in await contact_phones(app, actor, capped)
    app.clock.advance(minutes=50)  # a new hour
    await submit(app, actor, capped, "+14155550199")

    open_campaign = await running(app, actor)
    for n in range(5):
        await submit(app, actor, open_campaign, f"+141555502{n:02d}", client_address="203.0.113.7")
    other = await running(app, actor)  # another campaign of the organization changes nothing
    with pytest.raises(WidgetIntakeLimited) as by_address:
        await submit(app, actor, other, "+14155550299", client_address="203.0.113.7")
    assert by_address.value.details["scope"] == "address"
    await submit(app, actor, other, "+14155550299", client_address="203.0.113.8")
