"""``EmailSender`` over SMTP with aiosmtplib, configured by one URL (``PARLEY_SMTP_URL``).

``smtp://[user:password@]host[:port]`` (port 25 by default; STARTTLS when the server offers it) or
``smtps://...`` (TLS from the first byte, port 465 by default). Unset: every send fails with a clear reason.
"""

from __future__ import annotations

from email.message import EmailMessage as MimeMessage
from email.utils import formatdate, make_msgid
from typing import Any
from urllib.parse import unquote, urlsplit

import aiosmtplib

from application.ports.triggers import EmailFailed, EmailMessage


class SmtpEmailSender:
    def __init__(self, url: str | None, sender: str, *, timeout: float = 10.0) -> None:
        self.url, self.sender, self.timeout = url, sender, timeout

    def _server(self) -> dict[str, Any]:
        if not self.url:
            raise EmailFailed("no mail server is configured (PARLEY_SMTP_URL)")
        parts = urlsplit(self.url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise EmailFailed("PARLEY_SMTP_URL must be smtp://host[:port] or smtps://host[:port]")
        secure = parts.scheme == "smtps"
        return {"hostname": parts.hostname, "port": parts.port or (465 if secure else 25), "use_tls": secure,
                "start_tls": False if secure else None,
                "username": unquote(parts.username) if parts.username else None,
                "password": unquote(parts.password) if parts.password else None}

    async def send(self, message: EmailMessage) -> None:
        try:
            mime = MimeMessage()
            mime["From"] = self.sender
            mime["To"] = ", ".join(message.to)
            mime["Subject"] = message.subject  # a line break here is a ValueError: refused, never a new header
            mime["Date"] = formatdate(usegmt=True)
            mime["Message-ID"] = message.message_id or make_msgid(domain="parley")
            mime.set_content(message.body)
            for attachment in message.attachments:
                kind, *options = (part.strip() for part in attachment.content_type.split(";"))
                maintype, subtype = kind.split("/", 1)
                params = dict(option.split("=", 1) for option in options if "=" in option)
                mime.add_attachment(attachment.data, maintype=maintype, subtype=subtype,
                                    filename=attachment.filename, params=params)
            await aiosmtplib.send(mime, timeout=self.timeout, **self._server())
        except EmailFailed:
            raise
        except (aiosmtplib.SMTPException, OSError, TimeoutError, ValueError) as exc:
            raise EmailFailed(f"{type(exc).__name__}: {exc}"[:300]) from exc
