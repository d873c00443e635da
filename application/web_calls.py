"""Web calls: a browser talks to an agent. ``StartWebCall`` creates the call (direction ``web``, no phone
numbers, ringing until the browser's media stream connects) and issues the single-use token of its media stream.

Nothing is dialled, so neither the destination policy nor Do-Not-Call applies; the quota gate does (the call's
longest duration is reserved as for any call), and the call runs the agent's published version.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from application.agents import as_published
from application.calls import AgentNotCallable
from application.context import CauseContext
from application.ports.accounts import RateLimiter
from application.ports.agents import AgentRepository
from application.ports.calls import CallRepository
from application.ports.campaigns import CampaignRepository
from application.ports.media import MediaStreamTokens
from application.ports.platform import Clock, Random, UnitOfWork
from application.ports.usage import CALL_SECONDS, QuotaGate
from application.widget import within_widget_caps
from domain.agents import AgentStatus, render, unresolved_placeholders
from domain.calls import Call, render_values
from domain.errors import NotFound, ValidationFailed

WEB = "web"


@dataclass(frozen=True, slots=True)
class WebCallPolicy:
    token_ttl_seconds: int = 900
    """How long the browser has to open the call's media stream (the media-stream token's lifetime)."""


@dataclass(frozen=True, slots=True)
class StartWebCallCommand:
    organization_id: int
    agent_id: int
    custom_data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WebCall:
    call: Call
    token: str
    """The media stream's single-use token: the websocket URL is ``/v2/media-streams/<token>``."""
    expires_at: datetime


class StartWebCall:
    """Create a web call and its media-stream token (module docstring). The call is ringing from the start: if the
    browser never connects, the sweeper ends it (failed, ``timeout``) once the token and the call's longest
    duration have passed."""

    def __init__(self, uow: UnitOfWork, cause: CauseContext, calls: CallRepository, agents: AgentRepository,
                 tokens: MediaStreamTokens, quota: QuotaGate, clock: Clock, random: Random,
                 policy: WebCallPolicy) -> None:
        self.uow, self.cause, self.calls, self.agents, self.tokens = uow, cause, calls, agents, tokens
        self.quota, self.clock, self.random, self.policy = quota, clock, random, policy

    async def execute(self, command: StartWebCallCommand) -> WebCall:
        org, agent_id = command.organization_id, command.agent_id
        live = await self.agents.get(org, agent_id)
        if live is None:
            raise NotFound("agent", agent_id)
        if live.status != AgentStatus.ACTIVE:
            raise AgentNotCallable(agent_id, live.status)
        agent = await as_published(self.agents, live, live.current_version)
        if agent is None:
            raise AgentNotCallable(agent_id, "not published")
        values = render_values(None, "", command.custom_data)
        names = [name for name in unresolved_placeholders(agent, values)
                 if name not in ("contact_name", "destination_phone")]
        if names:
            raise ValidationFailed(
                f"Unresolved placeholders: {', '.join(names)}; send them in custom_data",
                details={"missing_placeholders": names,
                         "validation_errors": {"custom_data": f"missing values for: {', '.join(names)}"}},
            )
        prompt = render(agent.prompt, values)[0]
        first_message = render(agent.first_message, values)[0] if agent.first_message else None
        now = self.clock.now()
        call_id = self.random.uuid()
        # the one quota gate: a plan without overage reserves the call's longest duration, or 403 quota_exceeded
        await self.quota.admit(org, CALL_SECONDS, f"call:{call_id}", agent.max_call_duration_seconds, now)
        ttl = timedelta(seconds=self.policy.token_ttl_seconds)
        queued = Call(
            id=call_id, organization_id=org, agent_id=agent_id, destination_phone="", from_phone="",
            status="queued", custom_data=dict(command.custom_data), prompt=prompt, first_message=first_message,
            max_duration_seconds=agent.max_call_duration_seconds, created_at=now, updated_at=now, due_at=now,
            cause_depth=self.cause.depth, agent_version=agent.current_version, direction=WEB,
        )
        # ringing at once: nothing is dialled, and the dial queue only takes queued calls
        call, events = queued.move("dial", now)
        call = replace(call, deadline_at=now + ttl + timedelta(seconds=agent.max_call_duration_seconds))
        call = await self.calls.add(call)
        for kind in events:
            event = kind(org, call.view())
            self.uow.record(replace(event, depth=call.cause_depth) if call.cause_depth else event)
        token = await self.tokens.issue(call.id, org, now)
        return WebCall(call, token, now + ttl)


@dataclass(frozen=True, slots=True)
class StartWidgetWebCallCommand:
    organization_id: int
    campaign_id: int
    client_address: str
    custom_data: dict[str, Any] = field(default_factory=dict)


class StartWidgetWebCall:
    """The widget's "Talk now": a web call with the agent of the widget token's campaign, counted against the
    widget's hourly caps like a "Call me" contact (429 widget_intake_limited)."""

    def __init__(self, start: StartWebCall, campaigns: CampaignRepository, limiter: RateLimiter,
                 clock: Clock) -> None:
        self.start, self.campaigns, self.limiter, self.clock = start, campaigns, limiter, clock

    async def execute(self, command: StartWidgetWebCallCommand) -> WebCall:
        campaign = await self.campaigns.get(command.organization_id, command.campaign_id)
        if campaign is None:
            raise NotFound("campaign", command.campaign_id)
        await within_widget_caps(self.limiter, self.clock.now(), campaign, command.client_address)
        return await self.start.execute(StartWebCallCommand(command.organization_id, campaign.agent_id,
                                                            dict(command.custom_data)))
