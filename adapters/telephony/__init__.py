"""Telephony adapters: the simulator today; carrier adapters (Twilio, Telnyx) implement the same port."""
