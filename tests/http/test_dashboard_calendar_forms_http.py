"""Calendars and appointments in the dashboard through HTTP, on both databases: creating and editing a calendar
(the API's rules, an error beside its field; caps and the reminder, empty meaning none), its availability by
weekday added and removed, and an appointment cancelled (only once confirmed) and rescheduled through the API's use
cases: a slot taken meanwhile is a 409 page that says so and changes nothing."""

from __future__ import annotations

import re
from typing import Any

from tests.http.dashboard_support import add_user, cookie, login, new_user
from tests.http.scheduling_support import book, make_calendar, scheduling_api
from tests.http.test_dashboard_live_http import opened
from tests.support.apps import Api, ApiFactory

DAY = "2026-03-03"  # a Tuesday after the test clock's Monday


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False)


async def _get(api: Api, user: Any, path: str) -> Any:
    response = await api.client.get(f"/v2{path}", headers=user.tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]


NEW = {"name": "Front desk", "timezone": "America/New_York", "slot_duration_minutes": "30", "buffer_minutes": "0",
       "min_notice_minutes": "0", "horizon_days": "60", "max_upcoming_per_attendee": "",
       "max_bookings_per_day": "8", "reminder_minutes": "60", "reminder_channel": "sms"}


async def test_create_and_edit_a_calendar_and_its_hours(make_api: ApiFactory, sql_url: str) -> None:
    api = await scheduling_api(make_api, sql_url)
    user, headers, csrf = await _signed_in(api)
    listed = await api.client.get("/dashboard/calendars", headers=headers)
    assert listed.status_code == 200 and 'id="create-calendar"' in listed.text
    for changed, field in (({"timezone": "Mars/Olympus"}, "timezone"), ({"slot_duration_minutes": "2"},
                           "slot_duration_minutes"), ({"reminder_channel": "pigeon"}, "reminder_channel"),
                           ({"reminder_minutes": "1"}, "reminder_minutes"), ({"name": ""}, "name")):
        refused = await _post(api, headers, "/calendars", {"csrf_token": csrf, **NEW, **changed})
        assert refused.status_code == 400, (changed, refused.status_code)
        assert f'id="{field}-error"' in refused.text, (changed, refused.text[-2000:])
    assert await _get(api, user, "/scheduling/calendars") == []
    made = await _post(api, headers, "/calendars", {"csrf_token": csrf, **NEW})
    assert made.status_code == 303, made.text
    [calendar] = await _get(api, user, "/scheduling/calendars")
    assert made.headers["location"].startswith(f"/dashboard/calendars/{calendar['id']}")
    assert (calendar["timezone"], calendar["reminder_minutes"], calendar["reminder_channel"]) == (
        "America/New_York", 60, "sms")
    assert calendar["max_bookings_per_day"] == 8 and calendar["max_upcoming_per_attendee"] is None

    # availability by weekday
    path = f"/calendars/{calendar['id']}"
    for rule, field in (({"weekday": "0", "start_time": "09:00", "end_time": "25:00"}, "end_time"),
                        ({"weekday": "9", "start_time": "09:00", "end_time": "12:00"}, "weekday"),
                        ({"weekday": "0", "start_time": "9am", "end_time": "12:00"}, "start_time")):
        refused = await _post(api, headers, f"{path}/rules", {"csrf_token": csrf, **rule})
        assert refused.status_code == 400 and f'id="{field}-error"' in refused.text, (rule, refused.status_code)
    for rule in ({"weekday": "0", "start_time": "09:00", "end_time": "12:00"},
                 {"weekday": "0", "start_time": "13:00", "end_time": "24:00"},
                 {"weekday": "4", "start_time": "10:00", "end_time": "16:00"}):
        assert (await _post(api, headers, f"{path}/rules", {"csrf_token": csrf, **rule})).status_code == 303
    rules = await _get(api, user, f"/scheduling/calendars/{calendar['id']}/rules")
    assert sorted((r["weekday"], r["start_time"], r["end_time"]) for r in rules) == [
        (0, "09:00", "12:00"), (0, "13:00", "24:00"), (4, "10:00", "16:00")]
    page = await api.client.get(f"/dashboard{path}", headers=headers)
    monday = re.search(r"<strong>Monday</strong>(.*?)</tr>", page.text, re.S)
    assert monday and "09:00\u201312:00" in monday.group(1) and "13:00\u201324:00" in monday.group(1)
    tuesday = re.search(r"<strong>Tuesday</strong>(.*?)</tr>", page.text, re.S)
    assert tuesday and "closed" in tuesday.group(1)
    friday = next(r for r in rules if r["weekday"] == 4)
    removed = await _post(api, headers, f"{path}/rules/{friday['id']}/delete", {"csrf_token": csrf})
    assert removed.status_code == 303
    assert len(await _get(api, user, f"/scheduling/calendars/{calendar['id']}/rules")) == 2

    # the settings: shown as stored; a bad one beside its field changes nothing; empty reminder: none
    assert 'name="reminder_minutes" value="60"' in page.text and 'value="sms" selected' in page.text
    bad = await _post(api, headers, path, {"csrf_token": csrf, **NEW, "horizon_days": "0"})
    assert bad.status_code == 400 and 'id="horizon_days-error"' in bad.text
    saved = await _post(api, headers, path, {"csrf_token": csrf, **NEW, "name": "Desk 2", "reminder_minutes": "",
                                             "max_upcoming_per_attendee": "2", "max_bookings_per_day": ""})
    assert saved.status_code == 303, saved.text
    stored = await _get(api, user, f"/scheduling/calendars/{calendar['id']}")
    assert stored["name"] == "Desk 2" and stored["reminder_minutes"] is None
    assert stored["max_upcoming_per_attendee"] == 2 and stored["max_bookings_per_day"] is None


async def test_cancel_after_confirmation_and_reschedule_with_the_apis_conflict_rules(make_api: ApiFactory,
                                                                                     sql_url: str) -> None:
    api = await scheduling_api(make_api, sql_url)
    user = await new_user(api)
    session, csrf = await login(api, user)
    headers, t = cookie(session), user.tenant
    calendar = await make_calendar(api, t)
    first = (await book(api, t, calendar["id"], f"{DAY}T10:00:00-05:00", attendee_name="Ada")).json()["data"]
    second = (await book(api, t, calendar["id"], f"{DAY}T11:00:00-05:00", attendee_name="Grace")).json()["data"]
    day = await api.client.get(f"/dashboard/appointments?date={DAY}", headers=headers)
    assert f"/appointments/{first['id']}/reschedule" in day.text and f"/appointments/{second['id']}/cancel" in day.text
    async with opened(api, f"/dashboard/live/appointments?date={DAY}", session) as stream:  # the live view too
        assert f"/appointments/{first['id']}/reschedule" in await stream.next()

    # reschedule: the open slots of a day of the calendar, in its zone
    asked = await api.client.get(f"/dashboard/appointments/{first['id']}/reschedule?date=2026-03-04",
                                 headers=headers)
    assert asked.status_code == 200 and 'value="2026-03-04T09:00:00-05:00"' in asked.text
    same_day = await api.client.get(f"/dashboard/appointments/{first['id']}/reschedule", headers=headers)
    assert f'value="{DAY}T11:00:00-05:00"' not in same_day.text  # taken by the second
    assert f'value="{DAY}T11:30:00-05:00"' in same_day.text
    # a slot taken meanwhile: 409, said plainly, nothing changed
    taken = await _post(api, headers, f"/appointments/{first['id']}/reschedule",
                        {"csrf_token": csrf, "slot_start": f"{DAY}T11:00:00-05:00", "date": DAY})
    assert taken.status_code == 409 and 'id="slot-unavailable"' in taken.text and "slot_unavailable" in taken.text
    assert (await _get(api, user, f"/scheduling/appointments/{first['id']}"))["status"] == "confirmed"
    malformed = await _post(api, headers, f"/appointments/{first['id']}/reschedule",
                            {"csrf_token": csrf, "slot_start": "tomorrow"})
    assert malformed.status_code == 400 and 'id="slot_start-error"' in malformed.text
    moved = await _post(api, headers, f"/appointments/{first['id']}/reschedule",
                        {"csrf_token": csrf, "slot_start": "2026-03-04T09:00:00-05:00"})
    assert moved.status_code == 303 and "date=2026-03-04" in moved.headers["location"], moved.text
    old = await _get(api, user, f"/scheduling/appointments/{first['id']}")
    assert (old["status"], old["cancel_reason"]) == ("cancelled", "rescheduled")
    [new] = [a for a in await _get(api, user, "/scheduling/appointments?status=confirmed")
             if a["rescheduled_from"] == first["id"]]
    assert new["slot_start"].startswith("2026-03-04T14:00:00")

    # cancel asks first
    confirm = await api.client.get(f"/dashboard/appointments/{second['id']}/cancel", headers=headers)
    assert confirm.status_code == 200 and 'id="confirm-cancel"' in confirm.text and "Grace" in confirm.text
    unconfirmed = await _post(api, headers, f"/appointments/{second['id']}/cancel", {"csrf_token": csrf})
    assert unconfirmed.status_code == 200
    assert (await _get(api, user, f"/scheduling/appointments/{second['id']}"))["status"] == "confirmed"
    cancelled = await _post(api, headers, f"/appointments/{second['id']}/cancel",
                            {"csrf_token": csrf, "confirm": "cancel"})
    assert cancelled.status_code == 303 and f"date={DAY}" in cancelled.headers["location"]
    assert (await _get(api, user, f"/scheduling/appointments/{second['id']}"))["status"] == "cancelled"
    again = await _post(api, headers, f"/appointments/{second['id']}/cancel",
                        {"csrf_token": csrf, "confirm": "cancel"})
    assert again.status_code == 409 and 'role="alert"' in again.text

    # a viewer sees the day without the buttons
    viewer = await add_user(api, t, role="viewer")
    session, _ = await login(api, viewer)
    seen = await api.client.get("/dashboard/appointments?date=2026-03-04", headers=cookie(session))
    assert seen.status_code == 200 and "Ada" in seen.text and "/reschedule" not in seen.text


async def test_another_organizations_calendar_and_appointment_are_404_pages(make_api: ApiFactory,
                                                                            sql_url: str) -> None:
    api = await scheduling_api(make_api, sql_url)
    owner, _, _ = await _signed_in(api)
    calendar = await make_calendar(api, owner.tenant)
    appointment = (await book(api, owner.tenant, calendar["id"], f"{DAY}T10:00:00-05:00")).json()["data"]
    _, headers, csrf = await _signed_in(api)
    for path in (f"/calendars/{calendar['id']}", f"/appointments/{appointment['id']}/cancel",
                 f"/appointments/{appointment['id']}/reschedule"):
        assert (await api.client.get(f"/dashboard{path}", headers=headers)).status_code == 404, path
    for path, data in ((f"/calendars/{calendar['id']}", NEW),
                       (f"/calendars/{calendar['id']}/rules", {"weekday": "1", "start_time": "08:00",
                                                               "end_time": "09:00"}),
                       (f"/appointments/{appointment['id']}/cancel", {"confirm": "cancel"}),
                       (f"/appointments/{appointment['id']}/reschedule",
                        {"slot_start": f"{DAY}T12:00:00-05:00"})):
        assert (await _post(api, headers, path, {"csrf_token": csrf, **data})).status_code == 404, path
    assert (await _get(api, owner, f"/scheduling/appointments/{appointment['id']}"))["status"] == "confirmed"
    assert (await _get(api, owner, f"/scheduling/calendars/{calendar['id']}"))["name"] == "Front desk"
