"""ICS (RFC 5545) rendering with the icalendar library."""
