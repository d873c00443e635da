"""Widget feature: the embeddable "Call me" widget. An API key (scope ``widget:write``) mints a short-lived
token for one campaign and a few web origins; a partner page embeds ``/widget.js`` with it, and the visitor's
number becomes a contact of that campaign, dialled at once when it can be (docs/widget.md).

It uses the campaigns feature's contact intake (``AddContact``), its dial-now path (``DialContactNow``) and its
calling windows. Tokens are JWTs signed under a key derived from PARLEY_SECRET_KEY; nothing about them is stored,
so the feature has no tables, no jobs and no settings of its own. The HTTP side (routes, the widget
authenticator, CORS on ``/widget/*`` and the script) lives in ``entrypoints/http``.
"""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.crypto.jwt_widget_tokens import JwtWidgetTokens
from application import widget as cases
from application.ports.widget import WidgetTokens
from entrypoints.features import Feature
from entrypoints.settings import Settings


class WidgetTokensProvider(Provider):
    @provide(scope=Scope.APP)
    def tokens(self, settings: Settings) -> WidgetTokens:
        return JwtWidgetTokens(settings.secret_key)


class WidgetUseCaseProvider(Provider):
    scope = Scope.REQUEST

    cases = provide_all(
        cases.MintWidgetToken,
        cases.AuthenticateWidgetToken,
        cases.GetWidgetCampaign,
        cases.SubmitWidgetContact,
    )


FEATURE = Feature(
    name="widget",
    providers=(WidgetTokensProvider, WidgetUseCaseProvider),
)
