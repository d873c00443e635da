"""Public-holiday calendars from the ``holidays`` package."""

from adapters.holidays.calendars import PythonHolidayCalendars

__all__ = ["PythonHolidayCalendars"]
