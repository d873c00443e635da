"""Emulators of the outside services Parley talks to, speaking their documented protocols on 127.0.0.1."""
