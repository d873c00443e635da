"""Business-hours schedules in the dashboard through HTTP, on both databases: weekly hours by weekday, exceptions a
line each and a holiday region written as text and stored as the API's document (an error beside the weekday,
the exceptions' line or the field), whether it is open now, editing, and deleting only once confirmed (a schedule
in use refused with the API's 409), and another organization's schedule a 404 page."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

from adapters.memory.clock import ManualClock
from application.ports.business_hours import ScheduleUsage
from entrypoints.overrides import Pinned
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.test_business_hours_http import _UsedByCampaigns
from tests.support.apps import Api, ApiFactory

MONDAY_NOON = datetime(2026, 3, 2, 12, tzinfo=UTC)
NEW = {"name": "Support hours", "timezone": "Europe/Berlin", "weekly.0": "09:00-12:00, 13:00-17:00",
       "weekly.4": "9:00-12:00", "weekly.5": "22:00-02:00", "exceptions": "2026-12-24 closed\n\n2026-12-31 10:00-12:00",
       "holidays.country": "de", "holidays.subdivision": "BE"}


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False)


async def _schedules(api: Api, user: Any) -> list[dict[str, Any]]:
    return list((await api.client.get("/v2/schedules", headers=user.tenant.headers)).json()["data"])


def _error(text: str, field: str) -> str:
    found = re.search(rf'id="{re.escape(field.replace(".", "-"))}-error">([^<]*)<', text)
    assert found, (field, text[-2500:])
    return html.unescape(found.group(1))


async def test_create_see_edit_and_delete_a_schedule(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_NOON))
    user, headers, csrf = await _signed_in(api)
    listed = await api.client.get("/dashboard/schedules", headers=headers)
    assert listed.status_code == 200 and 'id="create-schedule"' in listed.text
    for changed, field, words in (
            ({"weekly.2": "nine to five"}, "weekly.2", "nine to five"),
            ({"weekly.3": "09:00-09:00"}, "weekly.3", "must differ from start"),
            ({"weekly.1": "25:00-26:00"}, "weekly.1", "09:00-17:00"),
            ({"exceptions": "2026-12-24 closed\n2026-13-01 closed"}, "exceptions", "line 2"),
            ({"exceptions": "2026-12-24 sometimes"}, "exceptions", "line 1"),
            ({"holidays.country": "Germany"}, "holidays.country", ""),
            ({"holidays.country": "", "holidays.subdivision": "BE"}, "holidays.country", "subdivision"),
            ({"timezone": "Mars/Olympus"}, "timezone", ""),
            ({"name": ""}, "name", "")):
        refused = await _post(api, headers, "/schedules", {"csrf_token": csrf, **NEW, **changed})
        assert refused.status_code == 400, (changed, refused.status_code)
        assert words in _error(refused.text, field), changed
    assert await _schedules(api, user) == []
    made = await _post(api, headers, "/schedules", {"csrf_token": csrf, **NEW})
    assert made.status_code == 303, made.text[-2000:]
    [schedule] = await _schedules(api, user)
    assert schedule["weekly"] == [{"day": 0, "start": "09:00", "end": "12:00"},
                                  {"day": 0, "start": "13:00", "end": "17:00"},
                                  {"day": 4, "start": "09:00", "end": "12:00"},
                                  {"day": 5, "start": "22:00", "end": "02:00"}]
    assert schedule["exceptions"] == [{"date": "2026-12-24", "closed": True, "intervals": []},
                                      {"date": "2026-12-31", "closed": False,
                                       "intervals": [{"start": "10:00", "end": "12:00"}]}]
    assert schedule["holidays"] == {"country": "DE", "subdivision": "BE"}

    # its page: open now (Monday 13:00 in Berlin), its hours by day
    page = await api.client.get(f"/dashboard/schedules/{schedule['id']}", headers=headers)
    assert page.status_code == 200 and re.search(r'id="open-now">open<', page.text)
    assert "09:00-12:00, 13:00-17:00" in page.text and "2026-12-31 10:00-12:00" in page.text

    # edit: the form holds the document; a bad weekday shown beside it; saved as typed
    path = f"/schedules/{schedule['id']}/edit"
    form = await api.client.get(f"/dashboard{path}", headers=headers)
    assert 'name="weekly.0" value="09:00-12:00, 13:00-17:00"' in form.text
    assert 'name="holidays.country" value="DE"' in form.text and "2026-12-24 closed" in form.text
    current = {"name": "Support hours", "timezone": "Europe/Berlin", "weekly.0": "09:00-12:00, 13:00-17:00",
               "weekly.4": "09:00-12:00", "weekly.5": "22:00-02:00",
               "exceptions": "2026-12-24 closed\n2026-12-31 10:00-12:00", "holidays.country": "DE",
               "holidays.subdivision": "BE"}
    bad = await _post(api, headers, path, {"csrf_token": csrf, **current, "weekly.6": "10:00-10:00"})
    assert bad.status_code == 400 and "must differ from start" in _error(bad.text, "weekly.6")
    saved = await _post(api, headers, path, {"csrf_token": csrf, **current, "weekly.0": "", "exceptions": "",
                                             "holidays.country": "", "holidays.subdivision": "",
                                             "name": "Closed Mondays"})
    assert saved.status_code == 303, saved.text[-2000:]
    [schedule] = await _schedules(api, user)
    assert schedule["name"] == "Closed Mondays" and [w["day"] for w in schedule["weekly"]] == [4, 5]
    assert schedule["exceptions"] == [] and schedule["holidays"] is None
    page = await api.client.get(f"/dashboard/schedules/{schedule['id']}", headers=headers)
    assert re.search(r'id="open-now">closed<', page.text)

    # delete asks first
    asked = await api.client.get(f"/dashboard/schedules/{schedule['id']}/delete", headers=headers)
    assert asked.status_code == 200 and "cannot be undone" in asked.text
    unconfirmed = await _post(api, headers, f"/schedules/{schedule['id']}/delete", {"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and len(await _schedules(api, user)) == 1
    deleted = await _post(api, headers, f"/schedules/{schedule['id']}/delete",
                          {"csrf_token": csrf, "confirm": "delete"})
    assert deleted.status_code == 303 and "deleted" in deleted.headers["location"]
    assert await _schedules(api, user) == []


async def test_a_schedule_in_use_is_not_deleted_and_the_page_says_why(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, overrides=(Pinned(ScheduleUsage, _UsedByCampaigns()),))
    user, headers, csrf = await _signed_in(api)
    assert (await _post(api, headers, "/schedules", {"csrf_token": csrf, **NEW})).status_code == 303
    [schedule] = await _schedules(api, user)
    refused = await _post(api, headers, f"/schedules/{schedule['id']}/delete",
                          {"csrf_token": csrf, "confirm": "delete"})
    assert refused.status_code == 409 and "2 running or paused campaign" in refused.text
    assert 'role="alert"' in refused.text and len(await _schedules(api, user)) == 1


async def test_another_organizations_schedule_is_a_404_page(any_api: Api) -> None:
    owner, owner_headers, owner_csrf = await _signed_in(any_api)
    assert (await _post(any_api, owner_headers, "/schedules", {"csrf_token": owner_csrf, **NEW})).status_code == 303
    [schedule] = await _schedules(any_api, owner)
    _, headers, csrf = await _signed_in(any_api)
    for path in ("", "/edit", "/delete"):
        assert (await any_api.client.get(f"/dashboard/schedules/{schedule['id']}{path}",
                                         headers=headers)).status_code == 404, path
    for path, data in (("/edit", NEW), ("/delete", {"confirm": "delete"})):
        assert (await _post(any_api, headers, f"/schedules/{schedule['id']}{path}",
                            {"csrf_token": csrf, **data})).status_code == 404, path
    assert len(await _schedules(any_api, owner)) == 1
