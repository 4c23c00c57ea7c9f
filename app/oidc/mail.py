"""Outgoing mail: one `send_mail` call, three backends chosen by `MAIL_BACKEND`.

- `outbox`: the message is a row in `mail_outbox`, committed with the request (development and
  tests; readable at `GET /dev/outbox` when `DEV_OUTBOX=1`).
- `console`: recipient, sender and subject are logged, with digits masked; never the body, as a
  login code must not end up in logs.
- `smtp`: the message is sealed (encrypted, it may hold a login code) into a job; the worker sends
  it through the configured SMTP server after the request has committed, retrying transient faults.
"""

from __future__ import annotations

import json
import logging
import re
import smtplib
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from email.message import EmailMessage

from sqlalchemy import select

from app.db import utcnow
from app.extensions import db
from app.jobs.service import enqueue_job
from app.oidc.models import OutboxMail
from app.oidc.settings import OidcSettings
from app.security import decrypt, encrypt
from app.settings import current

log = logging.getLogger(__name__)

SEND_MAIL_TASK = "oidc.send_mail"
_DIGIT = re.compile(r"\d")
_PURPOSE = "mail"


def send_mail(*, to: str, sender: str, subject: str, text: str) -> None:
    """Send a plain-text message with the configured backend, as part of the current transaction."""
    backend = current(OidcSettings).mail_backend
    if backend == "outbox":
        db.session.add(OutboxMail(to_address=to, from_address=sender, subject=subject, text=text, sent_at=utcnow()))
    elif backend == "smtp":
        sealed = encrypt(json.dumps({"to": to, "from": sender, "subject": subject, "text": text}).encode(), _PURPOSE)
        enqueue_job(SEND_MAIL_TASK, {"sealed": sealed})
    elif backend == "console":
        log.info("mail to %s from %s: %s (body not logged)", to, sender, _DIGIT.sub("#", subject))
    else:
        raise ValueError(f"unknown MAIL_BACKEND {backend!r}")


def deliver_sealed(payload: dict) -> dict:
    """Send a message sealed by `send_mail` through SMTP (runs in the worker); raises OSError/SMTPException."""
    message = json.loads(decrypt(payload["sealed"], _PURPOSE))
    email = EmailMessage()
    email["From"] = message["from"]
    email["To"] = message["to"]
    email["Subject"] = message["subject"]
    email.set_content(message["text"])
    config = current(OidcSettings)
    with _smtp_session(config) as server:
        if config.smtp_starttls and not config.smtp_ssl:
            server.starttls(context=ssl.create_default_context())
        if config.smtp_username:
            server.login(config.smtp_username, config.smtp_password)
        server.send_message(email)
    return {"sent_to": message["to"]}


@contextmanager
def _smtp_session(config: OidcSettings) -> Iterator[smtplib.SMTP]:
    """A connection to the SMTP server whose whole exchange ends by `SMTP_TIMEOUT`.

    smtplib bounds each socket operation only, so a server dripping its replies could hold the
    worker for as long as it likes; at the deadline the socket is shut instead, and the exchange
    fails with TimeoutError (an OSError: retried like any transient fault).
    """
    timeout = config.smtp_timeout
    if config.smtp_ssl:
        server: smtplib.SMTP = smtplib.SMTP_SSL(timeout=timeout, context=ssl.create_default_context())
    else:
        server = smtplib.SMTP(timeout=timeout)
    expired = threading.Event()  # set before the socket is shut (a Timer's own flag is set after)
    watchdog = threading.Timer(timeout, _shut, args=(server, expired))
    watchdog.daemon = True
    watchdog.start()
    try:
        server.connect(config.smtp_host, config.smtp_port)
        yield server
        server.quit()
    except (OSError, smtplib.SMTPException) as error:
        if expired.is_set():  # the deadline passed
            raise TimeoutError(f"the SMTP exchange took longer than SMTP_TIMEOUT ({timeout:g} s)") from error
        raise
    finally:
        watchdog.cancel()
        server.close()


def _shut(server: smtplib.SMTP, expired: threading.Event) -> None:
    expired.set()
    sock = server.sock
    if sock is not None:
        with suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


def outbox_messages(to: str | None, limit: int = 50) -> list[OutboxMail]:
    """Messages kept by the outbox backend, newest first, optionally for one recipient."""
    statement = select(OutboxMail).order_by(OutboxMail.sent_at.desc(), OutboxMail.id.desc()).limit(limit)
    if to:
        statement = statement.where(OutboxMail.to_address == to.strip().lower())
    return list(db.session.execute(statement).scalars())
