"""In-house scheduling: calendars, availability rules, blackouts, open slots and the appointment machine.

Pure domain code (standard library only). Every instant it hands out is an aware UTC ``datetime``; local
time only exists while rules are expanded and when a value is rendered. One module per concern, imported
directly (this package re-exports nothing):

* ``model``: the entities (Calendar, AvailabilityRule, Blackout, Slot, HeldSlot, HeldIntervals, Schedule,
  Appointment), the appointment machine and the validation of their fields;
* ``rules``: availability rules, blackouts, query windows and the supported years;
* ``slots``: open-slot generation (DST choices documented there), the booking check, rendering slots;
* ``feeds``: ICS feed tokens and what a feed shows.

Time zones live in ``domain.timezones``, RFC 3339 parsing and rendering in ``domain.rfc3339``.
"""
