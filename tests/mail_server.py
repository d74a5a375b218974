"""A real SMTP server on loopback (aiosmtpd) for tests that send mail through Django's
SMTP backend, and what it received."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiosmtpd.controller import Controller


class Inbox:
    """What the server received: ``(sender, recipients, raw message)`` per mail."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


@contextmanager
def smtp_server(settings: Any) -> Iterator[tuple[Inbox, Controller]]:
    """Start the server on a free port and point Django's SMTP backend at it."""
    inbox = Inbox()
    with socket.socket() as probe:  # a free port (the controller checks it by connecting)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = port
    settings.EMAIL_USE_TLS = False
    try:
        yield inbox, controller
    finally:
        controller.stop()
