"""CarrierAccounts keeps the credentials it opened by provider and sealed value: a carrier's webhooks do not
decrypt them on every request, and changed credentials (sealed anew) are opened afresh."""

from __future__ import annotations

import json
from dataclasses import replace

from application.carriers import OPENED_CREDENTIALS_KEPT, CarrierAccounts
from domain.telephony import TelephonyProvider


class CountingBox:
    """A SecretBox whose sealed values are readable, counting what it opens."""

    def __init__(self) -> None:
        self.opened = 0
        self.sealed = 0

    def seal(self, plaintext: str) -> str:
        self.sealed += 1
        return f"{self.sealed}:{plaintext}"

    def open(self, sealed: str) -> str:
        self.opened += 1
        return sealed.split(":", 1)[1]


def provider(box: CountingBox, provider_id: int, token: str) -> TelephonyProvider:
    return TelephonyProvider(provider_id, 1, "Twilio", "twilio", credentials_sealed=box.seal(json.dumps(
        {"account_sid": "AC1", "auth_token": token})), settings={"api_base_url": "https://api.example.test/"})


def test_the_same_sealed_credentials_are_opened_once_and_new_ones_afresh() -> None:
    box = CountingBox()
    accounts = CarrierAccounts(box)
    twilio = provider(box, 7, "first")
    first = accounts.open(twilio)
    again = accounts.open(twilio)
    assert box.opened == 1
    assert again.credentials is not first.credentials  # each account has its own copy
    assert again.credentials == {"account_sid": "AC1", "auth_token": "first"}
    assert (again.provider_id, again.api_base_url) == (7, "https://api.example.test")

    rotated = replace(twilio, credentials_sealed=box.seal(json.dumps({"account_sid": "AC1", "auth_token": "second"})))
    assert accounts.open(rotated).credentials["auth_token"] == "second"
    assert box.opened == 2
    other = provider(box, 8, "first")  # the same secret sealed for another provider is that provider's own
    accounts.open(other)
    assert box.opened == 3


def test_at_most_a_bounded_number_are_kept_the_least_recently_used_leaving_first() -> None:
    box = CountingBox()
    accounts = CarrierAccounts(box)
    providers = [provider(box, n, f"token-{n}") for n in range(1, OPENED_CREDENTIALS_KEPT + 2)]
    first = providers[0]
    for each in providers[:-1]:
        accounts.open(each)
    accounts.open(first)  # used again: the second is now the least recently used
    accounts.open(providers[-1])  # one more than are kept: the second leaves
    opened = box.opened
    accounts.open(first)
    assert box.opened == opened
    accounts.open(providers[1])
    assert box.opened == opened + 1
