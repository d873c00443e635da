"""Scheduling use cases, one module per concern, imported directly (this package re-exports nothing):

* ``calendars``: calendars, their availability rules and blackouts;
* ``availability``: open slots over a window and the next open slot (``SlotFinder``, which every booking
  path uses too);
* ``booking``: booking and the appointment lifecycle (reschedule, approve, decline, cancel, outcome);
* ``feeds``: ICS feed tokens and feeds.

Use cases never commit.
"""
