"""Mail backends: the production default and what the console backend may log."""

from __future__ import annotations

import logging
import re

import pytest

from app.config import Config
from app.extensions import db
from app.oidc.models import AuthorizationRequest
from app.oidc.settings import OidcSettings
from app.settings import load
from tests.support.config import set_settings, setting_of
from tests.support.oidc import authorize_query, form_fields, path_of


@pytest.mark.parametrize(("dev_outbox", "backend"), [("0", "smtp"), ("1", "outbox")])
def test_mail_goes_through_smtp_unless_the_development_outbox_is_on(monkeypatch, dev_outbox, backend):
    monkeypatch.delenv("MAIL_BACKEND", raising=False)
    monkeypatch.setenv("DEV_OUTBOX", dev_outbox)
    config = {**Config().as_dict(), "BASE_URL": "https://id.example.org"}
    assert load(OidcSettings, config).mail_backend == backend


def test_console_backend_never_logs_the_login_code(app, client, tenant, caplog):
    start = client.get(authorize_query(tenant))
    page = client.get(path_of(start.headers["Location"]))
    previous = setting_of(app, "MAIL_BACKEND")
    set_settings(app, MAIL_BACKEND="console")
    try:
        with caplog.at_level(logging.INFO, logger="app.oidc.mail"):
            sent = client.post(
                "/v1/openidc/login", data={**form_fields(page.get_data(as_text=True)), "email": tenant.email}
            )
    finally:
        set_settings(app, MAIL_BACKEND=previous)
    assert sent.status_code == 200
    with app.app_context():
        row = db.session.query(AuthorizationRequest).filter_by(email=tenant.email).one()
        assert row.login_code_hash is not None  # a code was made and mailed
        db.session.rollback()
    records = [record for record in caplog.records if record.name == "app.oidc.mail"]
    assert records and any(tenant.email in record.getMessage() for record in records)
    for record in records:
        # The recipient's own address may hold digits; nothing else may.
        message = record.getMessage().replace(tenant.email, "<to>")
        assert not re.search(r"\d{6}", message) and "valid for" not in message


def test_an_smtp_server_dripping_its_greeting_is_cut_at_smtp_timeout(app):
    """smtplib bounds each socket read only: a greeting of endless continuation lines, a byte at a
    time, must still end by SMTP_TIMEOUT."""
    import json
    import socket
    import threading
    import time

    from app.oidc.mail import _PURPOSE, deliver_sealed
    from app.security import encrypt

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        connection, _ = listener.accept()
        with connection:
            line = b"220-slow\r\n"
            sent = 0
            while not stop.wait(0.05):
                try:
                    connection.sendall(line[sent % len(line) : sent % len(line) + 1])
                except OSError:
                    return
                sent += 1

    threading.Thread(target=drip, daemon=True).start()
    previous = {
        name: setting_of(app, name) for name in ("SMTP_HOST", "SMTP_PORT", "SMTP_TIMEOUT", "SMTP_SSL", "SMTP_STARTTLS")
    }
    set_settings(
        app,
        SMTP_HOST="127.0.0.1",
        SMTP_PORT=listener.getsockname()[1],
        SMTP_TIMEOUT=1.0,
        SMTP_SSL=False,
        SMTP_STARTTLS=False,
    )
    with app.app_context():
        message = {"from": "a@example.org", "to": "b@example.org", "subject": "s", "text": "t"}
        sealed = encrypt(json.dumps(message).encode(), _PURPOSE)
    started = time.monotonic()
    try:
        with app.app_context(), pytest.raises(TimeoutError):
            deliver_sealed({"sealed": sealed})
        assert time.monotonic() - started < 3
    finally:
        stop.set()
        listener.close()
        set_settings(app, **previous)
