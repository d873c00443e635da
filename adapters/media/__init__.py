"""The media stream's adapters: μ-law, the carriers' stream protocols (Twilio Media Streams, Telnyx streaming), the
paced outbound sender, the stereo recorder and the live-session registry."""
