"""A local SMTP server that keeps every mail it is sent as a file: ``make run``'s mail.

``python -m notifications.mailsink --port 8124 --dir var/mail`` listens on loopback
(aiosmtpd) and writes each message to its own ``.eml`` file, named by when it arrived,
with ``X-Envelope-From`` and ``X-Envelope-To`` headers added; nothing is relayed. The
dashboard's Mail page reads the directory (``MAIL_SINK_DIR``) through :func:`mails` and
:func:`mail`. A deployment sets ``EMAIL_HOST`` to its own server and leaves
``MAIL_SINK_DIR`` empty.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import os
import re
import signal
import sys
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from notifications.sink_command import sink_arguments

# <UTC time of arrival>-<random>.eml: sorts by arrival, and is all a name may be.
_NAME = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{12}\.eml$")


class MailDirHandler:
    """aiosmtpd handler: each accepted message becomes one file in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        content = envelope.original_content or envelope.content
        raw = content if isinstance(content, bytes) else str(content).encode()
        envelope_lines = (
            f"X-Envelope-From: {envelope.mail_from}\r\n"
            f"X-Envelope-To: {', '.join(envelope.rcpt_tos)}\r\n"
        ).encode()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        name = f"{stamp}-{uuid.uuid4().hex[:12]}.eml"
        # Written aside, then renamed: a reader never sees half a mail.
        partial = self.directory / f".{name}.part"
        partial.write_bytes(envelope_lines + raw)
        os.replace(partial, self.directory / name)
        subject = _parse(envelope_lines + raw)["Subject"] or ""
        print(f"mail to {', '.join(envelope.rcpt_tos)}: {subject} ({name})", flush=True)
        return "250 Message accepted for delivery"


@dataclass(frozen=True)
class Mail:
    """One mail the sink kept, as the Mail page shows it."""

    name: str
    sender: str
    to: list[str]
    subject: str
    received_at: datetime
    body: str


def _parse(raw: bytes) -> EmailMessage:
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def _read(path: Path) -> Mail:
    message = _parse(path.read_bytes())
    part = message.get_body(preferencelist=("plain", "html"))
    body = part.get_content() if isinstance(part, EmailMessage) else ""
    recipients = str(message["X-Envelope-To"] or message["To"] or "")
    return Mail(
        name=path.name,
        sender=str(message["From"] or message["X-Envelope-From"] or ""),
        to=[r.strip() for r in recipients.split(",") if r.strip()],
        subject=str(message["Subject"] or "(no subject)"),
        received_at=datetime.strptime(path.name[:23], "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC),
        body=str(body),
    )


def _addressed_to(mail: Mail, recipient: str | None) -> bool:
    if recipient is None:
        return True
    wanted = recipient.strip().lower()
    return bool(wanted) and any(
        wanted == email.utils.parseaddr(r)[1].lower() or wanted == r.lower() for r in mail.to
    )


def mails(directory: Path, *, recipient: str | None = None, limit: int = 200) -> list[Mail]:
    """The newest mails in ``directory`` (to ``recipient`` only, when given)."""
    if not directory.is_dir():
        return []
    found: list[Mail] = []
    for path in sorted(directory.iterdir(), reverse=True):
        if not _NAME.match(path.name):
            continue
        mail_ = _read(path)
        if _addressed_to(mail_, recipient):
            found.append(mail_)
            if len(found) >= limit:
                break
    return found


def mail(directory: Path, name: str, *, recipient: str | None = None) -> Mail | None:
    """One mail by its file name (only a name the sink gives; never a path)."""
    if not _NAME.match(name) or not (directory / name).is_file():
        return None
    found = _read(directory / name)
    return found if _addressed_to(found, recipient) else None


def main(argv: list[str] | None = None) -> int:
    args = sink_arguments(__doc__.splitlines()[0], argv)
    from aiosmtpd.controller import Controller  # only the server needs it, not the page

    controller = Controller(MailDirHandler(args.dir), hostname=args.host, port=args.port)
    controller.start()
    print(f"mail sink on {args.host}:{args.port}, writing to {args.dir}", flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
