"""Carrier adapters (Twilio, Telnyx) behind application.ports.carriers.Carrier."""
